"""autotune.confirm: a record becomes what a build applies only after it beat the default
again, beside it, beyond the noise; a lucky first measurement (an outlier) does not."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from autotune import FakeRunner, MeasureInput, RandomTuner, Task, tune
from autotune.confirm import QUARTETS, candidates, confirm_best, judge
from autotune.measure import LOOK, ratio_noise, run_quartets, settled
from autotune.task_scheduler import TaskScheduler
from relay_ir.backend.tuned import find_tuned
from tessel_errors import TesselError
from tuning_logs import CONFIRM_TUNER, MeasureRecord, TuningDatabase, canonical_json

MS = 1e-3
MM = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])


class OutlierTimes:
    """True times per config (the default 1 ms, every other config slower unless named in
    `winners`), each call 2% noise; a config's first call is a lucky outlier (x0.6) with
    probability `lucky`, and the default's first call with `default_first` (x1.3: the
    default's own record an outlier)."""

    def __init__(self, seed: int, lucky: float = 0.25, winners: dict[int, float] | None = None,
                 default_first: float = 1.0) -> None:
        self.rng = np.random.default_rng(seed)
        self.lucky, self.winners, self.default_first = lucky, winners or {}, default_first
        self.true: dict[int, float] = {}
        self.order: list[int] = []

    def __call__(self, task: Task, cfg) -> float:
        d = task.default_config().index
        first = cfg.index not in self.true
        if first:
            self.order.append(cfg.index)
            n = len(self.order)
            self.true[cfg.index] = MS if cfg.index == d else \
                self.winners.get(n, float(self.rng.uniform(1.05, 1.6)) * MS)
        t = self.true[cfg.index] * float(self.rng.normal(1.0, 0.02))
        if first and cfg.index == d:
            return t * self.default_first
        if first and self.rng.random() < self.lucky:
            return t * 0.6
        return t

    def applied_true(self, db: TuningDatabase, task: Task = MM) -> float:
        rec = db.best_record(task.workload_key, task.target, task.device_key)
        return self.true[task.config_from_json(rec.config_json).index]


def test_without_confirmation_a_lucky_loser_is_applied(tmp_path: Path) -> None:
    # the defect: every config is truly slower than the default, a lucky one is applied
    times = OutlierTimes(seed=0)
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(MM, RandomTuner(MM, seed=0), 32, db, FakeRunner(times), confirm=0)
        assert times.applied_true(db) > 1.04 * MS


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_confirmation_the_applied_record_never_loses_to_the_default(
        tmp_path: Path, seed: int) -> None:
    times = OutlierTimes(seed=seed)
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(MM, RandomTuner(MM, seed=seed), 32, db, FakeRunner(times), confirm=2)
        assert times.applied_true(db) == MS
        assert p.verdicts and not any(v.accepted for v in p.verdicts)
        rec = db.best_record(MM.workload_key, MM.target, MM.device_key)
        assert rec.tuner == CONFIRM_TUNER
        assert p.applied_mean == rec.mean
        assert p.applied_config == canonical_json(MM.default_config().to_json())
        # a build reads the same record
        got = find_tuned(db, MM.template, MM.args, MM.attrs, MM.target)
        assert got is not None and got.config.index == MM.default_config().index


def test_an_outlier_default_record_does_not_let_a_slower_config_win(tmp_path: Path) -> None:
    times = OutlierTimes(seed=4, lucky=0.0, default_first=1.3)
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(MM, RandomTuner(MM, seed=4), 16, db, FakeRunner(times), confirm=0)
        assert times.applied_true(db) > MS  # old: anything under 1.3 ms beat the default
    times = OutlierTimes(seed=4, lucky=0.0, default_first=1.3)
    with TuningDatabase(tmp_path / "u.db") as db:
        tune(MM, RandomTuner(MM, seed=4), 16, db, FakeRunner(times), confirm=3)
        assert times.applied_true(db) == MS


