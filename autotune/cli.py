"""The `tessel` command: tune operators and inspect tuning databases.

    tessel tune --op matmul:1024x1024x1024 --trials 200 --tuner xgb \\
        --db tuning_logs/tuning.db --timeout 10 --early-stopping 50 --target llvm
    tessel db tasks | best | history | export | import | merge | prune | plot

Run `tessel --help` (or `python -m autotune.cli --help`) for every option.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tessel_errors import TesselError
from tuning_logs import DEFAULT_DB_PATH, MeasureRecord, TuningDatabase

# ---------------------------------------------------------------------------------------
# Small helpers


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table, columns left-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[k]) for r in cells) for k in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _device(args: argparse.Namespace) -> str | None:
    """The device key to filter by: this host's for the target, or None with --any-device."""
    if getattr(args, "any_device", False):
        return None
    from tessel_target import device_key

    return device_key(args.target)


# A model with more constant weights than this runs each conv with its weights cold: more
# than a core's share of the last-level cache of the x86 CPUs Tessel targets (1.25-4 MiB a
# core on servers; a Zen 4 CCD's 32 MiB is shared by 8 cores), so a run's later layers
# evict the earlier ones' weights before the next run reads them. ResNet-18 (45 MiB) and
# ResNet-50 (98 MiB) are above; MobileNetV2 (14 MiB) and the README's small ResNet
# (2.8 MiB) below.
COLD_WEIGHT_BYTES = 16 << 20


def runner_options(args: argparse.Namespace, model: bool, weight_bytes: int = 0
                   ) -> dict[str, Any]:
    """The LocalRunner's settings for `tessel tune`. A model's tasks are timed beside the
    default config (control), and, where the model's weights (`weight_bytes`) exceed
    COLD_WEIGHT_BYTES, with each call's weights and output evicted first (cache flush),
    as the model runs them. Tuned warm, the tuner cannot see what a schedule does about
    cold weights (conv2d_NCHWc.x86's 1x1 weight prefetch): ResNet-50 and ResNet-18 tuned
    warm ran 1.026x and 1.025x the untuned model, tuned cold 0.988x and 0.974x (one
    process, 12 rounds in turn, one Sapphire Rapids core, CPU time, load 2.5-2.7;
    databases tuned with `--trials 800` / `400` at load 3-4). A smaller model, and an
    --op task, are timed warm unless asked. A model's tasks are timed on 2 MiB pages
    (huge_pages) where its weights fill a huge page or more, as its arenas then lie
    (relay_ir.backend.huge_pages, executor.arena_bytes); an --op task on the arrays numpy
    gives.

        >>> args = build_parser().parse_args(["tune", "m.onnx"])
        >>> [runner_options(args, True, 45 << 20)["cache_flush"],
        ...  runner_options(args, True, 3 << 20)["cache_flush"],
        ...  runner_options(args, False)["cache_flush"]]
        [True, False, False]
        >>> [runner_options(args, True, 3 << 20)["huge_pages"],
        ...  runner_options(args, True, 1 << 20)["huge_pages"],
        ...  runner_options(args, False)["huge_pages"]]
        [True, False, False]
    """
    from relay_ir.backend.huge_pages import HUGE_PAGE

    cold = model and weight_bytes > COLD_WEIGHT_BYTES
    huge = model and weight_bytes >= HUGE_PAGE
    return dict(timeout=args.timeout, number=args.number, repeat=args.repeat,
                min_repeat_ms=args.min_repeat_ms if args.min_repeat_ms is not None
                else (10.0 if model else 50.0), imports=args.imports or (),
                cache_flush=cold if args.cache_flush is None else bool(args.cache_flush),
                control=model if args.control is None else args.control,
                model_layout=model,
                huge_pages=huge if args.huge_pages is None else bool(args.huge_pages))


def _why_no_records(key: str, db_path: str, known: bool) -> str:
    """The hint after "no records": the task is in the database (other target, other
    device, every measurement failed), or it is not, or the key given is a file's path
    (`tessel db best tuning.db` where `--db tuning.db` was meant)."""
    if known:
        return " (the task is in the database: try another --target, or --any-device)"
    if os.path.exists(key) or key.endswith((".db", ".sqlite", ".sqlite3")):
        return (f": {key!r} looks like a database file, not a workload key; pass it as "
                f"--db {key}")
    return f" (no such task in {db_path}: `tessel db tasks --db {db_path}` lists them)"


