"""Tuned ResNet-18 latency against ONNX Runtime and PyTorch: tune every tunable operator of
the model with the xgb tuner, compile it with the tuned schedules and without, and time
both beside ONNX Runtime and PyTorch (eager, and torch.jit.trace + freeze) on the same
random weights, batch 1.

    python3 -m benchmarks.tuned_model                          # 224x224, 32 trials per task
    python3 -m benchmarks.tuned_model --trials 200 --db r18.db # keep the records
    python3 -m benchmarks.tuned_model --db r18.db --no-tune    # only compile and time
    python3 -m benchmarks.tuned_model --image 32 --width 8 --classes 10 --trials 2  # tiny

It prints the tunable tasks (template, occurrences in the model, data * weight shape) with
trials, new trials, errors and best GFLOP/s each; the build times; each runtime's relative
error against ONNX Runtime on a fresh random input (it stops with an error above
--tolerance); the latency of Tessel tuned, Tessel untuned, ONNX Runtime, torch eager and
torch jit (median of --repeat runs after --warmup), with the load average next to each;
then the ratios tessel_tuned / each peer and tuned / untuned.

Candidates are timed warm (repeats of --min-repeat-ms back to back), each beside the
task's default config in ABBA quartets (LocalRunner(control=True)): a layer's time inside
the model is its warm time (its input was just written by the layer before, the model's
weights stay in the last-level cache), while a time after a cache flush was 2-5x longer,
ranked configs otherwise, and swung 50% between two calls of one config on a shared
machine (--cache-flush, --no-control give the older measurement). A conv is timed in the
blocked layouts the model runs it in (LocalRunner(model_layout=True); --logical-layout
times the NCHW task, whose packing and unpacking ranked configs otherwise). The database defaults
to a fresh temporary file. Tuning resumes from the records a --db already holds (nothing
is measured twice), so re-running with more --trials only measures the difference. Every
peer runs on Tessel's thread count (TESSEL_NUM_THREADS, else the CPUs of this process); the
machine may be shared, so compare ratios of one run only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import relay_ir
from autotune import LocalRunner, Task, extract_tasks, make_tuner, tune
from benchmarks.models import median_seconds, ort_session, relative_error
from lowering.kernel import num_threads
from relay_ir.frontend.onnx import from_onnx
from tessel_target import read_device_keys
from tuning_logs import TuningDatabase


def _load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def task_label(task: Task, count: int) -> str:
    """`template xN data*weight`, e.g. 'conv2d_NCHWc.x86 x3 1x16x4x4*1x1x3x3x16x16'."""
    shapes = "*".join("x".join(str(d) for d in a[0]) for a in task.args[:2])
    return f"{task.template} x{count} {shapes}"


def tune_model(tasks: list[tuple[Task, int]], db_path: Path, trials: int, timeout: float,
               min_repeat_ms: float, seed: int, cache_flush: bool = False,
               control: bool = True, model_layout: bool = True
               ) -> list[tuple[str, int, int, int, float]]:
    """Tune each task with xgb up to `trials` in all (resuming from the database); prints
    and returns (label, trials, new trials, errors, best GFLOP/s) per task."""
    rows = []
    print(f"{'task':<58} {'trials':>6} {'new':>4} {'errors':>6} {'GFLOP/s':>8} {'s':>5}")
    with TuningDatabase(db_path) as db, \
            LocalRunner(timeout=timeout, min_repeat_ms=min_repeat_ms,
                        cache_flush=cache_flush, control=control,
                        model_layout=model_layout) as runner:
        for task, count in tasks:
            t0 = time.time()
            p = tune(task, make_tuner("xgb", task, seed=seed), trials, db, runner)
            row = (task_label(task, count), p.trials, p.new_trials, p.errors, p.best_gflops)
            rows.append(row)
            print(f"{row[0]:<58} {row[1]:>6} {row[2]:>4} {row[3]:>6} {row[4]:>8.1f} "
                  f"{time.time() - t0:>5.1f}", flush=True)
    return rows


def recorded(tasks: list[tuple[Task, int]], db_path: Path
             ) -> list[tuple[str, int, int, int, float]]:
    """What the database already holds per task, in tune_model's row format (--no-tune)."""
    rows = []
    print(f"{'task':<58} {'trials':>6} {'GFLOP/s':>8}")
    with TuningDatabase(db_path, readonly=True) as db:
        for task, count in tasks:
            # this thread count's records, else those filed before records had a count
            device = next((d for d in read_device_keys(task.device_key)
                           if db.count(task.workload_key, task.target, d)), task.device_key)
            n = db.count(task.workload_key, task.target, device)
            best = db.best_record(task.workload_key, task.target, device)
            gflops = task.flop / best.mean / 1e9 if best and task.flop else 0.0
            rows.append((task_label(task, count), n, 0, 0, gflops))
            print(f"{rows[-1][0]:<58} {n:>6} {gflops:>8.1f}")
    return rows


