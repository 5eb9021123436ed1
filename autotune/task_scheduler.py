"""The task scheduler: a model's measurement budget goes, batch by batch, to the task whose
next batch should cut the model's latency most (Ansor's gradient-based scheduler, Zheng et
al. 2020, section 6).

Every task first gets one batch. After that each batch goes to the task of largest `Gain`:
the model-latency seconds its next batch is predicted to cut,

    gain = weight x max(0, group best - predicted best after the batch)
    predicted decrease = min(ALPHA x backward + (1 - ALPHA) x forward, room)
    room = best - flop / peak FLOP/s (with cap_by_peak and a known peak; else inf)
    forward = max(best / batches, best - BETA x flop / (best FLOP/s of similar tasks))

`weight` is the task's occurrences in the model; `backward` is how much its best time fell
per batch over its last `WINDOW` batches (the recent slope of its curve); `forward` is the
optimistic guess (its best time spread over the batches it has had) or, if larger, the way
to 1/BETA of the throughput that similar tasks (the same template and target, other
shapes) reached, which bounds what this one can reach.

With `cap_by_peak` (`tessel tune --peak-cap`), the predicted fall is at most the task's
room above one core's FMA peak, best - flop / peak (no kernel beats it; autotune.peak,
read by the runner's calibrate in the rounds it times the defaults: `measure_peaks`; a
target whose peak is unknown keeps the uncapped rule). The aim: uncapped, the 3x3 convs
of ResNet-18 at 0.94-0.95 of the peak in the model (64@56, x4 occurrences) took 80-96
of 400 trials and 512@7 3x3 (0.80 of the peak) few. It is off by default because it
did not pay: three 400-trial ResNet-18 tunes from scratch (one core, AVX-512, load
1.5-4) gave 64@56 x4 / 512@7 x3 88 / 72 trials uncapped, 152 / 112 capped with the peak
measured apart, 160 / 144 with the peak read in the calibration's rounds, and
benchmarks.tuned_ab (15 rounds x 5, CPU time, 2-3 runs at load 1.5-2.5) read them
0.982-0.989, 0.979-0.992 and 0.989-0.994 of untuned: a tie within the noise. The peak
reads 187-189 GFLOP/s whatever the load (the loop touches no memory) while the records'
units do not: 64@56 3x3's default calibrated at 1.272, 1.419 and 1.452 ms in the three
runs (0.96, 0.86 and 0.85 of the peak), so at load its room stays large; and 512@7 x3,
given twice the trials, found nothing faster than its default.

A task whose group has alternate
templates (a GPU conv: direct and implicit GEMM; build compiles the fastest) gains only
where its predicted best beats the group's best, and the model estimate takes the min over
a group's alternates, not the sum. Ties go to the task with fewer trials. A task leaves
when its tuner has no configs left or, with `early_stopping=N`, after N of its trials
without a better time (per task, across batches). Each decision carries the `Gain` that
made it; `Gain.explain()` is the reason printed and stored.

After each batch the task's fastest unconfirmed records (`confirm` of them) are timed
again beside its default (autotune.confirm); a task's best time, in its gain and in the
model estimate, is that of the record a build applies: a confirmed one, or the default.
Without this, the best of many noisy timings was often a lucky loser: at load 4-5 an
equal-shares ResNet-18 database of 96 records built a model 12% slower than untuned.

State lives in the tuning database: every decision is stored (`TuningDatabase.decisions`,
under the run's key, a digest of its tasks and their occurrences), and a resumed run
replays each task's records into its tuner (as `tune` does) and its decisions into the
task's state (the best time after each of its batches, so the gains it computes are those
the interrupted run would have computed), counting the trials toward the budget: running
the same command again goes on where it stopped and ends at the same total.

    >>> sched = TaskScheduler(tasks, tuners, db, runner, budget=512)  # doctest: +SKIP
    >>> result = sched.run()                                         # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autotune.task import Task
from autotune.tuners.base import Tuner
from autotune.tuning import TuneProgress, check_measurable, tune
from tessel_errors import TesselError
from tuning_logs import ScheduleDecision, canonical_json

ALPHA = 0.2   # weight of the observed (backward) slope against the forward guess (Ansor's)
BETA = 2.0    # a task may reach 1/BETA of its similar tasks' best FLOP/s (Ansor's)
WINDOW = 3    # batches the backward slope is measured over
RETRIES_WITHOUT_VALID = 2  # batches a task with no valid measurement keeps an infinite gain


@dataclass
class TaskState:
    """One task's place in the schedule."""

    task: Task
    occurrences: int
    tuner: Tuner
    trials: int = 0
    resumed_trials: int = 0  # what the database held when the run started
    batches: int = 0
    best: list[float] = field(default_factory=list)  # best time after each of its batches
    done: bool = False
    stop_reason: str = ""
    last_better: int = 0     # its trial count when its best time last fell
    progress: TuneProgress | None = None

    @property
    def best_time(self) -> float:
        """Best seconds so far (inf before any valid measurement)."""
        return self.best[-1] if self.best else math.inf

    @property
    def best_flops(self) -> float:
        """FLOP/s of the best time (0 before any valid measurement)."""
        b = self.best_time
        return (self.task.flop or 1.0) / b if math.isfinite(b) and b > 0 else 0.0

    def backward(self) -> float:
        """Seconds the best time fell per batch over its last WINDOW batches (>= 0)."""
        if len(self.best) < 2 or not math.isfinite(self.best[-1]):
            return 0.0
        past = self.best[-1 - WINDOW] if len(self.best) > WINDOW else self.best[0]
        if not math.isfinite(past):  # the window began before its first valid time
            past = next(b for b in self.best if math.isfinite(b))
        return max(0.0, past - self.best[-1]) / min(WINDOW, len(self.best) - 1)


