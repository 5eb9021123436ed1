"""Task scheduler against equal shares: the same total budgets spent on a model's tasks two
ways, and the end-to-end latency of the model compiled with each database (measured, not
estimated), medians over seeds.

    python -m benchmarks.task_scheduler                         # ResNet-18, 256/512/1024
    python -m benchmarks.task_scheduler --model small --budgets 96 192 --seeds 1

Equal shares give every task budget / tasks trials (today's `--trials-per-task`); the
scheduler (`autotune.task_scheduler`, what `tessel tune MODEL --trials N` runs) spends the
same total where it cuts the model's latency most. Each (strategy, budget, seed) tunes into
a fresh database, then the model is compiled with it and timed (median of repeats after
warm-up). The last lines print, per budget, the ratio of latencies and the smallest budget
at which each strategy came within 5% of the best latency any run reached.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time
import warnings
from typing import Any

import numpy as np

import relay_ir
from autotune import LocalRunner, make_tuner, tune
from autotune.extract import extract_model_tasks
from autotune.task_scheduler import TaskScheduler
from relay_ir.frontend.onnx import from_onnx
from tuning_logs import TuningDatabase


def _model(name: str) -> Any:
    from tests.e2e import onnx_models

    if name == "resnet18":
        return onnx_models.resnet18()
    if name == "small":
        return onnx_models.resnet18(image=64, width=16, classes=10)
    raise SystemExit(f"unknown model {name!r}; choose resnet18 or small")


CACHE_FLUSH = [True]  # as `tessel tune MODEL` measures: caches flushed before each call


def _runner() -> LocalRunner:
    return LocalRunner(timeout=20, min_repeat_ms=20, cache_flush=CACHE_FLUSH[0])


def tune_equal(tasks: list[tuple[Any, int]], budget: int, seed: int, db: Any) -> None:
    """Every task the same share of `budget`."""
    share = max(1, budget // len(tasks))
    with _runner() as runner:
        for task, _ in tasks:
            tune(task, make_tuner("xgb", task, seed=seed), share, db, runner)


def tune_scheduled(tasks: list[tuple[Any, int]], budget: int, seed: int, db: Any,
                   alternates: Any = ()) -> None:
    """`budget` spent by the task scheduler (groups' alternate templates counted once)."""
    tuners = [make_tuner("xgb", t, seed=seed) for t, _ in tasks]
    with _runner() as runner:
        TaskScheduler(tasks, tuners, db, runner, budget, alternates=alternates).run()


def latency(mod: Any, params: dict[str, Any], db_path: str, repeat: int) -> float:
    """Median seconds of the model compiled with the database's records."""
    with warnings.catch_warnings():  # tasks a small budget left untuned: expected here
        warnings.simplefilter("ignore", UserWarning)
        lib = relay_ir.build(mod, params=params, tuning_db=db_path)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in lib.input_specs}
    for _ in range(3):
        lib.run(**feeds)
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        lib.run(**feeds)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    """Tune with both strategies at each budget and seed; print latencies and ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "small"])
    ap.add_argument("--budgets", type=int, nargs="+", default=[256, 512, 1024])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--cache-flush", action=argparse.BooleanOptionalAction, default=True)
    opts = ap.parse_args(argv)
    CACHE_FLUSH[0] = opts.cache_flush
    mod, params = from_onnx(_model(opts.model))
    found = extract_model_tasks(mod, "llvm", params)
    tasks = found.tasks
    print(f"{opts.model}: {len(tasks)} tasks, {sum(n for _, n in tasks)} occurrences; load "
          f"average {os.getloadavg()[0]:.2f}")
    results: dict[tuple[str, int], float] = {}
    for budget in opts.budgets:
        for name, fn in (("equal", tune_equal),
                         ("scheduler", functools.partial(tune_scheduled,
                                                         alternates=found.alternates))):
            runs = []
            for seed in range(opts.seeds):
                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "t.db")
                    t0 = time.perf_counter()
                    with TuningDatabase(path) as db:
                        fn(tasks, budget, seed, db)
                    tuned_s = time.perf_counter() - t0
                    runs.append(latency(mod, params, path, opts.repeat))
                print(f"  budget {budget:5d} {name:9s} seed {seed}: {runs[-1] * 1e3:.3f} ms "
                      f"(tuning {tuned_s:.0f} s)", flush=True)
            results[(name, budget)] = statistics.median(runs)
    best = min(results.values())
    print("\nbudget  equal ms  scheduler ms  equal/scheduler")
    for budget in opts.budgets:
        e, s = results[("equal", budget)], results[("scheduler", budget)]
        print(f"{budget:6d}  {e * 1e3:8.3f}  {s * 1e3:12.3f}  {e / s:15.2f}")
    for name in ("equal", "scheduler"):
        within = [b for b in opts.budgets if results[(name, b)] <= 1.05 * best]
        print(f"{name}: within 5% of the best ({best * 1e3:.3f} ms) from budget "
              f"{within[0] if within else 'none of those run'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
