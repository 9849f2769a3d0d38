"""Device arrays as kiln.ops reads them: from `__cuda_array_interface__` (PyTorch CUDA tensors,
CuPy arrays, Numba) or DLPack (`__dlpack__`/`__dlpack_device__`; how bfloat16 arrives, which the
array interface cannot spell). Only what the reference ops check: pointer, shape, dtype,
contiguity and device; and the rule both Loader.launch and kiln.ops follow for `stream=None`
(default_stream)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kiln import _kiln
from kiln._errors import usage

# __cuda_array_interface__ typestr (little-endian) -> kiln's dtype names.
_TYPESTR = {"<f4": "f32", "<f2": "f16", "<f8": "f64", "<i4": "i32", "<i8": "i64", "<u4": "u32",
            "|u1": "u8", "|i1": "i8", "<i2": "i16", "<u2": "u16"}
# DLPack (code, bits) -> dtype names; code 0 int, 1 uint, 2 float, 4 bfloat.
_DLPACK = {(2, 32): "f32", (2, 16): "f16", (4, 16): "bf16", (2, 64): "f64", (0, 32): "i32",
           (0, 64): "i64", (1, 32): "u32", (1, 8): "u8", (0, 8): "i8"}
_ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i32": 4, "i64": 8, "u32": 4, "u8": 1,
             "i8": 1, "i16": 2, "u16": 2}
_CUDA_DLPACK_DEVICES = (2, 3, 13)  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged


@dataclass(frozen=True)
class DeviceArray:
    obj: object
    ptr: int
    shape: tuple[int, ...]
    dtype: str
    contiguous: bool
    device: int | None  # CUDA ordinal when the producer says

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def _compact_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _is_contiguous(shape: Sequence[int], strides_elems: Sequence[int] | None) -> bool:
    if not strides_elems:
        return True
    # Dimensions of extent 1 may have any stride.
    return all(n == 1 or s == c
               for n, s, c in zip(shape, strides_elems, _compact_strides(tuple(shape))))


def _torch_like_device(obj: object) -> int | None:
    dev = getattr(obj, "device", None)
    index = getattr(dev, "index", None)  # torch.device
    if isinstance(index, int):
        return index
    ident = getattr(dev, "id", None)  # cupy.cuda.Device
    return ident if isinstance(ident, int) else None


def framework(obj) -> str:
    module = type(obj).__module__ or ""
    return module.split(".")[0]


def default_stream(objs) -> int | None:
    """The stream a launch or an op on `objs` runs on when given stream=None: the current
    stream of the framework of the first torch or CuPy array among them (on that array's
    device), else None (the legacy default stream)."""
    for obj in objs:
        fw = framework(obj)
        if fw == "torch" and getattr(obj, "is_cuda", False):
            import torch

            return int(torch.cuda.current_stream(obj.device).cuda_stream)
        if fw == "cupy":
            import cupy  # type: ignore[import-not-found, unused-ignore]

            return int(cupy.cuda.get_current_stream().ptr)
    return None


def _order_cai_stream(cai: dict, name: str, stream: int | None) -> None:
    """CUDA Array Interface v3: the consumer synchronises the array's `stream` when it is not
    the one it will use (1 is the legacy default stream, which is also what None launches on)."""
    producer = cai.get("stream")
    if producer is None:
        return
    if isinstance(producer, bool) or not isinstance(producer, int):
        raise usage(f"{name}: __cuda_array_interface__ stream is a {type(producer).__name__}, "
                    "not an int (CUDA Array Interface v3)", name)
    if producer == 0:
        raise usage(f"{name}: __cuda_array_interface__ stream is 0, which the CUDA Array "
                    "Interface v3 does not allow (1: the legacy default stream, 2: per-thread)",
                    name)
    if producer != (stream or 1):
        _kiln._synchronize(producer)


def _from_cai(obj: Any, name: str, stream: int | None = None) -> DeviceArray:
    cai = obj.__cuda_array_interface__
    typestr = cai.get("typestr", "")
    dtype = _TYPESTR.get(typestr)
    if dtype is None:
        raise usage(f"{name}: dtype {typestr!r} is not one kiln's ops take (f32, f16, bf16)",
                    name, value=typestr)
    _order_cai_stream(cai, name, stream)
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    elems = None
    if strides is not None:
        item = _ITEMSIZE[dtype]
        if any(s % item for s in strides):
            return DeviceArray(obj, int(cai["data"][0]), shape, dtype, False,
                               _torch_like_device(obj))
        elems = tuple(s // item for s in strides)
    return DeviceArray(obj, int(cai["data"][0]), shape, dtype, _is_contiguous(shape, elems),
                       _torch_like_device(obj))


def _from_dlpack(obj: Any, name: str, stream: int | None = None) -> DeviceArray:
    dev_type, dev_id = obj.__dlpack_device__()
    if int(dev_type) not in _CUDA_DLPACK_DEVICES:
        raise usage(f"{name}: a {type(obj).__name__} on DLPack device type {int(dev_type)} "
                    "(not CUDA); kiln's ops take device memory", name)
    data, dev_kind, device_id, code, bits, lanes, shape, strides = _kiln._dlpack_view(obj,
                                                                                      stream)
    dtype = _DLPACK.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise usage(f"{name}: DLPack dtype (code {code}, {bits} bits, {lanes} lanes) is not one "
                    "kiln's ops take (f32, f16, bf16)", name)
    # Pinned host memory (kDLCUDAHost) is reachable from every device.
    return DeviceArray(obj, data, tuple(shape), dtype, _is_contiguous(shape, strides),
                       None if dev_kind == 3 else device_id)


def device_array(obj: object, name: str, stream: int | None = None) -> DeviceArray:
    """The array `obj` as kiln.ops reads it for a launch on `stream` (a CUstream as int; None:
    the legacy default stream): a DLPack producer is asked to order its work before it, a CAI v3
    stream that differs is synchronised. UsageError naming `name` when it is no device array."""
    if isinstance(obj, DeviceArray):
        return obj
    is_bf16 = str(getattr(obj, "dtype", "")) in ("torch.bfloat16", "bfloat16")
    if not is_bf16 and hasattr(obj, "__cuda_array_interface__"):
        return _from_cai(obj, name, stream)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj, name, stream)
    if hasattr(obj, "__array_interface__") or hasattr(obj, "__array__"):
        raise usage(f"{name}: a {type(obj).__name__} in host memory; kiln's ops take device "
                    "arrays (a torch CUDA tensor, a CuPy array)", name)
    raise usage(f"{name}: a {type(obj).__name__} is no device array: it has neither "
                "__cuda_array_interface__ nor __dlpack__", name)
