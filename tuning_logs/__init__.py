"""tuning_logs: the SQLite database of every autotuning measurement, and its queries.

Imports nothing of Tessel's except the error classes, so any layer may use it.

    >>> import tempfile, pathlib
    >>> from tuning_logs import MeasureRecord, TuningDatabase
    >>> with TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "tuning.db") as db:
    ...     db.add(MeasureRecord("mm", "matmul_x86", "llvm", "cpu0", {"tile": 16}, (1e-3,)))
    ...     db.best_record("mm", "llvm", "cpu0").config
    True
    {'tile': 16}
"""

from .context import current_database, resolve_database, using_database
from .database import DEFAULT_DB_PATH, ImportReport, TaskSummary, TuningDatabase
from .record import (
    CONFIRM_TUNER,
    ERROR_KINDS,
    TESSEL_VERSION,
    ErrorKind,
    MeasureRecord,
    ScheduleDecision,
    canonical_json,
)
from .schema import SCHEMA_VERSION

__all__ = [
    "CONFIRM_TUNER",
    "DEFAULT_DB_PATH",
    "ERROR_KINDS",
    "SCHEMA_VERSION",
    "TESSEL_VERSION",
    "ErrorKind",
    "ImportReport",
    "MeasureRecord",
    "ScheduleDecision",
    "TaskSummary",
    "TuningDatabase",
    "canonical_json",
    "current_database",
    "resolve_database",
    "using_database",
]