def _workload(args: argparse.Namespace) -> str:
    if args.op:
        from autotune.op_spec import parse_op_spec

        return parse_op_spec(args.op, args.target).workload_key
    if args.workload:
        return args.workload
    raise TesselError("name the task: a workload key (see `tessel db tasks`) or --op SPEC")


# ---------------------------------------------------------------------------------------
# tessel tune


def _progress_callback(bar: Any) -> Any:
    def cb(p: Any, inputs: Any, results: Any) -> None:
        bar.n = p.trials
        bar.set_postfix_str(f"best {p.best_gflops:.2f} GFLOP/s, errors {p.errors}",
                            refresh=False)
        bar.refresh()
    return cb


def cmd_tune(args: argparse.Namespace) -> int:
    """Tune each --op and print a summary table."""
    from autotune.measure import LocalRunner
    from autotune.op_spec import parse_op_spec
    from autotune.tuners import make_tuner
    from autotune.tuning import tune
    from lowering.kernel import num_threads

    tasks = [parse_op_spec(spec, args.target) for spec in args.op or []]
    weights = [1] * len(tasks)
    alternates: list[list[int]] = []
    weight_bytes = 0  # the model's constant weights (runner_options: flushed or not)
    mod = params = None
    if args.model:
        from autotune.extract import extract_model_tasks

        mod, params = _load_model(args.model, args.shape)
        weight_bytes = sum(int(getattr(v, "nbytes", 0)) for v in (params or {}).values())
        if args.quantize:
            from relay_ir.quantize import quantize

            # the int8 model's tasks do not depend on its scales: a global scale needs no
            # calibration data (relay_ir.quantize's defaults otherwise: first conv float)
            mod, params = quantize(mod, params, calibrate=8.0), None
        model_tasks = extract_model_tasks(mod, args.target, params)
        found = model_tasks.tasks
        alternates = [[len(tasks) + k for k in a] for a in model_tasks.alternates]
        print(f"{args.model}: {len(found)} tunable tasks"
              + (f" ({len(alternates)} groups with alternate templates; build compiles the "
                 "fastest of each)" if alternates else ""))
        if args.untuned_only:
            found, alternates = _untuned(args.db, found, alternates, len(tasks))
        for t, n in found:
            t.name = f"{t.template} x{n} {t.args[0][0]}"
            tasks.append(t)
            weights.append(n)
    if args.model and not args.cluster:
        print(f"threads: {num_threads()} (TESSEL_NUM_THREADS); records are filed at this count "
              "and builds apply them only at it (records filed before records had a count "
              "apply at any count until it has its own; a record timed on one count can lose "
              "on another): tune and confirm at the count the model will run with")
    if args.untuned_only and not args.model:
        raise TesselError("--untuned-only picks among a model's tasks: give MODEL.onnx, or "
                          "leave the option out for --op tasks")
    if args.untuned_only and not tasks:
        print(f"--untuned-only: every task has a record in {args.db}{_read_here()}; nothing "
              "tuned, the records are confirmed in the model")
        with TuningDatabase(args.db) as db:
            return _confirm_model(args, mod, params, db, None)
    if not tasks:
        raise TesselError("nothing to tune: give MODEL.onnx or --op SPEC "
                          "(e.g. --op matmul:1024x1024x1024)")
    if args.trials < 0 or (args.trials == 0 and not args.model):
        raise TesselError(f"--trials must be positive (0 only for MODEL: its model "
                          f"confirmation alone), got {args.trials}")
    if args.model and args.trials == 0 and args.trials_per_task is None:
        print("--trials 0: nothing tuned; the records the database holds are confirmed "
              "in the model")
        with TuningDatabase(args.db) as db:
            return _confirm_model(args, mod, params, db, None)
    summary = []
    model = bool(args.model)
    options = runner_options(args, model, weight_bytes)
    if model:
        print(f"timing: each candidate beside the default config, weights "
              f"{'evicted first (cold' if options['cache_flush'] else 'in cache (warm'}"
              f", as a model with {weight_bytes / 2**20:.1f} MiB of weights runs them; "
              f"--{'no-' if options['cache_flush'] else ''}cache-flush to change), "
              f"{_clock_word()} time"
              f"{', on 2 MiB pages' if options['huge_pages'] else ''}")
    if args.cluster:
        from autotune.cluster import RayRunner

        runner_cm = RayRunner(args.cluster, slots=args.slots,
                              device_keys=sorted({t.device_key for t in tasks}), **options)
    else:
        runner_cm = LocalRunner(n_parallel_build=args.build_workers, **options)
    with TuningDatabase(args.db) as db, runner_cm as runner:
        if args.model and args.trials_per_task is None:
            _tune_scheduled(args, tasks, weights, db, runner, alternates)
            return _confirm_model(args, mod, params, db, runner)
        per_task = args.trials_per_task or args.trials
        confirm = args.confirm if args.confirm is not None else (2 if args.model else 0)
        if options["control"]:
            # the records' units from the defaults timed together (the scheduler does so
            # too): each task's first control otherwise, and on a cluster each slot's own
            runner.calibrate(tasks, peaks=False)  # no task scheduler here: no peak cap
        for n, task in enumerate(tasks):
            tuner = make_tuner(args.tuner, task, seed=args.seed)
            t0 = time.time()
            callbacks = []
            bar = None
            if not args.no_progress:
                from tqdm import tqdm

                bar = tqdm(total=per_task, desc=f"[{n + 1}/{len(tasks)}] {task.name}",
                           unit="trial", file=sys.stderr, dynamic_ncols=True)
                callbacks.append(_progress_callback(bar))
            try:
                p = tune(task, tuner, per_task, db, runner,
                         early_stopping=args.early_stopping, callbacks=callbacks,
                         batch_size=args.batch_size, confirm=confirm)
            finally:
                if bar is not None:
                    bar.close()
            summary.append([task.name, args.tuner, p.trials, p.new_trials, p.errors,
                            _fmt(p.best_gflops), _fmt(p.best_mean * 1e3, 4),
                            f"{time.time() - t0:.1f}", "yes" if p.stopped_early else "no"])
        print(_table(["task", "tuner", "trials", "new", "errors", "best GFLOP/s", "best ms",
                      "time s", "early stop"], summary))
        print(f"database: {args.db}", flush=True)
        return _confirm_model(args, mod, params, db, runner) if args.model else 0


