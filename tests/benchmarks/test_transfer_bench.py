"""benchmarks/transfer.py runs end to end at a tiny size and prints cold against warm."""

from __future__ import annotations

import pytest

import tests.autotune.synthetic  # noqa: F401  (registers synthetic.test)
from autotune import FakeRunner, Task, make_tuner, tune
from benchmarks.transfer import curve, main, trials_to_close, trials_to_reach
from tuning_logs import ErrorKind, TuningDatabase

TASK = Task("synthetic.test", [((16, 8), "float32")])


def test_trials_to_reach_counts_to_within_five_percent() -> None:
    assert trials_to_reach([3.0, 2.0, 1.04, 1.0], 1.0) == 3
    assert trials_to_reach([3.0, 2.0], 1.0) is None


def test_trials_to_close_counts_to_95_percent_of_the_improvement() -> None:
    assert trials_to_close([10.0, 8.0, 6.1, 6.0], 10.0, 6.0) == 3
    assert trials_to_close([10.0, 9.0], 10.0, 6.0) is None


def test_a_curve_counts_a_retried_timeout_as_one_trial(tmp_path) -> None:
    calls = {1: 0}

    def seconds(t, c):  # config 1 times out once, then runs fastest of all when retried
        if c.index == 1:
            calls[1] += 1
            return ErrorKind.TIMEOUT if calls[1] == 1 else 0.5
        return {0: 4.0, 2: 2.0, 3: 3.0, 4: 1.0}[c.index]

    with TuningDatabase(tmp_path / "t.db") as db:
        tune(TASK, make_tuner("grid", TASK), 5, db, FakeRunner(seconds))
        assert calls[1] == 2
        assert curve(db, TASK, 5) == [1.0, 1.0, 0.5, 0.5, 0.125]
        assert curve(db, TASK, 3) == [1.0, 1.0, 0.5]
        assert curve(db, TASK, 7) == [1.0, 1.0, 0.5, 0.5, 0.125, 0.125, 0.125]


@pytest.mark.slow
def test_the_benchmark_tunes_cold_and_warm_and_prints_the_trials_each_needs(capsys) -> None:
    assert main(["--tasks", "1", "--trials", "3", "--source-trials", "2", "--seeds", "1",
                 "--source", "small"]) == 0
    out = capsys.readouterr().out
    assert "seed 0 cold: estimate" in out and "seed 0 warm: estimate" in out
    assert "medians over 1 seed(s), trials per task:" in out
    assert "(a) within 5% of cold's final latency: cold" in out
    assert "(b) 95% of cold's final improvement" in out and "cold / warm" in out
