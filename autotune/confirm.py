"""Confirming a task's best record before a compiled model applies it.

A tuning run measures hundreds of candidates once each, and the fastest of many noisy
measurements is often a lucky one (the winner's curse): on ResNet-18 a database whose
best records each beat their default when measured built a model slower than the untuned
one. So a record that would become a task's best is measured again, beside the task's
default kernel (as the runner times it: the fallback the model runs untuned) in many
ABBA quartets (`runner.compare`), and kept only if it wins beyond the noise of those
quartets. The verdicts are records too, with tuner "confirm" (so they travel with
export, import and merge): one for the default, its time in the quartets of the task's
first confirmation (the unit), and one per candidate compared, its ratio to the default
times that unit; a rejected candidate is credited no faster than the default. Once a
task has confirm records, `TuningDatabase.best` (what relay_ir.build applies) chooses
among them only, so a build applies only confirmed records, or the default. A config
that would change the channel block a model keeps around the task (a blocked conv timed
in the model's layouts whose output block differs from the fallback's) is rejected
untimed: the model plans its layouts from the applied configs, so its consumers would
read a layout the worker never timed them with. A rejection is a confirm record with an
error, and `TuningDatabase.best` never applies a config that has one, whatever its other
confirm records say: autotune.model_confirm rejects so a confirmed record that loses to
the default in the model. Verdicts are filed at the thread count of the process; the first
verdict at a count with no records of the task carries the task's legacy verdicts (filed
before records had a count, which builds there applied until then) to that count first,
so that judging one legacy record there does not hide the others (`_carry_legacy_verdicts`).

    >>> from autotune import FakeRunner, Task
    >>> from tuning_logs import TuningDatabase
    >>> import tempfile, pathlib
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
    >>> confirm_best(t, db, FakeRunner(lambda t, c: 1.0))  # nothing measured: nothing to do
    []
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.block_rule import block_rule
from autotune.measure import ratio_noise
from autotune.task import Task
from tessel_errors import TesselError
from tuning_logs import CONFIRM_TUNER, ErrorKind, MeasureRecord, TuningDatabase, canonical_json

# ABBA quartets per comparison (about 0.3 s of timing at 10 ms each), fewer where the
# verdict is clear at an earlier look (autotune.measure.settled)
QUARTETS = 30
MIN_GAIN = 0.005  # a win must also clear this: the model's context is not the worker's


@dataclass(frozen=True)
class Verdict:
    """A candidate compared with the task's default: the ratio of their median times,
    its noise (two standard errors, from the quartets' spread) and whether it is kept.

        >>> Verdict("{}", 0.9, 0.02, 30, True).explain()
        'accepted: 0.900 x the default (noise 0.020, 30 quartets)'
    """

    config_json: str
    ratio: float
    noise: float
    quartets: int
    accepted: bool

    def explain(self) -> str:
        """The verdict in words (the confirm record's note)."""
        word = "accepted" if self.accepted else "rejected"
        return (f"{word}: {self.ratio:.3f} x the default (noise {self.noise:.3f}, "
                f"{self.quartets} quartets)")


def judge(costs: Sequence[float], control: Sequence[float], config_json: str = "",
          min_gain: float = MIN_GAIN) -> Verdict:
    """The verdict on a candidate's quartets (`costs`) against the default's (`control`):
    accepted when the ratio of the medians plus two standard errors of the median of the
    per-quartet ratios (from their interquartile range) stays below 1 - `min_gain`.

        >>> judge([0.90, 0.91, 0.89, 0.90], [1.0, 1.0, 1.01, 0.99]).accepted
        True
        >>> judge([0.99, 1.01, 0.98, 1.02], [1.0, 1.0, 1.0, 1.0]).accepted
        False
    """
    if len(costs) == 0 or len(costs) != len(control):
        raise TesselError(f"judge: need as many candidate as default times, and at least "
                          f"one; got {len(costs)} and {len(control)}")
    # two standard errors, so that a lucky run of quartets rarely passes
    ratio, noise = ratio_noise(costs, control)
    return Verdict(config_json, ratio, noise, len(costs), ratio + noise < 1.0 - min_gain)


def _confirm_record(task: Task, config_json: str, seconds: float, note: str,
                    error: ErrorKind = ErrorKind.NONE) -> MeasureRecord:
    costs = (seconds,) if error is ErrorKind.NONE else ()
    return MeasureRecord(task.workload_key, task.template, task.target, task.device_key,
                         config_json, costs, error, error_msg=note[:2000],
                         timestamp=time.time(), tuner=CONFIRM_TUNER,
                         flops=task.flop or None, attrs_json=task.attrs)


def candidates(task: Task, db: TuningDatabase, default_json: str, k: int
               ) -> list[MeasureRecord]:
    """Up to `k` fastest records of the task not yet compared with the default and faster
    than what a build applies now (the confirmed best; before any confirmation, the
    default's record), fastest first."""
    history = db.history(task.workload_key, task.target, task.device_key)
    confirmed = {r.config_json for r in history if r.tuner == CONFIRM_TUNER}
    ok = [r for r in history if r.ok and r.tuner != CONFIRM_TUNER]
    if not ok:  # no trial at this thread count: confirm here those of other counts
        ok = [r for r in _other_counts(task, db) if r.ok and r.tuner != CONFIRM_TUNER]
    if confirmed:
        applied = db.best_record(task.workload_key, task.target, task.device_key)
        bound = applied.mean if applied is not None else math.inf
    else:
        bound = min((r.mean for r in ok if r.config_json == default_json), default=math.inf)
    out: list[MeasureRecord] = []
    for r in sorted(ok, key=lambda r: r.mean):
        if len(out) >= k or r.mean >= bound:
            break
        if r.config_json not in confirmed and r.config_json != default_json and \
                all(o.config_json != r.config_json for o in out):
            out.append(r)
    return out


def confirm_best(task: Task, db: TuningDatabase, runner: Any, k: int = 2,
                 quartets: int = QUARTETS, min_gain: float = MIN_GAIN) -> list[Verdict]:
    """Compare the task's `k` best unconfirmed records (see `candidates`) with its default
    on `runner` and store the verdicts as confirm records (see the module doc); returns
    them, in the order compared. Nothing happens for a runner without `compare`, for a
    target other than a CPU's (the accelerator's cycle model has no noise; GPU kernels
    are not timed beside a control), or for a task with no default config.
    """
    from autotune.tuning import default_as_run
    from tessel_target import Target

    if not hasattr(runner, "compare") or Target.parse(task.target).kind != "llvm":
        return []  # timed beside the default only on CPUs (a cycle model has no noise)
    default = default_as_run(task, runner)
    if default is None:
        return []
    default_json = canonical_json(default.to_json())
    # first, so that a config a carried verdict judged is no candidate again
    _carry_legacy_verdicts(task, db, default_json)
    todo = candidates(task, db, default_json, k)
    verdicts: list[Verdict] = []
    rule = block_rule(task, runner)
    for rec in todo:
        cfg = task.config_from_json(rec.config_json)
        # the model would write this conv's output in another channel block, which its
        # consumers then read: neither was timed so (a record tuned before the tuners kept
        # the block; see autotune.block_rule)
        why = rule.why(cfg) if rule is not None else ""
        if not why:
            try:
                costs, control = runner.compare(task, cfg, quartets,
                                                decide_below=1.0 - min_gain)
            except TesselError as e:  # it ran once, fails now: a loss
                why = str(e)
        if why:
            v = _reject(task, db, default_json, runner, rec.config_json, why)
            if v is not None:
                verdicts.append(v)
            continue
        unit = _unit(task, db, default_json, control, runner)
        assert unit is not None
        v = judge(costs, control, rec.config_json, min_gain)
        credited = v.ratio if v.accepted else max(v.ratio, 1.0)
        db.add(_confirm_record(task, rec.config_json, credited * unit, v.explain()))
        verdicts.append(v)
    return verdicts


def _reject(task: Task, db: TuningDatabase, default_json: str, runner: Any,
            config_json: str, why: str) -> Verdict | None:
    """Record `config_json` as rejected untimed (see `record_rejection`); None when
    nothing could be recorded."""
    if not record_rejection(task, db, default_json, config_json, f"rejected: {why}",
                            runner):
        return None
    return Verdict(config_json, math.inf, math.inf, 0, False)


def record_rejection(task: Task, db: TuningDatabase, default_json: str, config_json: str,
                     note: str, runner: Any, default_seconds: float | None = None) -> bool:
    """Record `config_json` as rejected (a confirm record with an error: builds never
    apply it again), after the default's confirm record where the task has none yet, so
    that the task still has a record to apply. The default's record is in the task's unit
    (see `_unit`: the runner's, else the default's tuning record, else
    `default_seconds`, e.g. its time in the model); False, nothing recorded, when there is
    no unit at all. At a thread count with no records of the task, where a build applied a
    legacy record, the legacy verdicts come to this count first (`_carry_legacy_verdicts`):
    a rejected legacy record gives way to the task's next legacy confirmed record there,
    not to the default.

        >>> from autotune import FakeRunner, Task
        >>> from tuning_logs import TuningDatabase
        >>> import tempfile, pathlib
        >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
        >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
        >>> record_rejection(t, db, "{}", '{"i": 1}', "slower", FakeRunner(lambda t, c: 1.0))
        False
        >>> record_rejection(t, db, "{}", '{"i": 1}', "slower", None, default_seconds=1e-3)
        True
    """
    if _unit(task, db, default_json, None, runner) is None and (
            default_seconds is None
            or _unit(task, db, default_json, [default_seconds], None) is None):
        return False
    db.add(_confirm_record(task, config_json, 0.0, note, ErrorKind.RUNTIME_ERROR))
    return True


def _other_counts(task: Task, db: TuningDatabase) -> list[MeasureRecord]:
    """The task's records on this device at other thread counts: their configs are the
    candidates of a confirmation at this count, whose verdicts are filed at this count.
    Not legacy records (filed before records had a count): builds apply them at any count
    until this one has records, a model's confirmation judges them at its count, and their
    verdicts come to this count with its first (`_carry_legacy_verdicts`)."""
    from tessel_target import at_other_thread_counts

    return at_other_thread_counts(db.history(task.workload_key, task.target),
                                  task.device_key)


def _carry_legacy_verdicts(task: Task, db: TuningDatabase, default_json: str) -> int:
    """Before the first verdict at a thread count with no applicable record of the task
    (builds there apply its legacy records, filed before records had a count; failed
    trials of the count do not apply), copy the legacy confirm records (their verdicts:
    the default's unit, accepted configs, rejections) to this count; how many.

    Why: a lookup at a count reads that count's records once it has any, and the legacy
    ones only before (tessel_target.read_device_keys). Without the copy, the first verdict
    here (e.g. a model confirmation at two threads rejecting the legacy record a build
    applied) would file the default's record at this count alone, and the build would
    then apply the default, hiding the task's other legacy confirmed records, which no one
    judged at this count. With it, this count starts from what its builds applied: after
    a rejection, the next legacy confirmed record applies, and the model confirmation's
    next pass judges it here. The legacy key itself is untouched (a verdict at one count
    says nothing of another). Nothing is copied where the legacy records have no confirm
    record of this default (their unit would not be this task's; an unconfirmed legacy
    trial is then treated as one of this count's: after a rejection the default applies,
    until a tuning run here confirms candidates beside it)."""
    from dataclasses import replace

    from tessel_target import legacy_device_key

    legacy = legacy_device_key(task.device_key)
    if legacy == task.device_key or \
            db.best_record(task.workload_key, task.target, task.device_key) is not None:
        return 0  # no count in the key, or builds here apply this count's records
    verdicts = db.history(task.workload_key, task.target, legacy, tuner=CONFIRM_TUNER)
    if not any(r.ok and r.config_json == default_json for r in verdicts):
        return 0
    why = " [carried from the records filed without a thread count]"
    return db.add_many(replace(r, device_key=task.device_key, record_id=None,
                               error_msg=(r.error_msg[:2000 - len(why)] + why))
                       for r in verdicts)


def _unit(task: Task, db: TuningDatabase, default_json: str,
          control: Sequence[float] | None, runner: Any) -> float | None:
    """The seconds every confirm record of the task is in, recorded at its first
    confirmation as the default's own confirm record (so that confirmations at different
    loads compare by their ratios): the runner's unit of the task (`runner.unit`, the
    one its tuning records are in: e.g. LocalRunner.calibrate's), else the default's time
    in the quartets; without `control` (a comparison that failed) the default's tuning
    record; None if none of these."""
    _carry_legacy_verdicts(task, db, default_json)
    own = None
    for r in db.history(task.workload_key, task.target, task.device_key):
        if r.config_json == default_json and r.ok:
            if r.tuner == CONFIRM_TUNER:
                return r.mean
            own = r.mean if own is None else own
    unit = runner.unit(task) if hasattr(runner, "unit") else None
    if unit is None:
        unit = float(np.median(control)) if control is not None else own
    if unit is None:
        return None
    db.add(_confirm_record(task, default_json, unit,
                           "the default: the unit of the task's confirm records"))
    return unit


__all__ = ["MIN_GAIN", "QUARTETS", "Verdict", "candidates", "confirm_best", "judge",
           "record_rejection"]