def _untuned(db_path: str, found: list[tuple[Any, int]], alternates: list[list[int]],
             offset: int) -> tuple[list[tuple[Any, int]], list[list[int]]]:
    """`tessel tune MODEL --untuned-only`: the model's tasks this device has no record of in
    the database that a build could apply (one that ran, of a config not rejected) at this
    thread count nor from before records had one (`_read_here`; e.g. tasks a newer
    Tessel files apart, the Winograd alternates of a database tuned before them), and the
    alternate sets left whole, renumbered (`offset`: the --op tasks before them)."""
    from tessel_target import read_device_keys

    with TuningDatabase(db_path) as db:
        # a record a build could apply: one that ran (a task whose configs all failed or
        # timed out is untuned), of a config no confirmation rejected (TuningDatabase.best)
        keep = [k for k, (t, _) in enumerate(found)
                if not any(db.best(t.workload_key, t.target, d)
                           for d in read_device_keys(t.device_key))]
    print(f"--untuned-only: {len(keep)} of {len(found)} tasks have no record in {db_path}"
          f"{_read_here()}; only they are tuned")
    new = {offset + k: offset + j for j, k in enumerate(keep)}
    return [found[k] for k in keep], [[new[k] for k in a] for a in alternates
                                      if all(k in new for k in a)]


def _read_here() -> str:
    """Which records `--untuned-only` counts, in words after "record": those a build here
    reads (tessel_target.read_device_keys).

        >>> "(TESSEL_NUM_THREADS)" in _read_here()
        True
    """
    from lowering.kernel import num_threads

    n = num_threads()
    threads = f"{n} thread{'s' if n != 1 else ''}"
    return (f" that a build here reads: one of this device at {threads} "
            "(TESSEL_NUM_THREADS) or one filed before records had a thread count (records of "
            f"other thread counts do not count: a build on {threads} does not apply them)")


def _clock_word() -> str:
    """What the timed slots read (measure.kernel_clock), for the tune command's output."""
    from autotune.measure import kernel_clock

    return "CPU" if kernel_clock() is time.process_time else "wall"


