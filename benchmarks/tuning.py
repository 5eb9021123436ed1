"""Tuning benchmark: (a) xgb against random and genetic search, best GFLOP/s after a number
of trials and trials needed to reach 95% of the best any tuner found; (b) the tuned matmul
against numpy (OpenBLAS) in the same run; (c) tuned ResNet-18 latency against ONNX Runtime
and PyTorch (benchmarks.tuned_model).

    python -m benchmarks.tuning          # all of it: about half an hour on 2 cores
    python -m benchmarks.tuning --ops matmul:1024x1024x1024 --trials 64 --model-trials 0
    python -m benchmarks.tuning --ops none --model-trials 64     # (c) only

By default (a) runs xgb, random and genetic search for 256 trials on matmul 1024^3 and two
ResNet-18 layers (3x3 conv2d 64@56x56 and 256@14x14, the blocked NCHWc template that
model compile uses), and (c) tunes each ResNet-18 task for 64 trials.

Each tuner gets a fresh database in a temporary folder, and the tuners take turns, 32
trials each. A timing taken while tuning is one noisy sample (the same config read 1.3x
apart between runs here, median), so each op gets two tables: as measured while tuning,
and verified: every config that raised some tuner's best is re-measured 3 times in
shuffled rounds, and the curves and the best any tuner found use those medians.
`--compare-only FOLDER` redoes only the tables from the databases a run left there. The
machine is shared, so note the load average and compare ratios from one run only.

numpy is timed in a child process without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on
some of these machines for old OpenBLAS builds; they make a current one pick a slower
kernel), so the peer runs its best kernel; the line says which variables were dropped.
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

import numpy as np

from autotune import LocalRunner, MeasureInput, make_tuner, parse_op_spec, tune
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


def trials_to(curve: list[float], level: float) -> int | None:
    """The first trial (1-based) whose best-so-far reaches `level`, or None."""
    return next((k + 1 for k, v in enumerate(curve) if v >= level), None)


def history(task: Any, db_path: Path) -> tuple[list[float], list[tuple[int, int]]]:
    """A tuner's run from its database: best GFLOP/s so far after each trial, and the
    (trial, config index) of each improvement. A config's later record is a retry of its
    timeout, not a trial: where it ran, it counts from the trial before it."""
    with TuningDatabase(db_path, readonly=True) as db:
        recs = db.history(task.workload_key)
    curve: list[float] = []
    steps: list[tuple[int, int]] = []
    best = 0.0
    seen: set[int] = set()
    for r in recs:
        index = task.config_from_json(r.config_json).index
        g = (task.flop / r.mean / 1e9) if r.ok and r.mean > 0 else 0.0
        if index in seen:  # a timed-out config measured again (autotune.tuning.
            # retry_timeouts): no trial of its own, its time counts from the last trial
            if g > best and curve:
                best = curve[-1] = g
                steps.append((len(curve), index))
            continue
        seen.add(index)
        if g > best:
            best = g
            steps.append((len(curve) + 1, index))
        curve.append(best)
    return curve, steps


def remeasure(task: Any, indices: list[int], rounds: int, timeout: float, seed: int
              ) -> dict[int, float]:
    """Median GFLOP/s of each config over `rounds` rounds, each round measuring all of them
    in a fresh random order (so a slow spell of the machine does not favour any)."""
    rng = np.random.default_rng(seed)
    got: dict[int, list[float]] = {i: [] for i in indices}
    with LocalRunner(timeout=timeout, min_repeat_ms=50, check_trials=0,
                     slow_cutoff=None) as runner:
        for _ in range(rounds):
            order = [indices[k] for k in rng.permutation(len(indices))]
            results = runner.run([MeasureInput(task, task.config(i)) for i in order])
            for i, res in zip(order, results):
                got[i].append(throughput(task, res) / 1e9)
    return {i: float(np.median(v)) for i, v in got.items()}


def verified(steps: list[tuple[int, int]], values: dict[int, float], n: int) -> list[float]:
    """A best-so-far curve of n trials from the re-measured values of the improvements."""
    curve, best, k = [], 0.0, 0
    for t in range(1, n + 1):
        while k < len(steps) and steps[k][0] <= t:
            best = max(best, values[steps[k][1]])
            k += 1
        curve.append(best)
    return curve


def report(spec: str, task: Any, curves: dict[str, list[float]], checkpoints: list[int],
           what: str) -> float:
    """Print the table of one op (best after each checkpoint, trials to 95% of the best any
    tuner found) and the xgb-against-random line; returns that best."""
    top = max((c[-1] for c in curves.values() if c), default=0.0)
    print(f"\n{spec} (space {task.space.size}), {what}: best GFLOP/s after N trials; "
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
    return top


def tune_op(task: Any, tuners: list[str], trials: int, timeout: float, seed: int,
            folder: Path, n_op: int, step: int = 32) -> dict[str, Path]:
    """Tune `task` with each tuner into its own fresh database; returns their paths.

    The tuners take turns, `step` trials each: a slow spell of the shared machine (seen
    here: a config measured 2-6x slower for minutes) then falls on all of them alike
    instead of on whichever tuner happened to run then."""
    paths = {name: folder / f"{n_op}-{name}.db" for name in tuners}
    spent = dict.fromkeys(tuners, 0.0)
    with contextlib.ExitStack() as stack:
        lanes = []
        for name in tuners:
            db = stack.enter_context(TuningDatabase(paths[name]))
            runner = stack.enter_context(LocalRunner(timeout=timeout, min_repeat_ms=50))
            lanes.append((name, make_tuner(name, task, seed=seed), db, runner))
        for upto in range(step, trials + step, step):
            for name, tuner, db, runner in lanes:
                t0 = time.time()
                tune(task, tuner, min(upto, trials), db, runner)
                spent[name] += time.time() - t0
    for name in tuners:
        print(f"{task.name} {name}: {trials} trials in {spent[name]:.0f} s", flush=True)
    return paths


def compare(spec: str, task: Any, paths: dict[str, Path], checkpoints: list[int],
            timeout: float, seed: int, rounds: int = 3) -> None:
    """Print the tables of one op: as measured while tuning, then verified (every config
    that improved some tuner's best re-measured `rounds` times, medians); and the tuned
    matmul against numpy."""
    runs = {name: history(task, path) for name, path in paths.items()}
    report(spec, task, {n: c for n, (c, _) in runs.items()}, checkpoints,
           "as measured while tuning")
    configs = sorted({i for _, steps in runs.values() for _, i in steps})
    t0 = time.time()
    values = remeasure(task, configs, rounds, timeout, seed)
    curves = {n: verified(steps, values, len(c)) for n, (c, steps) in runs.items()}
    top = report(spec, task, curves, checkpoints,
                 f"verified ({len(configs)} configs re-measured {rounds}x in "
                 f"{time.time() - t0:.0f} s, medians)")
    if task.template == "matmul.x86" and task.args[0][0][0] == task.args[0][0][1]:
        time.sleep(0.3)  # let the measurement worker's threads go idle first
        ref, dropped = numpy_gflops(task.args[0][0][0])
        note = f", without {' '.join(dropped)}" if dropped else ""
        first = checkpoints[0]
        early = ", ".join(f"{name} {c[min(first, len(c)) - 1] / ref:.2f}"
                          for name, c in curves.items() if c)
        print(f"numpy (OpenBLAS{note}) {ref:.1f} GFLOP/s; tuned (verified)/numpy "
              f"{top / ref:.2f}; after {first} trials: {early}")
    print(f"(load {os.getloadavg()[0]:.2f})", flush=True)


def run(ops: list[str], tuners: list[str], trials: int, checkpoints: list[int],
        timeout: float, seed: int, folder: Path | None = None) -> None:
    """Tune each op with each tuner (a fresh database each, so no tuner learns from another
    run's records) and print the comparison tables; with `folder` holding the databases
    of an earlier run (`{op number}-{tuner}.db`), only compare them."""
    tune_now = folder is None
    folder = folder or Path(tempfile.mkdtemp(prefix="tessel-bench-"))
    print(f"databases in {folder}")
    for n_op, spec in enumerate(ops):
        task = parse_op_spec(spec)
        task.name = spec
        paths = (tune_op(task, tuners, trials, timeout, seed, folder, n_op) if tune_now
                 else {name: folder / f"{n_op}-{name}.db" for name in tuners})
        compare(spec, task, paths, checkpoints, timeout, seed)
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
    ap.add_argument("--compare-only", type=Path, default=None, metavar="FOLDER",
                    help="(a): no tuning; compare the databases an earlier run left in FOLDER")
    a = ap.parse_args()
    if a.ops != "none":
        run(_split_ops(a.ops), a.tuners.split(","), a.trials,
            [int(x) for x in a.checkpoints.split(",")], a.timeout, a.seed, a.compare_only)
    if a.model_trials > 0:
        from benchmarks import tuned_model

        tuned_model.main(["--trials", str(a.model_trials), "--seed", str(a.seed)]
                         + (["--db", a.model_db] if a.model_db else []))


if __name__ == "__main__":
    main()