def test_a_real_winner_is_confirmed_and_applied(tmp_path: Path) -> None:
    times = OutlierTimes(seed=5, winners={4: 0.8 * MS})
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(MM, RandomTuner(MM, seed=5), 24, db, FakeRunner(times), confirm=2)
        verdicts = list(p.verdicts)
        # lucky losers ranked above it are rejected two by two until it comes up
        while more := confirm_best(MM, db, FakeRunner(times), k=2):
            verdicts += more
        assert times.applied_true(db) == pytest.approx(0.8 * MS)
        accepted = [v for v in verdicts if v.accepted]
        assert len(accepted) == 1 and accepted[0].ratio == pytest.approx(0.8, abs=0.03)
        assert len(verdicts) >= 3  # it was not the first: lucky ones were ahead of it


def test_candidates_skip_what_is_confirmed_and_what_is_not_faster(tmp_path: Path) -> None:
    d = canonical_json(MM.default_config().to_json())
    mk = lambda i, s, tuner="xgb": MeasureRecord(  # noqa: E731
        MM.workload_key, MM.template, MM.target, MM.device_key, MM.config(i).to_json(),
        (s,), tuner=tuner)
    with TuningDatabase(tmp_path / "t.db") as db:
        db.add(MeasureRecord(MM.workload_key, MM.template, MM.target, MM.device_key, d,
                             (1.0,)))
        db.add_many([mk(1, 0.5), mk(2, 0.7), mk(3, 0.9), mk(4, 1.2)])
        assert [MM.config_from_json(r.config_json).index
                for r in candidates(MM, db, d, 5)] == [1, 2, 3]
        db.add(MeasureRecord(MM.workload_key, MM.template, MM.target, MM.device_key, d,
                             (1.0,), tuner=CONFIRM_TUNER))
        db.add(mk(1, 1.0, CONFIRM_TUNER))  # 1 rejected; 2 and 3 left, faster than 1.0
        assert [MM.config_from_json(r.config_json).index
                for r in candidates(MM, db, d, 5)] == [2, 3]
        db.add(mk(2, 0.8, CONFIRM_TUNER))  # 2 accepted at 0.8: 3 (0.9) cannot beat it
        assert candidates(MM, db, d, 5) == []
        assert MM.config_from_json(db.best_record(
            MM.workload_key, MM.target, MM.device_key).config_json).index == 2


def test_a_runner_without_compare_confirms_nothing(tmp_path: Path) -> None:
    class NoCompare:
        def __init__(self) -> None:
            self.inner = FakeRunner(OutlierTimes(seed=0))

        def run(self, inputs):
            return self.inner.run(inputs)

    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(MM, RandomTuner(MM, seed=0), 16, db, NoCompare(), confirm=2)
        assert p.verdicts == [] and db.count() == 16
        assert p.applied_mean == p.best_mean


def test_a_candidate_that_fails_when_compared_is_rejected(tmp_path: Path) -> None:
    times = OutlierTimes(seed=0)

    class Failing(FakeRunner):
        def compare(self, task, config, quartets=30, decide_below=None):
            raise TesselError("compare: it crashed this time")

    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(MM, RandomTuner(MM, seed=0), 16, db, Failing(times), confirm=1)
        assert len(p.verdicts) == 1 and not p.verdicts[0].accepted
        assert math.isinf(p.verdicts[0].ratio)
        assert times.applied_true(db) == MS  # the default, from its own tuning time


def test_the_scheduler_confirms_and_a_model_build_applies_only_confirmed(
        tmp_path: Path) -> None:
    small = Task("matmul.x86", [((32, 32), "float32"), ((32, 32), "float32")])
    times = OutlierTimes(seed=7)
    with TuningDatabase(tmp_path / "t.db") as db:
        result = TaskScheduler([(MM, 2), (small, 1)],
                               [RandomTuner(MM, seed=0), RandomTuner(small, seed=0)], db,
                               FakeRunner(times), budget=48, batch_size=8).run()
        for task in (MM, small):
            assert times.applied_true(db, task) == MS
        # the scheduler's estimate is of the applied records, not of lucky times
        assert result.model_estimate_s == pytest.approx(
            sum(n * db.best_record(t.workload_key, t.target, t.device_key).mean
                for t, n in ((MM, 2), (small, 1))))