def _confirm_model(args: argparse.Namespace, mod: Any, params: Any, db: TuningDatabase,
                   runner: Any) -> int:
    """The end of `tessel tune MODEL`: each task's applied record timed in the model beside
    the untuned build, and rejected where it loses there beyond the noise
    (autotune.model_confirm);
    one line per verdict and the time it took."""
    if not args.model_confirm:
        return 0
    from autotune.model_confirm import confirm_in_model

    clock = _clock_word()
    print(f"model confirmation (--no-model-confirm skips it): each task's applied record "
          f"in the model beside the untuned build, every step timed in the model's order, "
          f"the two builds in turn, {clock} time", flush=True)
    got = confirm_in_model(mod, params, args.target, db, runner=runner)
    if got.verdicts:
        rows = [[v.name, v.occurrences, f"{v.applied_s * 1e6:.0f}",
                 f"{v.default_s * 1e6:.0f}", f"{v.ratio:.3f}", f"{v.noise:.3f}", v.rounds,
                 "kept" if v.accepted else "rejected"]
                for v in got.verdicts]
        print(_table(["task", "steps", "applied us", "default us", "ratio", "noise",
                      "rounds", "verdict"], rows))
    if got.unjudged:
        print(f"applied without a verdict in the model (the next confirmed record after a "
              f"rejection in the last pass): {'; '.join(got.unjudged)}")
    if got.defaulted:
        print(f"the default applies (its records lost in the model in every pass; the next "
              f"ones, never timed there, rejected untimed): {'; '.join(got.defaulted)}")
    kept = len(got.verdicts) - len(got.rejected)
    said = got.note or (f"{kept} kept, {len(got.rejected)} rejected (a build never applies "
                        f"a rejected record again: its task's next confirmed record, "
                        f"judged in the next pass, or its default)")
    print(f"model confirmation: {said}; {got.seconds:.1f} s ({got.build_seconds:.1f} s "
          f"building, {got.rounds} rounds timed; {got.cpu_seconds:.1f} s of CPU)")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """Run `ray start` joining --address, advertising this machine's device keys."""
    from autotune.cluster import start_worker

    return start_worker(args.address, args.slots, args.target or ["llvm"])


def _scheduled_row(st: Any, tuner: str) -> list[Any]:
    """The summary row of a scheduled task (autotune.task_scheduler.TaskState). Its GFLOP/s
    and ms are both of the time a build applies (a confirmed record, else the best
    measured): the tuner's fastest measurement may be one confirmation rejected, and a
    GFLOP/s of it beside the applied ms read 90.87 against 129.38 for one 0.0091 ms."""
    p = st.progress
    return [st.task.name, tuner, st.trials, st.trials - st.resumed_trials,
            p.errors if p else 0, _fmt(st.best_flops / 1e9 or math.nan),
            _fmt(st.best_time * 1e3, 4), st.stop_reason or "-"]


def _tune_scheduled(args: argparse.Namespace, tasks: list[Any], weights: list[int],
                    db: Any, runner: Any, alternates: list[list[int]]) -> int:
    """A model's --trials as one budget, spent by the task scheduler; one line per batch."""
    from autotune.task_scheduler import TaskScheduler
    from autotune.tuners import make_tuner

    def report(d: Any) -> None:
        print(f"batch {d.batch:3d} [{d.trials_used}/{args.trials}] {d.task}: {d.reason}; best "
              f"{d.best_s * 1e3:.4g} ms; model estimate {d.model_estimate_s * 1e3:.4g} ms",
              flush=True)

    tuners = [make_tuner(args.tuner, t, seed=args.seed) for t in tasks]
    t0 = time.time()
    result = TaskScheduler(list(zip(tasks, weights)), tuners, db, runner, args.trials,
                           batch_size=args.batch_size, early_stopping=args.early_stopping,
                           report=report, model=args.model, alternates=alternates,
                           confirm=2 if args.confirm is None else args.confirm,
                           cap_by_peak=args.peak_cap).run()
    for target, flops in result.peaks.items():
        print(f"peak: {flops / 1e9:.0f} GFLOP/s for {target} (one core's FMA peak, read "
              f"where and when the defaults were calibrated; capped each task's predicted "
              f"fall at its time above it)")
    rows = [_scheduled_row(st, args.tuner) for st in result.tasks]
    print(_table(["task", "tuner", "trials", "new", "errors", "best GFLOP/s", "best ms",
                  "left because"], rows))
    print(f"model estimate (sum of occurrences x best time): "
          f"{result.model_estimate_s * 1e3:.4g} ms after {time.time() - t0:.1f} s")
    print(f"database: {args.db}", flush=True)
    return 0


# ---------------------------------------------------------------------------------------
# tessel compile / run


