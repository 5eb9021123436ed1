"""autotune.model_confirm: a task's applied record timed in the model beside the untuned
build; one that loses there beyond the noise is rejected, and the next build applies the
default (or the task's next confirmed record, judged in turn). Step times come from a stand-in timer
(which build, which task) so that each verdict is known in advance; `time_in_turn`, the
real one, is checked on its own."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autotune import FakeRunner, Task
from autotune.block_rule import block_rule
from autotune.extract import extract_model_tasks
from autotune.model_confirm import confirm_in_model, time_in_turn
from autotune.tuning import default_as_run
from relay_ir.backend.tuned import find_tuned
from schedule.templates import partition_of
from tessel_errors import TesselError
from tuning_logs import (
    CONFIRM_TUNER,
    ErrorKind,
    MeasureRecord,
    TuningDatabase,
    canonical_json,
    using_database,
)


@pytest.fixture(scope="module")
def model() -> tuple[Any, dict[str, Any]]:
    """A 3x3 conv and a 1x1 conv (16 -> 32 channels) on 1x16x12x12, constant weights."""
    import relay_ir

    rng = np.random.default_rng(3)
    text = """
    def @main(%x: Tensor[(1, 16, 12, 12), float32], %w1: Tensor[(16, 16, 3, 3), float32],
              %w2: Tensor[(32, 16, 1, 1), float32]) {
      %0 = nn.conv2d(%x, %w1, padding=[1, 1, 1, 1]);
      %1 = nn.relu(%0);
      nn.conv2d(%1, %w2)
    }"""
    params = {"w1": rng.standard_normal((16, 16, 3, 3)).astype("float32"),
              "w2": rng.standard_normal((32, 16, 1, 1)).astype("float32")}
    return relay_ir.parse(text), params


@pytest.fixture(scope="module")
def conv(model) -> Task:
    """The 3x3 conv's task."""
    mod, params = model
    tasks = [t for t, _ in extract_model_tasks(mod, "llvm", params).tasks]
    return next(t for t in tasks if t.args[1][0][2] == 3)


def _default_json(task: Task) -> str:
    return canonical_json(default_as_run(task, FakeRunner(lambda t, c: 1.0,
                                                          model_layout=True)).to_json())


def _others(task: Task, n: int) -> list[str]:
    """`n` configs other than the default that keep the model's channel block and split
    the output among threads as the default does (a build on several threads applies no
    other: lower_group.default_partition)."""
    rule = block_rule(task, FakeRunner(lambda t, c: 1.0, model_layout=True))
    default = _default_json(task)
    split = partition_of(task.template, default_as_run(
        task, FakeRunner(lambda t, c: 1.0, model_layout=True)))
    out = []
    for j in range(rule.size if rule is not None else task.space.size):
        cfg = task.space.get(rule.point(j) if rule is not None else j)
        if canonical_json(cfg.to_json()) != default and \
                partition_of(task.template, cfg) == split:
            out.append(canonical_json(cfg.to_json()))
        if len(out) == n:
            return out
    raise AssertionError("the conv has too few configs")


def _record(task: Task, config: str, seconds: float, tuner: str = "xgb") -> MeasureRecord:
    return MeasureRecord(task.workload_key, task.template, task.target, task.device_key,
                         config, (seconds,), tuner=tuner, flops=task.flop or None,
                         attrs_json=task.attrs)


def _confirmed(db: TuningDatabase, task: Task, ratios: Sequence[float]) -> list[str]:
    """The default at 1 ms and one confirmed candidate per ratio (as autotune.confirm
    leaves them); returns the candidates' configs."""
    default = _default_json(task)
    configs = _others(task, len(ratios))
    db.add_many([_record(task, default, 1e-3),
                 *[_record(task, c, r * 0.9e-3) for c, r in zip(configs, ratios)],
                 _record(task, default, 1e-3, CONFIRM_TUNER),
                 *[_record(task, c, r * 1e-3, CONFIRM_TUNER) for c, r in zip(configs, ratios)]])
    return configs


def _applied(db: TuningDatabase, task: Task) -> str:
    got = find_tuned(db, task.template, list(task.args), task.attrs, task.target)
    return canonical_json(got.config.to_json())


def by_task(factor: Callable[[int, Any], float], seed: int = 0) -> Any:
    """A step timer: 1 ms a step in the untuned build (the second plan), noise of 1%; in
    a tuned build (the first plan), a step of a tuned task takes `factor(n, plan)` times
    that, n counting the distinct tuned plans seen (0 for the first build)."""
    rng = np.random.default_rng(seed)
    plans: list[Any] = []

    def timer(ps: Sequence[Any], arrays: list[np.ndarray], rounds: int) -> list[np.ndarray]:
        tuned, default = ps
        if all(p is not tuned for p in plans):
            plans.append(tuned)
        n = next(k for k, p in enumerate(plans) if p is tuned)
        scale = np.array([factor(n, tuned) if s.workload_key else 1.0 for s in tuned.steps])
        noise = rng.normal(1.0, 0.01, (2, rounds, len(scale)))
        return [1e-3 * scale * noise[0], 1e-3 * noise[1]]

    return timer


