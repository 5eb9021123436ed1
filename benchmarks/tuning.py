"""Tuning benchmark: (a) xgb against random and genetic search, best GFLOP/s after a number
of trials and trials needed to reach 95% of the best any tuner found; (b) the tuned matmul
against numpy (OpenBLAS) in the same run; (c) tuned ResNet-18 latency against ONNX Runtime
and PyTorch (benchmarks.tuned_model).

    python -m benchmarks.tuning          # all of it: about an hour on 2 cores
    python -m benchmarks.tuning --ops matmul:1024x1024x1024 --trials 64 --model-trials 0
    python -m benchmarks.tuning --ops none --model-trials 64     # (c) only

By default (a) runs xgb, random and genetic search for 256 trials on matmul 1024^3 and two
ResNet-18 layers (3x3 conv2d 64@56x56 and 256@14x14, the blocked NCHWc template that
model compile uses), and (c) tunes each ResNet-18 task for 64 trials.

Each tuner gets a fresh database in a temporary folder, and the tuners take turns, 32
trials each; the machine is shared, so note the load average printed next to each figure
and compare ratios from one run only. numpy is timed in a child process without
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on some of these machines for old OpenBLAS
builds; they make a current one pick a slower kernel), so the peer runs its best kernel;
the line says which variables were dropped.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from autotune import LocalRunner, make_tuner, parse_op_spec, tune
from autotune.tuners import throughput
from tuning_logs import TuningDatabase

DEFAULT_OPS = ("matmul:1024x1024x1024,conv2d_nchwc:1,64,56,56,64,3,3,1,1,"
               "conv2d_nchwc:1,256,14,14,256,3,3,1,1")


def _split_ops(text: str) -> list[str]:
    """Op specs separated by commas; a conv2d spec's own commas stay with it."""
    out: list[str] = []
    for part in text.split(","):
        if ":" in part or not out:
            out.append(part)
        else:
            out[-1] += "," + part
    return out


_NUMPY_GEMM = """
import sys, time, numpy as np
n, repeat = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n)).astype("float32")
b = rng.standard_normal((n, n)).astype("float32")
for _ in range(3):
    a @ b
times = []
for _ in range(repeat):
    t0 = time.perf_counter()
    a @ b
    times.append(time.perf_counter() - t0)
print(2.0 * n**3 / float(np.median(times)) / 1e9)
"""
_OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def numpy_gflops(n: int, repeat: int = 10) -> tuple[float, list[str]]:
    """numpy's (OpenBLAS) GFLOP/s on an n^3 float32 GEMM, median of `repeat` after warm-up,
    in a child process without the OpenBLAS kernel overrides; also the names dropped."""
    env = dict(os.environ)
    dropped = [k for k in _OPENBLAS_OVERRIDES if env.pop(k, None) is not None]
    out = subprocess.run([sys.executable, "-c", _NUMPY_GEMM, str(n), str(repeat)], env=env,
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip()), dropped


def _curve(task: Any, best: list[float]) -> Any:
    """A tune() callback appending the best GFLOP/s so far after each measured trial."""
    def cb(p: Any, inputs: Any, results: Any) -> None:
        cur = best[-1] if best else 0.0
        for r in results:
            cur = max(cur, throughput(task, r) / 1e9)
            best.append(cur)
    return cb


def trials_to(curve: list[float], level: float) -> int | None:
    """The first trial (1-based) whose best-so-far reaches `level`, or None."""
    return next((k + 1 for k, v in enumerate(curve) if v >= level), None)


