"""The reference package's typed operations (kiln/ops.hpp) on device arrays.

Each takes PyTorch CUDA tensors, CuPy arrays or any array with `__cuda_array_interface__` or
DLPack, checks what the kernels need (a CUDA array, the dtype, the shape, contiguity; a
UsageError names the argument), and launches on the reference package's loader:
`kiln.load("kiln-kernels")` on first use, or the one given with `loader=` or `use_loader()`.
The stream is `stream=` (an int, or an object with `cuda_stream` / `__cuda_stream__`), else the
current stream of the framework the arrays come from (torch, CuPy), else the legacy default
stream. Outputs are allocated through that framework when not given (`out=`).

When PyTorch is importable, importing this module also registers the ops as torch custom ops
(`torch.ops.kiln.rmsnorm`, ...) with fake implementations, so `torch.compile` traces a model
calling them without a graph break (kiln/_torch_ops.py).
"""

from __future__ import annotations

import threading

from kiln import _kiln
from kiln._arrays import DeviceArray, device_array
from kiln._errors import usage

REFERENCE_PACKAGE = "kiln-kernels"
FLOAT_DTYPES = ("f32", "f16", "bf16")

_lock = threading.Lock()
_default_loader = None


def use_loader(loader) -> None:
    """Makes `loader` (a kiln.Loader of kiln-kernels) the ops' default loader."""
    global _default_loader
    with _lock:
        _default_loader = loader


def reference_loader():
    """The default loader: use_loader()'s, else kiln.load("kiln-kernels") made once."""
    global _default_loader
    with _lock:
        if _default_loader is None:
            import kiln

            _default_loader = kiln.load(REFERENCE_PACKAGE)
        return _default_loader


# ---- checks shared with the fake (meta) implementations in _torch_ops.py -------------------

def check_dtype(name: str, dtype: str, allowed=FLOAT_DTYPES) -> None:
    if dtype not in allowed:
        raise usage(f"{name}: dtype {dtype} is not one of {', '.join(allowed)}", name,
                    value=dtype)


def check_same(name: str, what: str, got, want, other: str) -> None:
    if got != want:
        raise usage(f"{name}: {what} {got} differs from {other}'s {want}", name)


def rows_cols(name: str, shape: tuple[int, ...]) -> tuple[int, int]:
    """[..., cols] as (rows, cols): leading dimensions are rows."""
    if len(shape) < 1 or shape[-1] < 1:
        raise usage(f"{name}: shape {list(shape)} has no last dimension to normalise over", name)
    rows = 1
    for n in shape[:-1]:
        rows *= n
    return rows, shape[-1]


def gemm_shapes(a_shape, b_shape) -> tuple[int, int, int]:
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise usage(f"a, b: gemm takes 2-D matrices, got {list(a_shape)} and {list(b_shape)}",
                    "a" if len(a_shape) != 2 else "b")
    (M, K), (K2, N) = a_shape, b_shape
    if K != K2:
        raise usage(f"b: gemm needs a [M, K] and b [K, N]; a is {list(a_shape)}, b is "
                    f"{list(b_shape)}", "b")
    return M, N, K


# ---- arrays, streams, outputs ---------------------------------------------------------------

def _array(obj, name: str) -> DeviceArray:
    a = device_array(obj, name)
    if not a.contiguous:
        raise usage(f"{name}: not contiguous (row-major); the kernels index it densely: pass "
                    f"{name}.contiguous() (torch) or cupy.ascontiguousarray({name})", name)
    return a


def _same_device(arrays: dict[str, DeviceArray]) -> None:
    seen = {n: a.device for n, a in arrays.items() if a.device is not None}
    if len(set(seen.values())) > 1:
        raise usage("arrays on different devices: " +
                    ", ".join(f"{n} on cuda:{d}" for n, d in seen.items()),
                    next(iter(seen)))


def _framework(obj) -> str:
    module = type(obj).__module__ or ""
    return module.split(".")[0]


def _stream(stream, like: DeviceArray):
    if stream is not None:
        return stream
    fw = _framework(like.obj)
    if fw == "torch":
        import torch

        return torch.cuda.current_stream(like.obj.device).cuda_stream
    if fw == "cupy":
        import cupy

        return cupy.cuda.get_current_stream().ptr
    return None


_TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def _empty(like: DeviceArray, shape: tuple[int, ...], dtype: str, name: str):
    fw = _framework(like.obj)
    if fw == "torch":
        import torch

        return torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[dtype]),
                           device=like.obj.device)
    if fw == "cupy" and dtype != "bf16":
        import cupy

        return cupy.empty(shape, dtype={"f32": "float32", "f16": "float16"}[dtype])
    raise usage(f"{name}: give {name}= (a {list(shape)} {dtype} device array): kiln allocates "
                f"only through torch or CuPy, and the input is a {type(like.obj).__name__}", name)


def _out(out, like: DeviceArray, shape, dtype, name="out"):
    if out is None:
        out = _empty(like, tuple(shape), dtype, name)
    o = _array(out, name)
    check_same(name, "shape", list(o.shape), list(shape), "the result")
    check_same(name, "dtype", o.dtype, dtype, "the result")
    return out, o


def _loader(loader):
    return loader if loader is not None else reference_loader()


# ---- the operations ---------------------------------------------------------------------------

