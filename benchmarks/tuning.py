"""Tuning benchmark: (a) xgb against random and genetic search, best GFLOP/s after a number
of trials and trials needed to reach 95% of the best any tuner found; (b) the tuned matmul
against numpy (OpenBLAS) in the same run.

    python -m benchmarks.tuning                                  # matmul 1024^3, 64 trials
    python -m benchmarks.tuning --trials 256 --checkpoints 64,128,256 \\
        --ops matmul:1024x1024x1024,conv2d:1,64,56,56,64,3,3,1,1,conv2d:1,256,14,14,256,3,3,1,1

Each tuner gets a fresh database in a temporary folder; the machine is shared, so note the
load average printed next to each figure and compare ratios from one run only.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from autotune import LocalRunner, make_tuner, parse_op_spec, tune
from tuning_logs import TuningDatabase


def _split_ops(text: str) -> list[str]:
    """Op specs separated by commas; a conv2d spec's own commas stay with it."""
    out: list[str] = []
    for part in text.split(","):
        if ":" in part or not out:
            out.append(part)
        else:
            out[-1] += "," + part
    return out


def numpy_gflops(n: int, repeat: int = 5) -> float:
    """numpy's (OpenBLAS) GFLOP/s on an n^3 float32 GEMM, median of `repeat`."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype("float32")
    b = rng.standard_normal((n, n)).astype("float32")
    a @ b
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return 2.0 * n**3 / float(np.median(times)) / 1e9


def run(ops: list[str], tuners: list[str], trials: int, checkpoints: list[int],
        timeout: float, seed: int) -> None:
    """Tune each op with each tuner and print the comparison tables."""
    tmp = Path(tempfile.mkdtemp(prefix="tessel-bench-"))
    for spec in ops:
        task = parse_op_spec(spec)
        curves: dict[str, list[float]] = {}
        for name in tuners:
            best: list[float] = []

            def cb(p: object, inputs: object, results: object, best: list[float] = best
                   ) -> None:
                while len(best) < p.trials:  # type: ignore[attr-defined]
                    best.append(p.best_gflops)  # type: ignore[attr-defined]

            t0 = time.time()
            with TuningDatabase(tmp / f"{name}.db") as db, \
                    LocalRunner(timeout=timeout, min_repeat_ms=50) as runner:
                tune(task, make_tuner(name, task, seed=seed), trials, db, runner,
                     callbacks=[cb])
            curves[name] = best
            print(f"{spec} {name}: {len(best)} trials in {time.time() - t0:.0f} s, best "
                  f"{best[-1] if best else 0:.1f} GFLOP/s (load {os.getloadavg()[0]:.2f})",
                  flush=True)
        top = max((c[-1] for c in curves.values() if c), default=0.0)
        print(f"\n{spec}: best GFLOP/s after N trials; trials to 95% of {top:.1f}")
        print("tuner    " + "".join(f"{n:>8}" for n in checkpoints) + "   to-95%")
        for name, c in curves.items():
            vals = [f"{c[min(n, len(c)) - 1]:8.1f}" if c else "       -" for n in checkpoints]
            hit = next((k + 1 for k, v in enumerate(c) if v >= 0.95 * top), None)
            print(f"{name:8} " + "".join(vals) + f"   {hit if hit else '-':>6}")
        if task.template == "matmul.x86" and task.args[0][0][0] == task.args[0][0][1]:
            time.sleep(0.3)  # let the measurement worker's threads go idle first
            ref = numpy_gflops(task.args[0][0][0])
            print(f"numpy (OpenBLAS) {ref:.1f} GFLOP/s; tuned/numpy {top / ref:.2f} "
                  f"(load {os.getloadavg()[0]:.2f})")
        print()


def main() -> None:
    """Command line entry: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", default="matmul:1024x1024x1024")
    ap.add_argument("--tuners", default="xgb,random,ga")
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--checkpoints", default="16,32,64")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    run(_split_ops(a.ops), a.tuners.split(","), a.trials,
        [int(x) for x in a.checkpoints.split(",")], a.timeout, a.seed)


if __name__ == "__main__":
    main()
