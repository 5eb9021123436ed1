"""benchmarks.tuning's bookkeeping: curves from a tuner's database, verified curves."""

from __future__ import annotations

from pathlib import Path

import tests.autotune.synthetic  # noqa: F401  (registers synthetic.test)
from autotune import FakeRunner, Task, make_tuner, tune
from benchmarks.tuning import history, trials_to, verified
from tuning_logs import ErrorKind, TuningDatabase

TASK = Task("synthetic.test", [((16, 8), "float32")])
SECONDS = {0: 4.0, 1: ErrorKind.TIMEOUT, 2: 2.0, 3: 3.0, 4: 1.0}


def test_history_gives_the_best_so_far_and_the_configs_that_raised_it(tmp_path: Path) -> None:
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(TASK, make_tuner("grid", TASK), 5, db, FakeRunner(lambda t, c: SECONDS[c.index]))
    curve, steps = history(TASK, tmp_path / "t.db")
    g = [TASK.flop / s / 1e9 for s in (4.0, 2.0, 1.0)]
    assert curve == [g[0], g[0], g[1], g[1], g[2]]
    assert steps == [(1, 0), (3, 2), (5, 4)]


def test_a_timed_out_config_that_runs_when_retried_adds_no_trial_but_raises_the_best(
        tmp_path: Path) -> None:
    calls = {1: 0}

    def seconds(t, c):  # config 1 times out once, then runs fastest of all
        if c.index == 1:
            calls[1] += 1
            return ErrorKind.TIMEOUT if calls[1] == 1 else 0.5
        return SECONDS[c.index]

    with TuningDatabase(tmp_path / "t.db") as db:
        tune(TASK, make_tuner("grid", TASK), 5, db, FakeRunner(seconds))
    curve, steps = history(TASK, tmp_path / "t.db")
    g = [TASK.flop / s / 1e9 for s in (4.0, 2.0, 1.0, 0.5)]
    assert calls[1] == 2
    assert curve == [g[0], g[0], g[1], g[1], g[3]]
    assert steps == [(1, 0), (3, 2), (5, 4), (5, 1)]


def test_a_verified_curve_uses_the_re_measured_values_of_the_improvements() -> None:
    steps = [(1, 10), (3, 20), (5, 30)]
    # config 30 looked best while tuning but re-measures slower than 20
    curve = verified(steps, {10: 1.0, 20: 5.0, 30: 4.0}, 6)
    assert curve == [1.0, 1.0, 5.0, 5.0, 5.0, 5.0]
    assert trials_to(curve, 0.95 * 5.0) == 3 and trials_to(curve, 6.0) is None
