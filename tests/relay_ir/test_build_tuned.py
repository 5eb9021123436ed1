"""relay_ir.build(..., tuning_db=...): tuned records are applied, untuned tasks are listed."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import relay_ir
from autotune.extract import extract_tasks
from tests.relay_ir.programs import mlp, mlp_inputs
from tuning_logs import MeasureRecord, TuningDatabase, using_database


def _record_for(task, index: int) -> MeasureRecord:
    cfg = task.config_space().get(index)
    return MeasureRecord(task.workload_key, task.template, task.target, task.device_key,
                         cfg.to_json(), costs=(1e-4,), tuner="test")


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
            space = task.config_space()
            db.add(_record_for(task, space.size - 1))  # far from the fallback choice
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


def test_build_with_a_missing_database_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="no tuning database"):
        relay_ir.build(mlp(), tuning_db=tmp_path / "absent.db")