def test_a_record_that_loses_in_the_model_is_rejected_and_the_default_applies(
        tmp_path: Path, model, conv) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        (cand,) = _confirmed(db, conv, [0.8])
        assert _applied(db, conv) == cand
        got = confirm_in_model(mod, params, "llvm", db, timer=by_task(lambda n, p: 1.3))
        assert [(v.config_json, v.accepted) for v in got.verdicts] == [(cand, False)]
        assert got.verdicts[0].ratio == pytest.approx(1.3, rel=0.02)
        assert _applied(db, conv) == _default_json(conv)
        rejection = [r for r in db.history(conv.workload_key) if not r.ok]
        assert len(rejection) == 1 and rejection[0].tuner == CONFIRM_TUNER
        assert rejection[0].config_json == cand and "in the model" in rejection[0].error_msg
        # the next build applies the default: nothing is left to judge
        again = confirm_in_model(mod, params, "llvm", db, timer=by_task(lambda n, p: 1.3))
        assert again.verdicts == [] and again.note == "every task applies its default"


def test_a_record_that_wins_in_the_model_stays_applied(tmp_path: Path, model, conv) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        (cand,) = _confirmed(db, conv, [0.8])
        got = confirm_in_model(mod, params, "llvm", db, timer=by_task(lambda n, p: 0.8))
        assert [(v.config_json, v.accepted) for v in got.verdicts] == [(cand, True)]
        assert got.rounds == 10  # clear at the first look
        assert _applied(db, conv) == cand and all(r.ok for r in db.history(conv.workload_key))


def test_a_tie_in_the_model_keeps_the_record_confirmed_alone(tmp_path: Path, model,
                                                              conv) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        (cand,) = _confirmed(db, conv, [0.8])
        got = confirm_in_model(mod, params, "llvm", db, timer=by_task(lambda n, p: 1.0),
                               rounds=12)
        assert got.rounds == 12 and got.verdicts[0].accepted
        assert _applied(db, conv) == cand


def test_a_small_loss_within_max_loss_keeps_the_record(tmp_path: Path, model, conv) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        (cand,) = _confirmed(db, conv, [0.8])
        got = confirm_in_model(mod, params, "llvm", db, timer=by_task(lambda n, p: 1.05),
                               max_loss=0.1)
        assert got.verdicts[0].accepted and _applied(db, conv) == cand


def test_after_a_rejection_the_next_confirmed_record_is_judged_too(tmp_path: Path, model,
                                                                    conv) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        first, second = _confirmed(db, conv, [0.8, 0.9])
        # the first record loses in the model, the second (built in the second pass) wins
        got = confirm_in_model(mod, params, "llvm", db,
                               timer=by_task(lambda n, p: 1.2 if n == 0 else 0.9))
        assert [(v.config_json, v.accepted) for v in got.verdicts] == [(first, False),
                                                                      (second, True)]
        assert _applied(db, conv) == second and got.unjudged == []


def test_a_task_whose_record_lost_in_the_last_pass_takes_its_default(tmp_path: Path, model,
                                                                     conv) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        _, second, third = _confirmed(db, conv, [0.8, 0.85, 0.9])
        got = confirm_in_model(mod, params, "llvm", db, passes=1,
                               timer=by_task(lambda n, p: 1.2))
        assert len(got.verdicts) == 1 and _applied(db, conv) == _default_json(conv)
        assert got.defaulted == [got.verdicts[0].name] and got.unjudged == []
        untimed = [r for r in db.history(conv.workload_key)
                   if not r.ok and r.config_json in (second, third)]
        assert len(untimed) == 2 and all("rejected untimed" in r.error_msg for r in untimed)


def test_without_default_after_a_next_record_left_when_the_passes_run_out_is_named(
        tmp_path: Path, model, conv, monkeypatch) -> None:
    import autotune.model_confirm as model_confirm

    monkeypatch.setattr(model_confirm, "DEFAULT_AFTER", False)
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        _, second = _confirmed(db, conv, [0.8, 0.9])
        got = confirm_in_model(mod, params, "llvm", db, passes=1,
                               timer=by_task(lambda n, p: 1.2))
        assert len(got.verdicts) == 1 and _applied(db, conv) == second
        assert got.unjudged == [got.verdicts[0].name] and got.defaulted == []


def test_a_task_whose_next_record_wins_in_the_second_pass_is_not_defaulted(
        tmp_path: Path, model, conv) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        first, second, _ = _confirmed(db, conv, [0.8, 0.85, 0.9])
        got = confirm_in_model(mod, params, "llvm", db,
                               timer=by_task(lambda n, p: 1.2 if n == 0 else 0.9))
        assert [v.accepted for v in got.verdicts] == [False, True]
        assert _applied(db, conv) == second and got.defaulted == []


def test_every_record_survives_a_rejection(tmp_path: Path, model, conv) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        _confirmed(db, conv, [0.8])
        before = {r.digest() for r in db.records()}
        confirm_in_model(mod, params, "llvm", db, timer=by_task(lambda n, p: 1.3))
        after = {r.digest() for r in db.records()}
    assert before < after and len(after - before) == 1


