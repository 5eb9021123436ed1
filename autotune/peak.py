"""One core's fp32 FMA peak for a target: the FLOP/s that independent chains of vector FMAs
in registers reach (the target's vector width, so "llvm -mcpu=haswell" reads the AVX2
peak), timed on this machine's CPU time. What no kernel's FLOP/s can exceed: the task
scheduler caps a task's predicted gain by its time above it (autotune.task_scheduler), and
benchmarks.peak_headroom tables each task of a model against it.

    >>> peak = measure_peak("llvm")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

# independent FMA chains: more than latency x ports (4 x 2) keeps both ports busy; at most
# the target's vector registers less 4 (24 chains of AVX2's 16 registers spilled: 64
# against 90 GFLOP/s with 12)
CHAINS = 24
ITERATIONS = 2_000_000  # one peak call: about 0.1 s at 200 GFLOP/s


def fma_loop_ir(lanes: int, chains: int = CHAINS) -> str:
    """LLVM IR of `float @fma_loop(i64 %n)`: `chains` vectors of `lanes` floats, chain c
    starting at c + 1 in every lane, each replaced `n` times by x * 0.5 + 1.0 (one fused
    multiply-add); returns the sum over the chains of their first lanes.

        >>> "llvm.fma.v8f32" in fma_loop_ir(8)
        True
    """
    vec = f"<{lanes} x float>"

    def splat(x: float) -> str:
        return "<" + ", ".join([f"float {x:e}"] * lanes) + ">"

    lines = [f"declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})",
             "define float @fma_loop(i64 %n) {", "entry:",
             "  %empty = icmp eq i64 %n, 0",
             "  br i1 %empty, label %done, label %loop", "loop:",
             "  %i = phi i64 [0, %entry], [%next, %loop]"]
    lines += [f"  %a{c} = phi {vec} [{splat(c + 1.0)}, %entry], [%b{c}, %loop]"
              for c in range(chains)]
    lines += [f"  %b{c} = call {vec} @llvm.fma.v{lanes}f32({vec} %a{c}, {vec} "
              f"{splat(0.5)}, {vec} {splat(1.0)})" for c in range(chains)]
    lines += ["  %next = add i64 %i, 1", "  %more = icmp ult i64 %next, %n",
              "  br i1 %more, label %loop, label %done", "done:"]
    lines += [f"  %r{c} = phi {vec} [{splat(c + 1.0)}, %entry], [%b{c}, %loop]"
              for c in range(chains)]
    total = "0.0"
    for c in range(chains):
        lines.append(f"  %x{c} = extractelement {vec} %r{c}, i32 0")
        lines.append(f"  %s{c} = fadd float {total}, %x{c}")
        total = f"%s{c}"
    lines += [f"  ret float {total}", "}"]
    return "\n".join(lines)


@functools.lru_cache(maxsize=4)
def fma_loop(target: str) -> Callable[[int], float]:
    """The compiled `fma_loop_ir` for `target`'s vector width (Target.fp32_lanes), as a
    Python callable of the iteration count (the GIL released while it runs)."""
    import ctypes

    from lowering.llvm.jit import compile_ir
    from tessel_target import Target

    lanes = Target.parse(target).fp32_lanes
    module = compile_ir(fma_loop_ir(lanes, chains(target)), target)
    fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(module.address("fma_loop"))
    fn._module = module  # type: ignore[attr-defined]  # the code lives as long as fn
    return fn


def chains(target: str) -> int:
    """The FMA chains of `target`'s `fma_loop`: CHAINS, or its vector registers less 4.

        >>> chains("llvm -mcpu=haswell"), chains("llvm -mcpu=skylake-avx512")
        (12, 24)
    """
    from tessel_target import Target

    return min(CHAINS, Target.parse(target).vector_registers - 4)


def fma_flop(target: str, iterations: int) -> float:
    """Floating-point operations of one `fma_loop` call: two per lane per FMA.

        >>> fma_flop("llvm -mcpu=haswell", 10)
        1920.0
    """
    from tessel_target import Target

    return 2.0 * Target.parse(target).fp32_lanes * chains(target) * iterations


def fma_peak(target: str = "llvm", iterations: int = ITERATIONS,
             clock: Callable[[], float] = time.process_time) -> float:
    """FLOP/s of one call of `fma_loop` for `target`, by `clock` (CPU time: one core)."""
    fn = fma_loop(str(target))
    t0 = clock()
    fn(iterations)
    return fma_flop(str(target), iterations) / max(clock() - t0, 1e-12)


PEAK_CALLS = 5  # calls of a peak measurement: their fastest (noise only ever slows one)


def measure_peak(target: str = "llvm", calls: int = PEAK_CALLS,
                 iterations: int = ITERATIONS,
                 clock: Callable[[], float] = time.process_time) -> float:
    """One core's FMA peak for `target` (FLOP/s): the fastest of `calls` `fma_peak` calls
    (a busy core or a preemption only lowers a call's FLOP/s), after one untimed call.

        >>> ticks = iter(range(100))
        >>> measure_peak("llvm -mcpu=haswell", calls=2, iterations=10,
        ...              clock=lambda: float(next(ticks)))
        1920.0
    """
    if calls < 1:
        raise ValueError(f"measure_peak: calls must be at least 1, got {calls}")
    fma_loop(str(target))(min(iterations, 1000))  # compiled and warm before the timing
    return max(fma_peak(target, iterations, clock) for _ in range(calls))


__all__ = ["CHAINS", "ITERATIONS", "PEAK_CALLS", "chains", "fma_flop", "fma_loop",
           "fma_loop_ir", "fma_peak", "measure_peak"]
