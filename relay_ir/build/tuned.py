"""Tuned configs for compiling: the best record of a template task on this device.

relay_ir.build's template path asks `tuned_config(...)` for the config of each anchor; with
no tuning database in scope (`tuning_logs.using_database`, or `build(..., tuning_db=...)`)
or no record on this device it gets None, uses the template's fallback, and the task is
noted so that build can warn once, listing the untuned tasks. The workload key comes from
schedule.templates.workload_key, the same function autotune files records under.

    >>> tuned_config("matmul.x86", [((8, 8), "float32"), ((8, 8), "float32")], {}, "llvm")
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

from lowering.target import device_key
from schedule.space import ConfigEntity
from schedule.templates import config_space, workload_key
from tessel_errors import TesselError
from tuning_logs import current_database

# workload keys that had no usable record during the current build (None: not collecting)
_UNTUNED: ContextVar[list[str] | None] = ContextVar("tessel_untuned", default=None)


def tuned_config(template: str, specs: Sequence[Any], attrs: dict[str, Any],
                 target: Any) -> ConfigEntity | None:
    """The best tuned config of this task for `target` on this device, or None."""
    db = current_database()
    if db is None:
        return None
    key = workload_key(template, specs, attrs)
    rec = db.best_record(key, str(target), device_key(str(target)))
    if rec is not None:
        try:
            return config_space(template, list(specs), attrs).from_json(rec.config_json)
        except TesselError:  # recorded by another version of the template: not applicable
            pass
    untuned = _UNTUNED.get()
    if untuned is not None and key not in untuned:
        untuned.append(key)
    return None


class collect_untuned:
    """Within the block, remember the tasks `tuned_config` found no record for."""

    def __enter__(self) -> list[str]:
        self._keys: list[str] = []
        self._token = _UNTUNED.set(self._keys)
        return self._keys

    def __exit__(self, *exc: Any) -> None:
        _UNTUNED.reset(self._token)