def _parse_shapes(items: Sequence[str] | None) -> dict[str, tuple[int, ...]] | None:
    out = {}
    for it in items or []:
        name, _, dims = it.partition("=")
        try:
            out[name] = tuple(int(d) for d in dims.split("x"))
        except ValueError:
            raise TesselError(f"--shape {it!r} must look like NAME=1x3x224x224") from None
    return out or None


def _load_model(path: str, shapes: Sequence[str] | None) -> tuple[Any, dict[str, Any]]:
    if not Path(path).is_file():
        raise TesselError(f"no model file at {path!r}")
    from relay_ir.frontend.onnx import from_onnx

    return from_onnx(path, shape=_parse_shapes(shapes))


def _compile_db(given: str | None) -> str | None:
    """The database `tessel compile` reads: one named with --db must exist (a typo would
    otherwise compile every task untuned); the default one only if it is there."""
    if given is None:
        return str(DEFAULT_DB_PATH) if Path(DEFAULT_DB_PATH).is_file() else None
    if not Path(given).is_file():
        raise TesselError(f"no tuning database at {given!r} (--db); check the path, or leave "
                          f"--db out to use {DEFAULT_DB_PATH} if it exists")
    return given


def _load_inputs(specs: Sequence[str]) -> dict[str, Any]:
    """NAME=file.npy pairs of `tessel run --input` as arrays (TesselError naming a bad one)."""
    import numpy as np

    inputs: dict[str, Any] = {}
    for it in specs:
        name, eq, path = it.partition("=")
        if not eq or not name or not path:
            raise TesselError(f"--input {it!r}: give NAME=file.npy")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise TesselError(f"--input {name}: no file at {path!r}") from None
        except (OSError, ValueError, EOFError) as e:
            raise TesselError(f"--input {name}: {path!r} is not a readable .npy file ({e})"
                              ) from None
    return inputs