def test_judge_needs_a_win_beyond_the_noise() -> None:
    spread = judge([0.90, 1.06] * 15, [1.0] * 30)  # median 0.98, quartets 16% apart
    assert spread.ratio == pytest.approx(0.98) and spread.noise > 0.02
    assert not spread.accepted
    steady = judge([0.975, 0.985] * 15, [1.0] * 30)
    assert steady.ratio == pytest.approx(0.98) and steady.accepted
    assert not judge([0.997] * 30, [1.0] * 30).accepted  # under MIN_GAIN
    with pytest.raises(TesselError, match="as many candidate as default"):
        judge([1.0], [1.0, 2.0])


@pytest.mark.parametrize("true", [0.8, 1.3])
def test_a_clear_verdict_ends_the_comparison_at_the_first_look(tmp_path: Path,
                                                                true: float) -> None:
    times = OutlierTimes(seed=5, lucky=0.0)
    cfg = MM.config(3)
    times.true[MM.default_config().index], times.true[cfg.index] = MS, true * MS
    times.order += [MM.default_config().index, cfg.index]
    with TuningDatabase(tmp_path / "t.db") as db:
        db.add(MeasureRecord(MM.workload_key, MM.template, MM.target, MM.device_key,
                             cfg.to_json(), (0.5 * MS,)))
        [v] = confirm_best(MM, db, FakeRunner(times), k=1)
    assert v.quartets == LOOK  # not QUARTETS: 2% noise decides a 20% or 30% gap by then
    assert v.accepted == (true < 1)


def test_a_close_call_is_timed_for_every_quartet(tmp_path: Path) -> None:
    times = OutlierTimes(seed=5, lucky=0.0)
    cfg = MM.config(3)
    times.true[MM.default_config().index], times.true[cfg.index] = MS, 0.99 * MS
    times.order += [MM.default_config().index, cfg.index]
    with TuningDatabase(tmp_path / "t.db") as db:
        db.add(MeasureRecord(MM.workload_key, MM.template, MM.target, MM.device_key,
                             cfg.to_json(), (0.5 * MS,)))
        [v] = confirm_best(MM, db, FakeRunner(times), k=1)
    assert v.quartets == QUARTETS


def test_settled_needs_a_look_and_twice_the_final_margin() -> None:
    fast = [0.8, 0.81, 0.79, 0.8, 0.82] * 2
    assert not settled(fast[:LOOK - 1], [1.0] * (LOOK - 1), 0.995)  # before the first look
    assert settled(fast, [1.0] * LOOK, 0.995)
    assert settled([1.6 * x for x in fast], [1.0] * LOOK, 0.995)
    # a win by judge's margin at the end, not by twice it: not settled early
    near = [0.95, 0.99, 0.97, 0.955, 0.985] * 2
    r, noise = ratio_noise(near, [1.0] * LOOK)
    assert r + noise < 0.995 < r + 2 * noise
    assert judge(near, [1.0] * LOOK).accepted and not settled(near, [1.0] * LOOK, 0.995)


def test_quartets_stop_at_a_look_once_clear_and_never_before_the_count_otherwise() -> None:
    def run(ratios: list[float], n: int, below: float | None) -> int:
        costs: list[float] = []
        control: list[float] = []

        def step(k: int) -> None:
            for _ in range(k):
                costs.append(ratios[len(costs) % len(ratios)])
                control.append(1.0)

        run_quartets(step, costs, control, n, below)
        return len(costs)

    clear, close = [0.80, 0.81, 0.79, 0.82], [0.99, 1.0, 0.98, 1.01]
    bursty = [0.6, 1.0, 1.4, 1.0]  # spread over 10%: more quartets, up to 4x
    assert run(clear, 30, 0.995) == LOOK
    assert run(clear, 30, None) == 30
    assert run(close, 30, 0.995) == 30
    assert run(bursty, 30, None) == 120
    assert run(bursty, 30, 0.995) == 120


