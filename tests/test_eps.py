"""What the kit reads about the onnxruntime it runs with."""

from __future__ import annotations

import types

import onnxruntime

from conformance.eps import package_name


def fake_onnxruntime(site, *dist_infos: str) -> types.ModuleType:
    (site / "onnxruntime").mkdir(parents=True)
    (site / "onnxruntime" / "__init__.py").write_text("")
    for name in dist_infos:
        (site / name).mkdir()
    module = types.ModuleType("onnxruntime")
    module.__file__ = str(site / "onnxruntime" / "__init__.py")
    return module


def test_the_package_is_the_flavour_installed_beside_the_module_in_use(tmp_path):
    gpu = fake_onnxruntime(tmp_path / "target", "onnxruntime_gpu-1.23.2.dist-info", "onnxruntime_ep_webgpu-0.4.0.dist-info")
    assert package_name(gpu) == "onnxruntime-gpu"
    # Another flavour elsewhere on the path is not the one running.
    assert package_name(fake_onnxruntime(tmp_path / "venv", "onnxruntime-1.32.0.dist-info")) == "onnxruntime"
    assert package_name(onnxruntime) == "onnxruntime"


def test_a_module_without_dist_info_is_named_onnxruntime(tmp_path):
    assert package_name(fake_onnxruntime(tmp_path / "build")) == "onnxruntime"
