"""autotune: tuning tasks, measurement in killable workers, cost model, tuners, the loop.

    >>> from autotune import parse_op_spec, make_tuner, FakeRunner, tune
    >>> task = parse_op_spec("matmul:64x64x64")
    >>> task.template
    'matmul.x86'
"""

from autotune.extract import extract_tasks
from autotune.measure import (
    BuildResult,
    FakeRunner,
    LocalBuilder,
    LocalRunner,
    MeasureInput,
    MeasureResult,
)
from autotune.op_spec import OpSpecError, parse_op_spec
from autotune.task import Task
from autotune.tuners import GATuner, GridTuner, RandomTuner, Tuner, XGBTuner, make_tuner
from autotune.tuning import TuneProgress, tune

__all__ = ["BuildResult", "FakeRunner", "GATuner", "GridTuner", "LocalBuilder", "LocalRunner",
           "MeasureInput", "MeasureResult", "OpSpecError", "RandomTuner", "Task", "Tuner",
           "TuneProgress", "XGBTuner", "extract_tasks", "make_tuner", "parse_op_spec",
           "tune"]