def axpy(y, x, alpha: float, *, stream=None, loader=None):
    """y = alpha * x + y (in place); returns y."""
    ya, xa = _array(y, "y"), _array(x, "x")
    check_dtype("y", ya.dtype)
    check_same("x", "dtype", xa.dtype, ya.dtype, "y")
    check_same("x", "shape", list(xa.shape), list(ya.shape), "y")
    _same_device({"y": ya, "x": xa})
    _kiln._ops.axpy(_loader(loader), _stream(stream, ya), ya.ptr, xa.ptr, ya.numel,
                    float(alpha), ya.dtype)
    return y


def reduce_sum_workspace_bytes() -> int:
    return _kiln._ops.reduce_sum_workspace_bytes()


def reduce_sum(x, out=None, *, workspace=None, stream=None, loader=None):
    """The sum of x's elements into a 1-element array (accumulated in float); returns it."""
    xa = _array(x, "x")
    check_dtype("x", xa.dtype)
    if workspace is None:
        workspace = _empty(xa, (reduce_sum_workspace_bytes() // 4,), "f32", "workspace")
    wa = _array(workspace, "workspace")
    ws_bytes = wa.numel * {"f32": 4, "f16": 2, "bf16": 2}.get(wa.dtype, 4)
    out, oa = _out(out, xa, (), xa.dtype) if out is None else (out, _array(out, "out"))
    check_same("out", "size", oa.numel, 1, "a sum")
    check_same("out", "dtype", oa.dtype, xa.dtype, "x")
    _same_device({"x": xa, "out": oa, "workspace": wa})
    _kiln._ops.reduce_sum(_loader(loader), _stream(stream, xa), oa.ptr, xa.ptr, xa.numel,
                          wa.ptr, ws_bytes, xa.dtype)
    return out


def rmsnorm(x, weight, eps: float = 1e-6, out=None, *, stream=None, loader=None):
    """Row-wise RMS norm of x [..., cols] with weight [cols]; out may be x. Returns out."""
    xa, wa = _array(x, "x"), _array(weight, "weight")
    check_dtype("x", xa.dtype)
    check_same("weight", "dtype", wa.dtype, xa.dtype, "x")
    rows, cols = rows_cols("x", xa.shape)
    check_same("weight", "shape", list(wa.shape), [cols], "x's last dimension")
    out, oa = _out(out, xa, xa.shape, xa.dtype)
    _same_device({"x": xa, "weight": wa, "out": oa})
    _kiln._ops.rmsnorm(_loader(loader), _stream(stream, xa), oa.ptr, xa.ptr, wa.ptr, rows, cols,
                       float(eps), xa.dtype)
    return out


def softmax(x, out=None, *, stream=None, loader=None):
    """Row-wise softmax of x [..., cols]; out may be x. Returns out."""
    xa = _array(x, "x")
    check_dtype("x", xa.dtype)
    rows, cols = rows_cols("x", xa.shape)
    out, oa = _out(out, xa, xa.shape, xa.dtype)
    _same_device({"x": xa, "out": oa})
    _kiln._ops.softmax(_loader(loader), _stream(stream, xa), oa.ptr, xa.ptr, rows, cols,
                       xa.dtype)
    return out


def silu_and_mul(x, out=None, *, stream=None, loader=None):
    """x [..., 2d] (f16 or bf16) -> out [..., d] = silu(gate) * up. Returns out."""
    xa = _array(x, "x")
    check_dtype("x", xa.dtype, ("f16", "bf16"))
    rows, two_d = rows_cols("x", xa.shape)
    if two_d % 2:
        raise usage(f"x: last dimension {two_d} is not even ([..., 2d]: gate then up)", "x")
    out, oa = _out(out, xa, xa.shape[:-1] + (two_d // 2,), xa.dtype)
    _same_device({"x": xa, "out": oa})
    _kiln._ops.silu_and_mul(_loader(loader), _stream(stream, xa), oa.ptr, xa.ptr, rows,
                            two_d // 2, xa.dtype)
    return out


def gemm_f32(a, b, out=None, *, stream=None, loader=None):
    """out [M, N] = a [M, K] @ b [K, N], float32 row-major. Returns out."""
    return _gemm(_kiln._ops.gemm_f32, "f32", a, b, out, stream, loader)


def gemm_f16(a, b, out=None, *, stream=None, loader=None):
    """out [M, N] (float32) = a [M, K] @ b [K, N], a and b float16. Returns out."""
    return _gemm(_kiln._ops.gemm_f16, "f16", a, b, out, stream, loader)


def _gemm(op, in_dtype, a, b, out, stream, loader):
    """The checks both GEMMs make (a and b of in_dtype, [M, K] @ [K, N], one device), then op
    into a float32 out [M, N]."""
    aa, ba = _array(a, "a"), _array(b, "b")
    check_dtype("a", aa.dtype, (in_dtype,))
    check_dtype("b", ba.dtype, (in_dtype,))
    M, N, K = gemm_shapes(aa.shape, ba.shape)
    out, oa = _out(out, aa, (M, N), "f32")
    _same_device({"a": aa, "b": ba, "out": oa})
    op(_loader(loader), _stream(stream, aa), oa.ptr, aa.ptr, ba.ptr, M, N, K)
    return out


try:  # torch custom ops, when PyTorch is there
    import torch as _torch  # noqa: F401
except ImportError:
    pass
else:
    from kiln import _torch_ops  # noqa: F401
