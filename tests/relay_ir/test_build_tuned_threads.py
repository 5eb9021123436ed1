"""A tuning record applies at the thread count it was timed on: relay_ir.build at N
threads applies records filed at N (and legacy records, filed before the count was part of
the device key, at any count); records of other counts only make it warn, naming the fix."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import relay_ir
from autotune.extract import extract_tasks
from relay_ir.backend.tuned import find_tuned
from tessel_target import device_key, legacy_device_key
from tests.relay_ir.conftest import canon as _canon
from tests.relay_ir.conftest import far_config_index
from tests.relay_ir.programs import mlp, mlp_inputs
from tuning_logs import MeasureRecord, TuningDatabase


def _db_at(path: Path, device: str) -> dict[str, str]:
    """One record per task of the MLP, filed under `device` (far from the default choice,
    but splitting the work among threads as the default does, so that the split rule of
    lower_group.applied_config lets a build on any count apply it);
    returns {workload key: recorded config json}."""
    configs = {}
    with TuningDatabase(path) as db:
        for task, _ in extract_tasks(mlp(), "llvm"):
            cfg = task.config_space().get(far_config_index(task))
            db.add(MeasureRecord(task.workload_key, task.template, task.target, device,
                                 cfg.to_json(), costs=(1e-4,), tuner="test"))
            configs[task.workload_key] = _canon(cfg.to_json())
    return configs


def _build_matches_the_interpreter(db_path: Path, seed: int) -> None:
    mod = mlp()
    lib = relay_ir.build(mod, tuning_db=db_path)
    inputs = mlp_inputs(np.random.default_rng(seed))
    np.testing.assert_allclose(lib.run(*inputs), relay_ir.interpret(mod, *inputs),
                               rtol=1e-4, atol=1e-5)


def test_a_record_timed_at_one_thread_is_applied_by_a_one_thread_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, applied: list) -> None:
    configs = _db_at(tmp_path / "t.db", device_key("llvm", threads=1))
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every task has a record at this count
        _build_matches_the_interpreter(tmp_path / "t.db", seed=1)
    assert sorted(applied) == sorted(configs.values())


def test_a_two_thread_build_does_not_apply_one_thread_records_and_warns_naming_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, applied: list) -> None:
    _db_at(tmp_path / "t.db", device_key("llvm", threads=1))
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    with pytest.warns(UserWarning) as w:
        _build_matches_the_interpreter(tmp_path / "t.db", seed=2)
    assert applied == [None, None]
    (threads,) = [str(x.message) for x in w if "thread(s), not at the 2" in str(x.message)]
    assert "timed only at 1 thread(s)" in threads
    assert "TESSEL_NUM_THREADS=2 tessel tune MODEL" in threads and "--trials 0" in threads
    (untuned,) = [str(x.message) for x in w if "have no tuning record" in str(x.message)]
    assert "2 of them have records at other thread counts" in untuned
    assert "records of other devices" not in untuned  # the same machine, not another


@pytest.mark.parametrize("threads", ["1", "2"])
def test_a_legacy_record_without_a_thread_count_applies_at_any_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, applied: list, threads: str) -> None:
    configs = _db_at(tmp_path / "t.db", legacy_device_key(device_key("llvm")))
    monkeypatch.setenv("TESSEL_NUM_THREADS", threads)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a legacy record is this device's, at any count
        _build_matches_the_interpreter(tmp_path / "t.db", seed=3)
    assert sorted(applied) == sorted(configs.values())


def test_a_record_at_this_count_wins_over_a_legacy_one(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    task, _ = extract_tasks(mlp(), "llvm")[0]
    space = task.config_space()
    legacy, here = space.get(1), space.get(space.size - 1)
    with TuningDatabase(tmp_path / "t.db") as db:
        # the legacy record is faster, but it was timed at an unknown count
        db.add(MeasureRecord(task.workload_key, task.template, task.target,
                             legacy_device_key(device_key("llvm")), legacy.to_json(),
                             costs=(1e-5,), tuner="test"))
        db.add(MeasureRecord(task.workload_key, task.template, task.target,
                             device_key("llvm", threads=2), here.to_json(), costs=(1e-4,),
                             tuner="test"))
        got = find_tuned(db, task.template, task.args, task.attrs, "llvm")
        assert got is not None and got.from_this_device
        assert _canon(got.config.to_json()) == _canon(here.to_json())
        monkeypatch.setenv("TESSEL_NUM_THREADS", "1")  # nothing at 1: the legacy record
        got = find_tuned(db, task.template, task.args, task.attrs, "llvm")
        assert _canon(got.config.to_json()) == _canon(legacy.to_json())
