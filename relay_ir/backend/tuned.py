"""Tuned configs for compiling: the best record of a template task, on this device by default.

relay_ir.build's template path asks `tuned_config(...)` for the config of each anchor. Build
sets the records to read for the whole compilation with `applying_records(db, any_device)`;
outside such a block `tuned_config` reads the database of an enclosing
`tuning_logs.using_database`, if any. With no database, or no record of the task, it returns
None, the template's fallback is used, and the task is noted so that build can warn once,
listing the untuned tasks. Records of another device (target + CPU model + features, see
lowering.target.device_key) are used only with `any_device=True`, and only for tasks this
device has no record of (timings of different machines do not compare); build then warns how
many tasks took them. The workload key comes from schedule.templates.workload_key, the same
function autotune files records under.

A model with `?` dims compiles its kernels at the first run with each shape, after build
returned: `TuningSource` remembers the database file and `any_device` at build time, and
reopens the file read-only for those lazy compilations.

    >>> tuned_config("matmul.x86", [((8, 8), "float32"), ((8, 8), "float32")], {}, "llvm")
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lowering.target import device_key
from schedule.space import ConfigEntity
from schedule.templates import config_space, workload_key
from tessel_errors import RelayError, TesselError
from tuning_logs import TuningDatabase, current_database


@dataclass
class TuningScope:
    """The records one compilation reads, and what it found: tasks without a record
    (`untuned`), tasks of which only other devices have records (`elsewhere`, a subset of
    `untuned`), tasks that used records of other devices (`foreign`)."""

    db: TuningDatabase | None
    any_device: bool = False
    untuned: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)

    def warn(self, stacklevel: int = 2) -> None:
        """One warning for the untuned tasks, one for tasks tuned on other devices.

            >>> TuningScope(None).warn()   # no database: nothing to say
        """
        if self.db is None:
            return
        where = "on any device" if self.any_device else "on this device"
        if self.untuned:
            hint = ""
            if self.elsewhere:
                hint = (f"; {len(self.elsewhere)} of them have records of other devices, "
                        "which any_device=True (tessel compile --any-device) would apply")
            warnings.warn(
                f"{len(self.untuned)} tunable task(s) have no tuning record {where} in "
                f"{self.db.path}; they use the default schedule (tune them with "
                f"`tessel tune`{hint}): " + "; ".join(self.untuned), stacklevel=stacklevel + 1)
        if self.foreign:
            warnings.warn(
                f"{len(self.foreign)} tunable task(s) use tuning records of other devices "
                f"from {self.db.path} (any_device=True), not measured on this one: "
                + "; ".join(self.foreign), stacklevel=stacklevel + 1)


# the scope of the compilation in progress (None: outside build, read current_database())
_SCOPE: ContextVar[TuningScope | None] = ContextVar("tessel_tuning_scope", default=None)


def tuned_config(template: str, specs: Sequence[Any], attrs: dict[str, Any],
                 target: Any) -> ConfigEntity | None:
    """The best tuned config of this task for `target` (on this device by default), or None.

        >>> tuned_config("dense.x86", [((4, 16), "float32"), ((32, 16), "float32")], {},
        ...              "llvm") is None   # no database in scope
        True
    """
    scope = _SCOPE.get()
    if scope is None:
        scope = TuningScope(current_database())
    if scope.db is None:
        return None
    key = workload_key(template, specs, attrs)
    here = device_key(str(target))
    rec = _best(scope.db, key, str(target), here)
    if rec is None and scope.any_device:
        # this device's own record wins even if another machine measured a faster one:
        # timings of different machines do not compare
        rec = _best(scope.db, key, str(target), None)
    if rec is not None:
        try:
            cfg = config_space(template, list(specs), attrs).from_json(rec.config_json)
        except TesselError:  # recorded by another version of the template: not applicable
            pass
        else:
            if rec.device_key != here and key not in scope.foreign:
                scope.foreign.append(key)
            return cfg
    if key not in scope.untuned:
        scope.untuned.append(key)
        if not scope.any_device and _best(scope.db, key, str(target), None) is not None:
            scope.elsewhere.append(key)
    return None


def _best(db: TuningDatabase, key: str, target: str, device: str | None) -> Any:
    try:
        return db.best_record(key, target, device)
    except TesselError as e:
        # a RelayError, so that lower_group does not take it for a template that does not
        # apply and silently compile the default schedule (e.g. a database closed by then)
        raise RelayError(f"relay_ir.build cannot read its tuning records: {e}") from None


@contextlib.contextmanager
def applying_records(db: TuningDatabase | None,
                     any_device: bool = False) -> Iterator[TuningScope]:
    """Within the block, `tuned_config` reads `db` (None: no records, whatever is current).

        >>> with applying_records(None) as scope:
        ...     tuned_config("matmul.x86", [((8, 8), "float32")] * 2, {}, "llvm") is None
        True
    """
    scope = TuningScope(db, any_device)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


@dataclass(frozen=True)
class TuningSource:
    """Which records a built model's later (lazy) compilations apply: a database file, read
    again at each compilation, or None; and whether records of other devices count.

        >>> TuningSource.of(None, any_device=True)
        TuningSource(path=None, any_device=True)
    """

    path: Path | None = None
    any_device: bool = False

    @staticmethod
    def of(db: TuningDatabase | None, any_device: bool = False) -> TuningSource:
        """The source for the database build used (its file, as an absolute path).

            >>> TuningSource.of(None).path is None
            True
        """
        return TuningSource(None if db is None else Path(db.path).resolve(), any_device)

    @contextlib.contextmanager
    def opened(self) -> Iterator[TuningDatabase | None]:
        """The database reopened read-only for the block; None, with a warning, if it is gone.

            >>> with TuningSource().opened() as db:
            ...     db is None
            True
        """
        if self.path is None:
            yield None
            return
        try:
            db = TuningDatabase(self.path, readonly=True)
        except TesselError as e:
            warnings.warn(f"cannot reopen the tuning database given to relay_ir.build ({e}); "
                          "the kernels compiled for these input shapes use the default "
                          "schedules", stacklevel=6)  # the caller of run / profile
            yield None
            return
        with db:
            yield db
