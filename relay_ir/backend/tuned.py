"""Tuned configs for compiling: the one lookup of a template task's tuning record.

`find_tuned(db, template, specs, attrs, target)` says which record, if any, a compilation
applies to a task; relay_ir.build (through a `TuningScope`), `tessel compile`'s count of
tuned tasks and the tests all ask it, so they cannot disagree. The rules:

- this device's best record (device key = target + CPU model + features + the thread
  count this process runs kernels on, see tessel_target.device_key): a record timed at
  another thread count does not apply, since a schedule that wins on one thread can lose
  on two;
- for a task with no record at this count, its best legacy record (filed before the
  count was part of the key: it applies at any count, as it always did);
- with `any_device=True`, and only for a task this device has no record of, the best
  record of any device of the target (timings of different machines do not compare, so
  this device's own record wins even when another machine measured a faster config);
- a record whose config no longer fits the template (recorded by another version of it)
  does not apply.

The workload key comes from schedule.templates.workload_key, the same function autotune
files records under.

A compilation holds a `TuningScope`: the database it reads and what it found (tasks
without a record, tasks tuned only elsewhere or only at other thread counts, tasks that
used other devices' records), so that build warns once, listing them. The scope is
passed to lower_group explicitly.

A model with `?` dims compiles its kernels at the first run with each shape, after build
returned: `TuningSource` remembers the database file and `any_device` at build time, and
reopens the file read-only for those lazy compilations.

    >>> TuningScope(None).config("matmul.x86", [((8, 8), "float32")] * 2, {}, "llvm") is None
    True
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lowering.kernel import num_threads
from schedule.space import ConfigEntity
from schedule.templates import config_space, older_workload_keys, workload_key
from tessel_errors import RelayError, TesselError
from tessel_target import (
    at_other_thread_counts,
    device_key,
    device_threads,
    read_device_keys,
)
from tuning_logs import MeasureRecord, TuningDatabase


@dataclass(frozen=True)
class TunedConfig:
    """A task's tuning record and its config, instantiated for the template."""

    record: MeasureRecord
    config: ConfigEntity

    @property
    def from_this_device(self) -> bool:
        """Whether the record was measured on this machine (for the record's target), at
        this thread count or before records had one."""
        return self.record.device_key in read_device_keys(device_key(self.record.target))


def find_tuned(db: TuningDatabase, template: str, specs: Sequence[Any],
               attrs: dict[str, Any], target: Any, any_device: bool = False,
               accept: Callable[[ConfigEntity], bool] | None = None
               ) -> TunedConfig | None:
    """The record a compilation applies to this task, or None (the template's fallback).
    `accept(config)`: the fastest record whose config it accepts (on several threads, one
    that splits the output among them as the default does: lower_group.applied_config),
    from the device key whose records apply (this thread count's, else the legacy one).

        >>> import tempfile, pathlib
        >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
        >>> find_tuned(db, "dense.x86", [((4, 16), "float32"), ((32, 16), "float32")], {},
        ...            "llvm") is None
        True
    """
    key = workload_key(template, specs, attrs)
    devices: list[str | None] = list(read_device_keys(device_key(str(target))))
    if any_device:
        devices.append(None)
    for device in devices:  # this count's, then legacy, then (asked for) any device's
        recs = _best(db, key, str(target), device, 1 if accept is None else ACCEPT_DEPTH)
        if not recs:
            continue
        try:  # one space for the records read (up to ACCEPT_DEPTH of them)
            space = config_space(template, list(specs), attrs, target)
        except TesselError:
            return None
        for rec in recs:
            try:
                cfg = space.from_json(rec.config_json)
            except TesselError:  # recorded by another version of the template
                return None
            if accept is None or accept(cfg):
                return TunedConfig(rec, cfg)
        return None  # the records of the key that applies: none accepted
    return None


# how many of a task's fastest records `find_tuned` reads for one its `accept` takes
ACCEPT_DEPTH = 64


