"""Looking up tuned configs when compiling: the best record of a task on this device.

A compiler (relay_ir.build's template path) asks `best_config(template, specs, attrs,
target)` for the config to apply; with no database in scope (`tuning_logs.using_database`)
or no record for the task it gets None and uses the template's fallback, and the task is
remembered in `untuned()` so the caller can warn once, listing them.

    >>> best_config("matmul.x86", [((8, 8), "float32"), ((8, 8), "float32")], {}) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autotune.task import Task
from schedule.space import ConfigEntity
from tuning_logs import TuningDatabase, current_database

_UNTUNED: dict[str, Task] = {}


def best_config(template: str, specs: Sequence[Any], attrs: dict[str, Any],
                target: str = "llvm", db: TuningDatabase | None = None,
                any_device: bool = False) -> ConfigEntity | None:
    """The best tuned config of the task on this device, or None (fallback schedule)."""
    db = db if db is not None else current_database()
    if db is None:
        return None
    task = Task(template, list(specs), attrs, str(target))
    rec = db.best_record(task.workload_key, task.target,
                         None if any_device else task.device_key)
    if rec is None:
        _UNTUNED[task.workload_key] = task
        return None
    try:
        return task.config_from_json(rec.config_json)
    except Exception:  # recorded by another version of the template: not applicable
        _UNTUNED[task.workload_key] = task
        return None


def untuned(clear: bool = True) -> list[Task]:
    """The tasks `best_config` found no record for since the last call."""
    out = list(_UNTUNED.values())
    if clear:
        _UNTUNED.clear()
    return out
