"""Tuners against a FakeRunner and a temporary database, on deterministic synthetic costs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tests.autotune.synthetic  # noqa: F401  (registers synthetic.test)
from autotune import FakeRunner, Task, make_tuner, tune
from autotune.features import LOOP_FEATURE_LEN
from tessel_errors import TesselError
from tuning_logs import TuningDatabase

SMALL = Task("synthetic.test", [((64, 36), "float32")])
BIG = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])


def _bowl(task: Task, centre: float = 0.3):
    """Seconds = 0.1 + squared distance of each knob's relative choice from `centre`."""
    dims = task.space.dims()

    def sq(k: int, n: int) -> float:
        return ((k / (n - 1 or 1)) - centre) ** 2

    def cost(t: Task, cfg) -> float:
        return 0.1 + sum(sq(k, n) for k, n in zip(t.space.knob_indices(cfg.index), dims))

    best = 0.1 + sum(min(sq(k, n) for k in range(n)) for n in dims)
    return cost, best


@pytest.mark.parametrize("name", ["random", "grid", "ga", "xgb", "xgb_loop"])
def test_tuner_finds_the_optimum_of_a_small_space(name: str, tmp_path: Path) -> None:
    cost, best = _bowl(SMALL)
    budget = SMALL.space.size if name in ("random", "grid") else 200
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(SMALL, make_tuner(name, SMALL, seed=0), budget, db, FakeRunner(cost))
        assert p.best_mean == pytest.approx(best)
        assert db.best_record(SMALL.workload_key, "llvm").mean == pytest.approx(best)


def test_xgb_reaches_95_percent_in_half_the_trials_of_random(
        tmp_path: Path) -> None:
    cost, best = _bowl(BIG)

    def trials_to_95(name: str, seed: int) -> int:
        hist: list[tuple[int, float]] = []
        with TuningDatabase(tmp_path / f"{name}{seed}.db") as db:
            tune(BIG, make_tuner(name, BIG, seed=seed), 160, db, FakeRunner(cost),
                 callbacks=[lambda p, i, r: hist.append((p.trials, p.best_mean))])
        return next((n for n, m in hist if best / m >= 0.95), 1000)

    xgb = [trials_to_95("xgb", s) for s in range(3)]
    rnd = [trials_to_95("random", s) for s in range(3)]
    assert np.mean(xgb) * 2 <= np.mean(rnd), (xgb, rnd)


def test_tuners_never_propose_a_config_twice() -> None:
    for name in ["random", "ga", "xgb", "xgb_loop"]:
        tuner = make_tuner(name, SMALL, seed=1)
        runner = FakeRunner(_bowl(SMALL)[0])
        seen: list[int] = []
        while tuner.has_next() and len(seen) < 300:
            batch = tuner.next_batch(16)
            seen += [c.index for c in batch]
            from autotune import MeasureInput
            ins = [MeasureInput(SMALL, c) for c in batch]
            tuner.update(ins, runner.run(ins))
        assert len(seen) == len(set(seen)), name


def test_early_stopping_stops_after_n_trials_without_improvement(tmp_path: Path) -> None:
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(SMALL, make_tuner("grid", SMALL), 300, db, FakeRunner(lambda t, c: 1.0),
                 early_stopping=16, batch_size=8)
    # the first batch sets the best; nothing after it is better
    assert p.stopped_early and p.trials == 8 + 16


def test_unknown_tuner_names_the_choices() -> None:
    with pytest.raises(TesselError, match="unknown tuner 'anneal'; choose one of ga, genetic"):
        make_tuner("anneal", SMALL)


def test_xgb_transfer_uses_records_of_other_tasks_of_the_template(tmp_path: Path) -> None:
    other = Task("synthetic.test", [((64, 36), "float32")], {"variant": 1})
    cost, _ = _bowl(SMALL)
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(other, make_tuner("random", other, seed=0), 60, db, FakeRunner(cost))
        tuner = make_tuner("xgb", SMALL, seed=0)
        tune(SMALL, tuner, 8, db, FakeRunner(cost))
        assert tuner.model.trained  # trained before its own plan_size measurements existed


def test_xgb_transfer_learns_from_other_shapes_on_both_feature_kinds(
        tmp_path: Path) -> None:
    other = Task("synthetic.test", [((48, 20), "float32")])  # other split choices
    cost, _ = _bowl(other)
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(other, make_tuner("random", other, seed=0), 30, db, FakeRunner(cost))
        records = db.records(template="synthetic.test", exclude_workload=SMALL.workload_key)
    loop_rows = make_tuner("xgb_loop", SMALL, seed=0).load_transfer(records)
    knob_rows = make_tuner("xgb", SMALL, seed=0).load_transfer(records)
    assert loop_rows == 30 and knob_rows == 30  # knob features are shape-relative


