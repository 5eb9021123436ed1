"""Transfer across models: ResNet-50's conv tasks tuned cold (an empty database) and warm
(a database holding ResNet-18's records: the xgb cost model starts from them), the same
trials each, medians over seeds; how many measurements warm needs to reach the latency
cold reaches.

    python -m benchmarks.transfer                          # 4 tasks, 24 trials, 3 seeds
    python -m benchmarks.transfer --tasks 2 --trials 8 --seeds 1 --source-trials 4

The source run tunes every ResNet-18 task (`--source-trials` each) once; the target tasks
are ResNet-50's `--tasks` convolutions of the largest occurrences x FLOP whose workload the
source does not hold (a task the source has is reuse, not transfer). Each (seed, task) is
tuned twice with the same tuner seed: cold, then warm in a copy of the source database.
Both runs measure the template's default first (tune's default_first), and in both a task
tuned after another starts from the records of those before it (tune's transfer within the
database): warm adds ResNet-18's. From the records,
the estimate of the chosen tasks' share of the model (sum of occurrences x best time with
t trials per task, measured kernel times) gives, per seed, the trials per task each run
needs to come within 5% of the cold run's final estimate; their medians over seeds and
the ratio are the last lines.

Measured (2 vCPU Intel Xeon, sapphirerapids, shared, load 4-7; defaults, commit 4351daa):
cold needed 18 / 12 / 12 trials per task, warm 13 / never / 4 (median 12 against 13, no
saving shown); the same tasks' estimates moved 16-24 ms between runs, more than any
difference transfer makes. Before per-task rank groups and shape context (bb9ea4e), warm
never reached cold's latency in 3 seeds.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

from autotune import LocalRunner, make_tuner, tune
from autotune.extract import extract_tasks
from relay_ir.frontend.onnx import from_onnx
from tuning_logs import TuningDatabase


def _models(source: str) -> tuple[Any, Any]:
    import onnx

    from tests.e2e import onnx_models

    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        "light_resnet50.onnx")
    r50 = onnx_models.randomize_constant_weights(onnx.load(path))
    r18 = onnx_models.resnet18() if source == "resnet18" else \
        onnx_models.resnet18(image=64, width=16, classes=10)
    return r18, r50


def _runner() -> LocalRunner:
    return LocalRunner(timeout=20, min_repeat_ms=20, cache_flush=False)


def curve(db: TuningDatabase, task: Any, trials: int) -> list[float]:
    """Best seconds after each of the task's first `trials` records (inf before a valid
    one), in the order measured."""
    best, out = math.inf, []
    for r in db.history(task.workload_key, task.target, task.device_key)[:trials]:
        if r.ok and r.mean is not None:
            best = min(best, r.mean)
        out.append(best)
    return out + [best] * (trials - len(out))


def trials_to_reach(estimates: list[float], target: float) -> int | None:
    """The first t (1-based) whose estimate is within 5% of `target`, or None."""
    return next((t + 1 for t, e in enumerate(estimates) if e <= 1.05 * target), None)


def main(argv: list[str] | None = None) -> int:
    """Tune the chosen tasks cold and warm per seed; print the trials each needs."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", type=int, default=4, help="ResNet-50 tasks to tune")
    ap.add_argument("--trials", type=int, default=24, help="trials per task, cold and warm")
    ap.add_argument("--source-trials", type=int, default=16,
                    help="trials per ResNet-18 task in the source database")
    ap.add_argument("--source", default="resnet18", choices=["resnet18", "small"],
                    help="the source model (small: a 64x64, width-16 ResNet-18)")
    ap.add_argument("--seeds", type=int, default=3)
    opts = ap.parse_args(argv)
    r18, r50 = _models(opts.source)
    src_mod, src_params = from_onnx(r18)
    src_tasks = extract_tasks(src_mod, "llvm", src_params)
    have = {t.workload_key for t, _ in src_tasks}
    mod, params = from_onnx(r50)
    convs = [(t, n) for t, n in extract_tasks(mod, "llvm", params)
             if t.template.startswith("conv2d") and t.workload_key not in have]
    chosen = sorted(convs, key=lambda tn: -tn[1] * tn[0].flop)[:opts.tasks]
    print(f"source: {opts.source}, {len(src_tasks)} tasks x {opts.source_trials} trials; "
          f"target: ResNet-50's {len(chosen)} convs of the most occurrences x FLOP, "
          f"{opts.trials} trials each; load average {os.getloadavg()[0]:.2f}", flush=True)
    for t, n in chosen:
        print(f"  x{n} {t.args[0][0]} * {t.args[1][0]} ({t.flop / 1e6:.0f} MFLOP)")
    tmp = tempfile.mkdtemp()
    try:
        source = os.path.join(tmp, "source.db")
        t0 = time.perf_counter()
        with TuningDatabase(source) as db, _runner() as runner:
            for t, _ in src_tasks:
                tune(t, make_tuner("xgb", t, seed=0), opts.source_trials, db, runner)
            print(f"source database: {db.count()} records in {time.perf_counter() - t0:.0f} "
                  "s", flush=True)
        need: dict[str, list[float]] = {"cold": [], "warm": []}
        for seed in range(opts.seeds):
            est: dict[str, list[float]] = {}
            for mode in ("cold", "warm"):
                path = os.path.join(tmp, f"{mode}{seed}.db")
                if mode == "warm":
                    shutil.copy(source, path)
                t0 = time.perf_counter()
                with TuningDatabase(path) as db, _runner() as runner:
                    curves = []
                    for t, n in chosen:
                        tune(t, make_tuner("xgb", t, seed=seed), opts.trials, db, runner)
                        curves.append((n, curve(db, t, opts.trials)))
                est[mode] = [sum(n * c[k] for n, c in curves) for k in range(opts.trials)]
                print(f"  seed {seed} {mode}: estimate {est[mode][-1] * 1e3:.3f} ms after "
                      f"{opts.trials} trials per task ({time.perf_counter() - t0:.0f} s, "
                      f"load {os.getloadavg()[0]:.2f})", flush=True)
            target = est["cold"][-1]
            for mode in ("cold", "warm"):
                t = trials_to_reach(est[mode], target)
                need[mode].append(t if t is not None else math.inf)
            print(f"  seed {seed}: trials per task to within 5% of cold's final "
                  f"{target * 1e3:.3f} ms: cold {need['cold'][-1]}, warm {need['warm'][-1]}",
                  flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cold, warm = statistics.median(need["cold"]), statistics.median(need["warm"])
    print(f"\nmedians over {opts.seeds} seed(s): cold {cold:g}, warm {warm:g} trials per task "
          f"to reach cold's final latency (within 5%); cold / warm = "
          f"{cold / warm if math.isfinite(warm) else 0:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