def test_export_and_import_keep_the_rejection(tmp_path: Path, model, conv) -> None:
    mod, params = model
    text = io.StringIO()
    with TuningDatabase(tmp_path / "a.db") as db:
        _confirmed(db, conv, [0.8])
        confirm_in_model(mod, params, "llvm", db, timer=by_task(lambda n, p: 1.3))
        db.export_jsonl(text)
    with TuningDatabase(tmp_path / "b.db") as other:
        other.import_jsonl(io.StringIO(text.getvalue()))
        assert _applied(other, conv) == _default_json(conv)
    with TuningDatabase(tmp_path / "c.db") as merged:
        merged.merge(tmp_path / "a.db")
        assert _applied(merged, conv) == _default_json(conv)


def test_a_task_without_confirm_records_gets_the_defaults_record_before_its_rejection(
        tmp_path: Path, model, conv) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        cand = _others(conv, 1)[0]
        db.add_many([_record(conv, _default_json(conv), 1e-3), _record(conv, cand, 0.7e-3)])
        confirm_in_model(mod, params, "llvm", db, timer=by_task(lambda n, p: 1.3))
        applied = db.best_record(conv.workload_key, conv.target, conv.device_key)
        assert applied.tuner == CONFIRM_TUNER and applied.mean == pytest.approx(1e-3)
        assert applied.config_json == _default_json(conv)


def test_nothing_is_timed_nor_built_untuned_where_every_task_applies_its_default(
        tmp_path: Path, model, monkeypatch: pytest.MonkeyPatch) -> None:
    import relay_ir

    mod, params = model
    builds: list[Any] = []
    real = relay_ir.build
    monkeypatch.setattr(relay_ir, "build", lambda *a, **k: builds.append(k) or real(*a, **k))

    def never(*args: Any) -> list[np.ndarray]:
        raise AssertionError("nothing to time")

    with TuningDatabase(tmp_path / "t.db") as db:
        got = confirm_in_model(mod, params, "llvm", db, timer=never)
        assert got.verdicts == [] and got.note == "every task applies its default"
        assert [k["tuning_db"] for k in builds] == [db]  # the untuned build is not needed


def test_time_in_turn_times_every_step_of_each_build(model) -> None:
    import relay_ir

    mod, params = model
    a, b = relay_ir.build(mod, params=params), relay_ir.build(mod, params=params)
    x = np.random.default_rng(0).standard_normal((1, 16, 12, 12)).astype("float32")
    times = time_in_turn([a.plan, b.plan], [x], 3)
    assert [t.shape for t in times] == [(3, len(a.plan.steps)), (3, len(b.plan.steps))]
    assert all((t > 0).all() for t in times)


def test_steps_name_the_task_whose_records_they_apply(model, conv) -> None:
    import relay_ir

    mod, params = model
    keys = [s.workload_key for s in relay_ir.build(mod, params=params).plan.steps]
    assert conv.workload_key in keys and len(set(keys) - {""}) == 2


@pytest.mark.parametrize("kwargs, message", [
    ({"rounds": 1}, "rounds must be an integer of at least 2"),
    ({"rounds": 2.5}, "rounds must be an integer of at least 2"),
    ({"passes": 0}, "passes must be a positive integer"),
])
def test_bad_counts_are_refused(tmp_path: Path, model, kwargs, message) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db, pytest.raises(TesselError, match=message):
        confirm_in_model(mod, params, "llvm", db, **kwargs)


def test_inside_a_current_database_it_refuses_since_the_default_build_would_read_it(
        tmp_path: Path, model) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db, using_database(db), \
            pytest.raises(TesselError, match="outside a `tuning_logs.using_database` block"):
        confirm_in_model(mod, params, "llvm", db)


def test_a_target_other_than_a_cpu_is_left_alone(tmp_path: Path, model) -> None:
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        got = confirm_in_model(mod, params, "accel", db)
    assert got.verdicts == [] and "only CPU models" in got.note


def test_a_failed_default_record_is_not_a_default_to_fall_back_to(tmp_path: Path, model,
                                                                  conv) -> None:
    # no successful record of the default anywhere: the rejection still stands, and the
    # default's confirm record is the in-model time of one step
    mod, params = model
    with TuningDatabase(tmp_path / "t.db") as db:
        cand = _others(conv, 1)[0]
        db.add_many([_record(conv, cand, 0.7e-3),
                     MeasureRecord(conv.workload_key, conv.template, conv.target,
                                   conv.device_key, _default_json(conv), (),
                                   ErrorKind.TIMEOUT, tuner="xgb", attrs_json=conv.attrs)])
        confirm_in_model(mod, params, "llvm", db, timer=by_task(lambda n, p: 1.3))
        applied = db.best_record(conv.workload_key, conv.target, conv.device_key)
        assert applied.config_json == _default_json(conv)
        assert applied.mean == pytest.approx(1e-3, rel=0.05)
