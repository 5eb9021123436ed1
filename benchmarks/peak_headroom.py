"""Each tuning task of a model, timed where it runs, against one core's fp32 FMA peak timed in
the same rounds: how far tuning can take the model at most, and where that room is.

    TESSEL_NUM_THREADS=1 python -m benchmarks.peak_headroom resnet18.onnx --db tuned.db \\
        --rounds 20

Per round, the peak (`fma_peak`: independent chains of vector FMAs in registers, the
target's vector width, so `--target "llvm -mcpu=haswell"` reads the AVX2 peak) and then
one run of every build's steps in the model's order (autotune.model_confirm.time_in_turn:
each timed run after an untimed one, the builds in turn), on one thread's CPU time. A
task's time is its steps' summed (a task occurs several times in a model), its FLOPs
Task.flop times its steps; "of peak" is its FLOP/s over the peak's, "above peak" the
microseconds it takes beyond what its FLOPs take at the peak. A kernel that loads its
operands cannot quite reach the peak; the 3x3 convs of ResNet-18 and -50 read 0.94-0.96 of
it untuned, so a task near that has nothing left to tune.

Why: on this project's AVX-512 machine `tessel tune` makes ResNet-18 and ResNet-50 only
2-4% faster than untuned, on AVX2 10%. Re-ranking each task's top 4 configs by their times
in the model (4 builds beside the untuned one timed in turn, 30 rounds; an experiment not
kept) did not change that: ResNet-18 0.980 of untuned with the re-ranked picks and 0.980
with the database's, ResNet-50 0.976 and 0.972 (benchmarks.tuned_ab, 15 rounds, load
3.6-5.5; again at load 1.6: 0.983 against 0.988); a task's top configs tie within 1-5%
alone and in the model, and two runs of the experiment picked differently. Timing the
candidates with the weights pushed out of L2 only (into the 300 MiB L3 that holds all of
ResNet-18's weights from one run to the next) instead of out of every cache did not pay
either (fresh 400-trial tunes of two such variants, 0.960-1.033 of untuned in three runs,
against 0.983-0.991 tuned cold); 800 trials instead of 400 gave 0.962-0.970 against
0.984-0.989 in the same runs (load 2.0). This table
says why (one Emerald Rapids core, load 4.8-4.9, the tuning databases of session 13;
ResNet-18 20 rounds, ResNet-50 15):

| build | all steps | of the peak | at the peak | most room (above the peak, us) |
|---|---|---|---|---|
| ResNet-18 untuned | 22.96 ms | 0.88 | 20.12 ms | 512@7 3x3 0.80 (986), 256@14 s2 0.75 (213) |
| ResNet-18 tuned | 22.46 ms | 0.90 | | 512@7 3x3 0.81 (878); the other 3x3 0.95-0.98 |
| ResNet-50 untuned | 55.08 ms | 0.83 | 45.75 ms | 512@7 3x3 0.78 (746), 1x1 convs 0.76-0.88 |
| ResNet-50 tuned | 53.16 ms | 0.86 | | 512@7 3x3 0.80 (651), dense 0.04 (621: 8 MiB weights) |
| ResNet-18 AVX2 untuned | 48.47 ms | 0.75 | 36.49 ms | the 3x3 convs 0.67-0.80 |
| ResNet-18 AVX2 tuned | 43.72 ms | 0.83 | | 512@7 3x3 0.80 -> 0.96, 64@56 3x3 0.78 -> 0.85 |

(AVX2: `--target "llvm -mcpu=haswell"`, the process's CPUID capped to AVX2 as
benchmarks.models's AVX2 runs do; its peak 99 against 179 GFLOP/s.) On AVX-512 the untuned
3x3 convs already run at 0.94-0.95 of the peak: the tuned margin there can only come from
the tasks far below it, 512@7 3x3 first (its register tile is 7 columns x the model's
channel block of 32, 14 of the 32 vector registers).

    >>> peak = fma_peak("llvm", iterations=1000)  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import functools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# the peak loop lives in autotune (the task scheduler measures it too); re-exported here
from autotune.peak import (  # noqa: F401
    CHAINS,
    ITERATIONS,
    chains,
    fma_flop,
    fma_loop,
    fma_loop_ir,
    fma_peak,
)


@dataclass(frozen=True)
class TaskTime:
    """A task's steps in one build: seconds summed over them (median of the rounds), their
    FLOPs (0 for the steps of no tuning task, lumped as one row, key "")."""

    key: str
    name: str
    steps: int
    seconds: float
    flop: float

    def of_peak(self, peak: float) -> float:
        """FLOP/s over `peak` (FLOP/s).

            >>> TaskTime("k", "t", 1, 2e-3, 2e8).of_peak(2e11)
            0.5
        """
        return self.flop / self.seconds / peak if self.seconds > 0 else 0.0

    def above_peak(self, peak: float) -> float:
        """Seconds beyond what the FLOPs take at `peak`.

            >>> round(TaskTime("k", "t", 1, 2e-3, 2e8).above_peak(2e11), 6)
            0.001
        """
        return self.seconds - self.flop / peak


OTHER = "steps of no tuning task"


def task_times(plan: Any, step_seconds: np.ndarray, target: str) -> list[TaskTime]:
    """Per tuning task of `plan` (relay_ir GraphPlan), in the order of its first step, and
    one row for the other steps: its steps' seconds summed per round (`step_seconds`:
    rounds x steps), the median over rounds, and its FLOPs (Task.flop x steps).

        >>> task_times(lib.plan, time_in_turn([lib.plan], x, 5)[0], "llvm")  # doctest: +SKIP
    """
    from autotune.task import Task

    steps: dict[str, list[int]] = {}
    for k, step in enumerate(plan.steps):
        steps.setdefault(step.workload_key or OTHER, []).append(k)
    out = []
    for key, ks in steps.items():
        seconds = float(np.median(step_seconds[:, ks].sum(axis=1)))
        if key == OTHER:
            out.append(TaskTime("", OTHER, len(ks), seconds, 0.0))
            continue
        task = Task.from_workload_key(key, target)
        args = task.args
        name = f"{task.template} {args[0][0]}" + (f" * {args[1][0]}" if len(args) > 1 else "")
        out.append(TaskTime(key, name, len(ks), seconds, task.flop * len(ks)))
    return out


StepTimer = Callable[[Sequence[Any], list[np.ndarray], int], list[np.ndarray]]


def measure(plans: Sequence[Any], arrays: list[np.ndarray], rounds: int, target: str,
            peak: Callable[[], float] | None = None, timer: StepTimer | None = None
            ) -> tuple[float, list[np.ndarray]]:
    """The median peak (FLOP/s) and each plan's step seconds (rounds x steps), a peak call
    and one round of every plan (`timer`, default time_in_turn) in turn, `rounds` times."""
    from autotune.model_confirm import time_in_turn

    peak = peak or functools.partial(fma_peak, target)
    timer = timer or time_in_turn
    peaks: list[float] = []
    rows: list[list[np.ndarray]] = [[] for _ in plans]
    for _ in range(rounds):
        peaks.append(peak())
        for k, t in enumerate(timer(plans, arrays, 1)):
            rows[k].append(t[0])
    return float(np.median(peaks)), [np.array(r) for r in rows]


def table(times: Sequence[TaskTime], peak: float,
          base: Sequence[TaskTime] | None = None) -> str:
    """The rows, most time above the peak first, and a total line; with `base` (the
    untuned build's), each task's time over its time there, and the total's.

        >>> print(table([TaskTime("k", "conv", 2, 2e-3, 2e8)], 2e11,
        ...             [TaskTime("k", "conv", 2, 4e-3, 2e8)]))  # doctest: +NORMALIZE_WHITESPACE
          task  steps  us  of peak  above us  x base
          conv  2  2000  0.50  1000  0.500
          all steps 2.00 ms, 100 GFLOP/s = 0.50 of the peak; at the peak the FLOPs take
          1.00 ms (0.500 of this build); x0.500 of the base
    """
    before = {t.key: t.seconds for t in base or ()}
    total = sum(t.seconds for t in times)
    flop = sum(t.flop for t in times)
    lines = [f"  {'task':<58} {'steps':>5} {'us':>8} {'of peak':>8} {'above us':>9}"
             + (f" {'x base':>7}" if base is not None else "")]
    for t in sorted(times, key=lambda t: -t.above_peak(peak)):
        ratio = (f" {t.seconds / before[t.key]:>7.3f}" if before.get(t.key) else
                 f" {'-':>7}") if base is not None else ""
        lines.append(f"  {t.name:<58} {t.steps:>5} {t.seconds * 1e6:>8.0f} "
                     f"{t.of_peak(peak):>8.2f} {t.above_peak(peak) * 1e6:>9.0f}{ratio}")
    lines.append(f"  all steps {total * 1e3:.2f} ms, {flop / total / 1e9:.0f} GFLOP/s = "
                 f"{flop / total / peak:.2f} of the peak; at the peak the FLOPs take "
                 f"{flop / peak * 1e3:.2f} ms ({flop / peak / total:.3f} of this build)"
                 + (f"; x{total / sum(before.values()):.3f} of the base"
                    if base is not None else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, list[TaskTime]]:
    """Build the model untuned and with each --db, time them (see the module doc) and
    print a table per build; returns each build's task times, by name."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="an ONNX file")
    ap.add_argument("--db", action="append", default=[], help="a tuning database (repeat "
                    "for several): one tuned build each")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args(argv)
    from lowering.kernel import num_threads

    if num_threads() != 1:
        ap.error("the peak is one core's: run with TESSEL_NUM_THREADS=1")
    if args.rounds < 1:
        ap.error(f"--rounds must be positive, got {args.rounds}")
    import os

    import relay_ir
    from relay_ir.frontend.onnx import from_onnx

    mod, params = from_onnx(args.model)
    names = ["untuned", *args.db]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        libs = [relay_ir.build(mod, args.target, params, tuning_db=db)
                for db in [None, *args.db]]
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype(dtype) for _, shape, dtype in
              libs[0].input_specs]
    peak, step_seconds = measure([lib.plan for lib in libs], inputs, args.rounds,
                                 args.target)
    print(f"{args.model}: peak {peak / 1e9:.0f} GFLOP/s ({args.target}, median of "
          f"{args.rounds} rounds, CPU time), load {os.getloadavg()[0]:.2f}")
    out: dict[str, list[TaskTime]] = {}
    for name, lib, s in zip(names, libs, step_seconds):
        out[name] = task_times(lib.plan, s, args.target)
        base = out["untuned"] if name != "untuned" else None
        print(f"{name}{' (x base: of the untuned build)' if base else ''}:\n"
              f"{table(out[name], peak, base)}")
    return out


if __name__ == "__main__":
    main()