@dataclass(frozen=True)
class Gain:
    """Why a task would get the next batch: the terms of its estimated model-latency
    reduction (seconds), `value`. `explain()` says it in words.

        >>> g = Gain("mm", 2, 1e-3, 1e-4, 2.5e-4, 2.5e-4, 1e-3, 4, None, math.nan)
        >>> round(g.value * 1e3, 4), g.explain()[:28]
        (0.44, 'gain 0.44 ms = x2 occurrence')
    """

    task: str
    weight: int               # occurrences in the model
    best_s: float             # its best time
    backward_s: float         # its best time's fall per batch over the last WINDOW batches
    forward_s: float          # the forward guess: max of the two below
    optimistic_s: float       # best / batches
    group_best_s: float       # the best time of its group's alternates (itself if none)
    batches: int
    similar: str | None = None  # the similar task of the best FLOP/s, when it bounds
    similar_s: float = math.nan  # best - BETA x flop / that FLOP/s
    alternate: str | None = None  # the group's fastest alternate, when it is another task
    no_valid: bool = False    # nothing valid measured yet
    room_s: float = math.inf  # best - flop / peak FLOP/s, at least 0 (inf: peak unknown)

    @property
    def uncapped_s(self) -> float:
        """The predicted fall before the cap by the room above the peak."""
        return ALPHA * self.backward_s + (1 - ALPHA) * self.forward_s

    @property
    def decrease_s(self) -> float:
        """Predicted fall of its best time in the next batch: at most its room above
        the peak (no kernel runs faster than flop / peak)."""
        return min(self.uncapped_s, self.room_s)

    @property
    def value(self) -> float:
        """Predicted model-latency seconds the next batch cuts (inf: nothing known yet)."""
        if self.no_valid:
            return math.inf if self.batches < RETRIES_WITHOUT_VALID else 0.0
        cut = self.group_best_s - (self.best_s - self.decrease_s)
        return self.weight * max(0.0, cut)

    def explain(self) -> str:
        """The terms, in words (what `tessel tune MODEL` prints per batch)."""
        if self.no_valid:
            return (f"no valid measurement after {self.batches} batch(es)"
                    + (": the most to learn" if self.value else ": left for last"))
        ms = 1e3
        parts = [f"gain {self.value * ms:.4g} ms = x{self.weight} occurrences",
                 f"best {self.best_s * ms:.4g} ms after {self.batches} batches",
                 f"slope {self.backward_s * ms:.3g} ms/batch (x{ALPHA:g})",
                 f"forward {self.forward_s * ms:.3g} ms (x{1 - ALPHA:g}; best/batches "
                 f"{self.optimistic_s * ms:.3g}"]
        if self.similar is not None:
            parts[-1] += (f", {self.similar_s * ms:.3g} to 1/{BETA:g} of the FLOP/s "
                          f"{self.similar} reached")
        parts[-1] += ")"
        if math.isfinite(self.room_s):
            capped = self.uncapped_s > self.room_s
            parts.append(f"room above the peak {self.room_s * ms:.3g} ms"
                         + (f" caps the predicted fall of {self.uncapped_s * ms:.3g} ms"
                            if capped else ""))
        if self.alternate is not None:
            parts.append(f"alternate of {self.alternate} (group best "
                         f"{self.group_best_s * ms:.4g} ms): counts only below it")
        return "; ".join(parts)


