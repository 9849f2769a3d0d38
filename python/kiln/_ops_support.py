"""What every op of kiln.ops shares: the default loader, the array checks, the streams and
outputs, and the shape rules (RULES) that say, for each kind of op, what its arrays must be and
what its result is. kiln/ops.py and kiln/torch_ops.py are generated from the ops table
(loader/ops_table.py, by cmake/gen_ops.py) and call these; nothing here names an op."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

from kiln import _kiln
from kiln._arrays import DeviceArray, default_stream, device_array, framework
from kiln._errors import usage

REFERENCE_PACKAGE = "kiln-kernels"
FLOAT_DTYPES = ("f32", "f16", "bf16")
ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2}
TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}

_lock = threading.Lock()
_default_loader = None


def use_loader(loader) -> None:
    """Makes `loader` (a kiln.Loader of kiln-kernels; None: kiln.load("kiln-kernels") again,
    on first use) the ops' default loader."""
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


def loader(given):
    """The native loader (kiln._kiln.Loader) the op runs on: `given`'s, else the default's."""
    chosen = given if given is not None else reference_loader()
    native = getattr(chosen, "_native", None)
    return native() if callable(native) else chosen


# ---- checks, on (shape, dtype) alone: the same for device arrays and torch's fake tensors ----

def check_dtype(name: str, dtype: str, allowed=FLOAT_DTYPES) -> None:
    """A UsageValueError naming argument `name` unless `dtype` (a kiln dtype name, "f32") is
    one of `allowed`."""
    if dtype not in allowed:
        raise usage(f"{name}: dtype {dtype} is not one of {', '.join(allowed)}", name,
                    value=dtype)


def check_same(name: str, what: str, got, want, other: str) -> None:
    """A UsageValueError naming argument `name` when its `what` ("shape", "dtype"), `got`,
    differs from argument `other`'s, `want`."""
    if got != want:
        raise usage(f"{name}: {what} {got} differs from {other}'s {want}", name)


def numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def rows_cols(name: str, shape: tuple[int, ...]) -> tuple[int, int]:
    """shape [..., cols] as (rows, cols): leading dimensions are rows (either may be 0:
    empty); a UsageValueError naming argument `name` for a 0-d shape."""
    if len(shape) < 1:
        raise usage(f"{name}: shape {list(shape)} has no last dimension to normalise over", name)
    return numel(shape[:-1]), shape[-1]


def gemm_shapes(a_shape, b_shape) -> tuple[int, int, int]:
    """(M, N, K) of a_shape [M, K] and b_shape [K, N]; a UsageValueError naming a or b."""
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise usage(f"a, b: gemm takes 2-D matrices, got {list(a_shape)} and {list(b_shape)}",
                    "a" if len(a_shape) != 2 else "b")
    (M, K), (K2, N) = a_shape, b_shape
    if K != K2:
        raise usage(f"b: gemm needs a [M, K] and b [K, N]; a is {list(a_shape)}, b is "
                    f"{list(b_shape)}", "b")
    return M, N, K


# ---- the shape rules ------------------------------------------------------------------------
# Each takes the op's input arrays as {name: (shape, dtype)} (in the table's order) and the
# dtypes the family is built for, checks them, and says what the kernel is given.

@dataclass
class Result:
    dtype: str                       # the DType the C++ op is given
    dims: dict = field(default_factory=dict)  # its sizes, by the C++ parameter's name
    out_shape: tuple | None = None   # the result's shape; None: the op works in place
    out_dtype: str | None = None
    out_size_only: bool = False      # a given out only needs as many elements (a sum: 1)


def _elementwise(specs, dtypes) -> Result:
    """Arrays of one shape and dtype; the first is updated in place. n: their element count."""
    (first, (shape, dtype)), *rest = specs.items()
    check_dtype(first, dtype, dtypes)
    for name, (s, d) in rest:
        check_same(name, "dtype", d, dtype, first)
        check_same(name, "shape", list(s), list(shape), first)
    return Result(dtype, {"n": numel(shape)})


def _sum(specs, dtypes) -> Result:
    """x of any shape -> one element of its dtype. n: x's element count."""
    ((name, (shape, dtype)),) = specs.items()
    check_dtype(name, dtype, dtypes)
    return Result(dtype, {"n": numel(shape)}, (), dtype, out_size_only=True)


