"""relay_ir.build(..., tuning_db=...): tuned records are applied, untuned tasks are listed;
records of other devices only with any_device=True; `?`-dim models apply them at first run."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import relay_ir
from autotune.extract import extract_tasks
from relay_ir.backend.pipeline import specialize
from relay_ir.backend.tuned import TuningScope
from tessel_errors import RelayError, TuningLogError
from tests.relay_ir.conftest import far_config_index
from tests.relay_ir.programs import mlp, mlp_dynamic, mlp_inputs, resnet_block, resnet_block_inputs
from tuning_logs import MeasureRecord, TuningDatabase, using_database

OTHER_DEVICE = "llvm -mcpu=other|Some Other CPU|00000000"


def _record_for(task, index: int, device: str | None = None) -> MeasureRecord:
    cfg = task.config_space().get(index)
    return MeasureRecord(task.workload_key, task.template, task.target,
                         device or task.device_key, cfg.to_json(), costs=(1e-4,), tuner="test")


def _tuned_db(mod, path: Path, device: str | None = None) -> dict[str, str]:
    """A database with one record per task of `mod` (far from the fallback choice,
    `far_config_index`);
    returns {workload key: recorded config json}."""
    tasks = extract_tasks(mod, "llvm")
    assert tasks, "the model has tunable tasks"
    configs = {}
    with TuningDatabase(path) as db:
        for task, _ in tasks:
            rec = _record_for(task, far_config_index(task), device)
            db.add(rec)
            configs[task.workload_key] = _canon(rec.config_json)
    return configs


def _canon(config_json: str) -> str:
    return json.dumps(json.loads(config_json), sort_keys=True)


def _dynamic_inputs(rng: np.random.Generator, batch: int) -> list[np.ndarray]:
    return [rng.standard_normal((batch, 8)).astype("float32"),
            (0.3 * rng.standard_normal((16, 8))).astype("float32")]


def _dynamic_db(path: Path, batch: int) -> dict[str, str]:
    """Records for the dense task of mlp_dynamic at this batch size."""
    return _tuned_db(specialize(mlp_dynamic(), [(batch, 8), (16, 8)]), path)


def _run_matches_the_interpreter(lib, mod, seed: int, batch: int) -> None:
    """Run a `?`-batch model on fresh random inputs and compare with relay_ir.interpret."""
    inputs = _dynamic_inputs(np.random.default_rng(seed), batch=batch)
    np.testing.assert_allclose(lib.run(*inputs), relay_ir.interpret(mod, *inputs),
                               rtol=1e-4, atol=1e-5)


def test_build_with_an_empty_database_warns_listing_the_untuned_tasks(tmp_path: Path) -> None:
    mod = mlp()
    db_path = tmp_path / "tuning.db"
    TuningDatabase(db_path).close()
    with pytest.warns(UserWarning, match=r"tunable task\(s\) have no tuning record.*dense"):
        relay_ir.build(mod, tuning_db=db_path)


def test_build_applies_the_best_record_and_stays_correct(tmp_path: Path) -> None:
    mod = mlp()
    tasks = extract_tasks(mod, "llvm")
    assert tasks, "the MLP has tunable dense tasks"
    db_path = tmp_path / "tuning.db"
    with TuningDatabase(db_path) as db:
        for task, _ in tasks:
            db.add(_record_for(task, far_config_index(task)))  # far from the fallback
    inputs = mlp_inputs(np.random.default_rng(5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every task has a record: no warning
        lib = relay_ir.build(mod, tuning_db=db_path)
    got = lib.run(*inputs)
    np.testing.assert_allclose(got, relay_ir.interpret(mod, *inputs), rtol=1e-4, atol=1e-5)


def test_build_uses_the_enclosing_current_database(tmp_path: Path) -> None:
    mod = mlp()
    db_path = tmp_path / "tuning.db"
    TuningDatabase(db_path).close()
    with using_database(db_path), pytest.warns(UserWarning, match="no tuning record"):
        relay_ir.build(mod)


def test_build_with_a_closed_database_object_is_a_clear_error(tmp_path: Path) -> None:
    db = TuningDatabase(tmp_path / "tuning.db")
    db.close()
    with pytest.raises(RelayError, match="cannot read its tuning records.*closed"):
        relay_ir.build(mlp(), tuning_db=db)


def test_build_with_a_missing_database_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TuningLogError, match="no tuning database"):
        relay_ir.build(mlp(), tuning_db=tmp_path / "absent.db")


def test_a_record_of_another_device_is_not_applied_by_default(tmp_path: Path,
                                                              applied: list) -> None:
    mod = mlp()
    _tuned_db(mod, tmp_path / "tuning.db", device=OTHER_DEVICE)
    with pytest.warns(UserWarning, match=r"2 tunable task\(s\) have no tuning record on this "
                      r"device.*2 of them have records of other devices.*any_device=True"
                      r".*dense") as w:
        relay_ir.build(mod, tuning_db=tmp_path / "tuning.db")
    assert applied == [None, None]
    assert not [x for x in w if "use tuning records of other devices" in str(x.message)]


def test_any_device_applies_a_record_of_another_device_and_warns(tmp_path: Path,
                                                                applied: list) -> None:
    mod = mlp()
    configs = _tuned_db(mod, tmp_path / "tuning.db", device=OTHER_DEVICE)
    with pytest.warns(UserWarning, match=r"^2 tunable task\(s\) use tuning records of other "
                      r"devices") as w:
        lib = relay_ir.build(mod, tuning_db=tmp_path / "tuning.db", any_device=True)
    assert len(w) == 1
    assert sorted(applied) == sorted(configs.values())
    inputs = mlp_inputs(np.random.default_rng(7))
    np.testing.assert_allclose(lib.run(*inputs), relay_ir.interpret(mod, *inputs),
                               rtol=1e-4, atol=1e-5)


def test_any_device_with_records_of_this_device_applies_them_without_warning(
        tmp_path: Path, applied: list) -> None:
    mod = mlp()
    configs = _tuned_db(mod, tmp_path / "tuning.db")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # records of this device: no warning
        relay_ir.build(mod, tuning_db=tmp_path / "tuning.db", any_device=True)
    assert sorted(applied) == sorted(configs.values())


def test_any_device_prefers_this_devices_record_over_a_faster_foreign_one(
        tmp_path: Path, applied: list) -> None:
    mod = mlp()
    mine = _tuned_db(mod, tmp_path / "tuning.db")
    with TuningDatabase(tmp_path / "tuning.db") as db:
        for task, _ in extract_tasks(mod, "llvm"):
            rec = _record_for(task, 0, OTHER_DEVICE)
            db.add(MeasureRecord(rec.workload_key, rec.template, rec.target, rec.device_key,
                                 rec.config_json, costs=(1e-9,), tuner="test"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # only this device's records used: no warning
        relay_ir.build(mod, tuning_db=tmp_path / "tuning.db", any_device=True)
    assert sorted(applied) == sorted(mine.values())


def test_any_device_works_with_the_enclosing_current_database(tmp_path: Path,
                                                             applied: list) -> None:
    mod = mlp()
    configs = _tuned_db(mod, tmp_path / "tuning.db", device=OTHER_DEVICE)
    with using_database(tmp_path / "tuning.db"):
        with pytest.warns(UserWarning, match="no tuning record on this device"):
            relay_ir.build(mod)
        assert applied == [None, None]
        with pytest.warns(UserWarning, match="use tuning records of other devices"):
            relay_ir.build(mod, any_device=True)
    assert sorted(applied[2:]) == sorted(configs.values())


def test_a_dynamic_model_applies_the_record_at_its_first_run(tmp_path: Path,
                                                             applied: list) -> None:
    mod = mlp_dynamic()
    configs = _dynamic_db(tmp_path / "tuning.db", batch=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the record exists: no warning, at build or run
        lib = relay_ir.build(mod, tuning_db=tmp_path / "tuning.db")
        assert applied == []  # nothing compiled before the first run
        inputs = _dynamic_inputs(np.random.default_rng(3), batch=3)
        got = lib.run(*inputs)
    assert applied == list(configs.values())
    np.testing.assert_allclose(got, relay_ir.interpret(mod, *inputs), rtol=1e-4, atol=1e-5)


def test_a_dynamic_model_warns_at_first_run_for_a_shape_without_a_record(
        tmp_path: Path, applied: list) -> None:
    mod = mlp_dynamic()
    _dynamic_db(tmp_path / "tuning.db", batch=3)
    lib = relay_ir.build(mod, tuning_db=tmp_path / "tuning.db")
    inputs = _dynamic_inputs(np.random.default_rng(4), batch=5)
    with pytest.warns(UserWarning, match=r"1 tunable task\(s\) have no tuning record.*"
                      r"\[\[5,8\]"):
        got = lib.run(*inputs)
    assert applied == [None]
    np.testing.assert_allclose(got, relay_ir.interpret(mod, *inputs), rtol=1e-4, atol=1e-5)


def test_a_dynamic_model_applies_records_of_another_device_with_any_device(
        tmp_path: Path, applied: list) -> None:
    mod = mlp_dynamic()
    configs = _tuned_db(specialize(mod, [(2, 8), (16, 8)]), tmp_path / "tuning.db",
                        device=OTHER_DEVICE)
    lib = relay_ir.build(mod, tuning_db=tmp_path / "tuning.db", any_device=True)
    inputs = _dynamic_inputs(np.random.default_rng(5), batch=2)
    with pytest.warns(UserWarning, match="use tuning records of other devices"):
        got = lib.run(*inputs)
    assert applied == list(configs.values())
    np.testing.assert_allclose(got, relay_ir.interpret(mod, *inputs), rtol=1e-4, atol=1e-5)


def test_a_dynamic_model_built_with_a_database_object_closed_since_reopens_its_file(
        tmp_path: Path, applied: list) -> None:
    mod = mlp_dynamic()
    configs = _dynamic_db(tmp_path / "tuning.db", batch=3)
    with TuningDatabase(tmp_path / "tuning.db") as db:
        lib = relay_ir.build(mod, tuning_db=db)
    _run_matches_the_interpreter(lib, mod, seed=6, batch=3)
    assert applied == list(configs.values())


def test_a_dynamic_model_built_inside_using_database_applies_it_after_the_block(
        tmp_path: Path, applied: list) -> None:
    mod = mlp_dynamic()
    configs = _dynamic_db(tmp_path / "tuning.db", batch=3)
    with using_database(tmp_path / "tuning.db"):
        lib = relay_ir.build(mod)
    _run_matches_the_interpreter(lib, mod, seed=8, batch=3)
    assert applied == list(configs.values())


def test_a_dynamic_model_built_without_a_database_ignores_one_current_at_run(
        tmp_path: Path, applied: list) -> None:
    mod = mlp_dynamic()
    _dynamic_db(tmp_path / "tuning.db", batch=3)
    lib = relay_ir.build(mod)
    with using_database(tmp_path / "tuning.db"):
        lib.run(*_dynamic_inputs(np.random.default_rng(9), batch=3))
    assert applied == [None]


def test_a_dynamic_model_whose_database_file_is_gone_warns_and_uses_the_default(
        tmp_path: Path, applied: list) -> None:
    mod = mlp_dynamic()
    _dynamic_db(tmp_path / "tuning.db", batch=3)
    lib = relay_ir.build(mod, tuning_db=tmp_path / "tuning.db")
    (tmp_path / "tuning.db").unlink()
    inputs = _dynamic_inputs(np.random.default_rng(10), batch=3)
    with pytest.warns(UserWarning, match=r"cannot reopen the tuning database given to "
                      r"relay_ir.build \(no tuning database at .*default schedules"):
        got = lib.run(*inputs)
    assert applied == [None]
    np.testing.assert_allclose(got, relay_ir.interpret(mod, *inputs), rtol=1e-4, atol=1e-5)


def _a_record_of_other_blocks(tmp_path: Path, seed: int) -> tuple[Any, ...]:
    """resnet_block's conv task with one record whose weight blocks differ from the
    default's, in tmp_path/tuning.db: (params, inputs, task, blocks, index), where
    blocks(cfg) gives a config's (ic, oc) weight blocks and index the record's point.
    Of its two convs one reads its data in another block than the task is timed in (on
    AVX-512 the second: 8 channels of the first's blocks of 8, where 8 channels are timed
    NCHW), a task of its own (lower_group.record_attrs); `task` is the other's."""
    from schedule.templates import instantiate

    x, w1, w2 = resnet_block_inputs(np.random.default_rng(seed))
    params = {"w1": w1, "w2": w2}
    tasks = [(t, n) for t, n in extract_tasks(resnet_block(), "llvm", params)
             if t.template == "conv2d_NCHWc.x86"]  # not its Winograd alternate
    assert sorted(n for _, n in tasks) == [1, 1]
    task = next(t for t, _ in tasks if "data_block" not in t.attrs)
    assert task.args[1][0] == (8, 8, 3, 3)  # the logical OIHW weight

    def blocks(cfg) -> tuple[int, ...]:
        _, tensors = instantiate(task.template, task.args, task.attrs, cfg)
        return tuple(int(d.value) for d in tensors[1].shape[4:])

    default = blocks(None)
    index = next(i for i in range(task.space.size) if blocks(task.config(i)) != default)
    with TuningDatabase(tmp_path / "tuning.db") as db:
        db.add(_record_for(task, index))
    return params, (x, w1, w2), task, blocks, index