def room_above_peak(best_s: float, flop: float, peak_flops: float | None) -> float:
    """Seconds a task of `flop` FLOPs at best `best_s` can still lose: best - flop / peak,
    at least 0; inf when the peak (FLOP/s) or the FLOPs are unknown.

        >>> room_above_peak(3e-3, 2e8, 1e11), room_above_peak(3e-3, 2e8, None)
        (0.001, inf)
    """
    if not peak_flops or not flop or not math.isfinite(best_s):
        return math.inf
    return max(0.0, best_s - flop / peak_flops)


def gain_of(st: TaskState, states: Sequence[TaskState],
            group: Sequence[TaskState] = (), peak_flops: float | None = None) -> Gain:
    """The Gain of giving `st` the next batch, among `states` (for similar tasks: the same
    template and target) with `group` its alternates (itself included; () for none), its
    predicted fall capped by its room above `peak_flops` (one core's FLOP/s on its target;
    None: not capped)."""
    name = st.task.name or st.task.template
    best = st.best_time
    if not math.isfinite(best):
        return Gain(name, st.occurrences, best, 0.0, 0.0, 0.0, best, st.batches,
                    no_valid=True)
    optimistic = best / max(1, st.batches)
    forward, similar, similar_s = optimistic, None, math.nan
    peers = [s for s in states if s.task.template == st.task.template
             and s.task.target == st.task.target and s.best_flops > 0]
    if len(peers) > 1 and st.task.flop:
        top = max(peers, key=lambda s: s.best_flops)
        reach = best - BETA * st.task.flop / top.best_flops
        if reach > forward:
            forward, similar, similar_s = reach, top.task.name or top.task.template, reach
    members = [s for s in group if math.isfinite(s.best_time)] or [st]
    fastest = min(members, key=lambda s: s.best_time)
    alternate = (fastest.task.name or fastest.task.template) if fastest is not st else None
    return Gain(name, st.occurrences, best, st.backward(), forward, optimistic,
                fastest.best_time, st.batches, similar, similar_s, alternate,
                room_s=room_above_peak(best, st.task.flop, peak_flops))


@dataclass
class Decision:
    """One batch of the schedule: which task, why, and the estimate after it."""

    batch: int
    task: str
    reason: str
    gain_s: float
    best_s: float
    model_estimate_s: float
    trials_used: int
    gain: Gain | None = None  # None for a first batch


@dataclass
class ScheduleResult:
    """What a scheduled run did: the decisions in order and each task's final state."""

    decisions: list[Decision]
    tasks: list[TaskState]
    alternates: list[list[int]] = field(default_factory=list)
    peaks: dict[str, float] = field(default_factory=dict)  # FLOP/s per target: the caps

    @property
    def model_estimate_s(self) -> float:
        """Sum over groups of occurrences x best time (the min over a group's alternates)."""
        return _estimate(self.tasks, self.alternates)


def _estimate(states: Sequence[TaskState], alternates: Sequence[Sequence[int]]) -> float:
    grouped = {k for a in alternates for k in a}
    total = sum(s.occurrences * s.best_time for k, s in enumerate(states)
                if k not in grouped and math.isfinite(s.best_time))
    for a in alternates:
        best = min(states[k].best_time for k in a)
        if math.isfinite(best):
            total += states[a[0]].occurrences * best
    return total


def run_key(tasks: Sequence[tuple[Task, int]]) -> str:
    """The key a model's scheduled run files its decisions under: its tasks (workload,
    target, device) and their occurrences, in any order.

        >>> t = Task("matmul.x86", [((8, 8), "float32"), ((8, 8), "float32")])
        >>> run_key([(t, 2)]) == run_key([(t, 2)]) != run_key([(t, 3)])
        True
    """
    parts = sorted(f"{t.workload_key}@{t.target}@{t.device_key}x{int(n)}" for t, n in tasks)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


