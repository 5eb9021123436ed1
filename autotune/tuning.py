"""The tuning loop: propose, measure, store every measurement, learn, stop early.

Every result goes into the database as it arrives. A run restarted on the same database
skips every config already measured for the task (by any process) and counts them toward
`n_trial`, so it continues where it stopped and measures nothing twice.

A candidate that timed out is the one exception: a timeout says the machine was busy
(at load 7, 10 of 88 candidates of a ResNet-18 task overran the 10 s default, one of them
a close variant of the task's best config), not that the config is bad, so at the end of
a `tune` call that measured, each config whose only record is one timeout is measured
once more with RETRY_TIMEOUT_FACTOR x the runner's timeout (`retry_timeouts`). Both
records stay in the database; a resume replays the retry's result for the config, not
the timeout. A build error, a crash or a wrong result is never retried.

    >>> import tempfile, pathlib
    >>> from autotune import Task, FakeRunner, RandomTuner, tune
    >>> from tuning_logs import TuningDatabase
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
    >>> tune(t, RandomTuner(t), 8, db, FakeRunner(lambda t, c: 1.0)).trials
    8
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from autotune.block_rule import block_rule
from autotune.measure import MeasureInput, MeasureResult
from autotune.task import Task
from autotune.tuners.base import Tuner, throughput
from autotune.tuners.xgb import XGBTuner
from schedule.space import ConfigEntity
from tessel_errors import ScheduleError
from tuning_logs import ErrorKind, MeasureRecord, TuningDatabase

RETRY_TIMEOUT_FACTOR = 3.0  # a timed-out candidate's one retry gets this x the timeout

Callback = Callable[["TuneProgress", Sequence[MeasureInput], Sequence[MeasureResult]], None]


@dataclass
class TuneProgress:
    """The state a callback sees after each batch (also what `tune` returns)."""

    task: Task
    tuner: str
    n_trial: int
    trials: int = 0            # measured for this task in total (earlier runs included)
    new_trials: int = 0        # measured by this run
    best_flops: float = 0.0
    best_mean: float = math.inf
    best_config: str | None = None
    best_trial: int = 0        # the trial (1-based, in the database's order) of the best
    errors: int = 0
    retried: int = 0           # timed-out candidates this run measured again
    started: float = 0.0
    stopped_early: bool = False
    default_config: str | None = None  # the template's default as a point of the space
    default_mean: float = math.inf     # its measured seconds (inf: failed, or not measured)
    applied_mean: float = math.inf     # seconds of the record a build applies (db.best)
    applied_config: str | None = None  # and its config
    verdicts: list[Any] = field(default_factory=list)  # autotune.confirm's, of this run

    @property
    def best_gflops(self) -> float:
        """Best GFLOP/s so far."""
        return self.best_flops / 1e9


def _record(task: Task, inp: MeasureInput, res: MeasureResult, tuner: str) -> MeasureRecord:
    return MeasureRecord(task.workload_key, task.template, task.target, task.device_key,
                         inp.config_json, tuple(res.costs), res.error_kind,
                         res.error_msg[:2000], res.timestamp, tuner,
                         flops=task.flop or None, attrs_json=task.attrs)


def _replay_history(task: Task, tuner: Tuner, db: TuningDatabase,
                    progress: TuneProgress) -> None:
    """Feed the database's records of the task to the tuner (resume) and mark them visited:
    per config its first record, or the first after a timeout (its retry's)."""
    first: dict[int, tuple[ConfigEntity, MeasureResult]] = {}
    for r in db.history(task.workload_key, task.target, task.device_key):
        try:
            cfg = task.config_from_json(r.config_json)
        except ScheduleError:  # a record of another template version: keep it, skip it
            continue
        if cfg.index in first and first[cfg.index][1].error_kind != ErrorKind.TIMEOUT:
            continue
        first[cfg.index] = (cfg, MeasureResult(tuple(r.costs), r.error_kind, r.error_msg))
    inputs, results = [], []
    for n, (cfg, res) in enumerate(first.values()):
        _note(progress, [MeasureInput(task, cfg)], [res])
        progress.trials = n + 1
        if cfg.index in tuner.visited:  # a tuner tune() was given before: it knows this
            continue
        tuner.mark_visited(cfg.index)
        inputs.append(MeasureInput(task, cfg))
        results.append(res)
    if inputs:
        tuner.update(inputs, results)
    progress.trials = len(first)


def _note(progress: TuneProgress, inputs: Sequence[MeasureInput],
          results: Sequence[MeasureResult]) -> None:
    for k, (inp, res) in enumerate(zip(inputs, results)):
        f = throughput(progress.task, res)
        if not res.ok:
            progress.errors += 1
        if inp.config_json == progress.default_config:
            progress.default_mean = res.mean if res.ok else math.inf
        if f > progress.best_flops:
            progress.best_flops, progress.best_mean = f, res.mean
            progress.best_config = inp.config_json
            progress.best_trial = progress.trials + k + 1  # trials counts it after the batch


def timed_out_once(task: Task, db: TuningDatabase) -> list[str]:
    """The configs (JSON, in the order measured) of `task` whose only record in `db` is one
    timeout: what `retry_timeouts` measures again.

        >>> import tempfile, pathlib
        >>> t = Task("matmul.x86", [((8, 8), "float32"), ((8, 8), "float32")])
        >>> timed_out_once(t, TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db"))
        []
    """
    kinds: dict[str, list[ErrorKind]] = {}
    for r in db.history(task.workload_key, task.target, task.device_key):
        kinds.setdefault(r.config_json, []).append(r.error_kind)
    return [c for c, k in kinds.items() if k == [ErrorKind.TIMEOUT]]


@contextlib.contextmanager
def longer_timeout(runner: Any, factor: float) -> Iterator[None]:
    """Within the block, `factor` x the runner's `timeout` and its builder's (LocalRunner);
    a runner without one (a cluster's slots keep theirs) is left as it is.

        >>> from autotune.measure import LocalRunner
        >>> r = LocalRunner(timeout=10)
        >>> with longer_timeout(r, 3):
        ...     r.timeout, r.builder.timeout
        (30, 30)
        >>> r.timeout
        10
    """
    owners = [o for o in (runner, getattr(runner, "builder", None))
              if isinstance(getattr(o, "timeout", None), (int, float))]
    saved = [o.timeout for o in owners]
    for o in owners:
        o.timeout = o.timeout * factor
    try:
        yield
    finally:
        for o, t in zip(owners, saved):
            o.timeout = t


def retry_timeouts(task: Task, tuner: Tuner, db: TuningDatabase, runner: Any,
                   progress: TuneProgress, factor: float = RETRY_TIMEOUT_FACTOR) -> int:
    """Measure once more, with `factor` x the runner's timeout, each config of `task` whose
    only record is one timeout (`timed_out_once`), and store the new records beside the
    old; the tuner learns the ones that ran. Returns how many were retried. A config
    that times out again keeps its two timeout records and is not retried a third time.

        >>> retry_timeouts(task, tuner, db, runner, progress)  # doctest: +SKIP
        2
    """
    configs = []
    for c in timed_out_once(task, db):
        try:
            configs.append(task.config_from_json(c))
        except ScheduleError:  # a record of another template version
            continue
    if not configs:
        return 0
    inputs = [MeasureInput(task, c) for c in configs]
    with longer_timeout(runner, factor):
        results = runner.run(inputs)
    db.add_many(_record(task, i, r, tuner.name) for i, r in zip(inputs, results))
    ran = [(i, r) for i, r in zip(inputs, results) if r.ok]
    if ran:
        tuner.update([i for i, _ in ran], [r for _, r in ran])
        before = progress.best_flops
        _note(progress, [i for i, _ in ran], [r for _, r in ran])
        if progress.best_flops > before:  # the best came now, not at a trial of its own
            progress.best_trial = progress.trials
    progress.retried += len(inputs)
    return len(inputs)


def check_measurable(target: Any) -> None:
    """Refuse (DeviceError) to tune for a target whose times would mean nothing here: the
    GPU simulator ("cuda -sim": simulated times are not GPU times), or "cuda" without a GPU.

        >>> check_measurable("llvm")
    """
    from tessel_errors import DeviceError
    from tessel_target import Target
    from tessel_target.gpu import gpu

    t = Target.parse(target)
    if t.kind == "cuda" and t.attrs.get("sim"):
        raise DeviceError(
            f"cannot tune for '{t}': the GPU simulator's times say nothing about a GPU's "
            "(it runs every thread one after another on the CPU); tune with --target cuda "
            "on a machine with an NVIDIA GPU")
    if t.kind == "cuda" and gpu() is None:
        raise DeviceError(f"cannot tune for '{t}': this machine has no NVIDIA GPU to measure "
                          "on; tune on a machine with one")


def default_as_run(task: Task, runner: Any) -> ConfigEntity | None:
    """The default config as the runner times it: the fallback of the task the runner
    builds (`runner.timed_task`, e.g. an NCHWc conv in the layouts a model runs it in),
    as a point of `task`'s space. In a model's layouts a conv's fallback can differ from
    its logical task's (a 1x1 conv keeps the data's own channel block), and it is that
    kernel which the model runs untuned and which a tuned record must not lose to.

        >>> from autotune.measure import FakeRunner
        >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
        >>> got = default_as_run(t, FakeRunner(lambda t, c: 1.0))
        >>> got.to_json() == t.default_config().to_json()
        True
    """
    timed = runner.timed_task(task) if hasattr(runner, "timed_task") else task
    got = timed.default_config()
    if timed is task or got is None:
        return got
    same = list(timed.space.knobs) == list(task.space.knobs) and \
        timed.space.size == task.space.size
    if same and task.space.get(got.index).to_json() == got.to_json():
        return task.space.get(got.index)
    return task.default_config()


def tune(task: Task, tuner: Tuner, n_trial: int, db: TuningDatabase, runner: Any,
         early_stopping: int | None = None, callbacks: Sequence[Callback] = (),
         batch_size: int = 8, transfer: bool = True, default_first: bool = True,
         confirm: int = 0) -> TuneProgress:
    """Tune `task` up to `n_trial` measurements in all; every result is stored in `db`.

    `runner` is a LocalRunner or FakeRunner. `early_stopping=N` stops after N trials of
    this run without a better result. With `transfer`, an xgb tuner starts from the
    database's records of other tasks of the same template and target. With
    `default_first`, the first batch measures the template's default config
    (`Task.default_config`) unless the database has it already, so that the best record,
    which relay_ir.build applies, is never slower than the untuned default measured beside
    it (`progress.default_mean`). With `confirm=k`, the run ends by measuring the `k`
    fastest records not yet confirmed again, each beside the default for many quartets
    (`autotune.confirm.confirm_best`): a record that does not win beyond their noise is
    never applied by a build (`progress.verdicts`; `progress.applied_mean` is the time of
    the record a build applies). A call that measures ends by measuring once more, with a
    longer timeout, the candidates whose only record is a timeout (`retry_timeouts`;
    `progress.retried`), before confirming. A task the runner times in a model's layouts
    (`runner.timed_task`) is tuned only over the configs that keep the model's channel
    block (`autotune.block_rule`); its default is measured even when none are left.
    """
    check_measurable(task.target)
    # a task timed in a model's layouts: its tuner proposes only configs that keep the
    # model's channel block (autotune.block_rule), which confirmation would reject
    tuner.restrict(block_rule(task, runner))
    progress = TuneProgress(task, tuner.name, n_trial, started=time.time())
    default = default_as_run(task, runner) if default_first else None
    progress.default_config = default.to_json() if default is not None else None
    _replay_history(task, tuner, db, progress)
    if default is not None and (progress.default_config is None or db.has_config(
            task.workload_key, task.target, task.device_key, progress.default_config)):
        default = None  # measured already (by an earlier run, or another process)
    if transfer and isinstance(tuner, XGBTuner) and progress.trials == 0:
        tuner.load_transfer(db.records(template=task.template, target=task.target,
                                       device_key=task.device_key,
                                       exclude_workload=task.workload_key, limit=5000))
    last_better = progress.trials
    measures = progress.trials < n_trial  # a call of n_trial 0 (a resume) measures nothing
    for cb in callbacks:
        cb(progress, [], [])
    while progress.trials < n_trial and (tuner.has_next() or default is not None):
        want = min(batch_size, n_trial - progress.trials)
        first: list[Any] = []
        if default is not None:
            tuner.mark_visited(default.index)  # the tuner must not propose it again
            first, default = [default], None
        configs = first + (tuner.next_batch(want - len(first)) if want > len(first) else [])
        if not configs:
            break
        # another process may have measured some of these meanwhile
        configs = [c for c in configs if not db.has_config(task.workload_key, task.target,
                                                           task.device_key, c.to_json())]
        if not configs:
            continue
        inputs = [MeasureInput(task, c) for c in configs]
        results = runner.run(inputs)
        db.add_many(_record(task, i, r, tuner.name) for i, r in zip(inputs, results))
        before = progress.best_flops
        tuner.update(inputs, results)
        _note(progress, inputs, results)
        progress.trials += len(inputs)
        progress.new_trials += len(inputs)
        if progress.best_flops > before:
            last_better = progress.trials
        for cb in callbacks:
            cb(progress, inputs, results)
        if early_stopping is not None and progress.trials - last_better >= early_stopping:
            progress.stopped_early = True
            break
    if measures:
        retry_timeouts(task, tuner, db, runner, progress)
    if confirm > 0:
        from autotune.confirm import confirm_best

        progress.verdicts = confirm_best(task, db, runner, k=confirm)
    applied = db.best_record(task.workload_key, task.target, task.device_key)
    if applied is not None:
        progress.applied_mean, progress.applied_config = applied.mean, applied.config_json
    return progress
