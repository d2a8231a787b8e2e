"""What the kit reads about the onnxruntime it runs with."""

from __future__ import annotations

import types

import onnxruntime

from conformance.apis import support as api_support
from conformance.target.eps import package_name


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


class NumpyOnlyValue:
    """OrtValue as onnxruntime 1.24 has it: update_inplace's docstring names OrtValue, its code
    takes a numpy array only, and values are allocated by device name only."""

    def update_inplace(self, np_arr) -> None:
        """Update the OrtValue in place with a new Numpy array."""
        self._ortvalue.update_inplace(np_arr)

    @staticmethod
    def ortvalue_from_shape_and_type(shape, element_type, device_type="cpu", device_id=0):
        pass


class OrtValue(NumpyOnlyValue):
    """OrtValue from onnxruntime 1.30 on: update_inplace also takes another OrtValue (1.26),
    and a value can be allocated from a memory info (1.30)."""

    def update_inplace(self, data) -> None:
        """Update the OrtValue in place."""
        if isinstance(data, OrtValue):
            self._ortvalue.update_inplace(data._ortvalue)
            return
        self._ortvalue.update_inplace(data)

    @staticmethod
    def ortvalue_from_shape_and_type(shape, element_type, device_type="cpu", device_id=0, memory_info=None):
        pass


def fake_api(value_class) -> types.SimpleNamespace:
    return types.SimpleNamespace(OrtValue=value_class, InferenceSession=object)


def test_update_inplace_of_an_ortvalue_is_known_by_the_code_not_the_docstring():
    assert api_support(fake_api(NumpyOnlyValue))["update_inplace_ortvalue"] is False
    assert api_support(fake_api(OrtValue))["update_inplace_ortvalue"] is True
    assert api_support(onnxruntime)["update_inplace_ortvalue"] is True  # 1.32 takes an OrtValue


def test_allocation_from_a_memory_info_is_known_by_the_signature():
    assert api_support(fake_api(NumpyOnlyValue))["memory_info_alloc"] is False
    assert api_support(fake_api(OrtValue))["memory_info_alloc"] is True
