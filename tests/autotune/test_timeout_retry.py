"""A candidate that timed out (a busy machine, not a bad config) is measured once more
with a longer timeout at the end of the tune call; the database keeps both records, a
resume replays the retry's result, and other errors are never retried."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune import FakeRunner, RandomTuner, Task, XGBTuner, tune
from autotune.task_scheduler import TaskScheduler
from autotune.tuning import RETRY_TIMEOUT_FACTOR, timed_out_once
from schedule.space import ConfigEntity
from tuning_logs import ErrorKind, TuningDatabase

TASK = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")], name="mm")


class SlowRunner(FakeRunner):
    """Times a candidate out when measuring it takes over `timeout` seconds: configs
    index % 4 == 0 need 15 s (over the 10 s default, within 3 x), == 1 need 100 s (over
    both); == 2 fail to build; the rest need 1 s. Seconds per call: the fastest are the
    slow-to-measure ones (as the close variant of 512@7's best that timed out at load 7)."""

    def __init__(self, timeout: float = 10.0) -> None:
        super().__init__(self._cost)
        self.timeout = timeout
        self.timeouts: list[float] = []  # the timeout of each candidate measured

    def _cost(self, task: Task, cfg: ConfigEntity) -> float | ErrorKind:
        self.timeouts.append(self.timeout)
        need = {0: 15.0, 1: 100.0}.get(cfg.index % 4, 1.0)
        if cfg.index % 4 == 2:
            return ErrorKind.BUILD_ERROR
        if need > self.timeout:
            return ErrorKind.TIMEOUT
        return 1e-3 * (1.0 + cfg.index % 7) if cfg.index % 4 else 1e-4


def _kinds(db: TuningDatabase) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for r in db.history(TASK.workload_key, TASK.target, TASK.device_key):
        out.setdefault(TASK.config_from_json(r.config_json).index, []).append(
            r.error_kind.value)
    return out


def test_a_timeout_is_retried_once_with_a_longer_timeout_and_both_kept(
        tmp_path: Path) -> None:
    runner = SlowRunner()
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(TASK, RandomTuner(TASK, seed=0), 32, db, runner, default_first=False)
        kinds = _kinds(db)
    assert p.trials == 32 and len(kinds) == 32
    by_class = {i % 4: kinds[i] for i in kinds}  # every class occurs among 32 random picks
    assert by_class[0] == ["timeout", "none"]          # ran within 3 x the timeout
    assert by_class[1] == ["timeout", "timeout"]       # too slow even then: kept as such
    assert by_class[2] == ["build_error"]              # never retried
    assert by_class[3] == ["none"]
    retried = sum(1 for i in kinds if i % 4 in (0, 1))
    assert p.retried == retried
    assert runner.timeouts == [10.0] * 32 + [10.0 * RETRY_TIMEOUT_FACTOR] * retried
    assert runner.timeout == 10.0  # restored


def test_the_retried_config_can_be_the_best(tmp_path: Path) -> None:
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(TASK, RandomTuner(TASK, seed=0), 32, db, SlowRunner(), default_first=False)
        best = db.best_record(TASK.workload_key, TASK.target, TASK.device_key)
    assert best is not None and best.mean == pytest.approx(1e-4)
    assert TASK.config_from_json(best.config_json).index % 4 == 0
    assert p.best_mean == pytest.approx(1e-4) and p.best_trial <= p.trials


def test_a_resume_replays_the_retry_and_retries_nothing_again(tmp_path: Path) -> None:
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(TASK, RandomTuner(TASK, seed=0), 32, db, SlowRunner(), default_first=False)
        old = _kinds(db)
        again = SlowRunner()
        p = tune(TASK, RandomTuner(TASK, seed=0), 32, db, again, default_first=False)
        assert again.seen == []  # a resume at its total measures nothing
        assert p.trials == 32 and p.best_mean == pytest.approx(1e-4)
        assert p.errors == sum(1 for k in old.values() if k[-1] != "none")
        more = SlowRunner()
        p = tune(TASK, RandomTuner(TASK, seed=0), 40, db, more, default_first=False)
        measured = [i.config.index for i in more.seen]
        assert p.trials == 40 and not set(measured) & set(old)  # twice timed out: left
        assert all(len(k) == 2 for i, k in _kinds(db).items() if i % 4 in (0, 1))


def test_a_call_that_measures_nothing_retries_nothing(tmp_path: Path) -> None:
    with TuningDatabase(tmp_path / "t.db") as db:
        _timeout_records(db, [0, 4, 8])
        idle = SlowRunner()
        tune(TASK, RandomTuner(TASK, seed=0), 0, db, idle, default_first=False)
        assert idle.seen == [] and timed_out_once(TASK, db) != []


def _timeout_records(db: TuningDatabase, indices: list[int]) -> None:
    from autotune.measure import MeasureInput, MeasureResult
    from autotune.tuning import _record

    db.add_many(_record(TASK, MeasureInput(TASK, TASK.config(i)),
                        MeasureResult((), ErrorKind.TIMEOUT, "no answer within 10 s"),
                        "random") for i in indices)


def test_timeouts_of_an_earlier_run_are_retried_by_the_next(tmp_path: Path) -> None:
    with TuningDatabase(tmp_path / "t.db") as db:
        _timeout_records(db, [0, 4, 8])  # an earlier run stopped before its retries
        assert len(timed_out_once(TASK, db)) == 3
        runner = SlowRunner()
        p = tune(TASK, RandomTuner(TASK, seed=0), 8, db, runner, default_first=False)
        kinds = _kinds(db)
        assert [kinds[i] for i in (0, 4, 8)] == [["timeout", "none"]] * 3
        assert p.retried >= 3 and p.best_mean == pytest.approx(1e-4)


def test_the_xgb_tuner_takes_the_retry_as_the_configs_one_label(tmp_path: Path) -> None:
    tuner = XGBTuner(TASK, seed=0)
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(TASK, tuner, 24, db, SlowRunner(), default_first=False)
    assert len(tuner.xs) == len(set(tuner.xs)) == 24
    labels = dict(zip(tuner.xs, tuner.ys))
    assert all(labels[i] > 0 for i in labels if i % 4 == 0)  # ran at the retry
    assert all(labels[i] == 0 for i in labels if i % 4 == 1)


def test_the_scheduler_retries_after_the_batch_that_timed_out(tmp_path: Path) -> None:
    with TuningDatabase(tmp_path / "t.db") as db:
        result = TaskScheduler([(TASK, 1)], [RandomTuner(TASK, seed=0)], db, SlowRunner(),
                               16, batch_size=4, confirm=0).run()
        assert timed_out_once(TASK, db) == []
        assert result.tasks[0].trials == 16  # retries do not spend the budget
        assert result.tasks[0].best_time == pytest.approx(1e-4)
