"""Per-call overhead of a Tessel kernel: a tiny kernel (2 x 64 floats) timed as a serial
loop, as a parallel loop on the runtime's thread pool, and as a parallel loop that starts
its own pthreads on every call (TESSEL_THREAD_POOL=0). Includes the Python-side argument
checks and the ctypes call.

    python -m benchmarks.parallel_overhead
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

import lowering
import tensor_expr as te
from lowering.ir import Buffer, BufferStore, For, ForKind, PrimFunc
from lowering.kernel import Kernel, num_threads


def tiny(kind: ForKind) -> PrimFunc:
    """B[i, j] = A[i, j] * 2 + 1 over 2 x 64, the outer loop of `kind`."""
    A, B = Buffer("A", (2, 64), "float32"), Buffer("B", (2, 64), "float32")
    i, j = te.var("i"), te.var("j")
    body = For(i, te.const(0), te.const(2), kind, For(
        j, te.const(0), te.const(64), ForKind.VECTORIZED,
        BufferStore(B, A[i, j] * 2.0 + 1.0, (i, j))))
    return PrimFunc(f"tiny_{kind.value}", (A, B), body)


def per_call(kernel: Kernel, calls: int = 2000, repeat: int = 7) -> float:
    """Median seconds per call, calling through Kernel.__call__ (checks included)."""
    a = np.ones((2, 64), "float32")
    b = np.empty_like(a)
    kernel(a, b)
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            kernel(a, b)
        runs.append((time.perf_counter() - t0) / calls)
    return statistics.median(runs)


def main() -> dict[str, float]:
    """Print and return microseconds per call for each variant."""
    print(f"threads {num_threads()}, load average {os.getloadavg()[0]:.2f}")
    out = {"serial": per_call(lowering.build(tiny(ForKind.SERIAL))),
           "parallel, pool": per_call(lowering.build(tiny(ForKind.PARALLEL)))}
    os.environ["TESSEL_THREAD_POOL"] = "0"
    try:
        out["parallel, pthread_create"] = per_call(lowering.build(tiny(ForKind.PARALLEL)))
    finally:
        del os.environ["TESSEL_THREAD_POOL"]
    for name, t in out.items():
        print(f"{name:>26}: {t * 1e6:7.1f} us per call")
    return out


if __name__ == "__main__":
    main()
