"""The SQLite schema of a tuning database and the checks that guard opening one.

A tuning database is an ordinary SQLite file in WAL mode (so that a tuning run can write while
another process reads or writes), marked twice as ours: by SQLite's `application_id` header
field and by a `meta` table holding a magic string and the schema version. Before anything
writes to a file, `inspect_file` looks at it through a read-only connection (or not at all,
when its first bytes are not SQLite's), so a corrupt or foreign file is refused untouched.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.db"
    >>> inspect_file(path)
    'new'
    >>> db = connect(path); initialise(db); inspect_file(path)
    'ours'
    >>> db.close()
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Literal

import sqlite_utils

from tessel_errors import TuningLogError

from .record import CONFIRM_TUNER, ERROR_KINDS

# 2: the `tasks` view leaves out confirm records (a version-1 file's view counts them; it
# is replaced when the file is opened for writing, see `upgrade`)
# 3: its best leaves out configs a confirm record rejected (an error confirm record: lost
# in the model, autotune.model_confirm, or rejected untimed), as `best` does
# 4: its trials count configs, not records: a timed-out candidate measured again
# (autotune.tuning.retry_timeouts) is one trial with two records, as a resumed run counts it
SCHEMA_VERSION = 4
MAGIC = "tessel-tuning-db"
APPLICATION_ID = 0x5453454C  # "TSEL" in the SQLite header: `file(1)`-style recognition
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_S = 60.0

_ERROR_CHECK = ", ".join(f"'{k}'" for k in ERROR_KINDS)

# Columns in the order records are written; `digest` (sha256 of the record's JSON line) makes
# an exact duplicate a no-op, which is how import and merge skip what is already there.
MEASUREMENT_COLUMNS: tuple[str, ...] = (
    "workload_key", "template", "target", "device_key", "config", "costs", "mean",
    "error_kind", "error_msg", "timestamp", "tuner", "tessel_version", "flops", "attrs",
    "digest",
)

# A record's config has a confirm record with an error: a rejection (autotune.confirm,
# autotune.model_confirm), after which no build applies the config. `measurements` is the
# record's row; the same text is in TuningDatabase.best.
REJECTED = f"""EXISTS (SELECT 1 FROM measurements AS rejection
    WHERE rejection.workload_key = measurements.workload_key
      AND rejection.target = measurements.target
      AND rejection.device_key = measurements.device_key
      AND rejection.config = measurements.config
      AND rejection.tuner = '{CONFIRM_TUNER}' AND rejection.error_kind != 'none')"""

# One row per task. Confirm records (autotune.confirm) time configs again: they are not
# trials; a trial is a config measured (a retried timeout's second record is no trial of
# its own: autotune.tuning's resume counts the same); and a task that has confirm records
# reports the best a build applies, the fastest error-free confirm record of a config no
# confirm record rejected (TuningDatabase.best), not a lucky first measurement.
TASKS_SELECT = f"""
    SELECT workload_key, target, device_key,
           MAX(template) AS template,
           COUNT(DISTINCT CASE WHEN tuner != '{CONFIRM_TUNER}' THEN config END) AS trials,
           COUNT(DISTINCT CASE WHEN tuner != '{CONFIRM_TUNER}' AND error_kind = 'none'
                          THEN config END) AS ok_trials,
           CASE WHEN SUM(tuner = '{CONFIRM_TUNER}') > 0
                THEN MIN(CASE WHEN tuner = '{CONFIRM_TUNER}' AND error_kind = 'none'
                              AND NOT {REJECTED} THEN mean END)
                ELSE MIN(CASE WHEN error_kind = 'none' THEN mean END) END AS best_mean,
           MAX(flops) AS flops,
           MAX(timestamp) AS last_update
    FROM measurements
    GROUP BY workload_key, target, device_key"""

_DDL = f"""
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY,
    workload_key TEXT NOT NULL,
    template TEXT NOT NULL,
    target TEXT NOT NULL,
    device_key TEXT NOT NULL,
    config TEXT NOT NULL,
    costs TEXT NOT NULL,
    mean REAL,
    error_kind TEXT NOT NULL CHECK (error_kind IN ({_ERROR_CHECK})),
    error_msg TEXT NOT NULL DEFAULT '',
    timestamp REAL NOT NULL,
    tuner TEXT NOT NULL DEFAULT '',
    tessel_version TEXT NOT NULL DEFAULT '',
    flops REAL,
    attrs TEXT NOT NULL DEFAULT '{{}}',
    digest TEXT NOT NULL UNIQUE,
    CHECK (error_kind != 'none' OR mean IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS measurements_task
    ON measurements (workload_key, target, device_key, config);
CREATE INDEX IF NOT EXISTS measurements_best
    ON measurements (workload_key, target, device_key, error_kind, mean);
CREATE INDEX IF NOT EXISTS measurements_template
    ON measurements (template, target);
CREATE TABLE IF NOT EXISTS schedule_decisions (
    id INTEGER PRIMARY KEY,
    run_key TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    batch INTEGER NOT NULL,
    workload_key TEXT NOT NULL,
    task TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    gain_s REAL,
    best_s REAL,
    model_estimate_s REAL,
    trials_used INTEGER NOT NULL,
    timestamp REAL NOT NULL,
    UNIQUE (run_key, batch)
);
CREATE VIEW IF NOT EXISTS tasks AS {TASKS_SELECT};
"""


# Added after schema version 1 without a version bump (older readers ignore the table):
# a version-1 file gets it at its first schedule decision (or when upgraded)
DECISIONS_DDL = _DDL[_DDL.index("CREATE TABLE IF NOT EXISTS schedule_decisions"):
                     _DDL.index("CREATE VIEW IF NOT EXISTS tasks")].strip().rstrip(";")

FileState = Literal["new", "empty", "ours"]


def _readonly_connection(path: Path, timeout: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    # mode=ro: SQLite itself then refuses to write to the file, whatever we ask of it.
    uri = Path(os.path.abspath(path)).as_uri() + "?mode=ro"
    return sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)


def inspect_file(path: Path) -> FileState:
    """Say what is at `path` without changing it: 'new', 'empty' (a blank SQLite file), 'ours'.

    Anything else (not SQLite, corrupt, another program's database, a newer schema) raises
    TuningLogError naming the file and what to do.

        >>> inspect_file(Path("/nonexistent/dir/t.db"))
        'new'
    """
    path = Path(path)
    if not path.exists():
        return "new"
    if path.is_dir():
        raise TuningLogError(f"tuning database path {str(path)!r} is a directory; "
                             f"give a file path such as {str(path / 'tuning.db')!r}")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as e:
        raise TuningLogError(f"cannot read tuning database {str(path)!r}: {e}") from None
    if not head:
        return "empty"  # SQLite treats a zero-byte file as an empty database
    if head != SQLITE_HEADER:
        raise TuningLogError(f"{str(path)!r} is not a tuning database: it is not a SQLite "
                             f"file (it starts with {head[:8]!r}); the file was left "
                             f"untouched; pass another --db path")
    try:
        conn = _readonly_connection(path)
        try:
            return _inspect_sqlite(conn, path)
        finally:
            conn.close()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:  # damaged text: not UTF-8
        raise TuningLogError(f"{str(path)!r} is not a readable tuning database ({e}); it may be "
                             f"corrupt; the file was left untouched") from None


def _inspect_sqlite(conn: sqlite3.Connection, path: Path) -> FileState:
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
        "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    if app_id != APPLICATION_ID:
        if app_id == 0 and not names:
            return "empty"
        listed = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        raise TuningLogError(f"{str(path)!r} is a SQLite database of another program "
                             f"(application id {app_id:#x}, tables: {listed or 'none'}), not a "
                             f"Tessel tuning database; the file was left untouched; pass "
                             f"another --db path")
    if "meta" not in names:
        raise TuningLogError(f"{str(path)!r} carries Tessel's application id but has no meta "
                             f"table: it is damaged; restore it or start a new database")
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("magic") != MAGIC:
        raise TuningLogError(f"{str(path)!r} has a meta table without Tessel's magic "
                             f"(found {meta.get('magic')!r}); it is not a tuning database")
    try:
        version = int(meta.get("schema_version", ""))
    except ValueError:
        raise TuningLogError(f"{str(path)!r} has a bad schema version "
                             f"{meta.get('schema_version')!r} in its meta table") from None
    if version > SCHEMA_VERSION:
        raise TuningLogError(f"{str(path)!r} was written by a newer Tessel (schema version "
                             f"{version}; this Tessel reads up to version {SCHEMA_VERSION}); "
                             f"upgrade Tessel to use it, or export it there as JSON lines")
    if version < 1:
        raise TuningLogError(f"{str(path)!r} has schema version {version}, which no Tessel "
                             f"wrote; it is damaged")
    missing = {"measurements", "tasks"} - set(names)
    if missing:
        raise TuningLogError(f"{str(path)!r} lacks {', '.join(sorted(missing))}: the tuning "
                             f"database is damaged; restore it or start a new database")
    return "ours"


def connect(path: Path, readonly: bool = False,
            timeout: float = BUSY_TIMEOUT_S) -> sqlite_utils.Database:
    """Open a sqlite-utils Database on `path` with a busy timeout (and WAL when writable).

    `timeout` is how many seconds a write waits for another process's write to finish.

    Call `inspect_file` first: this function trusts the file.

        >>> import tempfile
        >>> db = connect(Path(tempfile.mkdtemp()) / "t.db"); db.journal_mode
        'wal'
        >>> db.close()
    """
    path = Path(path)
    if readonly:
        conn = _readonly_connection(path, timeout)
    else:
        # Threads may share the connection; TuningDatabase serialises them with a lock.
        conn = sqlite3.connect(str(path), timeout=timeout, check_same_thread=False)
    db = sqlite_utils.Database(conn, execute_plugins=False)
    db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    if not readonly:
        _enable_wal(db, timeout)
        # NORMAL is safe in WAL mode against process crashes, which is what tuning risks.
        db.execute("PRAGMA synchronous = NORMAL")
    return db


def _enable_wal(db: sqlite_utils.Database, timeout: float) -> None:
    # Switching a file to WAL needs it to itself, and SQLite answers "database is locked"
    # at once instead of calling the busy handler: two processes opening one new database
    # together (a tuning run and its twin) must wait for each other here, as writes do.
    deadline = time.monotonic() + timeout
    while True:
        try:
            if db.journal_mode != "wal":
                db.enable_wal()
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def stored_version(db: sqlite_utils.Database) -> int:
    """The schema version a file's meta table records (`inspect_file` checked it).

        >>> db = sqlite_utils.Database(memory=True); initialise(db); stored_version(db)
        4
    """
    return int(db.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                          ).fetchone()[0])


def upgrade(db: sqlite_utils.Database) -> bool:
    """Bring a file of an older schema version, opened for writing, to this one; True when
    it did. Version 1, 2 or 3 -> 4 replaces the `tasks` view (a view holds no data: DROP VIEW and
    CREATE VIEW) and adds the decisions table, in one immediate transaction that reads the
    version again, so two processes opening one old file upgrade it once. A current file
    is only read (no write lock: another process may be in the middle of a write).

        >>> db = sqlite_utils.Database(memory=True); initialise(db); upgrade(db)
        False
    """
    if stored_version(db) >= SCHEMA_VERSION:
        return False
    db.execute("BEGIN IMMEDIATE")
    try:
        if stored_version(db) >= SCHEMA_VERSION:
            db.rollback()
            return False
        db.execute("DROP VIEW IF EXISTS tasks")
        db.execute(f"CREATE VIEW tasks AS {TASKS_SELECT}")
        db.execute(DECISIONS_DDL)
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                   [str(SCHEMA_VERSION)])
        db.commit()
        return True
    except BaseException:
        db.rollback()
        raise


def read_as_current(db: sqlite_utils.Database) -> None:
    """Let a read-only connection to a file of an older version read it as this version
    does, writing nothing to it: a TEMP view `tasks` of this version's definition, which
    shadows the file's own (SQLite resolves a name in the temp schema first; the temp
    schema lives in memory, not in the file).

        >>> db = sqlite_utils.Database(memory=True); initialise(db); read_as_current(db)
    """
    if stored_version(db) < SCHEMA_VERSION:
        db.execute(f"CREATE TEMP VIEW IF NOT EXISTS tasks AS {TASKS_SELECT}")


def initialise(db: sqlite_utils.Database) -> None:
    """Create the schema if missing and stamp the file as a Tessel tuning database.

    Safe when several processes open a new database at once: everything is IF NOT EXISTS
    and happens in one immediate (write-locked) transaction.

        >>> db = sqlite_utils.Database(memory=True); initialise(db)
        >>> db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        '4'
    """
    db.execute("BEGIN IMMEDIATE")  # statement by statement: executescript() would COMMIT
    try:
        for statement in _DDL.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('magic', ?)", [MAGIC])
        db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                   [str(SCHEMA_VERSION)])
        db.commit()
    except BaseException:
        db.rollback()
        raise


__all__ = ["APPLICATION_ID", "MAGIC", "MEASUREMENT_COLUMNS", "REJECTED", "SCHEMA_VERSION",
           "TASKS_SELECT", "connect", "initialise", "inspect_file", "read_as_current",
           "stored_version", "upgrade"]
