"""The task scheduler: a model's measurement budget goes, batch by batch, to the task whose
next batch should cut the model's latency most (after Ansor's gradient-based scheduler).

Every task first gets one batch. After that each batch goes to the task of largest

    gain = occurrences x (ALPHA x backward + (1 - ALPHA) x forward)

where `backward` is how much the task's best time fell per batch over its last `WINDOW`
batches (what it has been gaining) and `forward` is its best time over the batches it has
had (an optimistic estimate that shrinks as a task is explored); ties go to the task with
fewer trials. A task leaves when its tuner has no configs left or it stops early. The
estimated model latency, the sum of occurrences x best time over the tuned tasks, is
reported after every batch with the decision that led to it.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from autotune.task import Task
from autotune.tuners.base import Tuner
from autotune.tuning import TuneProgress, check_measurable, tune
from tessel_errors import TesselError
from tuning_logs import ScheduleDecision

ALPHA = 0.2   # weight of the observed (backward) gain against the optimistic (forward) one
WINDOW = 3    # batches the backward gain is measured over


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
    progress: TuneProgress | None = None

    @property
    def best_time(self) -> float:
        """Best seconds so far (inf before any valid measurement)."""
        return self.best[-1] if self.best else math.inf

    def gain(self) -> float:
        """Estimated model-latency reduction (seconds) of its next batch."""
        best = self.best_time
        if not math.isfinite(best):
            return math.inf  # nothing valid measured yet: the most to learn
        past = self.best[-1 - WINDOW] if len(self.best) > WINDOW else self.best[0]
        finite_past = past if math.isfinite(past) else best
        backward = max(0.0, finite_past - best) / min(WINDOW, max(1, len(self.best) - 1))
        forward = best / max(1, self.batches)
        return self.occurrences * (ALPHA * backward + (1 - ALPHA) * forward)


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


@dataclass
class ScheduleResult:
    """What a scheduled run did: the decisions in order and each task's final state."""

    decisions: list[Decision]
    tasks: list[TaskState]

    @property
    def model_estimate_s(self) -> float:
        """Sum over tuned tasks of occurrences x best time."""
        return _estimate(self.tasks)


def _estimate(states: Sequence[TaskState]) -> float:
    return sum(s.occurrences * s.best_time for s in states if math.isfinite(s.best_time))


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

    `tasks` are (task, occurrences in the model); `tuners` one per task, in order.
    `report(decision)` is called after every batch (e.g. print).
    """

    def __init__(self, tasks: Sequence[tuple[Task, int]], tuners: Sequence[Tuner], db: Any,
                 runner: Any, budget: int, batch_size: int = 8,
                 early_stopping: int | None = None,
                 report: Callable[[Decision], None] | None = None, model: str = "") -> None:
        if len(tasks) != len(tuners):
            raise TesselError(f"TaskScheduler: {len(tasks)} tasks but {len(tuners)} tuners")
        if budget < 1 or batch_size < 1:
            raise TesselError("TaskScheduler: budget and batch_size must be at least 1")
        for task, _ in tasks:
            check_measurable(task.target)
        self.states = [TaskState(t, max(1, int(n)), tu) for (t, n), tu in zip(tasks, tuners)]
        self.db, self.runner = db, runner
        self.budget, self.batch_size = budget, batch_size
        self.early_stopping = early_stopping
        self.report = report
        self.used = 0
        self.decisions: list[Decision] = []
        self.model = model
        self.run_key = run_key(tasks)
        self._logged_batches = 0  # batches of this run the database held at the start

    def _step(self, st: TaskState, reason: str, gain: float) -> None:
        want = min(self.batch_size, self.budget - self.used)
        before = st.trials
        p = tune(st.task, st.tuner, st.trials + want, self.db, self.runner,
                 early_stopping=self.early_stopping, batch_size=self.batch_size,
                 transfer=st.trials == 0)
        st.progress = p
        st.trials = p.trials
        st.batches += 1
        st.best.append(p.best_mean)
        spent = max(0, p.trials - before)
        self.used += spent
        if p.stopped_early or not st.tuner.has_next() or spent == 0:
            st.done = True
        d = Decision(self._logged_batches + len(self.decisions) + 1,
                     st.task.name or st.task.template, reason, gain, p.best_mean,
                     _estimate(self.states), self.used)
        self.decisions.append(d)
        self.db.add_decision(ScheduleDecision(
            self.run_key, d.batch, st.task.workload_key, reason, d.best_s,
            d.model_estimate_s, d.trials_used, self.model, d.task, gain))
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
            mine = by_task.get(st.task.workload_key, [])
            if mine:
                st.best = [d.best_s if math.isfinite(d.best_s) else math.inf for d in mine]
                st.batches = len(mine)
                if math.isfinite(p.best_mean) and p.best_mean < st.best[-1]:
                    st.best.append(p.best_mean)  # records added outside this run since
            elif p.trials:  # records of another run or of plain `tune`: one step
                st.best.append(p.best_mean)
                st.batches = max(1, p.trials // self.batch_size)
        self.used = sum(st.trials for st in self.states)
        self._logged_batches = max((d.batch for d in logged), default=0)

    def run(self) -> ScheduleResult:
        """Measure until the budget is spent or every task is done."""
        self._resume()
        for st in self.states:  # every task first gets one batch (unless it has records)
            if self.used >= self.budget:
                break
            if st.trials == 0 and not st.done:
                self._step(st, "first batch", math.inf)
        while self.used < self.budget:
            live = [s for s in self.states if not s.done]
            if not live:
                break
            st = max(live, key=lambda s: (s.gain(), -s.trials))
            gain = st.gain()
            reason = (f"largest estimated gain: x{st.occurrences} occurrences, best "
                      f"{st.best_time * 1e3:.4g} ms after {st.trials} trials")
            self._step(st, reason, gain)
        return ScheduleResult(self.decisions, self.states)


__all__ = ["ALPHA", "Decision", "ScheduleResult", "TaskScheduler", "TaskState", "WINDOW",
           "run_key"]