def test_knob_features_say_how_much_of_the_extent_a_tile_covers() -> None:
    from autotune.features import knob_features_batch, knob_layout

    small, big = Task("synthetic.test", [((64, 36), "float32")]), \
        Task("synthetic.test", [((128, 72), "float32")])
    assert knob_layout(small.space) == knob_layout(big.space)

    def row(task: Task, ti: int, tj: int) -> np.ndarray:
        cfg = task.config_from_json({"knobs": {"tile_i": [-1, ti], "tile_j": [-1, tj],
                                               "unroll": 0, "mode": "ok"}})
        return knob_features_batch(task.space, [cfg.index])[0]

    a, b = row(small, 8, 6), row(big, 8, 6)
    # the same inner factors, twice the outer count: one more in log2(1 + count) terms
    assert a[0] == b[0] and a[2] == b[2]
    assert np.log2(1 + 64 // 8) == pytest.approx(a[1]) and \
        np.log2(1 + 128 // 8) == pytest.approx(b[1])
    # a tile that covers the whole extent has an outer count of 1 in every shape
    assert row(small, 64, 36)[[1, 3]].tolist() == row(big, 128, 72)[[1, 3]].tolist() == [1, 1]


def test_transfer_skips_records_of_a_task_whose_knobs_differ(tmp_path: Path) -> None:
    slow = Task("slowpoke.test", [((64, 36), "float32")])  # knob "work" only
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(slow, make_tuner("random", slow, seed=0), 2, db, FakeRunner(lambda t, c: 1.0))
        tune(SMALL, make_tuner("random", SMALL, seed=0), 6, db, FakeRunner(_cost6))
        records = db.records()
    assert make_tuner("xgb", SMALL, seed=0).load_transfer(records) == 6


def _cost6(task: Task, cfg) -> float:
    return 1.0 + cfg.index % 6


def test_xgb_on_loop_ir_features_trains_and_proposes_new_points(tmp_path: Path) -> None:
    cost, best = _bowl(SMALL)
    tuner = make_tuner("xgb_loop", SMALL, seed=0, plan_size=8)
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(SMALL, tuner, 40, db, FakeRunner(cost))
        configs = [r.config_json for r in db.history(SMALL.workload_key)]
    assert tuner.feature == "loop_ir" and tuner.model.trained
    assert p.trials == 40 and len(set(configs)) == 40
    assert next(iter(tuner._loop_cache.values())).shape == (LOOP_FEATURE_LEN,)


def test_xgb_rejects_an_unknown_feature_kind() -> None:
    from autotune.tuners.xgb import XGBTuner
    from tessel_errors import TesselError

    with pytest.raises(TesselError, match="feature must be 'knob' or 'loop_ir', got 'loopir'"):
        XGBTuner(SMALL, feature="loopir")


def test_transfer_rows_are_ranked_within_their_own_task() -> None:
    from autotune.cost_model import XGBCostModel

    # in both tasks a higher feature is faster; task b is faster in absolute terms at lower
    # features: one query group would teach that lower is better
    f = np.arange(10, dtype=np.float32)
    x = np.concatenate([f + 10, f])[:, None]
    y = np.concatenate([1 + f, 100 * (1 + f)])
    probe = np.arange(20, dtype=np.float32)[:, None]
    grouped, pooled = XGBCostModel(seed=0), XGBCostModel(seed=0)
    grouped.fit_transfer(x, y, ["a"] * 10 + ["b"] * 10)
    pooled.fit_transfer(x, y)
    g, p = grouped.predict(probe), pooled.predict(probe)
    for part in (slice(0, 10), slice(10, 20)):  # within each task's range: higher, faster
        assert np.all(np.diff(g[part]) > 0)
    # pooled, task b's large throughputs make every low feature look better than every
    # high one; grouped, the two ranges are not ranked against each other
    assert p[:10].mean() - p[10:].mean() > 2 and abs(g[:10].mean() - g[10:].mean()) < 1


def test_knob_rows_carry_the_task_shape_so_transfer_tells_shapes_apart() -> None:
    from autotune.features import task_context

    big = Task("synthetic.test", [((128, 72), "float32")])
    tuner = make_tuner("xgb", SMALL, seed=0)
    row = tuner._features([0])[0]
    np.testing.assert_array_equal(row[-2:], task_context(SMALL.args))
    assert not np.array_equal(task_context(big.args), task_context(SMALL.args))
