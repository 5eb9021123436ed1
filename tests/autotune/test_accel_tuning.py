"""Tuning the accelerator's templates: a candidate costs its simulated cycles at the
target's clock, a tile that overflows an SRAM scope is an error record, records are filed
under the accelerator configuration's device key, and `tessel tune --target accel` runs."""

from __future__ import annotations

import pytest

import lowering
from autotune.cli import main as cli_main
from autotune.measure import LocalRunner, MeasureInput
from autotune.op_spec import parse_op_spec
from autotune.tuners import make_tuner
from autotune.tuning import tune
from tuning_logs import ErrorKind, TuningDatabase

SPEC = "conv2d:1,32,8,8,32,3,3,1,1@int8"


def _config(task, **knobs):
    return next(task.config(k) for k in range(task.space.size)
                if all(task.config(k)[n].to_json() == v for n, v in knobs.items()))


def test_a_candidate_costs_its_cycles_and_an_sram_overflow_is_a_build_error():
    task = parse_op_spec(SPEC, "accel")
    assert task.template == "conv2d_packed.accel"
    good = _config(task, tile_h=[-1, 4], tile_w=[-1, 8], tile_co=[-1, 1], tile_ci=[-1, 1],
                   oc_nthread=2, h_nthread=1, order="spatial")
    # 8 x 8 outputs of both channel blocks: 128 accumulators, and a 10 x 10 window of
    # both input blocks, in a 1 KiB input buffer of 64 elements: too big
    small = parse_op_spec(SPEC, "accel -inp_buf_kib=1")
    bad = _config(small, tile_h=[-1, 8], tile_w=[-1, 8], tile_ci=[-1, 2])
    with LocalRunner(timeout=60, n_parallel_build=1) as runner:
        ok, failed = runner.run([MeasureInput(task, good), MeasureInput(small, bad)])
    s, tensors = task.instantiate(good)
    cycles = lowering.build(s, tensors, target="accel").stats().total_cycles
    assert ok.error_kind is ErrorKind.NONE, ok.error_msg
    assert ok.costs == (cycles / 100e6,)          # the default clock, 100 MHz
    assert f"{cycles} cycles" in ok.error_msg
    assert failed.error_kind is ErrorKind.BUILD_ERROR
    assert "needs 200 input elements, the input buffer holds 64" in failed.error_msg


@pytest.mark.slow
def test_tessel_tune_target_accel_files_records_under_the_configuration(tmp_path, capsys):
    db_path = tmp_path / "t.db"
    rc = cli_main(["tune", "--target", "accel -batch=2", "--op", SPEC, "--trials", "6",
                   "--tuner", "random", "--db", str(db_path), "--no-progress"])
    assert rc == 0
    assert "conv2d:1,32,8,8,32,3,3,1,1@int8" in capsys.readouterr().out
    task = parse_op_spec(SPEC, "accel -batch=2")
    with TuningDatabase(db_path) as db:
        history = db.history(task.workload_key, task.target, task.device_key)
        assert len(history) == 6
        assert task.device_key.startswith("accel -batch=2|batch=2,block=16,")
        assert any(r.error_kind is ErrorKind.NONE for r in history)


def test_tuning_measures_through_the_same_runner_and_database(tmp_path):
    task = parse_op_spec("dense:2x32x64@int8", "accel")
    with TuningDatabase(tmp_path / "t.db") as db, LocalRunner(timeout=60,
                                                              n_parallel_build=1) as runner:
        progress = tune(task, make_tuner("grid", task), 4, db, runner, batch_size=4)
        best = db.best(task.workload_key, task.target, task.device_key, k=1)
    assert progress.trials == 4 and best
    assert best[0].error_kind is ErrorKind.NONE