class TaskScheduler:
    """Spends `budget` measurements over a model's tasks (see the module doc).

    `tasks` are (task, occurrences in the model); `tuners` one per task, in order;
    `alternates` the index sets of tasks that are alternate templates of one group (see
    `autotune.extract.extract_model_tasks`). `report(decision)` is called after every
    batch (e.g. print). `confirm`: records confirmed per task after each of its batches
    (autotune.confirm; 0 turns it off). `peaks`: one core's FMA peak (FLOP/s) per target
    string; with `cap_by_peak` and no `peaks`, `run` asks the runner after calibrating it
    (`measure_peaks`); a target left out is not capped. Off by default (`tessel tune
    --peak-cap`): see the module doc for why.
    """

    def __init__(self, tasks: Sequence[tuple[Task, int]], tuners: Sequence[Tuner], db: Any,
                 runner: Any, budget: int, batch_size: int = 8,
                 early_stopping: int | None = None,
                 report: Callable[[Decision], None] | None = None, model: str = "",
                 alternates: Sequence[Sequence[int]] = (), confirm: int = 2,
                 peaks: Mapping[str, float] | None = None,
                 cap_by_peak: bool = False) -> None:
        if len(tasks) != len(tuners):
            raise TesselError(f"TaskScheduler: {len(tasks)} tasks but {len(tuners)} tuners")
        if budget < 1 or batch_size < 1:
            raise TesselError("TaskScheduler: budget and batch_size must be at least 1")
        if early_stopping is not None and early_stopping < 1:
            raise TesselError(f"TaskScheduler: early_stopping must be at least 1 trial, got "
                              f"{early_stopping}")
        for task, _ in tasks:
            check_measurable(task.target)
        self.alternates = _check_alternates(alternates, tasks)
        self.states = [TaskState(t, max(1, int(n)), tu) for (t, n), tu in zip(tasks, tuners)]
        self._group = {k: [self.states[j] for j in a] for a in self.alternates for k in a}
        self.db, self.runner = db, runner
        self.budget, self.batch_size = budget, batch_size
        self.early_stopping = early_stopping
        self.confirm = confirm
        self.peaks = None if peaks is None else dict(peaks)
        self.cap_by_peak = cap_by_peak or peaks is not None
        bad = {t: p for t, p in (self.peaks or {}).items()
               if not (p > 0 and math.isfinite(p))}
        if bad:
            raise TesselError(f"TaskScheduler: peaks must be positive FLOP/s, got {bad}")
        self.report = report
        self.used = 0
        self.decisions: list[Decision] = []
        self.model = model
        self.run_key = run_key(tasks)
        self._logged_batches = 0  # batches of this run the database held at the start

    def gain(self, k: int) -> Gain:
        """The Gain of giving task `k` the next batch now."""
        st = self.states[k]
        return gain_of(st, self.states, self._group.get(k, ()),
                       (self.peaks or {}).get(str(st.task.target)))

    @property
    def model_estimate_s(self) -> float:
        """The model's estimated latency now (min over a group's alternates)."""
        return _estimate(self.states, self.alternates)

    def _step(self, st: TaskState, reason: str, gain: Gain | None) -> None:
        want = min(self.batch_size, self.budget - self.used)
        before, best_before = st.trials, st.best_time
        p = tune(st.task, st.tuner, st.trials + want, self.db, self.runner,
                 batch_size=self.batch_size, transfer=st.trials == 0, confirm=self.confirm)
        st.progress = p
        st.trials = p.trials
        st.batches += 1
        st.best.append(p.applied_mean)  # a lucky time that confirmation rejected is no gain
        if p.applied_mean < best_before:  # at the best's trial, or when it was confirmed
            same = p.best_config is not None and p.applied_config == canonical_json(p.best_config)
            st.last_better = p.best_trial if same else p.trials
        spent = max(0, p.trials - before)
        self.used += spent
        if not st.tuner.has_next() or spent == 0:
            st.done, st.stop_reason = True, "its space is exhausted"
        elif self.early_stopping is not None and \
                st.trials - st.last_better >= self.early_stopping:
            st.done = True
            st.stop_reason = (f"stopped early: {st.trials - st.last_better} trials without a "
                              "better time")
        if st.done:
            reason += f" [{st.stop_reason}]"
        value = gain.value if gain is not None else math.inf
        d = Decision(self._logged_batches + len(self.decisions) + 1,
                     st.task.name or st.task.template, reason, value, p.applied_mean,
                     self.model_estimate_s, self.used, gain)
        self.decisions.append(d)
        self.db.add_decision(ScheduleDecision(
            self.run_key, d.batch, st.task.workload_key, reason, d.best_s,
            d.model_estimate_s, d.trials_used, self.model, d.task, value))
        if self.report is not None:
            self.report(d)

    def _resume(self) -> None:
        # the database's records of each task: trials and best time as a resumed run has
        # them; the stored decisions give each task's best time batch by batch
        logged = self.db.decisions(self.run_key)
        by_task: dict[str, list[ScheduleDecision]] = {}
        for d in logged:
            by_task.setdefault(d.workload_key, []).append(d)
        for st in self.states:
            p = tune(st.task, st.tuner, 0, self.db, self.runner, transfer=False)
            st.trials = st.resumed_trials = p.trials
            st.last_better = p.best_trial
            mine = by_task.get(st.task.workload_key, [])
            if mine:
                st.best = [d.best_s if math.isfinite(d.best_s) else math.inf for d in mine]
                st.batches = len(mine)
                if math.isfinite(p.applied_mean) and p.applied_mean < st.best[-1]:
                    st.best.append(p.applied_mean)  # records added outside this run since
            elif p.trials:  # records of another run or of plain `tune`: one step
                st.best.append(p.applied_mean)
                st.batches = max(1, p.trials // self.batch_size)
            if self.early_stopping is not None and st.trials and \
                    st.trials - st.last_better >= self.early_stopping:
                st.done, st.stop_reason = True, "stopped early (before the resume)"
        self.used = sum(st.trials for st in self.states)
        self._logged_batches = max((d.batch for d in logged), default=0)

    def run(self) -> ScheduleResult:
        """Measure until the budget is spent or every task is done."""
        need_peaks = self.peaks is None and self.cap_by_peak
        if hasattr(self.runner, "calibrate"):
            # the tasks' units timed together: the gains weigh tasks by their times; the
            # FMA peak read in the same rounds only where it caps them (about 40 ms)
            self.runner.calibrate([st.task for st in self.states], peaks=need_peaks)
        if need_peaks:  # read in the calibration's rounds
            self.peaks = measure_peaks([st.task for st in self.states], self.runner)
        self._resume()
        for st in self.states:  # every task first gets one batch (unless it has records)
            if self.used >= self.budget:
                break
            if st.trials == 0 and not st.done:
                self._step(st, "first batch", None)
        while self.used < self.budget:
            live = [k for k, s in enumerate(self.states) if not s.done]
            if not live:
                break
            gains = {k: self.gain(k) for k in live}
            k = max(live, key=lambda k: (gains[k].value, -self.states[k].trials))
            self._step(self.states[k], gains[k].explain(), gains[k])
        return ScheduleResult(self.decisions, self.states, self.alternates,
                              dict(self.peaks or {}))


def measure_peaks(tasks: Sequence[Task], runner: Any) -> dict[str, float]:
    """One core's FMA peak (FLOP/s) per CPU target of `tasks`, where the runner times
    candidates: `runner.peak_flops(task)` (LocalRunner's: read by its calibrate in the
    rounds it timed the defaults; a RayRunner's: on the slot of the task's device kind
    that calibrated), None where it cannot say. Of several device kinds of one target,
    the highest peak (the cap must never promise less than a kind can reach). Targets
    without a peak, and every target of a runner without `peak_flops`, are left out:
    their tasks keep the uncapped rule.

        >>> measure_peaks([], object())
        {}
    """
    from tessel_target import Target

    out: dict[str, float] = {}
    seen: set[tuple[str, str]] = set()
    for task in tasks:
        target = str(task.target)
        if (target, task.device_key) in seen or Target.parse(target).kind != "llvm":
            continue
        seen.add((target, task.device_key))
        got = runner.peak_flops(task) if hasattr(runner, "peak_flops") else None
        if got is not None and got > 0:
            out[target] = max(out.get(target, 0.0), float(got))
    return out


def _check_alternates(alternates: Sequence[Sequence[int]], tasks: Sequence[tuple[Task, int]]
                      ) -> list[list[int]]:
    out, seen = [], set()
    for a in alternates:
        a = [int(k) for k in a]
        bad = [k for k in a if not 0 <= k < len(tasks) or k in seen]
        if bad:
            raise TesselError(f"TaskScheduler: alternates {a} name task {bad[0]}, which is "
                              f"out of range (0..{len(tasks) - 1}) or in another set")
        if len({max(1, int(tasks[k][1])) for k in a}) > 1:
            raise TesselError(f"TaskScheduler: alternates {a} occur different numbers of "
                              "times; alternates of one group occur together")
        seen.update(a)
        if len(a) > 1:
            out.append(a)
    return out


__all__ = ["ALPHA", "BETA", "Decision", "Gain", "ScheduleResult", "TaskScheduler",
           "TaskState", "WINDOW", "gain_of", "measure_peaks", "room_above_peak", "run_key"]
