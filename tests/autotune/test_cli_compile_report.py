"""`tessel compile` reports what the build applied: the count comes from the build's own
TuningScope, so a record the split rule refuses on more than one thread is not counted as
applied, and the report says so (run as `python -m autotune.cli` in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from autotune import FakeRunner, Task
from autotune.block_rule import block_rule
from autotune.tuning import default_as_run
from schedule.templates import partition_of
from tessel_target import legacy_device_key
from tuning_logs import MeasureRecord, TuningDatabase, canonical_json

ROOT = Path(__file__).resolve().parents[2]
CONV = "conv2d_NCHWc.x86"


def _conv_onnx(d: Path) -> Path:
    """conv.onnx: a 3x3 conv, 16 -> 32 channels on 1x16x12x12, constant weight."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(5).standard_normal(
        (32, 16, 3, 3)).astype("float32"), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                              [1, 16, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
              d / "conv.onnx")
    return d / "conv.onnx"


def _splitting_otherwise(task: Task) -> str:
    """A config that keeps the model's channel block but splits the output among threads
    otherwise than the task's default as the model runs it."""
    runner = FakeRunner(lambda t, c: 1.0, model_layout=True)
    split = partition_of(task.template, default_as_run(task, runner))
    rule = block_rule(task, runner)
    for j in range(rule.size if rule is not None else task.space.size):
        cfg = task.space.get(rule.point(j) if rule is not None else j)
        if partition_of(task.template, cfg) not in (None, split):
            return canonical_json(cfg.to_json())
    raise AssertionError("every config of the task splits as its default")


def _compile(cwd: Path, threads: int) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TESSEL_NUM_THREADS=str(threads),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "autotune.cli", "compile", "conv.onnx", "--db",
                        "t.db", "-o", f"c{threads}.tessel"], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    return p


def test_compile_counts_a_record_the_split_rule_refuses_as_not_applied(tmp_path: Path) -> None:
    from autotune.extract import extract_tasks
    from relay_ir.frontend.onnx import from_onnx

    mod, params = from_onnx(str(_conv_onnx(tmp_path)))
    # the direct conv's task (the Winograd template's, its alternate, has no record)
    [task] = [t for t, _ in extract_tasks(mod, "llvm", params) if t.template == CONV]
    with TuningDatabase(tmp_path / "t.db") as db:  # filed without a count: any count reads it
        db.add(MeasureRecord(task.workload_key, task.template, task.target,
                             legacy_device_key(task.device_key), _splitting_otherwise(task),
                             costs=(1e-4,), tuner="test"))
    one = _compile(tmp_path, 1).stdout
    assert "1 of 1 tunable tasks apply tuning records on this device" in one
    assert "split rule" not in one
    two = _compile(tmp_path, 2).stdout
    assert "0 of 1 tunable tasks apply tuning records on this device" in two
    assert "the split rule refused the records of 1 of the others" in two
    assert "`TESSEL_NUM_THREADS=2 tessel tune MODEL --db t.db`" in two
