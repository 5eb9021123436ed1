"""lowering: schedules to loop IR, loop passes, the loop-IR interpreter and the backends.

    >>> import tensor_expr as te, lowering
    >>> from schedule import create_schedule
    >>> A = te.placeholder((64,), name="A")
    >>> B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    >>> s = create_schedule(B)
    >>> print(lowering.lower(s, [A, B]))
    func main(A: float32[64], B: float32[64]) {
      for (i, 0, 64) {
        B[i] = (A[i] * 2.0)
      }
    }
    >>> import numpy as np
    >>> f = lowering.build(s, [A, B], target="llvm")
    >>> a, b = np.arange(64, dtype="float32"), np.full(64, np.nan, "float32")
    >>> f(a, b); b[:4].tolist()
    [0.0, 2.0, 4.0, 6.0]
"""

from __future__ import annotations

from typing import Any


def lower(sch: Any, args: Any, name: str = "main", *, partition: bool = True) -> Any:
    """Lower a schedule into a loop-IR PrimFunc: `print(lowering.lower(s, [A, B, C]))`.

    `partition=False` skips loop partitioning (the tail of a split stays guarded).
    """
    from lowering.schedule_ops import lower as _lower

    return _lower(sch, args, name=name, partition=partition)


def build(sch: Any, args: Any = None, target: Any = "llvm", name: str = "main", *,
          partition: bool | None = None) -> Any:
    """Compile a schedule (or a PrimFunc) into a kernel callable on numpy arrays.

    `partition` (loop partitioning) defaults to on for the CPU and off for CUDA, where a
    guard costs little and a split-off tail would repeat a cross-thread reduction.
    `f = lowering.build(s, [A, B, C], target="llvm"); f(a, b, c)`
    """
    from lowering.build_module import build as _build

    return _build(sch, args, target=target, name=name, partition=partition)


def interpret(func: Any, *arrays: Any) -> None:
    """Run a loop-IR PrimFunc with the numpy reference interpreter, writing outputs in place."""
    from lowering.interpreter import run

    run(func, *arrays)
