"""GPU schedules the CUDA tests share: a bound vector op, a shared-memory matmul, two
kernels with a global temporary."""

from __future__ import annotations

from typing import Any

import tensor_expr as te
from schedule import create_schedule


def bind(s: Any, stage: Any, axis: Any, tag: str) -> None:
    s[stage].bind(axis, te.thread_axis(tag))


def vector_scale(n: Any = None, factor: int = 32, dtype: str = "float32"
                 ) -> tuple[Any, list[Any]]:
    """B[i] = A[i] * 2 + 1, split by `factor` into blockIdx.x / threadIdx.x."""
    n = te.var("n") if n is None else n
    A = te.placeholder((n,), dtype, "A")
    two, one = te.const(2, dtype), te.const(1, dtype)
    B = te.compute((n,), lambda i: A[i] * two + one, name="B")
    s = create_schedule(B)
    bx, tx = s[B].split(B.op.axis[0], factor=factor)
    bind(s, B, bx, "blockIdx.x")
    bind(s, B, tx, "threadIdx.x")
    return s, [A, B]


def shared_matmul(n: int = 16, tile: int = 4) -> tuple[Any, list[Any]]:
    """C = A @ B with tiles of A staged in shared memory, one thread per output element."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = create_schedule(C)
    AA = s.cache_read(A, "shared", [C])
    i, j = C.op.axis
    bi, ti = s[C].split(i, factor=tile)
    bj, tj = s[C].split(j, factor=tile)
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=tile)
    s[C].reorder(bi, bj, ti, tj, ko, ki)
    bind(s, C, bi, "blockIdx.y")
    bind(s, C, bj, "blockIdx.x")
    bind(s, C, ti, "threadIdx.y")
    bind(s, C, tj, "threadIdx.x")
    s[AA].compute_at(s[C], ko)
    ai, ak = s[AA].op.axis
    bind(s, AA, ai, "threadIdx.y")
    bind(s, AA, ak, "threadIdx.x")
    return s, [A, B, C]


def two_kernels(n: int = 40) -> tuple[Any, list[Any]]:
    """T = exp(A) (kept in global memory), C = T * 3: two kernels, one temporary."""
    A = te.placeholder((n,), name="A")
    T = te.compute((n,), lambda i: te.exp(A[i]), name="T")
    C = te.compute((n,), lambda i: T[i] * 3.0, name="C")
    s = create_schedule(C)
    for stage in (T, C):
        bx, tx = s[stage].split(stage.op.axis[0], factor=16)
        bind(s, stage, bx, "blockIdx.x")
        bind(s, stage, tx, "threadIdx.x")
    return s, [A, C]