def torch_runners(model: Any, x: np.ndarray, threads: int) -> dict[str, Any]:
    """{'torch eager': fn, 'torch jit': fn, 'torch oneDNN': fn} for the ONNX `model` (the
    jit ones left out if tracing or freezing fails; {} without torch); each fn maps the
    input array to the output array. 'torch oneDNN' is the frozen trace passed through
    `torch.jit.optimize_for_inference`, which runs the convs as oneDNN's blocked-layout
    kernels: PyTorch's fastest CPU path, and the one peer whose ISA can be capped
    (`ONEDNN_MAX_CPU_ISA=AVX2` gives its AVX2 kernels on an AVX-512 host, as ONNX
    Runtime's CPUID dispatch cannot)."""
    try:
        import torch
    except ImportError:
        print("torch: not installed")
        return {}
    from benchmarks.onnx_torch import to_torch

    torch.set_num_threads(threads)
    net = to_torch(model)
    xt = torch.from_numpy(x)

    def run(m: Any) -> Any:
        def fn() -> np.ndarray:
            with torch.inference_mode():
                return m(xt).numpy()
        return fn

    out = {"torch eager": run(net)}
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # torch 2.13 deprecates jit (for torch.compile), but it is the usual deployment
            warnings.simplefilter("ignore", DeprecationWarning)
            jit = torch.jit.freeze(torch.jit.trace(net, xt))
            onednn = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(net, xt)))
        out["torch jit"] = run(jit)
        out["torch oneDNN"] = run(onednn)
    except Exception as e:  # a peer that cannot trace is reported, not fatal
        print(f"torch jit: trace/freeze failed ({type(e).__name__}: {e}); eager only")
    return out