def test_the_local_runner_compares_to_a_threshold_in_looks() -> None:
    from autotune import LocalRunner

    task = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    # one element per step, nothing packed or unrolled: many times the default's time
    slow = task.config(8428)
    assert '"tile_x": [-1, 1, 1]' in slow.to_json()
    with LocalRunner(timeout=20, min_repeat_ms=1.0) as runner:
        costs, control = runner.compare(task, slow, quartets=30, decide_below=0.995)
    assert len(costs) == len(control) and len(costs) % LOOK == 0
    assert not judge(costs, control).accepted


def test_the_local_runner_compares_a_candidate_with_the_default_in_quartets() -> None:
    from autotune import LocalRunner

    task = Task("matmul.x86", [((32, 32), "float32"), ((32, 32), "float32")])
    cfg = task.config(3)
    with LocalRunner(timeout=20, min_repeat_ms=1.0) as runner:
        costs, control = runner.compare(task, cfg, quartets=6)
    assert len(costs) == len(control) >= 6
    assert all(c > 0 for c in costs + control)
    v = judge(costs, control)  # no assertion on what it says: that is a timing
    assert v.quartets == len(costs) and math.isfinite(v.ratio)


def test_an_accelerator_task_is_not_confirmed(tmp_path: Path) -> None:
    from autotune.op_spec import parse_op_spec

    acc = parse_op_spec("conv2d:1,32,8,8,32,3,3,1,1@int8", "accel")
    runner = FakeRunner(lambda t, c: 1e-3 if c.index == acc.default_config().index
                        else 0.5e-3)  # every candidate "wins": a CPU task would compare
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(acc, RandomTuner(acc, seed=0), 8, db, runner, confirm=2)
    assert p.verdicts == [] and len(runner.seen) == 8  # cycle counts: nothing to confirm


def test_the_local_runner_calibrates_the_units_of_several_tasks_together() -> None:
    from autotune import LocalRunner

    a = Task("matmul.x86", [((32, 32), "float32"), ((32, 32), "float32")])
    b = Task("matmul.x86", [((48, 48), "float32"), ((48, 48), "float32")])
    with LocalRunner(timeout=20, min_repeat_ms=1.0, control=True) as runner:
        assert runner.unit(a) is None
        got = runner.calibrate([a, b], rounds=3)
        assert set(got) == {f"{t.workload_key}@{t.target}" for t in (a, b)}
        assert runner.unit(a) == got[f"{a.workload_key}@{a.target}"] > 0
        # a candidate's record is in that unit: its control ratio x the calibrated time
        [r] = runner.run([MeasureInput(a, a.config(1))])
        assert r.ok and f"in units of its {runner.unit(a) * 1e3:.4g} ms" in r.error_msg


def test_the_scheduler_calibrates_first_and_confirm_records_share_the_runners_unit(
        tmp_path: Path) -> None:
    times = OutlierTimes(seed=0, winners={3: 0.7 * MS})

    class Calibrated(FakeRunner):
        calibrated: list = []

        def calibrate(self, tasks, peaks=True):
            self.calibrated.append([t.workload_key for t in tasks])

        def unit(self, task):
            return 2 * MS  # what the runner's records of the task are in

    runner = Calibrated(times)
    with TuningDatabase(tmp_path / "t.db") as db:
        TaskScheduler([(MM, 1)], [RandomTuner(MM, seed=0)], db, runner, budget=16).run()
        d = canonical_json(MM.default_config().to_json())
        conf = [r for r in db.history(MM.workload_key) if r.tuner == CONFIRM_TUNER]
    assert runner.calibrated == [[MM.workload_key]]
    assert [r.mean for r in conf if r.config_json == d] == [2 * MS]
