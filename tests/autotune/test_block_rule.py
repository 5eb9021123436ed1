"""A task tuned for a model keeps the model's channel block (autotune.block_rule): no tuner
proposes a config that writes another, confirmation rejects one from an older database,
and an --op task (timed as itself) is unrestricted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import autotune.tuning
from autotune import FakeRunner, Task, make_tuner, tune
from autotune.block_rule import BlockRule, block_rule
from autotune.confirm import confirm_best
from autotune.measure import timed_as
from autotune.tuning import default_as_run
from tuning_logs import CONFIRM_TUNER, TuningDatabase

HSW = "llvm -mcpu=haswell"
CONV = Task("conv2d_NCHWc.x86", [((1, 32, 8, 8), "float32"), ((32, 32, 3, 3), "float32")],
            {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1]}, HSW)
# 144 points, 36 of them in the model's block: small enough to tune them all
STEM = Task("conv2d_stem.x86", [((1, 8, 4, 4), "float32"), ((8, 8, 1, 1), "float32")],
            {}, HSW)
MS = 1e-3


def _written_block(task: Task, cfg) -> int:
    """The channel block the timed kernel really writes: its instantiated output's."""
    return int(timed_as(task, True).instantiate(cfg)[1][-1].shape[-1].value)


def _other_blocks_faster(task: Task):
    """Seconds where every config of another block than the fallback's looks 2x faster
    (what made the worker rank them first on AVX2 ResNet-18), with some spread."""
    block = _written_block(task, None)

    def cost(t: Task, cfg) -> float:
        base = 0.5 if cfg["tile_oc"].size[-1] != block else 1.0
        return (base + 0.01 * (cfg.index % 17)) * MS

    return cost, block


@pytest.mark.parametrize("task", [CONV, STEM], ids=["conv2d_NCHWc", "stem"])
def test_the_rule_reads_the_block_the_kernel_writes(task: Task) -> None:
    rule = block_rule(task, FakeRunner(lambda t, c: MS, model_layout=True))
    assert rule is not None and rule.block == _written_block(task, None)
    rng = np.random.default_rng(1)
    for i in rng.choice(task.space.size, 40, replace=False):
        cfg = task.config(int(i))
        keeps = _written_block(task, cfg) == rule.block
        assert rule.allows(cfg.index) == keeps
        assert (rule.why(cfg) == "") == keeps
    # the sub-space, numbered by point(j), is exactly the allowed points, in index order
    if task is STEM:
        assert [rule.point(j) for j in range(rule.size)] == \
            [i for i in range(task.space.size) if rule.allows(i)]


def test_an_op_task_or_a_template_without_a_block_knob_has_no_rule() -> None:
    assert block_rule(CONV, FakeRunner(lambda t, c: MS)) is None
    mm = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")], target=HSW)
    assert block_rule(mm, FakeRunner(lambda t, c: MS, model_layout=True)) is None


@pytest.mark.parametrize("name", ["random", "grid", "ga", "xgb"])
def test_a_model_task_is_tuned_only_in_the_models_block(name: str, tmp_path: Path) -> None:
    cost, block = _other_blocks_faster(CONV)
    runner = FakeRunner(cost, model_layout=True)
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(CONV, make_tuner(name, CONV, seed=0), 48, db, runner)
    assert p.trials == 48
    seen = [inp.config for inp in runner.seen]
    assert len(seen) == 48 and len({c.index for c in seen}) == 48
    assert {c["tile_oc"].size[-1] for c in seen} == {block}


def test_an_op_task_is_tuned_over_every_block(tmp_path: Path) -> None:
    cost, block = _other_blocks_faster(CONV)
    runner = FakeRunner(cost)
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(CONV, make_tuner("xgb", CONV, seed=0), 48, db, runner)
    assert {c.config["tile_oc"].size[-1] for c in runner.seen} - {block}


@pytest.mark.parametrize("name", ["random", "grid", "ga", "xgb"])
def test_a_restricted_tuner_runs_out_with_its_sub_space(name: str, tmp_path: Path) -> None:
    runner = FakeRunner(lambda t, c: (1.0 + 0.01 * (c.index % 13)) * MS, model_layout=True)
    rule = block_rule(STEM, runner)
    assert rule is not None and 0 < rule.size < STEM.space.size
    tuner = make_tuner(name, STEM, seed=0)
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(STEM, tuner, STEM.space.size, db, runner, batch_size=16)
    seen = {inp.config.index for inp in runner.seen}
    assert p.trials == rule.size == len(seen) and not tuner.has_next()
    assert seen == {rule.point(j) for j in range(rule.size)}


def test_a_space_with_nothing_left_still_tunes_the_default(tmp_path: Path,
                                                           monkeypatch) -> None:
    runner = FakeRunner(lambda t, c: MS, model_layout=True)
    real = block_rule(CONV, runner)
    assert real is not None
    empty = BlockRule(real.template, real.knob, real.block, real.position, real.dims, ())
    monkeypatch.setattr(autotune.tuning, "block_rule", lambda task, runner: empty)
    tuner = make_tuner("xgb", CONV, seed=0)
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(CONV, tuner, 16, db, runner)
    assert not tuner.has_next() and tuner.next_batch(4) == []
    # the default as the model runs it (a 3x3 conv with more pixels than channels splits
    # rows first where it writes the blocked layout: ROWS_OUTER_WITH_TAPS)
    assert [inp.config.index for inp in runner.seen] == [default_as_run(CONV, runner).index]
    assert p.trials == 1 and p.default_mean == pytest.approx(MS)


def test_confirmation_rejects_a_layout_changing_record_of_an_old_database(
        tmp_path: Path, monkeypatch) -> None:
    cost, block = _other_blocks_faster(CONV)
    default = default_as_run(CONV, FakeRunner(cost, model_layout=True)).index

    def costs(t: Task, c) -> float:  # the default a little faster than its block's rest
        return 0.9 * MS if c.index == default else cost(t, c)

    with TuningDatabase(tmp_path / "t.db") as db:
        # an older database: tuned in the model's layouts (its default as the model runs
        # it measured first) before the tuners kept the block (nothing restricted)
        with monkeypatch.context() as m:
            m.setattr(autotune.tuning, "block_rule", lambda task, runner: None)
            tune(CONV, make_tuner("random", CONV, seed=0), 24, db,
                 FakeRunner(costs, model_layout=True))
        old = [r for r in db.history(CONV.workload_key, CONV.target, CONV.device_key)
               if r.ok and CONV.config_from_json(r.config_json)["tile_oc"].size[-1] != block]
        assert old and min(r.mean for r in old) < 0.9 * MS
        model = FakeRunner(costs, model_layout=True)
        verdicts = confirm_best(CONV, db, model, k=3)
        applied = CONV.config_from_json(
            db.best_record(CONV.workload_key, CONV.target, CONV.device_key).config_json)
        notes = [r.error_msg for r in db.history(CONV.workload_key)
                 if r.tuner == CONFIRM_TUNER]
    assert verdicts and all(not v.accepted and v.quartets == 0 for v in verdicts)
    assert model.seen == []  # rejected untimed
    assert applied["tile_oc"].size[-1] == block
    assert sum(f"where the model's plan has {block}" in n for n in notes) == len(verdicts)