def bench(model: Any, db_path: Path, repeat: int, warmup: int, pause: float,
          tolerance: float, seed: int, rounds: int = 3) -> dict[str, float]:
    """Seconds per inference of Tessel tuned and untuned, ONNX Runtime and torch."""
    mod, params = from_onnx(model)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned = relay_ir.build(mod, target="llvm", params=params, tuning_db=str(db_path))
    for w in caught:
        print(f"warning: {w.message}")
    t1 = time.perf_counter()
    untuned = relay_ir.build(mod, target="llvm", params=params)
    print(f"build: tuned {t1 - t0:.1f} s, untuned {time.perf_counter() - t1:.1f} s")

    rng = np.random.default_rng(seed + 1)
    feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in tuned.input_specs}
    threads = num_threads()
    sess = ort_session(model, threads)
    runners: dict[str, Any] = {
        "tessel tuned": lambda: tuned.run(**feeds),
        "tessel untuned": lambda: untuned.run(**feeds),
        "onnxruntime": lambda: sess.run(None, feeds)[0],
    }
    runners.update(torch_runners(model, next(iter(feeds.values())), threads))

    want = runners["onnxruntime"]()
    errors = {k: relative_error(np.asarray(fn()), want) for k, fn in runners.items()
              if k != "onnxruntime"}
    print("relative error vs onnxruntime: "
          + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()))
    bad = [k for k, v in errors.items() if not v <= tolerance]
    if bad:
        raise SystemExit(f"outputs differ from onnxruntime by more than {tolerance:g}: "
                         + ", ".join(bad))

    print(f"\nlatency, {rounds} interleaved rounds, each the median of {repeat} after "
          f"{warmup} warm-up, {threads} threads; the median round:")
    per_round: dict[str, list[float]] = {k: [] for k in runners}
    loads: dict[str, list[str]] = {k: [] for k in runners}
    for _ in range(max(1, rounds)):
        for k, fn in runners.items():
            time.sleep(pause)  # let the previous library's spinning workers go idle
            loads[k].append(_load())
            per_round[k].append(median_seconds(fn, repeat, warmup))
    secs = {k: statistics.median(v) for k, v in per_round.items()}
    for k, v in secs.items():
        rs = " ".join(f"{x * 1e3:.1f}" for x in per_round[k])
        print(f"  {k:<15} {v * 1e3:9.2f} ms   (rounds {rs}; {', '.join(loads[k])})",
              flush=True)

    print("ratios (< 1: tessel tuned is faster):")
    for k, v in secs.items():
        if k != "tessel tuned":
            print(f"  tessel_tuned / {k:<15} {secs['tessel tuned'] / v:6.2f}")
    return secs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark (see the module docstring); returns the tasks, their printed rows,
    the seconds per runtime and the database path.

        >>> main(["--image", "32", "--width", "8", "--classes", "10", "--trials", "2"])
        ... # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=32, help="measurements per task, in all")
    ap.add_argument("--db", type=Path, default=None,
                    help="tuning database (default: a fresh temporary file)")
    ap.add_argument("--no-tune", action="store_true",
                    help="only compile with the records --db holds, and time")
    ap.add_argument("--image", type=int, default=224, help="input side")
    ap.add_argument("--width", type=int, default=64, help="channels of the first stage")
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--pause", type=float, default=0.3, help="seconds between libraries")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per candidate")
    ap.add_argument("--min-repeat-ms", type=float, default=10.0,
                    help="a measured candidate repeats its kernel for at least this long")
    ap.add_argument("--cache-flush", action="store_true",
                    help="time candidates after a cache flush (the older measurement)")
    ap.add_argument("--no-control", action="store_true",
                    help="time candidates alone, not beside the default config")
    ap.add_argument("--logical-layout", action="store_true",
                    help="time convs in NCHW (packing and unpacking included), not in the "
                         "blocked layouts the model runs them in")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds of the latency comparison")
    ap.add_argument("--tolerance", type=float, default=1e-3,
                    help="largest relative error against onnxruntime accepted")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.no_tune and (a.db is None or not a.db.exists()):
        ap.error("--no-tune needs --db PATH of an existing tuning database")
    db_path = a.db or Path(tempfile.mkdtemp(prefix="tessel-tuned-")) / "tuning.db"

    from tests.e2e.onnx_models import resnet18

    model = resnet18(image=a.image, width=a.width, classes=a.classes, seed=a.seed)
    mod, params = from_onnx(model)
    tasks = extract_tasks(mod, "llvm", params)
    print(f"ResNet-18 batch 1, {a.image}x{a.image}, width {a.width}, {a.classes} classes, "
          f"threads {num_threads()}, {_load()}")
    print(f"{len(tasks)} tunable tasks, " + ("records only" if a.no_tune else
          f"{a.trials} trials each (xgb)") + f", database {db_path}")
    t0 = time.time()
    rows = (recorded(tasks, db_path) if a.no_tune else
            tune_model(tasks, db_path, a.trials, a.timeout, a.min_repeat_ms, a.seed,
                       a.cache_flush, not a.no_control, not a.logical_layout))
    print(f"tasks done in {time.time() - t0:.0f} s ({_load()})\n")
    secs = bench(model, db_path, a.repeat, a.warmup, a.pause, a.tolerance, a.seed,
                 a.rounds)
    return {"tasks": rows, "task_list": tasks, "seconds": secs, "db": db_path}


if __name__ == "__main__":
    main()
