"""Tensor-core intrinsics (CUDA's warp matrix functions, nvcuda::wmma, 16x16x16, float16 in,
float32 accumulate) for `tensorize`, and the storage scopes of their fragments.

A fragment is a 16x16 tile owned by the 32 lanes of a warp together. A stage in scope
`local.wmma.matrix_a` / `local.wmma.matrix_b` / `local.wmma.accumulator` holds fragments:
its buffer (both last dims multiples of 16) is an array of 16x16 tiles, and every access
to it is one of the calls below, which all lanes of a warp make together with the same
arguments (so a fragment stage is computed inside the warp's loops, never under a loop
bound to threadIdx.x).

- WMMA_LOAD_A(frag, src, ldm): the 16x16 tile of `src` at that element, rows `ldm` apart,
  into a matrix_a fragment (row major). WMMA_LOAD_B likewise into a matrix_b fragment,
  from a weight stored [n, k] (the K x N operand, column major).
- WMMA_MMA(acc, a, b): acc[i, j] += sum_k a[i, k] * b[j, k] (float32 sums of float16
  products).
- WMMA_STORE(dst, acc, ldm): an accumulator tile into `dst` (row major, rows `ldm` apart).
- WMMA_FILL(acc, value): every element of an accumulator tile; not an intrinsic of the
  schedule: lowering.cuda turns the zero-init loops of a tensorized reduction into it.

Each call's arguments are the first elements of the regions (as every tensorize intrinsic
here), so the backend reads buffer, tile and offset from them. lowering.cuda emits
nvcuda::wmma code (sm_70 and later) and its simulator runs them per warp.

    >>> intrin_mma().name
    'tessel.wmma_mma'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensor_expr as te
from schedule.tensorize import Region, TensorIntrin, decl_tensor_intrin
from tensor_expr.expr import Call, PrimExpr, cast
from tessel_target.gpu import arch_number, cuda_arch

TILE = 16
MIN_ARCH = 70  # warp matrix functions need Volta (sm_70) or later
SCOPE_A, SCOPE_B = "local.wmma.matrix_a", "local.wmma.matrix_b"
SCOPE_ACC = "local.wmma.accumulator"
SCOPES = (SCOPE_A, SCOPE_B, SCOPE_ACC)
WMMA_LOAD_A, WMMA_LOAD_B = "tessel.wmma_load_a", "tessel.wmma_load_b"
WMMA_MMA, WMMA_STORE, WMMA_FILL = "tessel.wmma_mma", "tessel.wmma_store", "tessel.wmma_fill"
WMMA_CALLS = (WMMA_LOAD_A, WMMA_LOAD_B, WMMA_MMA, WMMA_STORE, WMMA_FILL)


def has_tensor_cores(target: Any) -> bool:
    """True when a cuda target's architecture has tensor cores (sm_70 or later).

        >>> has_tensor_cores("cuda -arch=sm_61"), has_tensor_cores("cuda -arch=sm_90")
        (False, True)
    """
    return arch_number(cuda_arch(target)) >= MIN_ARCH


def leading_dim(buffer: Any) -> PrimExpr:
    """The distance between rows of a (loop-IR) buffer: its padded stride, else its width."""
    if buffer.strides is not None:
        return buffer.strides[-2]
    return buffer.shape[-1]


def _copy(dtype: str, name: str) -> te.Tensor:
    src = te.placeholder((TILE, TILE), dtype, name=f"{name}_src")
    return te.compute((TILE, TILE), lambda i, j: src[i, j], name=name)


def intrin_load(which: str) -> TensorIntrin:
    """A 16x16 float16 tile into a matrix_a (`which` "a") or matrix_b ("b") fragment."""
    name = WMMA_LOAD_A if which == "a" else WMMA_LOAD_B

    def emit(outs: Sequence[Region], ins: Sequence[Region]) -> PrimExpr:
        return Call("int32", name, (outs[0].first, ins[0].first, leading_dim(ins[0].buffer)))

    return decl_tensor_intrin(_copy("float16", f"wmma_{which}"), name, emit)


def intrin_mma() -> TensorIntrin:
    """acc[i, j] += sum_k float32(a[i, k]) * float32(b[j, k]) over one 16x16x16 tile."""
    a = te.placeholder((TILE, TILE), "float16", name="wmma_a")
    b = te.placeholder((TILE, TILE), "float16", name="wmma_b")
    k = te.reduce_axis((0, TILE), name="k")
    c = te.compute((TILE, TILE), lambda i, j: te.sum(
        cast(a[i, k], "float32") * cast(b[j, k], "float32"), axis=k), name="wmma_c")

    def emit(outs: Sequence[Region], ins: Sequence[Region]) -> PrimExpr:
        return Call("int32", WMMA_MMA, (outs[0].first, ins[0].first, ins[1].first))

    return decl_tensor_intrin(c, WMMA_MMA, emit)


def intrin_store() -> TensorIntrin:
    """A float32 accumulator tile into memory (row major)."""

    def emit(outs: Sequence[Region], ins: Sequence[Region]) -> PrimExpr:
        return Call("int32", WMMA_STORE, (outs[0].first, ins[0].first,
                                          leading_dim(outs[0].buffer)))

    return decl_tensor_intrin(_copy("float32", "wmma_store"), WMMA_STORE, emit)


__all__ = ["MIN_ARCH", "SCOPES", "SCOPE_A", "SCOPE_ACC", "SCOPE_B", "TILE", "WMMA_CALLS",
           "WMMA_FILL", "WMMA_LOAD_A", "WMMA_LOAD_B", "WMMA_MMA", "WMMA_STORE",
           "has_tensor_cores", "intrin_load", "intrin_mma", "intrin_store", "leading_dim"]
