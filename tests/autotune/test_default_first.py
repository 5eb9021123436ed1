"""default_first: a task's first batch measures the template's default config, so its best
record (what relay_ir.build applies) is never slower than the untuned default."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autotune import FakeRunner, RandomTuner, Task, make_tuner, tune
from autotune.task_scheduler import TaskScheduler
from relay_ir.backend.tuned import find_tuned
from tuning_logs import TuningDatabase, canonical_json

MM = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
CONV = Task("conv2d_NCHWc.x86", [((1, 64, 14, 14), "float32"), ((64, 64, 3, 3), "float32")],
            {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1]})
GPU_DENSE = Task("dense.cuda", [((16, 64), "float32"), ((32, 64), "float32")], {},
                 "cuda -sim")


@pytest.mark.parametrize("task", [MM, CONV, GPU_DENSE], ids=lambda t: t.template)
def test_the_default_config_is_the_fallback_schedule(task: Task) -> None:
    cfg = task.default_config()
    assert cfg is not None
    assert str(task.lower(cfg)) == str(task.lower(None))


def test_a_fallback_outside_the_space_has_no_default_config(tmp_path: Path,
                                                            monkeypatch) -> None:
    # no template's fallback lies outside its space now (ResNet-18's classifier, N=1000
    # with B packed at build, was one until its padded tiles joined the space): a task
    # made to have none still tunes
    t = Task("dense.x86", [((1, 512), "float32"), ((1000, 512), "float32")],
             {"weight_layout": "packed"})
    assert t.default_config() is not None
    monkeypatch.setattr(Task, "default_config", lambda self: None)
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(t, RandomTuner(t, seed=0), 4, db, FakeRunner(lambda t, c: 1.0))
    assert p.trials == 4 and p.default_config is None


def _default_fastest(default_index: int):
    rng = np.random.default_rng(1)
    other = {}

    def cost(task: Task, cfg) -> float:
        if cfg.index == default_index:
            return 1e-3
        return other.setdefault(cfg.index, float(rng.uniform(1.5e-3, 9e-3)))

    return cost


@pytest.mark.parametrize("tuner", ["random", "xgb", "ga"])
def test_the_first_batch_measures_the_default_and_the_best_never_loses_to_it(
        tmp_path: Path, tuner: str) -> None:
    d = MM.default_config()
    runner = FakeRunner(_default_fastest(d.index))
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(MM, make_tuner(tuner, MM, seed=3), 24, db, runner, batch_size=8)
        best = db.best_record(MM.workload_key, MM.target, MM.device_key)
        measured = [r.config_json for r in db.history(MM.workload_key)]
    assert runner.seen[0].config.index == d.index
    assert measured.count(canonical_json(d.to_json())) == 1 and len(measured) == 24
    assert p.default_mean == pytest.approx(1e-3) and p.best_mean <= p.default_mean
    assert best.config_json == canonical_json(d.to_json())


def test_a_resumed_run_does_not_measure_the_default_again(tmp_path: Path) -> None:
    d = MM.default_config()
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(MM, RandomTuner(MM, seed=0), 8, db, FakeRunner(lambda t, c: 1.0))
        again = FakeRunner(lambda t, c: 1.0)
        p = tune(MM, RandomTuner(MM, seed=1), 16, db, again)
    assert all(i.config.index != d.index for i in again.seen)
    assert p.default_mean == 1.0  # known from the database's record
    assert p.trials == 16


def test_a_database_without_the_default_gets_it_in_the_next_batch(tmp_path: Path) -> None:
    d = MM.default_config()
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(MM, RandomTuner(MM, seed=0), 8, db, FakeRunner(lambda t, c: 1.0),
             default_first=False)
        had = {r.config_json for r in db.history(MM.workload_key)}
        again = FakeRunner(lambda t, c: 1.0)
        tune(MM, RandomTuner(MM, seed=1), 12, db, again)
    if canonical_json(d.to_json()) in had:
        pytest.skip("the random tuner happened to pick the default")
    assert again.seen[0].config.index == d.index


def test_every_scheduled_task_measures_its_default_in_its_first_batch(tmp_path: Path) -> None:
    tasks = [MM, Task("matmul.x86", [((32, 32), "float32")] * 2)]
    defaults = {t.workload_key: t.default_config().index for t in tasks}
    runner = FakeRunner(lambda t, c: 1e-3 if c.index == defaults[t.workload_key] else 2e-3)
    with TuningDatabase(tmp_path / "t.db") as db:
        result = TaskScheduler([(t, 1) for t in tasks], [RandomTuner(t) for t in tasks], db,
                               runner, 16, batch_size=4).run()
        for t in tasks:
            got = find_tuned(db, t.template, t.args, t.attrs, t.target)
            assert got is not None and got.config.index == defaults[t.workload_key]
    assert [st.best_time for st in result.tasks] == [1e-3, 1e-3]


class _ModelLayoutFakeRunner(FakeRunner):
    """A FakeRunner that, as LocalRunner(model_layout=True), times convs as a model runs
    them."""

    def timed_task(self, task: Task) -> Task:
        from autotune.measure import timed_as

        return timed_as(task, model_layout=True)


def test_the_default_measured_first_is_the_kernel_the_model_runs_untuned(
        tmp_path: Path) -> None:
    # a 1x1 stride-2 conv (ResNet-18's downsample): in the model it reads the blocks the
    # previous conv wrote, so its untuned kernel keeps that block, unlike its logical
    # (NCHW) task's fallback; the first measurement must be the model's kernel
    t = Task("conv2d_NCHWc.x86", [((1, 64, 56, 56), "float32"),
                                  ((128, 64, 1, 1), "float32")],
             {"strides": [2, 2], "padding": [0, 0, 0, 0], "dilation": [1, 1]},
             "llvm -mcpu=skylake-avx512")
    from autotune.measure import timed_as

    in_model = timed_as(t, model_layout=True).default_config()
    assert in_model.to_json() != t.default_config().to_json()
    runner = _ModelLayoutFakeRunner(lambda t, c: 1.0)
    with TuningDatabase(tmp_path / "t.db") as db:
        p = tune(t, RandomTuner(t, seed=0), 4, db, runner)
    assert runner.seen[0].config.to_json() == in_model.to_json()
    assert p.default_config == in_model.to_json()


def test_a_runner_that_times_the_task_as_it_is_measures_the_logical_default(
        tmp_path: Path) -> None:
    runner = FakeRunner(lambda t, c: 1.0)
    with TuningDatabase(tmp_path / "t.db") as db:
        tune(CONV, RandomTuner(CONV, seed=0), 2, db, runner)
    assert runner.seen[0].config.to_json() == CONV.default_config().to_json()