def other_thread_counts(db: TuningDatabase, template: str, specs: Sequence[Any],
                        attrs: dict[str, Any], target: Any) -> list[int]:
    """The thread counts other than this process's at which this device has successful
    records of the task (which a build here does not apply).

        >>> import tempfile, pathlib
        >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
        >>> other_thread_counts(db, "dense.x86", [((4, 16), "float32")] * 2, {}, "llvm")
        []
    """
    try:
        history = db.history(workload_key(template, specs, attrs), str(target))
    except TesselError as e:
        raise RelayError(f"relay_ir.build cannot read its tuning records: {e}") from None
    return sorted({device_threads(r.device_key)
                   for r in at_other_thread_counts(history, device_key(str(target)))
                   if r.ok})


def _best(db: TuningDatabase, key: str, target: str, device: str | None, k: int = 1
          ) -> list[Any]:
    try:
        return db.best(key, target, device, k=k)
    except TesselError as e:
        # a RelayError, so that lower_group does not take it for a template that does not
        # apply and compile the default schedule (e.g. a database closed by then)
        raise RelayError(f"relay_ir.build cannot read its tuning records: {e}") from None


@dataclass
class TuningScope:
    """The records one compilation reads, and what it found: tasks with a record
    (`found`), tasks without one (`untuned`), tasks of which only other devices have
    records (`elsewhere`, a subset of `untuned`), tasks of which this device has records
    only at other thread counts (`other_threads`, a subset of `untuned`, apart from
    `elsewhere`), tasks that used records of other devices (`foreign`), tasks whose record
    the split rule refused (`other_split`, a subset of `found`: lower_group.applied_config
    notes them). What the build applied is `applied`; `report` says it in words.

        >>> scope = TuningScope(None)
        >>> scope.config("dense.x86", [((4, 16), "float32"), ((32, 16), "float32")], {},
        ...              "llvm") is None, scope.untuned
        (True, [])
    """

    db: TuningDatabase | None
    any_device: bool = False
    found: list[str] = field(default_factory=list)
    untuned: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    other_threads: dict[str, list[int]] = field(default_factory=dict)  # key: the counts
    stale: list[str] = field(default_factory=list)  # with records of an older template
    # tasks whose record was not applied on more than one thread: it splits the output
    # among threads otherwise than the default (lower_group.default_partition)
    other_split: list[str] = field(default_factory=list)

    def config(self, template: str, specs: Sequence[Any], attrs: dict[str, Any],
               target: Any) -> ConfigEntity | None:
        """The tuned config of the task (`find_tuned`), noting what was found."""
        if self.db is None:
            return None
        key = workload_key(template, specs, attrs)
        got = find_tuned(self.db, template, specs, attrs, target, self.any_device)
        if got is not None:
            if key not in self.found:
                self.found.append(key)
            if not got.from_this_device and key not in self.foreign:
                self.foreign.append(key)
            return got.config
        if key not in self.untuned:
            self.untuned.append(key)
            counts = other_thread_counts(self.db, template, specs, attrs, target)
            if counts:
                self.other_threads[key] = counts
            elif not self.any_device and \
                    find_tuned(self.db, template, specs, attrs, target, True) is not None:
                self.elsewhere.append(key)
            if any(self.db.history(k, limit=1)
                   for k in older_workload_keys(template, specs, attrs)):
                self.stale.append(key)
        return None

    @property
    def applied(self) -> list[str]:
        """The tasks whose record the compilation applied: those with a record (`found`)
        but for those whose record the split rule refused (`other_split`), which
        lower_group.applied_config notes after `config` found it.

            >>> scope = TuningScope(None, found=["a", "b"], other_split=["b"])
            >>> scope.applied
            ['a']
        """
        return [k for k in self.found if k not in self.other_split]

    def report(self) -> str:
        """What the compilation applied, in words (`tessel compile` prints it): how many
        of the tunable tasks it compiled applied a record, and how many records the split
        rule refused (on more than one thread, see lower_group.splits_otherwise), with
        how to get records that apply here.

            >>> TuningScope(None).report()
            'no tuning database: every task uses its default schedule'
        """
        if self.db is None:
            return "no tuning database: every task uses its default schedule"
        where = "on any device" if self.any_device else "on this device"
        text = (f"{len(self.applied)} of {len(self.found) + len(self.untuned)} tunable "
                f"tasks apply tuning records {where} from {self.db.path}")
        if self.other_split:
            n = num_threads()
            text += (
                f"; the split rule refused the records of {len(self.other_split)} of the "
                f"others: on more than one thread (here {n}) a record that splits the output "
                "among threads otherwise than the default does not apply (the kernel before "
                "left the data in the caches of the default's split); they apply on one "
                f"thread. To tune at {n} threads: `TESSEL_NUM_THREADS={n} tessel tune MODEL "
                f"--db {self.db.path}` (its records apply where they split as the default "
                "does)")
        return text

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
            if self.stale:
                hint += (f"; {len(self.stale)} of them have records of an older version of "
                         "their template, which no longer apply: tune them again")
            if self.other_threads:
                hint += (f"; {len(self.other_threads)} of them have records at other "
                         "thread counts only (see the next warning)")
            warnings.warn(
                f"{len(self.untuned)} tunable task(s) have no tuning record {where} in "
                f"{self.db.path}; they use the default schedule (tune them with "
                f"`tessel tune`{hint}): " + "; ".join(self.untuned), stacklevel=stacklevel + 1)
        if self.other_split:
            warnings.warn(
                f"{len(self.other_split)} tuned task(s) run their default on "
                f"{num_threads()} threads: their records split the output among threads "
                "otherwise than the default (by rows or by channel chunks), which loses "
                "where the kernel before wrote the data on other cores; they still apply "
                "on one thread: " + "; ".join(self.other_split), stacklevel=stacklevel + 1)
        if self.other_threads:
            n = num_threads()
            counts = sorted({c for cs in self.other_threads.values() for c in cs})
            warnings.warn(
                f"{len(self.other_threads)} tunable task(s) have tuning records in "
                f"{self.db.path} timed only at {', '.join(map(str, counts))} thread(s), not "
                f"at the {n} this build runs kernels on; a schedule that wins at one count "
                f"can lose at another, so they use the default schedule. To fix: tune at "
                f"{n} (`TESSEL_NUM_THREADS={n} tessel tune MODEL --db {self.db.path}`), or "
                f"confirm those records at {n} (the same with `--trials 0`), or build "
                f"with TESSEL_NUM_THREADS set to the count they were tuned at: "
                + "; ".join(self.other_threads), stacklevel=stacklevel + 1)
        if self.foreign:
            warnings.warn(
                f"{len(self.foreign)} tunable task(s) use tuning records of other devices "
                f"from {self.db.path} (any_device=True), not measured on this one: "
                + "; ".join(self.foreign), stacklevel=stacklevel + 1)


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
    def opened(self) -> Iterator[TuningScope]:
        """A scope over the database reopened read-only for the block; a scope without
        records, with a warning, if the file is gone.

            >>> with TuningSource().opened() as scope:
            ...     scope.db is None
            True
        """
        if self.path is None:
            yield TuningScope(None, self.any_device)
            return
        try:
            db = TuningDatabase(self.path, readonly=True)
        except TesselError as e:
            warnings.warn(f"cannot reopen the tuning database given to relay_ir.build ({e}); "
                          "the kernels compiled for these input shapes use the default "
                          "schedules", stacklevel=6)  # the caller of run / profile
            yield TuningScope(None, self.any_device)
            return
        with db:
            yield TuningScope(db, self.any_device)


__all__ = ["TunedConfig", "TuningScope", "TuningSource", "find_tuned", "other_thread_counts"]
