"""What the kit reads about the onnxruntime it runs with."""

from __future__ import annotations

import functools
import types

import numpy

import onnxruntime

from conformance.apis import support as api_support
from conformance.testbed.eps import package_name


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
    """OrtValue as onnxruntime 1.24 has it: update_inplace's docstring names OrtValue, but it
    takes a numpy array only, and values are allocated by device name only."""

    def __init__(self, array):
        self._array = array

    @classmethod
    def ortvalue_from_numpy(cls, array):
        return cls(array)

    def numpy(self):
        return self._array

    def update_inplace(self, np_arr) -> None:
        """Update the OrtValue in place with a new Numpy array (or an OrtValue, says the docstring)."""
        if not isinstance(np_arr, numpy.ndarray):
            raise TypeError("update_inplace(): incompatible function arguments")
        self._array[...] = np_arr

    @classmethod
    def ortvalue_from_shape_and_type(cls, shape, element_type, device_type="cpu", device_id=0):
        return cls(numpy.zeros(shape, element_type))


class OrtValue(NumpyOnlyValue):
    """OrtValue from onnxruntime 1.30 on: update_inplace also takes another OrtValue (1.26),
    and a value can be allocated from a memory info (1.30)."""

    def update_inplace(self, data) -> None:
        super().update_inplace(data.numpy() if isinstance(data, NumpyOnlyValue) else data)

    @classmethod
    def ortvalue_from_shape_and_type(cls, shape, element_type, device_type="cpu", device_id=0, memory_info=None):
        return cls(numpy.zeros(shape, element_type))


def _passed_on(function):
    """A wrapper that hides what `function` takes: its own code names nothing of it."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)
    return wrapper


class WrappedOrtValue(OrtValue):
    """The 1.30 value behind wrappers (as a tracing or logging layer installs them)."""

    update_inplace = _passed_on(OrtValue.update_inplace)
    ortvalue_from_shape_and_type = classmethod(_passed_on(OrtValue.ortvalue_from_shape_and_type.__func__))


class WrappedNumpyOnlyValue(NumpyOnlyValue):
    update_inplace = _passed_on(NumpyOnlyValue.update_inplace)
    ortvalue_from_shape_and_type = classmethod(_passed_on(NumpyOnlyValue.ortvalue_from_shape_and_type.__func__))


def fake_api(value_class) -> types.SimpleNamespace:
    return types.SimpleNamespace(OrtValue=value_class, InferenceSession=object)


def test_update_inplace_of_an_ortvalue_is_known_by_calling_it():
    assert api_support(fake_api(NumpyOnlyValue))["update_inplace_ortvalue"] is False
    assert api_support(fake_api(OrtValue))["update_inplace_ortvalue"] is True
    # a wrapper's code names no OrtValue: reading it would say no
    assert api_support(fake_api(WrappedOrtValue))["update_inplace_ortvalue"] is True
    assert api_support(fake_api(WrappedNumpyOnlyValue))["update_inplace_ortvalue"] is False
    assert api_support(onnxruntime)["update_inplace_ortvalue"] is True  # 1.32 takes an OrtValue


def test_allocation_from_a_memory_info_is_known_by_calling_it():
    assert api_support(fake_api(NumpyOnlyValue))["memory_info_alloc"] is False
    assert api_support(fake_api(OrtValue))["memory_info_alloc"] is True
    # a wrapper's signature is (*args, **kwargs): reading it would say yes, or no, for both
    assert api_support(fake_api(WrappedOrtValue))["memory_info_alloc"] is True
    assert api_support(fake_api(WrappedNumpyOnlyValue))["memory_info_alloc"] is False
