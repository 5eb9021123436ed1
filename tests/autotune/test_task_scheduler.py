"""The task scheduler spends a model's budget where the model's latency falls most, every
task gets a first batch, it stops at the budget, and a rerun resumes from the database."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune import FakeRunner, RandomTuner, Task
from autotune.task_scheduler import TaskScheduler
from tessel_errors import DeviceError, TesselError
from tuning_logs import TuningDatabase


def _task(n: int) -> Task:
    return Task("matmul.x86", [((n, n), "float32"), ((n, n), "float32")], name=f"mm{n}")


def _cost(task: Task, cfg) -> float:
    # mm64 is slow and improves with the config index; mm16 is fast and flat
    if task.name == "mm64":
        return 1e-2 / (1 + cfg.index % 50)
    return 1e-5


def _scheduler(db, tasks, budget: int, occurrences=(1, 1)) -> TaskScheduler:
    pairs = [(t, n) for t, n in zip(tasks, occurrences)]
    tuners = [RandomTuner(t, seed=0) for t in tasks]
    return TaskScheduler(pairs, tuners, db, FakeRunner(_cost), budget, batch_size=4)


def test_every_task_gets_a_first_batch(tmp_path: Path) -> None:
    tasks = [_task(64), _task(16), _task(32)]
    with TuningDatabase(tmp_path / "t.db") as db:
        result = _scheduler(db, tasks, 12, (1, 1, 1)).run()
    assert [d.task for d in result.decisions] == ["mm64", "mm16", "mm32"]
    assert all(d.reason == "first batch" for d in result.decisions)


def test_the_task_that_dominates_latency_gets_the_budget(tmp_path: Path) -> None:
    tasks = [_task(64), _task(16)]
    with TuningDatabase(tmp_path / "t.db") as db:
        result = _scheduler(db, tasks, 48).run()
    trials = {st.task.name: st.trials for st in result.tasks}
    assert trials["mm64"] >= 3 * trials["mm16"]
    assert sum(trials.values()) == 48


def test_occurrences_weigh_a_task_up(tmp_path: Path) -> None:
    a, b = _task(64), Task("matmul.x86", [((48, 48), "float32")] * 2, name="mm64")
    with TuningDatabase(tmp_path / "t.db") as db:
        result = _scheduler(db, [a, b], 40, (1, 10)).run()
    trials = [st.trials for st in result.tasks]
    assert trials[1] > trials[0]  # same cost curve, ten times the occurrences


def test_the_model_estimate_is_occurrences_times_best(tmp_path: Path) -> None:
    tasks = [_task(64), _task(16)]
    with TuningDatabase(tmp_path / "t.db") as db:
        result = _scheduler(db, tasks, 24, (2, 3)).run()
    best = {st.task.name: st.best_time for st in result.tasks}
    assert result.model_estimate_s == pytest.approx(2 * best["mm64"] + 3 * best["mm16"])
    assert result.decisions[-1].model_estimate_s == pytest.approx(result.model_estimate_s)


def test_a_rerun_resumes_and_ends_at_the_same_total(tmp_path: Path) -> None:
    tasks = [_task(64), _task(16)]
    with TuningDatabase(tmp_path / "t.db") as db:
        _scheduler(db, tasks, 16).run()
        again = _scheduler(db, tasks, 32).run()
        assert again.decisions[0].reason != "first batch"  # both tasks have records
        assert sum(st.trials for st in again.tasks) == 32
        assert db.count() == 32
        done = _scheduler(db, tasks, 32).run()
    assert done.decisions == []


def test_a_scheduler_needs_one_tuner_per_task(tmp_path: Path) -> None:
    with TuningDatabase(tmp_path / "t.db") as db, pytest.raises(TesselError, match="2 tasks"):
        TaskScheduler([(_task(8), 1), (_task(16), 1)], [RandomTuner(_task(8))], db,
                      FakeRunner(_cost), 8)


def test_scheduling_for_the_gpu_simulator_is_refused(tmp_path: Path) -> None:
    t = Task("dense.cuda", [((16, 16), "float32")] * 2, {}, "cuda -sim")
    with TuningDatabase(tmp_path / "t.db") as db, pytest.raises(DeviceError):
        TaskScheduler([(t, 1)], [RandomTuner(t)], db, FakeRunner(_cost), 8)


def test_every_decision_is_kept_in_the_database_under_the_runs_key(tmp_path: Path) -> None:
    tasks = [_task(64), _task(16)]
    with TuningDatabase(tmp_path / "t.db") as db:
        sched = _scheduler(db, tasks, 24)
        result = sched.run()
        stored = db.decisions(sched.run_key)
    assert [(d.batch, d.reason, d.trials_used) for d in stored] == \
        [(d.batch, d.reason, d.trials_used) for d in result.decisions]
    assert stored[-1].model_estimate_s == pytest.approx(result.model_estimate_s)


def test_a_resumed_run_takes_up_each_tasks_best_time_batch_by_batch(tmp_path: Path) -> None:
    tasks = [_task(64), _task(16)]
    with TuningDatabase(tmp_path / "t.db") as db:
        first = _scheduler(db, tasks, 20).run()
        history = {st.task.name: list(st.best) for st in first.tasks}
        again = _scheduler(db, tasks, 20)
        again._resume()
        assert {st.task.name: st.best for st in again.states} == history
        more = _scheduler(db, tasks, 28).run()
    assert more.decisions[0].batch == len(first.decisions) + 1


def test_a_database_from_before_the_decision_log_gets_it_at_the_first_decision(
        tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "t.db"
    TuningDatabase(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE schedule_decisions")
    with TuningDatabase(path) as db:
        assert db.decisions() == []
        result = _scheduler(db, [_task(64), _task(16)], 8).run()
        assert len(db.decisions()) == len(result.decisions) == 2