def run(ops: list[str], tuners: list[str], trials: int, checkpoints: list[int],
        timeout: float, seed: int, step: int = 32) -> None:
    """Tune each op with each tuner (a fresh database each, so no tuner learns from another
    run's records) and print the comparison tables.

    The tuners take turns, `step` trials each: a slow spell of the shared machine (seen
    here: a config measured 2-6x slower for minutes) then falls on all of them alike
    instead of on whichever tuner happened to run then."""
    tmp = Path(tempfile.mkdtemp(prefix="tessel-bench-"))
    for n_op, spec in enumerate(ops):
        task = parse_op_spec(spec)
        curves: dict[str, list[float]] = {name: [] for name in tuners}
        spent = dict.fromkeys(tuners, 0.0)
        with contextlib.ExitStack() as stack:
            lanes = []
            for name in tuners:
                db = stack.enter_context(TuningDatabase(tmp / f"{n_op}-{name}.db"))
                runner = stack.enter_context(LocalRunner(timeout=timeout, min_repeat_ms=50))
                lanes.append((name, make_tuner(name, task, seed=seed), db, runner))
            for upto in range(step, trials + step, step):
                for name, tuner, db, runner in lanes:
                    t0 = time.time()
                    tune(task, tuner, min(upto, trials), db, runner,
                         callbacks=[_curve(task, curves[name])])
                    spent[name] += time.time() - t0
        for name, best in curves.items():
            print(f"{spec} {name}: {len(best)} trials in {spent[name]:.0f} s, best "
                  f"{best[-1] if best else 0:.1f} GFLOP/s", flush=True)
        print(f"(load {os.getloadavg()[0]:.2f})")
        top = max((c[-1] for c in curves.values() if c), default=0.0)
        print(f"\n{spec} (space {task.space.size}): best GFLOP/s after N trials; "
              f"trials to 95% of {top:.1f}, the best any tuner found")
        print("tuner    " + "".join(f"{n:>8}" for n in checkpoints) + "   to-95%")
        hits: dict[str, int | None] = {}
        for name, c in curves.items():
            vals = [f"{c[min(n, len(c)) - 1]:8.1f}" if c else "       -" for n in checkpoints]
            hits[name] = trials_to(c, 0.95 * top)
            shown = str(hits[name]) if hits[name] else f">{len(c)}"
            print(f"{name:8} " + "".join(vals) + f"   {shown:>6}")
        for model in ("xgb", "xgb_loop"):
            if model in hits and "random" in hits and hits[model]:
                rnd = hits["random"]
                need = f"{rnd}" if rnd else f"more than {len(curves['random'])}"
                ratio = f" ({hits[model] / rnd:.2f}x)" if rnd else ""
                print(f"{model} reached 95% in {hits[model]} trials, random in {need}{ratio}")
        if task.template == "matmul.x86" and task.args[0][0][0] == task.args[0][0][1]:
            time.sleep(0.3)  # let the measurement worker's threads go idle first
            ref, dropped = numpy_gflops(task.args[0][0][0])
            note = f", without {' '.join(dropped)}" if dropped else ""
            first = checkpoints[0]
            early = ", ".join(f"{name} {c[min(first, len(c)) - 1] / ref:.2f}"
                              for name, c in curves.items() if c)
            print(f"numpy (OpenBLAS{note}) {ref:.1f} GFLOP/s; tuned/numpy {top / ref:.2f}; "
                  f"after {first} trials: {early} (load {os.getloadavg()[0]:.2f})")
        print(flush=True)


def main() -> None:
    """Command line entry: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", default=DEFAULT_OPS, help="op specs, or 'none'")
    ap.add_argument("--tuners", default="xgb,random,ga")
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--checkpoints", default="64,128,256")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model-trials", type=int, default=64,
                    help="(c): tune ResNet-18 with this many trials per task and time it "
                         "against ONNX Runtime and PyTorch (0: skip)")
    ap.add_argument("--model-db", default=None, help="(c): keep ResNet-18's records here")
    a = ap.parse_args()
    if a.ops != "none":
        run(_split_ops(a.ops), a.tuners.split(","), a.trials,
            [int(x) for x in a.checkpoints.split(",")], a.timeout, a.seed)
    if a.model_trials > 0:
        from benchmarks import tuned_model

        tuned_model.main(["--trials", str(a.model_trials), "--seed", str(a.seed)]
                         + (["--db", a.model_db] if a.model_db else []))


if __name__ == "__main__":
    main()
