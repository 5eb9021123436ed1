"""The tuning database: every measurement of every task, and the queries tuners and builds ask.

Writes are one immediate transaction each (`add`) or one for a batch (`add_many`, imports),
and the file is in WAL mode, so several tuning processes can share one database and none
loses a record. Resume rests on `has_config` / `measured_configs`: a config already recorded
for a (workload, target, device) is never measured again, whatever its outcome was.

    >>> import tempfile, pathlib
    >>> from tuning_logs import MeasureRecord
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "logs" / "tuning.db"
    >>> with TuningDatabase(path) as db:
    ...     _ = db.add(MeasureRecord("mm", "matmul_x86", "llvm", "cpu0", {"t": 8}, (2e-3,)))
    ...     _ = db.add(MeasureRecord("mm", "matmul_x86", "llvm", "cpu0", {"t": 4}, (1e-3,)))
    ...     db.best("mm", "llvm", "cpu0")[0].config, db.has_config("mm", "llvm", "cpu0", {"t": 8})
    ({'t': 4}, True)
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tessel_errors import TuningLogError

from .record import CONFIRM_TUNER, MeasureRecord, ScheduleDecision, canonical_json
from .schema import (
    BUSY_TIMEOUT_S,
    DECISIONS_DDL,
    MEASUREMENT_COLUMNS,
    REJECTED,
    connect,
    initialise,
    inspect_file,
    read_as_current,
    upgrade,
)

DEFAULT_DB_PATH = Path("tuning_logs") / "tuning.db"  # relative: under the current directory

_INSERT = (f"INSERT OR IGNORE INTO measurements ({', '.join(MEASUREMENT_COLUMNS)}) "
           f"VALUES ({', '.join('?' * len(MEASUREMENT_COLUMNS))})")
_SELECT = "SELECT * FROM measurements"


@dataclass(frozen=True, slots=True)
class TaskSummary:
    """What the database knows of one (workload, target, device): trials and the best so far.

        >>> TaskSummary("mm", "matmul_x86", "llvm", "cpu0", 10, 9, 0.5, 2e9, 0.0).best_gflops
        4.0
    """

    workload_key: str
    template: str
    target: str
    device_key: str
    trials: int
    ok_trials: int
    best_mean: float | None
    flops: float | None
    last_update: float

    @property
    def best_gflops(self) -> float | None:
        """GFLOP/s of the best measurement, when the task's flops are known.

            >>> TaskSummary("mm", "t", "llvm", "d", 1, 0, None, 2e9, 0.0).best_gflops is None
            True
        """
        if self.flops is None or self.best_mean is None:
            return None
        return self.flops / self.best_mean / 1e9


@dataclass(frozen=True, slots=True)
class ImportReport:
    """How many records an import or merge added and how many it skipped as duplicates.

        >>> ImportReport(added=3, duplicates=1).total
        4
    """

    added: int
    duplicates: int

    @property
    def total(self) -> int:
        """Records read from the source.

            >>> ImportReport(0, 0).total
            0
        """
        return self.added + self.duplicates


def _row_values(r: MeasureRecord) -> tuple[Any, ...]:
    return (r.workload_key, r.template, r.target, r.device_key, r.config_json,
            json.dumps(list(r.costs)), r.mean, r.error_kind.value, r.error_msg, r.timestamp,
            r.tuner, r.tessel_version, r.flops, r.attrs_json, r.digest())


def _from_row(row: Mapping[str, Any]) -> MeasureRecord:
    try:
        return MeasureRecord(
            workload_key=row["workload_key"], template=row["template"], target=row["target"],
            device_key=row["device_key"], config_json=row["config"],
            costs=tuple(json.loads(row["costs"])), error_kind=row["error_kind"],
            error_msg=row["error_msg"], timestamp=row["timestamp"], tuner=row["tuner"],
            tessel_version=row["tessel_version"], flops=row["flops"],
            attrs_json=row["attrs"], record_id=row["id"])
    except (TuningLogError, ValueError, TypeError, KeyError, RecursionError) as e:
        raise TuningLogError(f"measurement row {row.get('id')} of the tuning database is "
                             f"damaged: {e}") from None


MAX_LINE_BYTES = 1 << 20  # a record is a few hundred bytes; error messages are cut at 2000


def _read_lines(f: IO[bytes] | IO[str], name: str) -> list[MeasureRecord]:
    """Every record of a JSON-lines file, or TuningLogError naming the first bad line."""
    records = []
    for lineno in itertools.count(1):
        line = f.readline(MAX_LINE_BYTES + 1)
        if not line:
            return records
        try:
            if len(line) > MAX_LINE_BYTES:
                raise TuningLogError(f"bad measure record: the line is over {MAX_LINE_BYTES} "
                                     "bytes, far longer than any record")
            if isinstance(line, bytes):
                try:
                    line = line.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise TuningLogError(f"bad measure record: not UTF-8 text ({e.reason} at "
                                         f"byte {e.start})") from None
            if line.strip():
                records.append(MeasureRecord.from_json(line))
        except TuningLogError as e:
            raise TuningLogError(f"{name}:{lineno}: {e}; nothing was imported") from None


def _where(**conditions: Any) -> tuple[str, list[Any]]:
    # None means "any"; keys are column names, values compared with '='.
    parts, params = [], []
    for column, value in conditions.items():
        if value is not None:
            parts.append(f"{column} = ?")
            params.append(value)
    return (" WHERE " + " AND ".join(parts)) if parts else "", params


class TuningDatabase:
    """A SQLite tuning database at `path` (created with its folders when missing).

    `readonly=True` opens an existing database without ever writing to it (used to read the
    source of a merge). `timeout` is how many seconds a write waits while another process
    writes. Use it as a context manager, or call `close()`.

        >>> import tempfile, pathlib
        >>> with TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "a" / "t.db") as db:
        ...     db.count()
        0
    """

    def __init__(self, path: str | Path = DEFAULT_DB_PATH, *, readonly: bool = False,
                 timeout: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._lock = threading.RLock()  # one connection, shared by a tuner's threads
        state = inspect_file(self.path)  # raises, untouched, on a corrupt or foreign file
        if readonly and state != "ours":
            raise TuningLogError(f"no tuning database at {str(self.path)!r} "
                                 f"({'the file is empty' if state == 'empty' else 'no file'}); "
                                 f"run `tessel tune` with --db {self.path} first")
        try:
            if state == "new":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = connect(self.path, readonly=readonly, timeout=timeout)
        except (OSError, sqlite3.OperationalError) as e:
            raise TuningLogError(f"cannot open tuning database {str(self.path)!r}: {e}") from None
        try:
            if state != "ours":
                initialise(self._db)
            elif readonly:
                read_as_current(self._db)  # an older file read as this version reads it
            else:
                upgrade(self._db)  # an older file opened for writing: made this version
        except sqlite3.OperationalError as e:
            self._db.close()
            raise TuningLogError(f"cannot open tuning database {str(self.path)!r}: {e} "
                                 f"(another process may hold it locked, or the folder is "
                                 f"read-only)") from None

    # -- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; the object is unusable afterwards.

            >>> import tempfile, pathlib
            >>> TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db").close()
        """
        with self._lock:
            self._db.close()

    def __enter__(self) -> TuningDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TuningDatabase({str(self.path)!r}{', readonly=True' if self.readonly else ''})"

    def __getstate__(self) -> None:
        # A connection cannot cross processes; a worker should open the path itself.
        raise TypeError(f"a TuningDatabase cannot be pickled or sent to another process; "
                        f"pass its path ({str(self.path)!r}) and open it there")

    # -- writes ---------------------------------------------------------------------------

    def _check_writable(self, what: str) -> None:
        if self.readonly:
            raise TuningLogError(f"cannot {what}: {str(self.path)!r} was opened read-only")

    @contextlib.contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction, locked at the start, with SQLite's failures made ours."""
        self._check_writable(what)
        with self._lock, self._translate_errors(what):
            # IMMEDIATE takes the write lock now, so a busy database is waited for (busy
            # timeout) instead of failing later when a read lock would need upgrading.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db.conn
                self._db.commit()
            except BaseException:
                self._db.rollback()
                raise

    @contextlib.contextmanager
    def _translate_errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.ProgrammingError as e:  # e.g. used after close()
            raise TuningLogError(f"cannot {what} in {str(self.path)!r}: {e}") from None
        except sqlite3.OperationalError as e:
            raise TuningLogError(f"cannot {what} in {str(self.path)!r}: {e} (another process "
                                 f"may hold the database locked, or the disk is full or "
                                 f"read-only)") from None

    def _insert(self, records: Iterable[MeasureRecord]) -> int:
        """Insert records in one write transaction; return how many were new."""
        self._check_writable("add records")
        rows = []
        for r in records:
            if not isinstance(r, MeasureRecord):
                raise TuningLogError(f"can only add MeasureRecord objects, got "
                                     f"{type(r).__name__}")
            rows.append(_row_values(r))
        if not rows:
            return 0
        with self._write("add records") as conn:
            before = conn.total_changes
            conn.executemany(_INSERT, rows)
            return conn.total_changes - before

    def add(self, record: MeasureRecord) -> bool:
        """Store one record; False when an identical record was already there.

            >>> import tempfile, pathlib
            >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
            >>> r = MeasureRecord("w", "t", "llvm", "d", {}, (1.0,))
            >>> db.add(r), db.add(r)
            (True, False)
        """
        return self._insert([record]) == 1

    def add_many(self, records: Iterable[MeasureRecord]) -> int:
        """Store records in one transaction (all or none); return how many were new.

            >>> import tempfile, pathlib
            >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
            >>> db.add_many(MeasureRecord("w", "t", "llvm", "d", {"i": i}, (1.0,))
            ...             for i in range(3))
            3
        """
        return self._insert(records)

    def add_decision(self, d: ScheduleDecision) -> None:
        """Store one task-scheduler decision (a batch of run `d.run_key`).

            >>> import tempfile, pathlib
            >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
            >>> db.add_decision(ScheduleDecision("r", 1, "mm", "first batch", 1.0, 1.0, 8))
            >>> [x.reason for x in db.decisions("r")]
            ['first batch']
        """
        if not isinstance(d, ScheduleDecision):
            raise TuningLogError(f"add_decision takes a ScheduleDecision, got "
                                 f"{type(d).__name__}")
        with self._write("add a schedule decision") as conn:
            conn.execute(DECISIONS_DDL)  # a file from before the table existed
            conn.execute(
                "INSERT OR REPLACE INTO schedule_decisions (run_key, model, batch, "
                "workload_key, task, reason, gain_s, best_s, model_estimate_s, trials_used, "
                "timestamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [d.run_key, d.model, d.batch, d.workload_key, d.task, d.reason, d.gain_s,
                 d.best_s, d.model_estimate_s, d.trials_used, d.timestamp])

    def decisions(self, run_key: str | None = None, *,
                  model: str | None = None) -> list[ScheduleDecision]:
        """The decisions of a scheduled run (or of every run of `model`), oldest first."""
        where, params = [], []
        for col, val in (("run_key", run_key), ("model", model)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        sql = ("SELECT * FROM schedule_decisions" + (" WHERE " + " AND ".join(where)
                                                    if where else "") + " ORDER BY run_key, batch")
        with self._lock, self._translate_errors("read schedule decisions"):
            known = self._db.execute("SELECT name FROM sqlite_master WHERE name = "
                                     "'schedule_decisions'").fetchone()
            if known is None:
                return []
            cur = self._db.execute(sql, params)
            cols = [c[0] for c in cur.description]
            rows = [dict(zip(cols, r)) for r in cur.fetchall()]

        def num(v: Any) -> float:
            return math.nan if v is None else float(v)

        return [ScheduleDecision(r["run_key"], r["batch"], r["workload_key"], r["reason"],
                                 num(r["best_s"]), num(r["model_estimate_s"]),
                                 r["trials_used"], r["model"], r["task"], num(r["gain_s"]),
                                 r["timestamp"]) for r in rows]

    def prune(self, top_k: int) -> int:
        """Keep only the `top_k` fastest error-free records per (workload, target, device),
        and every confirm record (they decide what `best` returns).

        Failed measurements are dropped too, so a later tuning run may try those configs
        again. Returns the number of records deleted.

            >>> import tempfile, pathlib
            >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
            >>> db.add_many(MeasureRecord("w", "t", "llvm", "d", {"i": i}, (i + 1.0,))
            ...             for i in range(5))
            5
            >>> db.prune(2), [r.config["i"] for r in db.history("w")]
            (3, [0, 1])
        """
        self._check_writable("prune")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise TuningLogError(f"prune needs top_k to be a positive integer, got {top_k!r}")
        with self._write("prune") as conn:
            cursor = conn.execute(
                "DELETE FROM measurements WHERE tuner != ? AND id NOT IN ("
                " SELECT id FROM ("
                "  SELECT id, ROW_NUMBER() OVER (PARTITION BY workload_key, target, device_key"
                "                                ORDER BY mean, timestamp, id) AS rank"
                "  FROM measurements WHERE error_kind = 'none')"
                " WHERE rank <= ?)", [CONFIRM_TUNER, top_k])
            return cursor.rowcount

    # -- queries --------------------------------------------------------------------------

    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """Run a read under the lock and fetch every row (no cursor outlives the lock)."""
        with self._lock:
            try:
                return list(self._db.query(sql, params))
            # a damaged file's text may not be UTF-8, which sqlite3 decodes as it fetches
            except (sqlite3.DatabaseError, sqlite3.ProgrammingError, UnicodeDecodeError) as e:
                raise TuningLogError(f"cannot read tuning database {str(self.path)!r}: "
                                     f"{e}") from None

    def _select(self, sql: str, params: list[Any]) -> list[MeasureRecord]:
        return [_from_row(row) for row in self._rows(sql, params)]

    def count(self, workload_key: str | None = None, target: str | None = None,
              device_key: str | None = None) -> int:
        """Number of records, optionally of one workload / target / device.

            >>> import tempfile, pathlib
            >>> TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db").count("mm")
            0
        """
        where, params = _where(workload_key=workload_key, target=target,
                               device_key=device_key)
        return self._rows(f"SELECT COUNT(*) AS n FROM measurements{where}", params)[0]["n"]

    def best(self, workload_key: str, target: str, device_key: str | None = None,
             k: int = 1) -> list[MeasureRecord]:
        """The `k` error-free records of lowest mean, fastest first; of a task (workload,
        target, device) with confirm records (tuner "confirm", see autotune.confirm),
        only those: once a task's best was re-measured beside its default, what a build
        applies is a confirmed record, never a lucky first measurement. A config with a
        confirm record that is an error (a rejection: untimed by autotune.confirm, or
        slower in the model than the default, autotune.model_confirm) is left out, its
        earlier confirm records too.

        `device_key=None` takes records of any device: only for a user who asked for that.

            >>> import tempfile, pathlib
            >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
            >>> db.best("mm", "llvm")
            []
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise TuningLogError(f"best() needs k to be a positive integer, got {k!r}")
        where, params = _where(workload_key=workload_key, target=target,
                               device_key=device_key, error_kind="none")
        where += (" AND (tuner = ? OR NOT EXISTS (SELECT 1 FROM measurements AS c WHERE "
                  "c.workload_key = measurements.workload_key AND c.target = "
                  "measurements.target AND c.device_key = measurements.device_key AND "
                  "c.tuner = ?)) AND NOT " + REJECTED)
        return self._select(f"{_SELECT}{where} ORDER BY mean, timestamp, id LIMIT ?",
                            [*params, CONFIRM_TUNER, CONFIRM_TUNER, k])

    def best_record(self, workload_key: str, target: str,
                    device_key: str | None = None) -> MeasureRecord | None:
        """The single best record, or None when the task has no successful measurement.

            >>> import tempfile, pathlib
            >>> TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db").best_record("w", "x")
        """
        found = self.best(workload_key, target, device_key, k=1)
        return found[0] if found else None

    def history(self, workload_key: str, target: str | None = None,
                device_key: str | None = None, *, tuner: str | None = None,
                limit: int | None = None) -> list[MeasureRecord]:
        """Every record of a workload in the order measured (oldest first).

            >>> import tempfile, pathlib
            >>> TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db").history("w")
            []
        """
        where, params = _where(workload_key=workload_key, target=target,
                               device_key=device_key, tuner=tuner)
        sql = f"{_SELECT}{where} ORDER BY timestamp, id"
        if limit is not None:
            sql, params = sql + " LIMIT ?", [*params, int(limit)]
        return self._select(sql, params)

    def tasks(self, target: str | None = None,
              device_key: str | None = None) -> list[TaskSummary]:
        """One summary per (workload, target, device), most recently updated first, from
        the `tasks` view (tuning_logs.schema): its trials are the configs measured (confirm
        records left out, a retried timeout counted once), its best is `best`'s.

            >>> import tempfile, pathlib
            >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
            >>> _ = db.add(MeasureRecord("mm", "mt", "llvm", "d", {}, (0.5,), flops=1e9))
            >>> [(t.workload_key, t.trials, t.best_gflops) for t in db.tasks()]
            [('mm', 1, 2.0)]
        """
        where, params = _where(target=target, device_key=device_key)
        rows = self._rows(f"SELECT * FROM tasks{where} "
                          f"ORDER BY last_update DESC, workload_key", params)
        return [TaskSummary(r["workload_key"], r["template"], r["target"], r["device_key"],
                            r["trials"] or 0, r["ok_trials"] or 0, r["best_mean"],
                            r["flops"], r["last_update"]) for r in rows]

    def has_config(self, workload_key: str, target: str, device_key: str,
                   config: str | Mapping[str, Any]) -> bool:
        """True when this config was already measured (with any outcome) for the task.

            >>> import tempfile, pathlib
            >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
            >>> _ = db.add(MeasureRecord("w", "t", "llvm", "d", {"a": 1, "b": 2}, (1.0,)))
            >>> db.has_config("w", "llvm", "d", '{"b": 2, "a": 1}')
            True
        """
        rows = self._rows(
            "SELECT 1 AS hit FROM measurements WHERE workload_key = ? AND target = ? "
            "AND device_key = ? AND config = ? LIMIT 1",
            [workload_key, target, device_key, canonical_json(config)])
        return bool(rows)

    def measured_configs(self, workload_key: str, target: str,
                         device_key: str) -> set[str]:
        """Canonical JSON of every config measured for the task (for a tuner to skip).

            >>> import tempfile, pathlib
            >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
            >>> _ = db.add(MeasureRecord("w", "t", "llvm", "d", {"b": 2, "a": 1}, (1.0,)))
            >>> db.measured_configs("w", "llvm", "d")
            {'{"a":1,"b":2}'}
        """
        rows = self._rows(
            "SELECT DISTINCT config FROM measurements WHERE workload_key = ? AND target = ? "
            "AND device_key = ?", [workload_key, target, device_key])
        return {r["config"] for r in rows}

    def records(self, *, template: str | None = None, target: str | None = None,
                device_key: str | None = None, workload_key: str | None = None,
                exclude_workload: str | None = None, ok_only: bool = False,
                limit: int | None = None) -> list[MeasureRecord]:
        """Records filtered by template / target / device, e.g. other tasks' for transfer.

            >>> import tempfile, pathlib
            >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
            >>> _ = db.add(MeasureRecord("w1", "mt", "llvm", "d", {}, (1.0,)))
            >>> _ = db.add(MeasureRecord("w2", "mt", "llvm", "d", {}, (1.0,)))
            >>> [r.workload_key for r in db.records(template="mt", exclude_workload="w2")]
            ['w1']
        """
        where, params = _where(template=template, target=target, device_key=device_key,
                               workload_key=workload_key,
                               error_kind="none" if ok_only else None)
        if exclude_workload is not None:
            where += (" AND" if where else " WHERE") + " workload_key != ?"
            params.append(exclude_workload)
        sql = f"{_SELECT}{where} ORDER BY id"
        if limit is not None:
            sql, params = sql + " LIMIT ?", [*params, int(limit)]
        return self._select(sql, params)

    # -- exchange -------------------------------------------------------------------------

    def export_jsonl(self, dest: str | Path | IO[str], *, workload_key: str | None = None,
                     target: str | None = None, device_key: str | None = None) -> int:
        """Write records as JSON lines (oldest first) to a path or text file; return count.

            >>> import tempfile, pathlib, io
            >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
            >>> _ = db.add(MeasureRecord("w", "t", "llvm", "d", {}, (1.0,)))
            >>> out = io.StringIO(); db.export_jsonl(out), out.getvalue().count("\\n")
            (1, 1)
        """
        where, params = _where(workload_key=workload_key, target=target,
                               device_key=device_key)
        if isinstance(dest, (str, Path)):
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "w", encoding="utf-8") as f:
                return self._write_lines(f, where, params)
        return self._write_lines(dest, where, params)

    def _write_lines(self, f: IO[str], where: str, params: list[Any]) -> int:
        records = self._select(f"{_SELECT}{where} ORDER BY id", params)
        for r in records:
            f.write(r.to_json(versioned=True) + "\n")
        return len(records)

    def import_jsonl(self, source: str | Path | IO[str]) -> ImportReport:
        """Add the records of a JSON-lines file, skipping exact duplicates.

        Every line is checked before anything is written: a bad line raises TuningLogError
        with its line number and the database is unchanged.

            >>> import tempfile, pathlib, io
            >>> db = TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db")
            >>> line = MeasureRecord("w", "t", "llvm", "d", {}, (1.0,)).to_json()
            >>> db.import_jsonl(io.StringIO(line + "\\n" + line + "\\n"))
            ImportReport(added=1, duplicates=1)
        """
        self._check_writable("import records")
        if isinstance(source, (str, Path)):
            try:
                with open(source, "rb") as f:
                    records = _read_lines(f, str(source))
            except OSError as e:
                raise TuningLogError(f"cannot read JSON lines from {str(source)!r}: {e}") from None
        else:
            records = _read_lines(source, getattr(source, "name", "<stream>"))
        added = self._insert(records)
        return ImportReport(added=added, duplicates=len(records) - added)

    def merge(self, other: str | Path) -> ImportReport:
        """Add every record of another tuning database (opened read-only), skipping duplicates.

            >>> import tempfile, pathlib
            >>> d = pathlib.Path(tempfile.mkdtemp())
            >>> with TuningDatabase(d / "a.db") as a:
            ...     _ = a.add(MeasureRecord("w", "t", "llvm", "d", {}, (1.0,)))
            >>> with TuningDatabase(d / "b.db") as b:
            ...     b.merge(d / "a.db"), b.merge(d / "a.db")
            (ImportReport(added=1, duplicates=0), ImportReport(added=0, duplicates=1))
        """
        self._check_writable("merge")
        with TuningDatabase(other, readonly=True) as source:
            records = source.records()
        added = self._insert(records)
        return ImportReport(added=added, duplicates=len(records) - added)


__all__ = ["DEFAULT_DB_PATH", "ImportReport", "TaskSummary", "TuningDatabase"]
