"""The generic GPU schedule: every fused group runs, one output element per thread.

Injective stages that are not outputs are inlined (as on the CPU); every stage left at
the root (outputs, reductions, stages a reduction reads twice) becomes one kernel: its
data-parallel axes fused into one, split into blocks of `threads` threads, bound to
blockIdx.x / threadIdx.x; reduce axes stay serial inside the thread. Stages between
kernels live in global memory. Correct for every group the CPU compiles, and the base the
tuned GPU templates (shared-memory tiles, cross-thread reductions) improve on.

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

import tensor_expr as te
from schedule.schedule import Schedule
from schedule.templates.common import inline_injective, shape_of
from tensor_expr.tensor import ComputeOp, Tensor

DEFAULT_THREADS = 128


def schedule_gpu_generic(s: Schedule, outs: Sequence[Tensor],
                         threads: int = DEFAULT_THREADS) -> Schedule:
    """Bind every root compute stage of `s` (see the module doc); returns `s`."""
    inline_injective(s, outs)
    for st in s.stages:
        if not isinstance(st.op, ComputeOp) or st.attach_type == "inline":
            continue
        axes = list(st.op.axis)
        numel = 1
        for n in shape_of(st.op.output(0)):
            numel *= n
        fused = st.fuse(*axes) if len(axes) > 1 else axes[0] if axes else None
        if fused is None:  # a 0-d output: one thread
            continue
        bx, tx = st.split(fused, factor=max(1, min(threads, numel)))
        st.bind(bx, te.thread_axis("blockIdx.x"))
        st.bind(tx, te.thread_axis("threadIdx.x"))
    return s


__all__ = ["DEFAULT_THREADS", "schedule_gpu_generic"]
