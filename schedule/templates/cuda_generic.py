"""The generic GPU schedule: every fused group runs, one output element per thread.

Injective stages that are not outputs are inlined (as on the CPU); every stage left at
the root (outputs, reductions, stages a reduction reads twice) becomes one kernel: its
data-parallel axes fused into one, split into blocks of `threads` threads, bound to
blockIdx.x / threadIdx.x; reduce axes stay serial inside the thread. A long reduction
(`CROSS_THREAD_MIN` elements or more per output, as a softmax row or a global pool) is
instead shared by the threads of a block: one block per output element, its reduce axes
fused and split over threadIdx.x (a cross-thread reduction, lowering.passes
.thread_allreduce). Stages between kernels live in global memory. Correct for every group
the CPU compiles, and the base the tuned GPU templates (shared-memory tiles) improve on.

    >>> import tensor_expr as te
    >>> from schedule import create_schedule
    >>> A = te.placeholder((4, 100), name="A")
    >>> B = te.compute((4, 100), lambda i, j: A[i, j] * 2.0, name="B")
    >>> s = schedule_gpu_generic(create_schedule(B), [B])
    >>> [str(iv.var.name) for iv in s[B].leaf_iter_vars]
    ['i.j.fused.outer', 'i.j.fused.inner']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensor_expr as te
from schedule.schedule import Schedule
from schedule.templates.common import inline_injective, shape_of
from tensor_expr.tensor import ComputeOp, Tensor

DEFAULT_THREADS = 128
CROSS_THREAD_MIN = 64


def schedule_gpu_generic(s: Schedule, outs: Sequence[Tensor],
                         threads: int = DEFAULT_THREADS) -> Schedule:
    """Bind every root compute stage of `s` (see the module doc); returns `s`."""
    inline_injective(s, outs)
    for st in s.stages:
        if not isinstance(st.op, ComputeOp) or st.attach_type == "inline":
            continue
        axes = list(st.op.axis)
        red = list(st.op.reduce_axis)
        red_len = 1
        for r in red:
            red_len *= int(r.dom.extent.value)
        if red and red_len >= CROSS_THREAD_MIN:
            _cross_thread(st, axes, red, red_len)
            continue
        bind_elementwise(st, threads)
    return s


def bind_elementwise(st: Any, threads: int = DEFAULT_THREADS) -> None:
    """One thread per output element of stage `st` (four contiguous ones, vectorized, when
    the size allows): its axes fused, split into blocks of `threads`, bound to blockIdx.x /
    threadIdx.x (a 0-d stage is left to one thread)."""
    axes = list(st.op.axis)
    if not axes:
        return
    numel = 1
    for n in shape_of(st.op.output(0)):
        numel *= n
    fused = st.fuse(*axes) if len(axes) > 1 else axes[0]
    if numel % (4 * threads) == 0 and not st.op.reduce_axis:
        # four contiguous elements per thread: float4 loads and stores where the accesses
        # allow (lowering.cuda.codegen falls back to four scalar ones where not)
        fused, lanes = st.split(fused, factor=4)
        st.vectorize(lanes)
    bx, tx = st.split(fused, factor=max(1, min(threads, numel)))
    st.bind(bx, te.thread_axis("blockIdx.x"))
    st.bind(tx, te.thread_axis("threadIdx.x"))


def _cross_thread(st: Any, axes: list[Any], red: list[Any], red_len: int) -> None:
    threads = 32 if red_len <= 256 else 128
    r = st.fuse(*red) if len(red) > 1 else red[0]
    ro, ri = st.split(r, factor=threads)
    if axes:
        out = st.fuse(*axes) if len(axes) > 1 else axes[0]
        st.bind(out, te.thread_axis("blockIdx.x"))
    else:  # a 0-d result: the thread loop outermost, so that the whole nest is one kernel
        st.reorder(ri, ro)
    st.bind(ri, te.thread_axis("threadIdx.x"))


__all__ = ["CROSS_THREAD_MIN", "DEFAULT_THREADS", "bind_elementwise", "schedule_gpu_generic"]
