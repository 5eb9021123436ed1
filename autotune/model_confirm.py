"""Confirming a model's applied records in the model, beside the model built untuned.

autotune.confirm keeps a record only where it beats the task's default kernel timed alone
(ABBA quartets in the runner). In the model a kernel runs in another context: the caches
its predecessors leave, an output written over its input, the layout and the data its
successor reads. Of ResNet-50's records confirmed alone, a 256@14 -> 1024 config timed
3321 against its default's 3357 us alone and 4453 against 3690 us in the model. So
`tessel tune MODEL` ends (unless --no-model-confirm) with `confirm_in_model`:

- the model is built twice: with the database (what `tessel compile` would apply) and
  with every task's default (no records);
- every step of both builds is timed in the model's order, the two builds in turn (AB BA
  AB ..., each timed run right after an untimed run of the same build, as a model served
  again and again runs), on one thread's CPU time where TESSEL_NUM_THREADS=1
  (autotune.measure.kernel_clock), a look every LOOK rounds and an end once every
  verdict is clear (autotune.measure.settled), at most `rounds`;
- per task whose applied record is not its default, its steps' times summed per round in
  each build (a task occurs several times in a model), and the ratio of their medians
  with its noise (autotune.measure.ratio_noise: two standard errors);
- a record slower than the default beyond that noise (ratio - noise > 1 + `max_loss`)
  is rejected; one within the noise stays, since it already beat the default alone
  (autotune.confirm) and this step cannot resolve a few percent (below): a confirm record
  with an error for its config (the rejection autotune.confirm writes for a config it
  refuses untimed), after which `TuningDatabase.best` never applies that config (its
  earlier confirm records stay, every measurement stays), so the next build applies the
  task's next confirmed record, or the default. Such a next record is timed in the model
  the same way (one more build; lowering's compile cache keeps the kernels that did not
  change), at most `passes` builds in all; where the last pass rejected a record, the
  task takes its default (the records it would apply next are rejected untimed:
  DEFAULT_AFTER), rather than ship a record no pass timed in the model.

Verdicts are records, so they travel with export, import and merge as the confirm records
do. Only CPU targets (a cycle model or a GPU is not timed step by step here).

What it cannot tell apart: two builds of the very same kernels differ too (where the
memory plan and the constants put each array); two untuned builds of ResNet-18 (12 tasks)
and ResNet-50 (24) timed so, 30 rounds on one Emerald Rapids core at load 3.3-4.5, gave
per-task ratios of 0.954-1.016 and 0.950-1.010 with a median noise of 0.032 and 0.028, one
task of each beyond its noise. So a gain or a loss of a few percent is not resolved, and
the record confirmed alone keeps the benefit of the doubt; what this step catches is a
record that clearly loses in the model.
What a config does to the next step's time (the cache it leaves, an output written in
place) counts for that step's task, not for its own.

Measured (one Emerald Rapids core, CPU time, load 3.5-5.8; benchmarks.tuned_ab for the
model in turn with the database before and after): ResNet-18 tuned here with
`--trials 400` (301 s), its confirmation 19 s (12.6 s of CPU), 11 verdicts in two
passes, 4 kept (0.87-0.995x), 7 rejected (0.993-1.056x); tuned / untuned 0.977 and 0.956
before, 0.969 and 0.949 after. On the database tuned on main, ResNet-18: 10 verdicts, 4
rejected, 0.972, 0.972, 0.963 before, 0.933, 0.948, 0.950 after; ResNet-50: 30
verdicts, 15 rejected (0.97-1.03x), 53 s (24 s of CPU), 0.927, 0.909, 0.959 before,
0.936, 0.938, 0.986 after: it took back gains of a few percent it could not tell from
noise. The README's small ResNet on two threads (wall time): every record rejected, the
tuned 32@8 3x3 convs 12 us a step in the model against the default's 9. Those figures
were taken with the first rule, which rejected a record also where it only failed to
win beyond the noise; since ResNet-50 gave back its small gains under it, a record now
goes only where it loses beyond the noise (ResNet-18's at 1.056x, not its ties).

    >>> from tuning_logs import TuningDatabase
    >>> import tempfile, pathlib
    >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
    >>> confirm_in_model(mod, params, "llvm", db).verdicts  # doctest: +SKIP
    [InModel('conv2d_NCHWc.x86 x3 (1, 256, 14, 14)', ... accepted=False)]
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autotune.measure import LOOK, kernel_clock, ratio_noise, settled
from autotune.task import Task
from tessel_errors import RelayError, TesselError
from tuning_logs import TuningDatabase, canonical_json

ROUNDS = 30  # at most; every verdict of ResNet-18 and -50 was clear well before
PASSES = 2   # builds with the database: the first, and one after rejections
# Where the last pass rejected a task's record, the record the task would apply next was
# never timed in the model: it is rejected untimed and the task takes its default. Its
# faster records lost there (ResNet-50, AVX2 code, the 1024@14 -> 256 task: 1.127x, then
# the next 1.114x, and a third would have shipped untimed), and the default is the one
# kernel every pass timed in the model.
DEFAULT_AFTER = True
MAX_UNTIMED_REJECTIONS = 64  # confirmed records of one task rejected so, at most

# (plans, input arrays, rounds) -> per plan, seconds of each step in each round
# (rounds x steps): `time_in_turn`, or a stand-in in tests
StepTimer = Callable[[Sequence[Any], list[np.ndarray], int], list[np.ndarray]]


@dataclass(frozen=True)
class InModel:
    """A task's applied record against its default in the model: seconds summed over the
    task's steps (medians of the rounds), their ratio and its noise, and the verdict.

        >>> v = InModel("k", "conv x3", 3, "{}", 4453e-6, 3690e-6, 1.207, 0.02, 20, False)
        >>> v.explain()
        'rejected, the default applies: 1.207 x the default in the model (noise 0.020, 20 rounds)'
    """

    workload_key: str
    name: str
    occurrences: int
    config_json: str
    applied_s: float
    default_s: float
    ratio: float
    noise: float
    rounds: int
    accepted: bool

    def explain(self) -> str:
        """The verdict in words (the rejection record's note)."""
        word = "kept" if self.accepted else "rejected, the default applies"
        return (f"{word}: {self.ratio:.3f} x the default in the model (noise "
                f"{self.noise:.3f}, {self.rounds} rounds)")


@dataclass
class ModelConfirmation:
    """What `confirm_in_model` did: the verdicts (in the order judged), timed rounds,
    seconds in all (and of this process's CPU) and of them building, why nothing was
    judged (`note`), if so, and the tasks whose record the last pass rejected: taking their
    default (`defaulted`, DEFAULT_AFTER) or, with that off, applying a next record no verdict
    judged (`unjudged`)."""

    verdicts: list[InModel] = field(default_factory=list)
    rounds: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's: what it costs a quiet machine
    build_seconds: float = 0.0
    note: str = ""
    unjudged: list[str] = field(default_factory=list)
    defaulted: list[str] = field(default_factory=list)

    @property
    def rejected(self) -> list[InModel]:
        """The verdicts that rejected a record."""
        return [v for v in self.verdicts if not v.accepted]


def time_in_turn(plans: Sequence[Any], arrays: list[np.ndarray], rounds: int,
                 clock: Callable[[], float] | None = None) -> list[np.ndarray]:
    """Seconds of every step of each plan (relay_ir GraphPlans of one model) in each round,
    the plans in turn (AB BA ...), each timed run of a plan after an untimed run of it.

        >>> a, b = time_in_turn([tuned.plan, default.plan], [x], 10)  # doctest: +SKIP
        >>> a.shape == (10, len(tuned.plan.steps))                     # doctest: +SKIP
        True
    """
    from relay_ir.backend.profile import bound_steps

    clock = clock or kernel_clock()
    calls = [bound_steps(plan, arrays) for plan in plans]
    out = [np.zeros((rounds, len(c))) for c in calls]
    for r in range(rounds):
        order = range(len(plans)) if r % 2 == 0 else reversed(range(len(plans)))
        for b in order:
            for fn, args in calls[b]:
                fn(args)
            row = out[b][r]
            for k, (fn, args) in enumerate(calls[b]):
                t0 = clock()
                fn(args)
                row[k] = clock() - t0
    return out


class _InModelLayouts:
    """What tuning.default_as_run asks of a runner: the task as the model runs it (a
    model's tasks are timed in its layouts, cli.runner_options)."""

    def timed_task(self, task: Task) -> Task:
        from autotune.measure import timed_as

        return timed_as(task, model_layout=True)


@dataclass
class _Applied:
    """A task whose build applies a record other than its default: the steps it runs."""

    task: Task
    config_json: str
    default_json: str
    steps: list[int]


def _applied_records(plan: Any, db: TuningDatabase, target: str) -> dict[str, _Applied]:
    """The tasks of `plan`'s steps whose applied record (relay_ir.backend.tuned.find_tuned,
    what the build read) is not the default as the model runs it, by workload key: any
    record of an alternate template (schedule.templates.is_alternate), which the default
    build does not run at all."""
    from autotune.tuning import default_as_run
    from relay_ir.backend.lower_group import splitting_as
    from relay_ir.backend.tuned import find_tuned
    from schedule.templates import is_alternate, partition_of

    out: dict[str, _Applied | None] = {}  # None: the task applies its default
    for k, step in enumerate(plan.steps):
        key = step.workload_key
        if key in out:
            if out[key] is not None:
                out[key].steps.append(k)
            continue
        if not key:
            continue
        task = Task.from_workload_key(key, target)
        default = default_as_run(task, _InModelLayouts())
        if default is None:
            out[key] = None
            continue
        default_json = canonical_json(default.to_json())
        split = partition_of(task.template, default)
        # the record the build applied: the fastest that splits as the default does
        got = find_tuned(db, task.template, list(task.args), task.attrs, target,
                         accept=splitting_as(task.template, split))
        # an alternate template (a Winograd conv) replaces the family's default kernel:
        # even its own default config is a choice to judge
        own_default = got is not None and got.record.config_json == default_json and \
            not is_alternate(task.template)
        out[key] = None if got is None or own_default else \
            _Applied(task, got.record.config_json, default_json, [k])
    return {k: a for k, a in out.items() if a is not None}


def _name(a: _Applied) -> str:
    """The tune command's name of the task, with its weight's shape (ResNet-18 has three
    tasks on (1, 128, 28, 28): a 3x3 conv, a 1x1 and a strided 3x3)."""
    args = a.task.args
    return f"{a.task.template} x{len(a.steps)} {args[0][0]}" + (
        f" * {args[1][0]}" if len(args) > 1 else "")


def _judge(applied: dict[str, _Applied], tuned: np.ndarray, default: np.ndarray,
           max_loss: float) -> list[InModel]:
    out = []
    for key, a in applied.items():
        costs, control = tuned[:, a.steps].sum(axis=1), default[:, a.steps].sum(axis=1)
        ratio, noise = ratio_noise(costs, control)
        out.append(InModel(key, _name(a), len(a.steps), a.config_json,
                           float(np.median(costs)), float(np.median(control)), ratio, noise,
                           len(costs), not ratio - noise > 1.0 + max_loss))
    return out


def _time_until_clear(timer: StepTimer, plans: Sequence[Any], arrays: list[np.ndarray],
                      applied: dict[str, _Applied], rounds: int, max_loss: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Rounds in looks of LOOK until every task's verdict is clear, or `rounds`."""
    tuned = np.zeros((0, len(plans[0].steps)))
    default = np.zeros((0, len(plans[1].steps)))
    while len(tuned) < rounds:
        a, b = timer(plans, arrays, min(LOOK, rounds - len(tuned)))
        tuned, default = np.vstack([tuned, a]), np.vstack([default, b])
        if all(settled(tuned[:, x.steps].sum(axis=1), default[:, x.steps].sum(axis=1),
                       1.0 + max_loss) for x in applied.values()):
            break
    return tuned, default


def _reject(db: TuningDatabase, a: _Applied, verdict: InModel, runner: Any) -> None:
    """The rejection record of `verdict`'s config, after a confirm record of the default
    where the task has none yet (its unit, autotune.confirm), so that the task still has
    a record to apply: the default."""
    from autotune.confirm import record_rejection

    note = (f"{verdict.explain()}; {verdict.applied_s * 1e6:.0f} against "
            f"{verdict.default_s * 1e6:.0f} us over its {verdict.occurrences} steps")
    # without a runner's unit or a tuning record of the default, its time in the model
    record_rejection(a.task, db, a.default_json, a.config_json, note, runner,
                     default_seconds=verdict.default_s / verdict.occurrences)


def _inputs(lib: Any, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _, shape, dtype in lib.input_specs]


def _aligned(a: Any, b: Any) -> bool:
    """Both builds run the same groups in the same order (fusion does not read records)."""
    return len(a.steps) == len(b.steps) and all(
        x.group == y.group for x, y in zip(a.steps, b.steps))


def confirm_in_model(mod: Any, params: dict[str, Any] | None, target: str,
                     db: TuningDatabase, *, rounds: int = ROUNDS, passes: int = PASSES,
                     timer: StepTimer | None = None, runner: Any = None,
                     max_loss: float = 0.0) -> ModelConfirmation:
    """Time each task's applied record in the model beside the default build and reject,
    in `db`, those slower than the default beyond the noise (see the module doc). `timer` times the
    steps (default `time_in_turn`); `runner`, the tuning run's, gives the units of a
    task's first confirm record (autotune.confirm). Call it outside a
    `tuning_logs.using_database` block: the default build must read no records.
    """
    from tessel_target import Target
    from tuning_logs import current_database

    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 2:
        raise TesselError(f"confirm_in_model: rounds must be an integer of at least 2 (a "
                          f"noise needs two), got {rounds!r}")
    if isinstance(passes, bool) or not isinstance(passes, int) or passes < 1:
        raise TesselError(f"confirm_in_model: passes must be a positive integer, got "
                          f"{passes!r}")
    if current_database() is not None:
        raise TesselError("confirm_in_model builds the model once without tuning records: "
                          "call it outside a `tuning_logs.using_database` block")
    target = str(target)
    if Target.parse(target).kind != "llvm":
        return ModelConfirmation(note=f"not for target '{target}': only CPU models are "
                                      "timed step by step")
    t0, cpu0 = time.perf_counter(), time.process_time()
    result = ModelConfirmation()
    timer = timer or time_in_turn
    default = None  # built once something is to be judged: most of this step's time
    for _ in range(passes):
        b0 = time.perf_counter()
        tuned = _build_quietly(mod, target, params, db)
        steps = _static_steps(tuned)
        if not steps:
            result.note = "the model has no static steps to time (give --shape for `?` dims)"
            break
        applied = {k: a for k, a in _applied_records(tuned.plan, db, target).items()
                   if _unjudged(result.verdicts, k, a)}
        if applied and default is None:
            default = _build_quietly(mod, target, params, None)
        result.build_seconds += time.perf_counter() - b0
        if not applied:
            if not result.verdicts:
                result.note = "every task applies its default"
            break
        if not _aligned(tuned.plan, default.plan):
            result.note = ("the builds with and without records run different groups; "
                           "nothing judged")
            break
        a_times, d_times = _time_until_clear(timer, [tuned.plan, default.plan],
                                             _inputs(default), applied, rounds, max_loss)
        result.rounds += len(a_times)
        verdicts = _judge(applied, a_times, d_times, max_loss)
        for v in verdicts:
            if not v.accepted:
                _reject(db, applied[v.workload_key], v, runner)
        result.verdicts += verdicts
        if all(v.accepted for v in verdicts):
            break
    else:  # the last pass rejected records: their tasks take the default (DEFAULT_AFTER)
        if DEFAULT_AFTER:
            result.defaulted = _default_after_losses(tuned.plan, db, target, result.verdicts,
                                                     runner)
        else:
            result.unjudged = [_name(a) for k, a in
                               _applied_records(tuned.plan, db, target).items()
                               if _unjudged(result.verdicts, k, a)]
    result.seconds = time.perf_counter() - t0
    result.cpu_seconds = time.process_time() - cpu0
    return result


def _build_quietly(mod: Any, target: str, params: dict[str, Any] | None,
                   db: TuningDatabase | None) -> Any:
    """relay_ir.build without its warning on untuned tasks (the tune command said so)."""
    from relay_ir import build

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build(mod, target, params, tuning_db=db)


def _static_steps(lib: Any) -> list[Any]:
    try:
        return lib.plan.steps
    except RelayError:  # `?` dims: the kernels are compiled at a run, for its shapes
        return []


def _default_after_losses(plan: Any, db: TuningDatabase, target: str,
                          verdicts: Sequence[InModel], runner: Any) -> list[str]:
    """The tasks whose record the last pass rejected and whose next record no pass timed:
    that record, and any other confirmed record still faster alone than the default, is
    rejected untimed (DEFAULT_AFTER), so that the task applies its default; their names."""
    from autotune.confirm import record_rejection

    names: list[str] = []
    for _ in range(MAX_UNTIMED_REJECTIONS):
        left = {k: a for k, a in _applied_records(plan, db, target).items()
                if _unjudged(verdicts, k, a)}
        if not left:
            break
        for key, a in left.items():
            lost = [v for v in verdicts if v.workload_key == key and not v.accepted]
            note = (f"rejected untimed, the default applies: {len(lost)} faster record(s) "
                    f"of the task lost to the default in the model (the last "
                    f"{lost[-1].ratio:.3f} x) and no pass was left to time this one")
            record_rejection(a.task, db, a.default_json, a.config_json, note, runner,
                             default_seconds=lost[-1].default_s / lost[-1].occurrences)
            if _name(a) not in names:
                names.append(_name(a))
    return names


def _unjudged(verdicts: Sequence[InModel], key: str, a: _Applied) -> bool:
    """Whether the task applies a record no verdict judged (any, or its next one after a
    rejection)."""
    last = [v for v in verdicts if v.workload_key == key]
    return not last or last[-1].config_json != a.config_json


__all__ = ["LOOK", "PASSES", "ROUNDS", "InModel", "ModelConfirmation", "StepTimer",
           "confirm_in_model", "time_in_turn"]
