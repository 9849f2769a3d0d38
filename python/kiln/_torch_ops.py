"""kiln's reference ops as torch custom ops (namespace `kiln`), imported by kiln.ops when PyTorch
is there. Each has a fake (meta) implementation that applies the same shape and dtype rules
and allocates nothing on a device, so `torch.compile(..., fullgraph=True)` traces a model
calling them without a graph break, and a bad shape fails while tracing with the same
kiln.UsageError as at run time. The real implementations run kiln.ops on the tensors, on
torch's current stream.

    torch.ops.kiln.rmsnorm(x, weight, eps) -> Tensor
    torch.ops.kiln.softmax(x) -> Tensor
    torch.ops.kiln.silu_and_mul(x) -> Tensor            (f16/bf16, [..., 2d] -> [..., d])
    torch.ops.kiln.reduce_sum(x) -> Tensor              (0-d, x's dtype)
    torch.ops.kiln.gemm_f32(a, b) -> Tensor
    torch.ops.kiln.gemm_f16(a, b) -> Tensor             (float32)
    torch.ops.kiln.axpy_(y, x, alpha) -> None           (y += alpha * x, in place)
"""

from __future__ import annotations

import torch
from torch.library import custom_op

from kiln import ops
from kiln._errors import usage

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def _dtype(name: str, t: torch.Tensor, allowed=ops.FLOAT_DTYPES) -> str:
    d = _DTYPES.get(t.dtype, str(t.dtype).replace("torch.", ""))
    ops.check_dtype(name, d, allowed)
    return d


def _rows_check(x: torch.Tensor, weight: torch.Tensor | None = None) -> None:
    d = _dtype("x", x)
    _, cols = ops.rows_cols("x", tuple(x.shape))
    if weight is not None:
        ops.check_same("weight", "dtype", _dtype("weight", weight), d, "x")
        ops.check_same("weight", "shape", list(weight.shape), [cols], "x's last dimension")


@custom_op("kiln::rmsnorm", mutates_args=())
def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return ops.rmsnorm(x.contiguous(), weight.contiguous(), eps)


@rmsnorm.register_fake
def _(x, weight, eps):
    _rows_check(x, weight)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@custom_op("kiln::softmax", mutates_args=())
def softmax(x: torch.Tensor) -> torch.Tensor:
    return ops.softmax(x.contiguous())


@softmax.register_fake
def _(x):
    _rows_check(x)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _silu_shape(x: torch.Tensor) -> list[int]:
    _dtype("x", x, ("f16", "bf16"))
    _, two_d = ops.rows_cols("x", tuple(x.shape))
    if two_d % 2:
        raise usage(f"x: last dimension {two_d} is not even ([..., 2d]: gate then up)", "x")
    return list(x.shape[:-1]) + [two_d // 2]


@custom_op("kiln::silu_and_mul", mutates_args=())
def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    return ops.silu_and_mul(x.contiguous())


@silu_and_mul.register_fake
def _(x):
    return x.new_empty(_silu_shape(x))


@custom_op("kiln::reduce_sum", mutates_args=())
def reduce_sum(x: torch.Tensor) -> torch.Tensor:
    return ops.reduce_sum(x.contiguous())


@reduce_sum.register_fake
def _(x):
    _dtype("x", x)
    return x.new_empty(())


def _gemm_check(a, b, dtype: str) -> list[int]:
    _dtype("a", a, (dtype,))
    _dtype("b", b, (dtype,))
    M, N, _ = ops.gemm_shapes(tuple(a.shape), tuple(b.shape))
    return [M, N]


@custom_op("kiln::gemm_f32", mutates_args=())
def gemm_f32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return ops.gemm_f32(a.contiguous(), b.contiguous())


@gemm_f32.register_fake
def _(a, b):
    return a.new_empty(_gemm_check(a, b, "f32"))


@custom_op("kiln::gemm_f16", mutates_args=())
def gemm_f16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return ops.gemm_f16(a.contiguous(), b.contiguous())


@gemm_f16.register_fake
def _(a, b):
    return a.new_empty(_gemm_check(a, b, "f16"), dtype=torch.float32)


@custom_op("kiln::axpy_", mutates_args=("y",))
def axpy_(y: torch.Tensor, x: torch.Tensor, alpha: float) -> None:
    ops.axpy(y, x.contiguous(), alpha)


@axpy_.register_fake
def _(y, x, alpha):
    d = _dtype("y", y)
    ops.check_same("x", "dtype", _dtype("x", x), d, "y")
    ops.check_same("x", "shape", list(x.shape), list(y.shape), "y")
