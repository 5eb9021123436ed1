"""The `tasks` view leaves confirm records out itself (schema version 2) and the configs a
confirm record rejected (version 3), and counts a retried timeout as one trial (version 4):
in a new file, in a version-1, 2 or 3 file opened for writing (its view replaced, the
version bumped), and in a version-1 file opened
read-only (a temporary view shadows the file's, the file untouched); the best a task
reports is what a build applies (`TuningDatabase.best`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tuning_logs import CONFIRM_TUNER, SCHEMA_VERSION, ErrorKind, TuningDatabase

W1, W2, W3, W4, W5 = "mm|a", "mm|b", "mm|c", "mm|d", "mm|e"

# the view a version-1 file holds (tuning_logs/schema.py before version 2)
V1_VIEW = """CREATE VIEW tasks AS
    SELECT workload_key, target, device_key,
           MAX(template) AS template,
           COUNT(*) AS trials,
           SUM(error_kind = 'none') AS ok_trials,
           MIN(CASE WHEN error_kind = 'none' THEN mean END) AS best_mean,
           MAX(flops) AS flops,
           MAX(timestamp) AS last_update
    FROM measurements
    GROUP BY workload_key, target, device_key"""

# the view a version-2 file holds: rejected configs still counted
V2_VIEW = """CREATE VIEW tasks AS
    SELECT workload_key, target, device_key,
           MAX(template) AS template,
           SUM(tuner != 'confirm') AS trials,
           SUM(tuner != 'confirm' AND error_kind = 'none') AS ok_trials,
           CASE WHEN SUM(tuner = 'confirm') > 0
                THEN MIN(CASE WHEN tuner = 'confirm' AND error_kind = 'none'
                              THEN mean END)
                ELSE MIN(CASE WHEN error_kind = 'none' THEN mean END) END AS best_mean,
           MAX(flops) AS flops,
           MAX(timestamp) AS last_update
    FROM measurements
    GROUP BY workload_key, target, device_key"""

# the view a version-3 file holds: records counted, so a retried timeout twice
V3_VIEW = V2_VIEW.replace("""THEN mean END)
                ELSE""", """AND NOT EXISTS (SELECT 1 FROM measurements AS rejection
                                  WHERE rejection.workload_key = measurements.workload_key
                                    AND rejection.target = measurements.target
                                    AND rejection.device_key = measurements.device_key
                                    AND rejection.config = measurements.config
                                    AND rejection.tuner = 'confirm'
                                    AND rejection.error_kind != 'none')
                              THEN mean END)
                ELSE""")


def _fill(db: TuningDatabase, make_record) -> None:
    """W1: four trials (one failed), a lucky 0.5 that confirmation rejected (credited the
    default's 1.0) and a confirmed 0.8; W2: never confirmed; W3: confirm records that all
    failed (nothing a build may apply); W4: a confirmed 0.7 that the model then rejected
    (an error confirm record of its config): the default's 1.0 applies; W5: a candidate
    that timed out and ran at its retry (autotune.tuning.retry_timeouts), and another."""
    db.add_many([
        make_record(workload_key=W1, config={"i": 0}, costs=(1.0,)),
        make_record(workload_key=W1, config={"i": 1}, costs=(0.5,)),
        make_record(workload_key=W1, config={"i": 2}, costs=(0.9,)),
        make_record(workload_key=W1, config={"i": 3}, costs=(),
                    error_kind=ErrorKind.RUNTIME_ERROR),
        make_record(workload_key=W1, config={"i": 0}, costs=(1.0,), tuner=CONFIRM_TUNER),
        make_record(workload_key=W1, config={"i": 1}, costs=(1.0,), tuner=CONFIRM_TUNER),
        make_record(workload_key=W1, config={"i": 2}, costs=(0.8,), tuner=CONFIRM_TUNER),
        make_record(workload_key=W2, config={"i": 0}, costs=(0.7,)),
        make_record(workload_key=W2, config={"i": 1}, costs=(0.6,)),
        make_record(workload_key=W3, config={"i": 0}, costs=(0.4,)),
        make_record(workload_key=W3, config={"i": 1}, costs=(), tuner=CONFIRM_TUNER,
                    error_kind=ErrorKind.RUNTIME_ERROR),
        make_record(workload_key=W4, config={"i": 0}, costs=(1.0,)),
        make_record(workload_key=W4, config={"i": 1}, costs=(0.6,)),
        make_record(workload_key=W4, config={"i": 0}, costs=(1.0,), tuner=CONFIRM_TUNER),
        make_record(workload_key=W4, config={"i": 1}, costs=(0.7,), tuner=CONFIRM_TUNER),
        make_record(workload_key=W4, config={"i": 1}, costs=(), tuner=CONFIRM_TUNER,
                    error_kind=ErrorKind.RUNTIME_ERROR),
        make_record(workload_key=W5, config={"i": 0}, costs=(), error_kind=ErrorKind.TIMEOUT),
        make_record(workload_key=W5, config={"i": 0}, costs=(2.0,)),
        make_record(workload_key=W5, config={"i": 1}, costs=(3.0,)),
    ])


EXPECTED = {W1: (4, 3, 0.8), W2: (2, 2, 0.6), W3: (1, 1, None), W4: (2, 2, 1.0),
            W5: (2, 2, 2.0)}


def _summaries(db: TuningDatabase) -> dict[str, tuple[int, int, float | None]]:
    return {t.workload_key: (t.trials, t.ok_trials, t.best_mean) for t in db.tasks()}


def _applied(db: TuningDatabase) -> dict[str, float | None]:
    out = {}
    for t in db.tasks():
        rec = db.best_record(t.workload_key, t.target, t.device_key)
        out[t.workload_key] = rec.mean if rec is not None else None
    return out


def _raw_view(path: Path) -> dict[str, tuple[int, int, float | None]]:
    """The view as any SQLite client reads it (no Tessel code in between)."""
    conn = sqlite3.connect(path)
    try:
        return {w: (n, ok, best) for w, n, ok, best in conn.execute(
            "SELECT workload_key, trials, ok_trials, best_mean FROM tasks")}
    finally:
        conn.close()


def _version(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        conn.close()


def _as_version_1(path: Path, view: str = V1_VIEW, version: str = "1") -> None:
    """Make a file what a version-1 (or another older) Tessel wrote: its view and version."""
    conn = sqlite3.connect(path)
    conn.execute("DROP VIEW tasks")
    conn.execute(view)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [version])
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def test_a_new_files_view_leaves_confirm_records_out(db_path, make_record):
    with TuningDatabase(db_path) as db:
        _fill(db, make_record)
        assert _summaries(db) == EXPECTED
        assert {w: best for w, (_, _, best) in EXPECTED.items()} == _applied(db)
    assert _raw_view(db_path) == EXPECTED
    assert _version(db_path) == str(SCHEMA_VERSION) == "4"


def test_an_old_file_opened_for_writing_gets_the_new_view(db_path, make_record):
    with TuningDatabase(db_path) as db:
        _fill(db, make_record)
    _as_version_1(db_path)
    assert _raw_view(db_path)[W1] == (7, 6, 0.5)  # the old view: confirm records counted
    with TuningDatabase(db_path) as db:
        assert _summaries(db) == EXPECTED
        db.add(make_record(workload_key=W2, config={"i": 2}, costs=(0.55,)))
    assert _version(db_path) == "4"
    assert _raw_view(db_path) == {**EXPECTED, W2: (3, 3, 0.55)}


def test_a_version_2_file_opened_for_writing_leaves_rejected_configs_out(db_path,
                                                                        make_record):
    with TuningDatabase(db_path) as db:
        _fill(db, make_record)
    _as_version_1(db_path, V2_VIEW, "2")
    assert _raw_view(db_path)[W4] == (2, 2, 0.7)  # the old view: the rejected 0.7
    with TuningDatabase(db_path) as db:
        assert _summaries(db) == EXPECTED
    assert _version(db_path) == "4" and _raw_view(db_path) == EXPECTED


def test_a_version_3_file_opened_for_writing_counts_a_retried_timeout_once(db_path,
                                                                          make_record):
    with TuningDatabase(db_path) as db:
        _fill(db, make_record)
    _as_version_1(db_path, V3_VIEW, "3")
    assert _raw_view(db_path)[W5] == (3, 2, 2.0)  # the old view: the timeout and its retry
    with TuningDatabase(db_path) as db:
        assert _summaries(db) == EXPECTED
    assert _version(db_path) == "4" and _raw_view(db_path) == EXPECTED


def test_an_old_file_opened_read_only_reports_right_and_stays_untouched(db_path, make_record):
    with TuningDatabase(db_path) as db:
        _fill(db, make_record)
    _as_version_1(db_path)
    before = db_path.read_bytes()
    with TuningDatabase(db_path, readonly=True) as db:
        assert _summaries(db) == EXPECTED
        assert {w: best for w, (_, _, best) in EXPECTED.items()} == _applied(db)
    assert db_path.read_bytes() == before
    assert _version(db_path) == "1" and _raw_view(db_path)[W1] == (7, 6, 0.5)