def _rows(specs, dtypes) -> Result:
    """x [..., cols] (rows: the leading dimensions) and an optional per-column vector [cols]
    of x's dtype -> x's shape and dtype."""
    (first, (shape, dtype)), *rest = specs.items()
    check_dtype(first, dtype, dtypes)
    rows, cols = rows_cols(first, shape)
    for name, (s, d) in rest:
        check_same(name, "dtype", d, dtype, first)
        check_same(name, "shape", list(s), [cols], f"{first}'s last dimension")
    return Result(dtype, {"rows": rows, "cols": cols}, tuple(shape), dtype)


def _gated_rows(specs, dtypes) -> Result:
    """x [..., 2d] (gate then up) -> [..., d] of x's dtype."""
    ((name, (shape, dtype)),) = specs.items()
    check_dtype(name, dtype, dtypes)
    rows, two_d = rows_cols(name, shape)
    if two_d % 2:
        raise usage(f"{name}: last dimension {two_d} is not even ([..., 2d]: gate then up)",
                    name)
    return Result(dtype, {"rows": rows, "d": two_d // 2}, tuple(shape[:-1]) + (two_d // 2,),
                  dtype)


def _matmul(specs, dtypes) -> Result:
    """a [M, K] @ b [K, N], both of the one dtype built -> [M, N] float32."""
    (a, (a_shape, a_dtype)), (b, (b_shape, b_dtype)) = specs.items()
    check_dtype(a, a_dtype, dtypes)
    check_dtype(b, b_dtype, dtypes)
    M, N, K = gemm_shapes(a_shape, b_shape)
    return Result(a_dtype, {"M": M, "N": N, "K": K}, (M, N), "f32")


RULES = {"elementwise": _elementwise, "sum": _sum, "rows": _rows, "gated_rows": _gated_rows,
         "matmul": _matmul}


# ---- scalars, sizes, empty inputs ------------------------------------------------------------

def scalar(name: str, value) -> float:
    """A float argument of an op: an int or float (a NumPy or torch 0-d number too); anything
    else is a UsageTypeError naming it (the value itself the C++ op checks)."""
    if isinstance(value, (str, bytes, bool)) or not hasattr(value, "__float__"):
        raise usage(f"{name}: takes a float, not a {type(value).__name__}", name, TypeError)
    return float(value)


def finite_nonneg(op: str, name: str, value: float) -> None:
    """What the C++ op checks of such a scalar (op_support.cpp), for the fakes."""
    if not math.isfinite(value) or value < 0:
        raise usage(f"kiln.ops.{op}: {name} = {value} must be finite and >= 0", name,
                    value=str(value))


def check_sizes(r: Result, limits: dict, name: str) -> None:
    """Each size the kernel is given fits its C++ type (limits: the largest, by size name)."""
    for dim, most in limits.items():
        if r.dims.get(dim, 0) > most:
            raise usage(f"{name}: {dim} = {r.dims[dim]} is more than the kernels take ({most})",
                        name, value=str(r.dims[dim]))


def nothing_to_launch(r: Result, out) -> bool:
    """True when an empty input leaves the kernels nothing to do, as torch treats it: an empty
    result (or an in-place op on no element) is returned as it is; a result whose reduction is
    over no element (a sum of nothing, a product over K = 0) is filled with zeros."""
    if not any(d == 0 for d in r.dims.values()):
        return False
    if r.out_shape is None or numel(r.out_shape) == 0:
        return True
    if hasattr(out, "zero_"):      # torch
        out.zero_()
    elif hasattr(out, "fill"):     # CuPy, NumPy-like
        out.fill(0)
    else:
        raise usage(f"out: the result of an empty reduction is zeros, and kiln cannot fill a "
                    f"{type(out).__name__}: give a torch or CuPy array", "out")
    return True


# ---- arrays, streams, outputs ---------------------------------------------------------------

def not_contiguous(name: str):
    return usage(f"{name}: not contiguous (row-major); the kernels index it densely: pass "
                 f"{name}.contiguous() (torch) or cupy.ascontiguousarray({name})", name)


def _array(obj, name: str, stream: int | None = None) -> DeviceArray:
    a = device_array(obj, name, stream)
    if not a.contiguous:
        raise not_contiguous(name)
    return a


def launch_stream(given, objs) -> int | None:
    """The stream an op runs on, as an int: stream= (an int or a stream object), else
    default_stream of the arrays (their framework's current stream); None: the legacy default
    stream. Loader.launch follows the same rule."""
    if given is not None:
        return _kiln._stream_handle(given)
    return default_stream(objs)


def arrays(objs: dict, stream=None) -> dict[str, DeviceArray]:
    """Each argument as a contiguous device array (a UsageError names the one that is not),
    read for a launch on launch_stream(stream, ...), all on the current context's device."""
    s = launch_stream(stream, objs.values())
    out = {name: _array(obj, name, s) for name, obj in objs.items()}
    on_current_device(out)
    return out


def specs(arrays: dict[str, DeviceArray]) -> dict[str, tuple[tuple[int, ...], str]]:
    return {name: (tuple(a.shape), a.dtype) for name, a in arrays.items()}


def on_current_device(arrays: dict[str, DeviceArray]) -> None:
    """The ops load and launch in the current CUDA context: an array of another device is
    refused (docs/python.md, "Devices and streams")."""
    known = {n: a.device for n, a in arrays.items() if a.device is not None}
    if not known:
        return
    current = _kiln._current_device()
    for n, d in known.items():
        if d != current:
            raise usage(f"{n}: on cuda:{d}, but the current device is cuda:{current}; kiln runs "
                        f"in the current context: call the op under torch.cuda.device({d}) or "
                        f"cupy.cuda.Device({d})", n)


def same_device(arrays: dict[str, DeviceArray]) -> None:
    seen = {n: a.device for n, a in arrays.items() if a.device is not None}
    if len(set(seen.values())) > 1:
        raise usage("arrays on different devices: " +
                    ", ".join(f"{n} on cuda:{d}" for n, d in seen.items()),
                    next(iter(seen)))


def _empty(like: DeviceArray, shape: tuple[int, ...], dtype: str, name: str):
    obj: Any = like.obj
    fw = framework(obj)
    if fw == "torch":
        import torch

        return torch.empty(shape, dtype=getattr(torch, TORCH_DTYPES[dtype]), device=obj.device)
    if fw == "cupy" and dtype != "bf16":
        import cupy  # type: ignore[import-not-found, unused-ignore]

        with cupy.cuda.Device(like.device if like.device is not None else obj.device.id):
            return cupy.empty(shape, dtype=TORCH_DTYPES[dtype])
    raise usage(f"{name}: give {name}= (a {list(shape)} {dtype} device array): kiln allocates "
                f"only through torch or CuPy, and the input is a {type(like.obj).__name__}", name)


def output(out, like: DeviceArray, r: Result, stream: int | None = None):
    """out= checked against the result, or allocated like `like`: (the object, its array), read
    (DLPack) for a launch on `stream`."""
    assert r.out_shape is not None and r.out_dtype is not None, "the op has a result"
    if out is None:
        out = _empty(like, r.out_shape, r.out_dtype, "out")
    o = _array(out, "out", stream)
    if r.out_size_only:
        check_same("out", "size", o.numel, numel(r.out_shape), "the result")
    else:
        check_same("out", "shape", list(o.shape), list(r.out_shape), "the result")
    check_same("out", "dtype", o.dtype, r.out_dtype, "the result")
    return out, o


def workspace(ws, like: DeviceArray, nbytes: int, stream: int | None = None):
    """workspace= or a float32 one of nbytes allocated like `like`: (object, array, its bytes)."""
    if ws is None:
        ws = _empty(like, (nbytes // 4,), "f32", "workspace")
    w = _array(ws, "workspace", stream)
    return ws, w, w.numel * ITEMSIZE.get(w.dtype, 4)


# ---- torch's fake (meta) implementations ----------------------------------------------------

def fake_result(rule: str, dtypes, tensors: dict, in_place=()):
    """What the op's shape rule makes of torch tensors (fake ones while tracing): the checks the
    real op makes (the tensors it updates in place, `in_place`, contiguous, as the real op
    refuses them otherwise; the others the real op makes contiguous), the rule's checks, then
    an empty result of its shape and dtype on the first tensor's device (None for an op in
    place)."""
    import torch

    for name in in_place:
        if not tensors[name].is_contiguous():
            raise not_contiguous(name)

    def dtype_name(t) -> str:
        for name, attr in TORCH_DTYPES.items():
            if t.dtype == getattr(torch, attr):
                return name
        return str(t.dtype).replace("torch.", "")

    r = RULES[rule]({n: (tuple(t.shape), dtype_name(t)) for n, t in tensors.items()}, dtypes)
    if r.out_shape is None or r.out_dtype is None:
        return None
    first = next(iter(tensors.values()))
    return first.new_empty(r.out_shape, dtype=getattr(torch, TORCH_DTYPES[r.out_dtype]))
