"""The tessel command, run as `python -m autotune.cli` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEY = 'matmul.x86|[[[32,32],"float32"],[[32,32],"float32"]]|{}'


def _tessel(*args: str, cwd: Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "autotune.cli", *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=240)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    p = _tessel("tune", "--op", "matmul:32x32x32", "--trials", "4", "--tuner", "random",
                "--batch-size", "2", "--timeout", "20", "--min-repeat-ms", "1", cwd=d)
    assert "matmul:32x32x32  random  4" in p.stdout
    assert "best GFLOP/s" in p.stdout and "4/4" in p.stderr  # the progress bar
    return d


def test_tune_writes_the_default_database(tuned: Path) -> None:
    assert (tuned / "tuning_logs" / "tuning.db").is_file()


def test_db_tasks_lists_the_tuned_task(tuned: Path) -> None:
    out = _tessel("db", "tasks", cwd=tuned).stdout
    assert KEY in out and "1 tasks in tuning_logs/tuning.db" in out


def test_db_best_by_op_spec_and_by_key_agree(tuned: Path) -> None:
    a = _tessel("db", "best", "--op", "matmul:32x32x32", "-k", "2", cwd=tuned).stdout
    b = _tessel("db", "best", KEY, "-k", "2", cwd=tuned).stdout
    assert a == b and a.startswith(f"best of {KEY}") and a.count(" none ") == 2


def test_db_best_of_an_unknown_key_says_how_to_list_the_tasks(tuned: Path) -> None:
    p = _tessel("db", "best", "no-such-key", cwd=tuned, ok=False)
    assert p.returncode == 1
    assert "no such task in tuning_logs/tuning.db" in p.stdout and "tessel db tasks" in p.stdout


def test_db_best_given_a_database_path_says_to_pass_it_as_db(tuned: Path) -> None:
    p = _tessel("db", "best", "tuning_logs/tuning.db", cwd=tuned, ok=False)
    assert p.returncode == 1 and "pass it as --db tuning_logs/tuning.db" in p.stdout


def test_db_best_of_a_known_task_on_another_target_names_the_target(tuned: Path) -> None:
    p = _tessel("db", "best", KEY, "--target", "llvm -mcpu=haswell", cwd=tuned, ok=False)
    assert p.returncode == 1 and "the task is in the database: try another --target" in p.stdout


def test_db_history_lists_every_trial(tuned: Path) -> None:
    out = _tessel("db", "history", "--op", "matmul:32x32x32", cwd=tuned).stdout
    assert len([ln for ln in out.splitlines() if " random " in ln]) == 4


def test_export_then_import_into_a_new_database(tuned: Path) -> None:
    out = _tessel("db", "export", "recs.jsonl", cwd=tuned).stdout
    assert "exported 4 records to recs.jsonl" in out
    out = _tessel("db", "import", "recs.jsonl", "--db", "copy.db", cwd=tuned).stdout
    assert "imported 4 records from recs.jsonl (0 duplicates)" in out
    out = _tessel("db", "merge", "copy.db", cwd=tuned).stdout
    assert "merged 0 records from copy.db (4 duplicates)" in out


def test_plot_writes_a_png(tuned: Path) -> None:
    out = _tessel("db", "plot", "curves.png", cwd=tuned).stdout
    assert "wrote curves.png (1 curves)" in out
    assert (tuned / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_prune_keeps_the_top_k(tuned: Path) -> None:
    _tessel("db", "export", "prune.jsonl", cwd=tuned)
    _tessel("db", "import", "prune.jsonl", "--db", "p.db", cwd=tuned)
    out = _tessel("db", "prune", "--top-k", "1", "--db", "p.db", cwd=tuned).stdout
    assert "pruned 3 records" in out


def test_errors_are_one_line_with_exit_code_2(tuned: Path) -> None:
    p = _tessel("tune", "--op", "matmul:64x64", cwd=tuned, ok=False)
    assert p.returncode == 2
    assert "tessel: error: op spec 'matmul:64x64': matmul takes 3 sizes" in p.stderr
    p = _tessel("db", "tasks", "--db", "missing.db", cwd=tuned, ok=False)
    assert p.returncode == 2 and "no tuning database at 'missing.db'" in p.stderr


def _tiny_onnx(d: Path) -> tuple[Path, Path]:
    """Conv 3x3 (4 -> 8 channels, constant weight: an image's conv, conv2d_stem.x86) +
    Relu, and an input file."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(11)
    w = numpy_helper.from_array(rng.standard_normal((8, 4, 3, 3)).astype("float32"), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c"], ["y"])], "g", [x], [y], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
              d / "tiny.onnx")
    np.save(d / "x.npy", rng.standard_normal((1, 4, 8, 8)).astype("float32"))
    return d / "tiny.onnx", d / "x.npy"


def test_tune_compile_and_run_a_model(tmp_path: Path) -> None:
    import numpy as np

    ort = pytest.importorskip("onnxruntime")
    model, xfile = _tiny_onnx(tmp_path)
    out = _tessel("tune", "tiny.onnx", "--trials", "2", "--tuner", "random", "--no-progress",
                  "--min-repeat-ms", "1", cwd=tmp_path).stdout
    assert "tiny.onnx: 1 tunable tasks" in out and "conv2d_stem.x86 x1" in out
    assert "weights in cache (warm, as a model with 0.0 MiB of weights" in out  # a tiny one
    assert "batch   1 [2/2] conv2d_stem.x86 x1 (1, 4, 8, 8): first batch" in out
    assert "model estimate (sum of occurrences x best time)" in out
    assert "model confirmation (--no-model-confirm skips it)" in out
    assert "model confirmation: " in out.splitlines()[-1]
    out = _tessel("compile", "tiny.onnx", "-o", "tiny.tessel", cwd=tmp_path).stdout
    assert "-> tiny.tessel" in out and "1 of 1 tunable tasks apply tuning records" in out
    out = _tessel("run", "tiny.tessel", "--input", "x=x.npy", "--repeat", "3", "-o", "y.npy",
                  cwd=tmp_path).stdout
    assert "output 0: shape (1, 8, 8, 8)" in out and "latency: median" in out
    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": np.load(xfile)})[0]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-4, atol=1e-4)


def test_tune_trials_0_only_confirms_in_the_model_and_the_flag_skips_that(
        tmp_path: Path) -> None:
    from autotune.extract import extract_model_tasks
    from relay_ir.frontend.onnx import from_onnx
    from tests.autotune.test_model_confirm import _confirmed
    from tuning_logs import TuningDatabase

    model, _ = _tiny_onnx(tmp_path)
    out = _tessel("tune", "tiny.onnx", "--trials", "0", "--db", "t.db", cwd=tmp_path).stdout
    assert "--trials 0: nothing tuned" in out and "batch " not in out
    assert out.splitlines()[-1].startswith("model confirmation: every task applies its "
                                           "default; ")
    mod, params = from_onnx(str(model))
    ((stem, _),) = extract_model_tasks(mod, "llvm", params).tasks
    with TuningDatabase(tmp_path / "t.db") as db:
        _confirmed(db, stem, [0.8])
    out = _tessel("tune", "tiny.onnx", "--trials", "0", "--db", "t.db", cwd=tmp_path).stdout
    row = next(line for line in out.splitlines() if line.startswith("conv2d_stem.x86 x1"))
    assert row.split()[-1] in ("kept", "rejected")
    out = _tessel("tune", "tiny.onnx", "--trials", "0", "--db", "t.db", "--no-model-confirm",
                  cwd=tmp_path).stdout
    assert "model confirmation" not in out
    p = _tessel("tune", "--op", "matmul:32x32x32", "--trials", "0", cwd=tmp_path, ok=False)
    assert p.returncode == 2 and "--trials must be positive (0 only for MODEL" in p.stderr


def _two_convs(tmp_path: Path) -> None:
    """two.onnx: two convs; relay_ir.quantize keeps the first float, the second is int8."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(12)
    ws = [numpy_helper.from_array(rng.standard_normal(s).astype("float32"), n)
          for n, s in (("w1", (8, 4, 3, 3)), ("w2", (16, 8, 3, 3)))]
    g = helper.make_graph([helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["a"], ["b"]),
                           helper.make_node("Conv", ["b", "w2"], ["y"], pads=[1, 1, 1, 1])],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                              [1, 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], ws)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
              tmp_path / "two.onnx")


def test_tune_quantize_tunes_the_int8_tasks_of_the_quantized_model(tmp_path: Path) -> None:
    _two_convs(tmp_path)
    out = _tessel("tune", "two.onnx", "--quantize", "--trials-per-task", "2", "--tuner",
                  "random", "--no-progress", "--min-repeat-ms", "1", cwd=tmp_path).stdout
    assert "two.onnx: 2 tunable tasks" in out
    row = next(line for line in out.splitlines() if line.startswith("conv2d_int8.x86 x1"))
    assert row.split()[6:9] == ["random", "2", "2"]  # tuner, trials, new


def test_tune_quantize_for_the_accelerator_tunes_only_its_int8_conv(tmp_path: Path) -> None:
    _two_convs(tmp_path)  # the float first conv stays on the host: no accelerator task
    out = _tessel("tune", "two.onnx", "--quantize", "--target", "accel", "--trials-per-task",
                  "2", "--tuner", "random", "--no-progress", cwd=tmp_path).stdout
    assert "two.onnx: 1 tunable tasks" in out
    row = next(line for line in out.splitlines() if line.startswith("conv2d_packed.accel x1"))
    assert row.split()[6:9] == ["random", "2", "2"]


def test_db_plot_model_draws_the_scheduled_runs_estimate(tmp_path: Path) -> None:
    _tiny_onnx(tmp_path)
    _tessel("tune", "tiny.onnx", "--trials", "2", "--tuner", "random", "--no-progress",
            "--min-repeat-ms", "1", cwd=tmp_path)
    out = _tessel("db", "plot", "model.png", "--model", "tiny.onnx", cwd=tmp_path).stdout
    assert "wrote model.png (1 batches of tiny.onnx)" in out
    assert (tmp_path / "model.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    p = _tessel("db", "plot", "x.png", "--model", "other.onnx", cwd=tmp_path, ok=False)
    assert p.returncode == 2 and "no scheduled run of 'other.onnx'" in p.stderr
    assert "it has runs of tiny.onnx" in p.stderr


def test_trials_per_task_tunes_every_task_the_same_number_of_times(tmp_path: Path) -> None:
    _tiny_onnx(tmp_path)
    out = _tessel("tune", "tiny.onnx", "--trials-per-task", "3", "--tuner", "random",
                  "--no-progress", "--min-repeat-ms", "1", cwd=tmp_path).stdout
    assert "batch " not in out and "early stop" in out
    row = next(line for line in out.splitlines() if line.startswith("conv2d_stem.x86 x1"))
    assert row.split()[6:9] == ["random", "3", "3"]  # tuner, trials, new


def test_compile_any_device_applies_records_of_another_device(tmp_path: Path) -> None:
    import numpy as np

    import relay_ir
    from autotune.extract import extract_tasks
    from relay_ir.backend.pipeline import bind_params
    from relay_ir.frontend.onnx import from_onnx
    from tests.relay_ir.conftest import far_config_index
    from tuning_logs import MeasureRecord, TuningDatabase

    model, xfile = _tiny_onnx(tmp_path)
    mod, params = from_onnx(str(model))
    [(task, _)] = extract_tasks(mod, "llvm", params)
    cfg = task.config_space().get(far_config_index(task))
    with TuningDatabase(tmp_path / "other.db") as db:
        db.add(MeasureRecord(task.workload_key, task.template, task.target,
                             "llvm -mcpu=other|Some Other CPU|00000000", cfg.to_json(),
                             costs=(1e-4,), tuner="test"))
    p = _tessel("compile", "tiny.onnx", "--db", "other.db", "-o", "a.tessel", cwd=tmp_path)
    assert "0 of 1 tunable tasks apply tuning records on this device" in p.stdout
    assert "1 tunable task(s) have no tuning record on this device" in p.stderr
    assert "1 of them have records of other devices" in p.stderr
    p = _tessel("compile", "tiny.onnx", "--db", "other.db", "--any-device", "-o", "b.tessel",
                cwd=tmp_path)
    assert "1 of 1 tunable tasks apply tuning records on any device" in p.stdout
    assert "1 tunable task(s) use tuning records of other devices" in p.stderr
    assert "no tuning record" not in p.stderr
    x = np.load(xfile)
    want = relay_ir.interpret(bind_params(mod, params), x)
    got = relay_ir.load_compiled(str(tmp_path / "b.tessel")).run(x=x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_compile_with_a_database_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    _tiny_onnx(tmp_path)
    p = _tessel("compile", "tiny.onnx", "--db", "typo.db", "-o", "t.tessel", cwd=tmp_path,
                ok=False)
    assert p.returncode == 2
    assert p.stderr.strip() == ("tessel: error: no tuning database at 'typo.db' (--db); check "
                                "the path, or leave --db out to use tuning_logs/tuning.db if "
                                "it exists")
    assert not (tmp_path / "t.tessel").exists()


def test_compile_counts_a_record_the_template_cannot_read_as_untuned(tmp_path: Path) -> None:
    from autotune.extract import extract_tasks
    from relay_ir.frontend.onnx import from_onnx
    from tuning_logs import MeasureRecord, TuningDatabase

    model, _ = _tiny_onnx(tmp_path)
    mod, params = from_onnx(str(model))
    [(task, _)] = extract_tasks(mod, "llvm", params)
    with TuningDatabase(tmp_path / "stale.db") as db:  # a knob this template does not have
        db.add(MeasureRecord(task.workload_key, task.template, task.target, task.device_key,
                             {"no_such_knob": 3}, costs=(1e-4,), tuner="test"))
    p = _tessel("compile", "tiny.onnx", "--db", "stale.db", "-o", "s.tessel", cwd=tmp_path)
    assert "0 of 1 tunable tasks apply tuning records on this device" in p.stdout
    assert "1 tunable task(s) have no tuning record on this device" in p.stderr


def test_run_with_a_missing_input_file_is_a_one_line_error(tmp_path: Path) -> None:
    _tiny_onnx(tmp_path)
    _tessel("compile", "tiny.onnx", "-o", "t.tessel", cwd=tmp_path)
    p = _tessel("run", "t.tessel", "--input", "x=missing.npy", cwd=tmp_path, ok=False)
    assert p.returncode == 2
    assert p.stderr.strip() == "tessel: error: --input x: no file at 'missing.npy'"


def test_run_with_an_input_that_is_not_npy_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("not an array")
    p = _tessel("run", "whatever.tessel", "--input", "x=x.txt", cwd=tmp_path, ok=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.startswith("tessel: error: --input x: 'x.txt' is not a readable .npy file")


def test_run_of_a_simulated_gpu_model_says_its_time_is_the_simulators(tmp_path: Path) -> None:
    _tiny_onnx(tmp_path)
    _tessel("compile", "tiny.onnx", "--target", "cuda -sim", "-o", "tiny.tessel", cwd=tmp_path)
    out = _tessel("run", "tiny.tessel", "--repeat", "1", cwd=tmp_path).stdout
    assert "latency: median" in out and "host time of the GPU simulator" in out


def test_a_scheduled_tasks_summary_gives_gflops_of_the_applied_time_not_the_fastest_measured(
) -> None:
    from autotune import Task
    from autotune.cli import _scheduled_row
    from autotune.task_scheduler import TaskState
    from autotune.tuning import TuneProgress

    task = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    lucky = TuneProgress(task, "random", 8, trials=8, best_flops=task.flop / 1e-5,
                         best_mean=1e-5)  # a measurement confirmation rejected
    st = TaskState(task, 1, tuner=None, trials=8, best=[2e-5], progress=lucky)
    row = _scheduled_row(st, "random")
    assert row[5:7] == [f"{task.flop / 2e-5 / 1e9:.2f}", "0.0200"]


def test_tune_op_with_control_calibrates_the_units_first(monkeypatch, tmp_path: Path) -> None:
    from autotune.cli import main
    from autotune.measure import LocalRunner

    calls: list[list[str]] = []
    real = LocalRunner.calibrate

    def spy(self, tasks, rounds=15, peaks=True):
        calls.append([t.workload_key for t in tasks])
        return real(self, tasks, rounds=2, peaks=peaks)

    monkeypatch.setattr(LocalRunner, "calibrate", spy)
    db = str(tmp_path / "t.db")
    assert main(["tune", "--op", "matmul:32x32x32", "--op", "matmul:16x16x16",
                 "--trials", "2", "--tuner", "random", "--control", "--db", db,
                 "--no-progress", "--min-repeat-ms", "1", "--repeat", "1"]) == 0
    assert len(calls) == 1 and len(calls[0]) == 2  # both tasks, once, before tuning
    calls.clear()
    assert main(["tune", "--op", "matmul:32x32x32", "--trials", "2", "--tuner",
                 "random", "--db", db, "--no-progress", "--min-repeat-ms", "1"]) == 0
    assert calls == []  # without control there are no units to set


def test_tune_untuned_only_tunes_just_the_tasks_without_a_record(tmp_path: Path) -> None:
    from autotune.extract import extract_tasks
    from relay_ir.frontend.onnx import from_onnx
    from tests.autotune.test_model_confirm import _confirmed
    from tuning_logs import TuningDatabase

    _two_convs(tmp_path)
    mod, params = from_onnx(str(tmp_path / "two.onnx"))
    # the stem, and the 8 -> 16 3x3 conv's direct and Winograd tasks
    first, *others = [t for t, _ in extract_tasks(mod, "llvm", params)]
    assert len(others) == 2
    with TuningDatabase(tmp_path / "t.db") as db:
        _confirmed(db, first, [0.9])
        before = db.count(first.workload_key)
    out = _tessel("tune", "two.onnx", "--untuned-only", "--trials-per-task", "2", "--tuner",
                  "random", "--db", "t.db", "--no-progress", "--no-model-confirm",
                  "--min-repeat-ms", "1", cwd=tmp_path).stdout
    assert "--untuned-only: 2 of 3 tasks have no record in t.db that a build here reads" in out
    with TuningDatabase(tmp_path / "t.db") as db:
        assert db.count(first.workload_key) == before
        assert all(db.count(t.workload_key) > 0 for t in others)


def test_tune_untuned_only_counts_a_task_whose_records_all_failed_as_untuned(
        tmp_path: Path) -> None:
    from autotune.extract import extract_tasks
    from relay_ir.frontend.onnx import from_onnx
    from tests.autotune.test_model_confirm import _confirmed
    from tuning_logs import MeasureRecord, TuningDatabase

    _two_convs(tmp_path)
    mod, params = from_onnx(str(tmp_path / "two.onnx"))
    first, *others = [t for t, _ in extract_tasks(mod, "llvm", params)]
    with TuningDatabase(tmp_path / "t.db") as db:
        _confirmed(db, first, [0.9])
        for t in others:  # a build applies neither: both timed out
            db.add(MeasureRecord(t.workload_key, t.template, t.target, t.device_key,
                                 t.default_config().to_json(), error_kind="timeout",
                                 error_msg="ran past 10 s", tuner="test"))
    out = _tessel("tune", "two.onnx", "--untuned-only", "--trials-per-task", "2", "--tuner",
                  "random", "--db", "t.db", "--no-progress", "--no-model-confirm",
                  "--min-repeat-ms", "1", cwd=tmp_path).stdout
    assert "--untuned-only: 2 of 3 tasks have no record in t.db that a build here reads" in out


def test_tune_untuned_only_with_every_task_recorded_confirms_and_tunes_nothing(
        tmp_path: Path) -> None:
    from autotune.extract import extract_tasks
    from relay_ir.frontend.onnx import from_onnx
    from tests.autotune.test_model_confirm import _confirmed
    from tuning_logs import TuningDatabase

    _two_convs(tmp_path)
    mod, params = from_onnx(str(tmp_path / "two.onnx"))
    with TuningDatabase(tmp_path / "t.db") as db:
        for task, _ in extract_tasks(mod, "llvm", params):
            _confirmed(db, task, [0.9])
        before = db.count()
    out = _tessel("tune", "two.onnx", "--untuned-only", "--trials-per-task", "2", "--db",
                  "t.db", "--no-progress", "--no-model-confirm", cwd=tmp_path).stdout
    assert "every task has a record in t.db that a build here reads" in out
    assert "; nothing tuned, the records are confirmed in the model" in out
    with TuningDatabase(tmp_path / "t.db") as db:
        assert db.count() == before


def test_tune_untuned_only_without_a_model_says_it_needs_one(tmp_path: Path) -> None:
    got = _tessel("tune", "--op", "matmul:16x16x16", "--untuned-only", "--db", "t.db",
                  cwd=tmp_path, ok=False)
    assert got.returncode != 0 and "--untuned-only picks among a model's tasks" in got.stderr


def test_tune_model_says_how_many_threads_it_times_on(tmp_path: Path) -> None:
    _two_convs(tmp_path)
    out = _tessel("tune", "two.onnx", "--trials", "0", "--db", "t.db", "--no-model-confirm",
                  cwd=tmp_path).stdout
    assert "threads: " in out and "records are filed at this count" in out
