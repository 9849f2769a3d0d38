"""DLPack producers (how bfloat16 arrays arrive: __cuda_array_interface__ cannot spell it): a
CUDA DLPack tensor made with ctypes, as torch or JAX hand one over, read by launch and by
kiln.ops; a CPU one refused."""

import ctypes
import struct

import pytest

import kiln
from kiln._arrays import device_array


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class DLPackArray:
    """A producer of unversioned DLPack capsules over memory it does not own."""

    def __init__(self, ptr, shape, code=4, bits=16, device_type=2, offset=0, strides=None,
                 device_id=0):
        self.shape_c = (ctypes.c_int64 * len(shape))(*shape)
        self.strides_c = (ctypes.c_int64 * len(shape))(*strides) if strides else None
        self.managed = DLManagedTensor()
        t = self.managed.dl_tensor
        t.data, t.byte_offset, t.ndim = ptr, offset, len(shape)
        t.device = DLDevice(device_type, device_id)
        t.dtype = DLDataType(code, bits, 1)
        t.shape = self.shape_c
        t.strides = self.strides_c if strides else None
        self.device_type, self.device_id = device_type, device_id
        self.calls = []

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __dlpack__(self, stream=None):
        self.calls.append(stream)
        return _new_capsule(ctypes.addressof(self.managed), b"dltensor", None)


def test_launch_takes_the_data_pointer_of_a_cuda_dlpack_tensor(stand_in, tiny_package, tmp_path,
                                                               monkeypatch):
    from conftest import isolated_config

    loader = kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path))
    a = DLPackArray(0x9000, (4,), offset=0x10)
    loader.launch(loader.get("scale_dtype_f32"), 1, 1, [a, 0, kiln.f32(1.0), 4])
    assert stand_in.lines()[0].split(" params ")[1].split()[0] == struct.pack("<Q", 0x9010).hex()
    assert a.calls == [1]  # the producer orders its work before the legacy default stream
    loader.launch(loader.get("scale_dtype_f32"), 1, 1, [a, 0, kiln.f32(1.0), 4], stream=0x1234)
    assert a.calls == [1, 0x1234]  # ... or before the launch's stream


def test_ops_read_dtype_shape_and_contiguity_from_dlpack():
    a = device_array(DLPackArray(0x9000, (2, 8)), "x")
    assert (a.ptr, a.shape, a.dtype, a.contiguous, a.device) == (0x9000, (2, 8), "bf16", True, 0)
    t = device_array(DLPackArray(0x9000, (2, 8), strides=(1, 2)), "x")
    assert t.contiguous is False


def test_a_cpu_dlpack_tensor_is_refused_as_host_memory(stand_in, tiny_package, tmp_path):
    from conftest import isolated_config

    loader = kiln.Loader(description=tiny_package.description, config=isolated_config(tmp_path))
    cpu = DLPackArray(0x9000, (4,), device_type=1)
    with pytest.raises(kiln.UsageError) as e:
        loader.launch(loader.get("scale_dtype_f32"), 1, 1, [cpu])
    assert e.value.argument == "args[0]" and "in host memory" in str(e.value)
    with pytest.raises(kiln.UsageError) as e:
        kiln.ops.softmax(cpu, out=cpu)
    assert e.value.argument == "x" and "not CUDA" in str(e.value)