def cmd_compile(args: argparse.Namespace) -> int:
    """Compile an ONNX model with relay_ir.build and save it (--any-device: use records of
    other devices too)."""
    import relay_ir
    from relay_ir.backend.pipeline import build_with_scope
    from relay_ir.backend.tuned import TuningScope

    db_path = _compile_db(args.db)
    mod, params = _load_model(args.model, args.shape)
    t0 = time.time()
    if db_path is not None:
        # the count comes from the build's own scope: what it applied, after the split
        # rule and every other rule of lower_group.applied_config
        with TuningDatabase(db_path, readonly=True) as db:
            scope = TuningScope(db, args.any_device)
            lib = build_with_scope(mod, args.target, params, scope)
        scope.warn(stacklevel=1)  # here, as relay_ir.build's point at its caller
        print(scope.report())  # (a model with `?` dims compiles nothing yet: save refuses it)
    else:
        print(f"no tuning database at {DEFAULT_DB_PATH}: every task uses its default "
              "schedule (tune with `tessel tune MODEL`, or name one with --db)")
        lib = relay_ir.build(mod, target=args.target, params=params)
    lib.save(args.output)
    print(f"compiled {args.model} in {time.time() - t0:.1f} s -> {args.output}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Load a compiled model, run it on .npy inputs (random ones if none), print timings."""
    import numpy as np

    import relay_ir

    inputs = _load_inputs(args.input or [])
    lib = relay_ir.load_compiled(args.compiled)
    rng = np.random.default_rng(0)
    for name, shape, dtype in lib.input_specs if hasattr(lib, "input_specs") else []:
        if name not in inputs:
            inputs[name] = rng.standard_normal(shape).astype(dtype)
    out = lib.run(**inputs)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        lib.run(**inputs)
        times.append(time.perf_counter() - t0)
    outs = out if isinstance(out, (list, tuple)) else [out]
    for k, o in enumerate(outs):
        arr = np.asarray(o)
        print(f"output {k}: shape {arr.shape} dtype {arr.dtype} mean {float(arr.mean()):.6g}")
        if args.output:
            np.save(f"{args.output}.{k}.npy" if len(outs) > 1 else args.output, arr)
    print(f"latency: median {np.median(times) * 1e3:.3f} ms, min {min(times) * 1e3:.3f} ms "
          f"over {args.repeat} runs{_simulated_note(lib)}")
    return 0


def _simulated_note(lib: object) -> str:
    """What a run's time is where a simulator stands in for the device: the host's time
    running the simulation, not the device's latency."""
    from tessel_target import Target

    target = getattr(lib, "target", None)
    if target is None:
        return ""
    t = target if isinstance(target, Target) else Target.parse(str(target))
    if t.kind == "cuda" and "sim" in t.attrs:
        return " (host time of the GPU simulator, not a GPU's latency)"
    if t.kind == "accel":
        return (" (host time, the accelerator simulated; its cycles: lib.placement and "
                "benchmarks/accel.py)")
    return ""


# ---------------------------------------------------------------------------------------
# tessel db ...


def _record_rows(recs: Sequence[MeasureRecord]) -> list[list[Any]]:
    return [[k + 1, r.error_kind.value, _fmt(r.gflops), _fmt((r.mean or math.nan) * 1e3, 4),
             r.tuner or "-", r.config_json if len(r.config_json) < 90 else
             r.config_json[:87] + "..."] for k, r in enumerate(recs)]


def cmd_db(args: argparse.Namespace) -> int:
    """The `tessel db` subcommands."""
    what = args.what
    if what == "tasks":
        with TuningDatabase(args.db, readonly=True) as db:
            tasks = db.tasks()
        rows = [[t.workload_key, t.target, t.trials, t.ok_trials, _fmt(t.best_gflops),
                 _fmt((t.best_mean or math.nan) * 1e3, 4)] for t in tasks]
        print(_table(["workload", "target", "trials", "ok", "best GFLOP/s", "best ms"], rows))
        print(f"{len(tasks)} tasks in {args.db}")
    elif what in ("best", "history"):
        from tessel_target import read_device_keys

        key = _workload(args)
        with TuningDatabase(args.db, readonly=True) as db:
            asked = _device(args)
            # none at this thread count: those filed before records had one, which builds
            # apply then (relay_ir.backend.tuned.find_tuned)
            for device in read_device_keys(asked) if asked is not None else (None,):
                recs = db.best(key, args.target, device, k=args.k) if what == "best" else \
                    db.history(key, args.target, device, limit=args.limit)
                if recs:
                    break
            known = not recs and any(t.workload_key == key for t in db.tasks())
        if not recs:
            print(f"no {'successful ' if what == 'best' else ''}records for {key} on "
                  f"{args.target}{_why_no_records(key, args.db, known)}")
            return 1
        print(f"{what} of {key}")
        print(_table(["#", "error", "GFLOP/s", "ms", "tuner", "config"], _record_rows(recs)))
    elif what == "export":
        with TuningDatabase(args.db, readonly=True) as db:
            n = db.export_jsonl(args.path)
        print(f"exported {n} records to {args.path}")
    elif what == "import":
        with TuningDatabase(args.db) as db:
            rep = db.import_jsonl(args.path)
        print(f"imported {rep.added} records from {args.path} ({rep.duplicates} duplicates)")
    elif what == "merge":
        with TuningDatabase(args.db) as db:
            rep = db.merge(args.path)
        print(f"merged {rep.added} records from {args.path} ({rep.duplicates} duplicates)")
    elif what == "prune":
        with TuningDatabase(args.db) as db:
            n = db.prune(args.top_k)
        print(f"pruned {n} records (kept the top {args.top_k} per task)")
    elif what == "plot" and args.model:
        n = plot_model(args.db, args.model, args.path)
        print(f"wrote {args.path} ({n} batches of {args.model})")
    elif what == "plot":
        n = plot_database(args.db, args.path)
        print(f"wrote {args.path} ({n} curves)")
    return 0


def plot_model(db_path: str | Path, model: str, out: str | Path) -> int:
    """A PNG of a model's estimated latency (the task scheduler's, after each batch)
    against the trials spent and against wall time; returns the number of batches.
    `model` is the model path `tessel tune` was given (or its file name)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with TuningDatabase(db_path, readonly=True) as db:
        every = db.decisions()
    mine = [d for d in every if d.model == model or Path(d.model).name == Path(model).name]
    if not mine:
        known = sorted({d.model for d in every if d.model})
        raise TesselError(f"{db_path} holds no scheduled run of {model!r}; tune it with "
                          f"`tessel tune {model} --trials N --db {db_path}`"
                          + (f" (it has runs of {', '.join(known)})" if known else ""))
    fig, (by_trials, by_time) = plt.subplots(1, 2, figsize=(11, 4.5))
    for key in sorted({d.run_key for d in mine}):
        run = [d for d in mine if d.run_key == key]
        t0 = run[0].timestamp
        ms = [d.model_estimate_s * 1e3 for d in run]
        by_trials.plot([d.trials_used for d in run], ms, marker=".", label=f"run {key[:8]}")
        by_time.plot([d.timestamp - t0 for d in run], ms, marker=".", label=f"run {key[:8]}")
    by_trials.set_xlabel("trials")
    by_time.set_xlabel("wall time since the first batch (s)")
    for ax in (by_trials, by_time):
        ax.set_ylabel("estimated model latency (ms)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{model}: sum of occurrences x best time per task")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return len(mine)


def plot_database(db_path: str | Path, out: str | Path) -> int:
    """A PNG of best-so-far GFLOP/s against trials, one curve per task and tuner."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = 0
    fig, ax = plt.subplots(figsize=(8, 5))
    with TuningDatabase(db_path, readonly=True) as db:
        for t in db.tasks():
            hist = db.history(t.workload_key, t.target, t.device_key)
            for tuner in sorted({r.tuner for r in hist}):
                best, ys = 0.0, []
                for r in hist:
                    if r.tuner == tuner:
                        best = max(best, r.gflops or 0.0)
                        ys.append(best)
                label = f"{t.workload_key.split('|')[0]} {t.workload_key.split('|')[1][:40]}"
                ax.plot(range(1, len(ys) + 1), ys, label=f"{label} ({tuner or '-'})")
                curves += 1
    ax.set_xlabel("trials")
    ax.set_ylabel("best GFLOP/s so far")
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return curves


# ---------------------------------------------------------------------------------------
# The parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `tessel`."""
    p = argparse.ArgumentParser(prog="tessel", description="Tessel: autotune operators and "
                                "manage tuning databases.")
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tune", help="autotune operators (--op SPEC)")
    t.add_argument("model", nargs="?", help="an ONNX model: tune its tunable operators")
    t.add_argument("--shape", action="append", help="input shape NAME=1x3x224x224")
    t.add_argument("--quantize", action="store_true",
                   help="tune the tasks of the int8 model relay_ir.quantize makes of MODEL")
    t.add_argument("--op", action="append", help="an op spec such as matmul:1024x1024x1024 "
                   "or conv2d:N,C,H,W,O,KH,KW,stride,pad (repeatable)")
    t.add_argument("--trials", type=int, default=200,
                   help="for MODEL: the model's budget, spent where it cuts latency most "
                        "(the task scheduler); for --op: measurements per op (in all)")
    t.add_argument("--trials-per-task", type=int, default=None,
                   help="for MODEL: the same measurements for every task instead")
    t.add_argument("--untuned-only", action="store_true",
                   help="for MODEL: tune only the tasks without a record in --db of this "
                        "device at this thread count (TESSEL_NUM_THREADS) or filed before "
                        "records had a thread count; records of other counts do not count "
                        "(the model confirmation still judges every applied record)")
    t.add_argument("--tuner", default="xgb",
                   choices=["xgb", "xgb_loop", "random", "grid", "ga", "genetic"])
    t.add_argument("--db", default=str(DEFAULT_DB_PATH), help="the tuning database")
    t.add_argument("--target", default="llvm", help="target, e.g. 'llvm -mcpu=native'")
    t.add_argument("--timeout", type=float, default=10.0, help="seconds per candidate")
    t.add_argument("--early-stopping", type=int, default=None,
                   help="stop after N trials without improvement")
    t.add_argument("--batch-size", type=int, default=8)
    t.add_argument("--number", type=int, default=1, help="calls per timed repeat (at least)")
    t.add_argument("--repeat", type=int, default=3, help="timed repeats per candidate")
    t.add_argument("--min-repeat-ms", type=float, default=None,
                   help="raise number until one repeat takes this long (default: 10 for "
                        "MODEL, 50 for --op)")
    t.add_argument("--cache-flush", action=argparse.BooleanOptionalAction, default=None,
                   help="evict each timed call's weights and output from the caches first, "
                        "as a model's earlier layers do (default: on for a MODEL with over "
                        "16 MiB of weights, off otherwise)")
    t.add_argument("--huge-pages", action=argparse.BooleanOptionalAction, default=None,
                   help="time each candidate on arrays on 2 MiB pages, as a compiled model's "
                        "arenas hold its weights and intermediates (default: on for a MODEL "
                        "with 2 MiB of weights or more, off otherwise)")
    t.add_argument("--control", action=argparse.BooleanOptionalAction, default=None,
                   help="time each candidate beside the default config, ABBA (default: on "
                        "for MODEL, off for --op)")
    t.add_argument("--confirm", type=int, default=None, metavar="K",
                   help="after each task's batches, measure its K fastest unconfirmed "
                        "records again beside the default; a build applies only those that "
                        "win beyond the noise (autotune.confirm; default: 2 for MODEL, 0 "
                        "(off) for --op)")
    t.add_argument("--model-confirm", action=argparse.BooleanOptionalAction, default=True,
                   help="for MODEL: at the end, time each task's applied record in the "
                        "model beside the untuned build and reject those that lose there "
                        "beyond the noise (autotune.model_confirm; --trials 0 does only "
                        "this)")
    t.add_argument("--peak-cap", action=argparse.BooleanOptionalAction, default=False,
                   help="for MODEL: cap each task's predicted gain by its time above one "
                        "core's FMA peak (autotune.task_scheduler; off by default: on "
                        "ResNet-18 it moved trials but did not pay: 0.979-0.994 of untuned "
                        "against 0.982-0.989 without)")
    t.add_argument("--build-workers", type=int, default=None,
                   help="processes that compile candidates (default: one per core)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--import", dest="imports", action="append",
                   help="a module to import first (registers extra templates)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--cluster", default=None,
                   help="measure on a Ray cluster: 'auto' (a local one on this machine) or "
                        "HOST:PORT of one whose nodes run `tessel worker`")
    t.add_argument("--slots", type=int, default=1,
                   help="with --cluster auto: measuring slots on this machine")
    t.set_defaults(fn=cmd_tune)

    c = sub.add_parser("compile", help="compile an ONNX model (relay_ir.build)")
    c.add_argument("model")
    c.add_argument("-o", "--output", required=True)
    c.add_argument("--db", default=None,
                   help=f"the tuning database (default: {DEFAULT_DB_PATH} if it exists)")
    c.add_argument("--target", default="llvm")
    c.add_argument("--shape", action="append", help="input shape NAME=1x3x224x224")
    c.add_argument("--any-device", action="store_true",
                   help="apply the best record of a task on any device, not only this one")
    c.set_defaults(fn=cmd_compile)
    r = sub.add_parser("run", help="run a compiled model and time it")
    r.add_argument("compiled")
    r.add_argument("--input", action="append", help="NAME=file.npy (random if missing)")
    r.add_argument("--repeat", type=int, default=10)
    r.add_argument("-o", "--output", help="save the output(s) as .npy")
    r.set_defaults(fn=cmd_run)

    w = sub.add_parser("worker", help="join a Ray cluster as a measuring node")
    w.add_argument("--address", required=True, help="HOST:PORT of the cluster's head")
    w.add_argument("--slots", type=int, default=1, help="candidates measured at once here")
    w.add_argument("--target", action="append", default=None,
                   help="a target this node measures (default: llvm); repeatable")
    w.set_defaults(fn=cmd_worker)

    d = sub.add_parser("db", help="inspect and manage a tuning database")
    dsub = d.add_subparsers(dest="what", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--db", default=str(DEFAULT_DB_PATH), help="the tuning database")
        q.add_argument("--target", default="llvm")

    q = dsub.add_parser("tasks", help="one line per tuned task")
    common(q)
    for name in ("best", "history"):
        q = dsub.add_parser(name, help=f"the {name} records of one task")
        common(q)
        q.add_argument("workload", nargs="?", help="a workload key")
        q.add_argument("--op", help="or the op spec of the task")
        q.add_argument("--any-device", action="store_true",
                       help="include records of other devices")
        if name == "best":
            q.add_argument("-k", type=int, default=5)
        else:
            q.add_argument("--limit", type=int, default=None)
    for name, helptext in [("export", "write JSON lines"), ("import", "read JSON lines"),
                           ("merge", "add another database's records"),
                           ("plot", "PNG of best-so-far against trials")]:
        q = dsub.add_parser(name, help=helptext)
        common(q)
        q.add_argument("path")
        if name == "plot":
            q.add_argument("--model", default=None,
                           help="instead: the estimated latency of this tuned model against "
                                "trials and wall time")
    q = dsub.add_parser("prune", help="keep the top k records per task")
    common(q)
    q.add_argument("--top-k", type=int, required=True)
    d.set_defaults(fn=cmd_db)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `tessel`: `main(["db", "tasks"])`."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except TesselError as e:
        print(f"tessel: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