def test_a_tuned_conv_packs_its_constant_weight_in_the_recorded_blocks(tmp_path: Path) -> None:
    params, inputs, task, blocks, index = _a_record_of_other_blocks(tmp_path, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib = relay_ir.build(resnet_block(), params=params, tuning_db=tmp_path / "tuning.db")
    # one task without a record: the other conv's, keyed by the block its data arrives in
    # (lower_group.record_attrs)
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and "1 tunable task(s) have no tuning record" in said[0]
    assert '"data_block":' in said[0]
    packed = [tuple(k.specs[1][0]) for k in lib.plan.kernels]
    # the first conv reads the model's input: the record's blocks (the second reads the
    # first's output in the record's output block, not the block the record was timed
    # on: the default, see the next test)
    assert blocks(task.config(index)) in {s[4:] for s in packed}
    want = relay_ir.interpret(resnet_block(), *inputs)
    np.testing.assert_allclose(lib.run(x=inputs[0]), want, rtol=1e-4, atol=1e-5)


def test_a_call_whose_data_arrives_in_another_block_than_its_record_was_timed_on_runs_the_default(
        tmp_path: Path) -> None:
    # lower_group.timed_data_block: a record is applied only to data in the block it was
    # timed on (a model's first convs read the stem's block, which may differ)
    from relay_ir.backend.lower_group import timed_data_block

    params, inputs, task, blocks, index = _a_record_of_other_blocks(tmp_path, 6)
    lib = relay_ir.build(resnet_block(), params=params, tuning_db=tmp_path / "tuning.db")
    # the first conv reads the model's NCHW input (no block to disagree): the record; the
    # second reads the first's output in the record's output block, not the one the
    # record was timed on: the default
    out_block = blocks(task.config(index))[1]
    assert out_block != timed_data_block(task.template, task.args, task.attrs, "llvm")
    packed = [tuple(k.specs[1][0])[4:] for k in lib.plan.kernels if len(k.specs[1][0]) == 6]
    assert sorted(packed) == sorted([blocks(task.config(index)), blocks(None)])
    want = relay_ir.interpret(resnet_block(), *inputs)
    np.testing.assert_allclose(lib.run(x=inputs[0]), want, rtol=1e-4, atol=1e-5)


def test_records_of_an_older_template_version_are_not_applied_and_the_warning_says_so(
        tmp_path: Path) -> None:
    from autotune import Task
    from relay_ir.backend.tuned import find_tuned
    from schedule.templates import older_workload_keys

    # conv2d_NCHWc.x86 is past version 1 (version 2: the padding guard became its default;
    # 3: 1x1 convs prefetch their weights): a record confirmed against the version-1
    # default could run slower than today's default
    task = Task("conv2d_NCHWc.x86", [((1, 32, 8, 8), "float32"), ((32, 32, 3, 3), "float32")],
                {"padding": [1, 1, 1, 1]}, "llvm")
    old_key = older_workload_keys(task.template, task.args, task.attrs)[0]
    assert old_key != task.workload_key and "#v" not in old_key and "#v" in task.workload_key
    config = task.default_config().to_json()
    with TuningDatabase(tmp_path / "t.db") as db:
        db.add(MeasureRecord(old_key, task.template, task.target, task.device_key, config,
                             (1e-4,)))
        assert find_tuned(db, task.template, task.args, task.attrs, task.target) is None
        scope = TuningScope(db)
        assert scope.config(task.template, task.args, task.attrs, task.target) is None
        assert scope.stale == [task.workload_key]
        with pytest.warns(UserWarning, match="older version of their template.*tune them "
                                             "again"):
            scope.warn()
        db.add(MeasureRecord(task.workload_key, task.template, task.target, task.device_key,
                             config, (1e-4,)))
        got = find_tuned(db, task.template, task.args, task.attrs, task.target)
        assert got is not None and got.config.index == task.default_config().index
