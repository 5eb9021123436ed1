"""Opening a file: ours is accepted, anything else is refused with a clear error, untouched."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tessel_errors import TuningLogError
from tuning_logs import SCHEMA_VERSION, TuningDatabase
from tuning_logs.schema import APPLICATION_ID, inspect_file


def _snapshot(path: Path) -> tuple[bytes, list[str]]:
    """The file's bytes and the names of files beside it (to catch new -wal/-shm files)."""
    return path.read_bytes(), sorted(p.name for p in path.parent.iterdir())


def test_new_database_is_created_with_its_folders(tmp_path):
    path = tmp_path / "a" / "b" / "tuning.db"
    with TuningDatabase(path) as db:
        assert db.count() == 0
    assert path.is_file()


def test_new_database_is_stamped_and_in_wal_mode(db_path):
    TuningDatabase(db_path).close()
    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        assert meta == {"magic": "tessel-tuning-db", "schema_version": str(SCHEMA_VERSION)}
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert {"measurements", "tasks", "measurements_best", "measurements_task"} <= names
    finally:
        conn.close()


def test_reopening_keeps_records(db_path, make_record):
    with TuningDatabase(db_path) as db:
        db.add(make_record())
    with TuningDatabase(db_path) as db:
        assert db.count() == 1
    assert inspect_file(db_path) == "ours"


def test_zero_byte_file_becomes_a_database(tmp_path, make_record):
    path = tmp_path / "t.db"
    path.write_bytes(b"")
    with TuningDatabase(path) as db:
        db.add(make_record())
        assert db.count() == 1


def test_random_bytes_are_refused_and_left_untouched(tmp_path, rng):
    path = tmp_path / "t.db"
    path.write_bytes(rng.bytes(8192))
    before = _snapshot(path)
    with pytest.raises(TuningLogError, match="is not a tuning database: it is not a SQLite file"):
        TuningDatabase(path)
    assert _snapshot(path) == before


def test_damaged_sqlite_file_is_refused_and_left_untouched(tmp_path, rng):
    path = tmp_path / "t.db"
    path.write_bytes(b"SQLite format 3\x00" + rng.bytes(8192))
    before = _snapshot(path)
    with pytest.raises(TuningLogError, match="may be corrupt; the file was left untouched"):
        TuningDatabase(path)
    assert _snapshot(path) == before


def test_foreign_sqlite_database_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "shop.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('Ada')")
    conn.commit()
    conn.close()
    before = _snapshot(path)
    with pytest.raises(TuningLogError, match="SQLite database of another program .*"
                                             "tables: customers"):
        TuningDatabase(path)
    assert _snapshot(path) == before


def test_foreign_database_with_a_measurements_table_is_still_refused(tmp_path):
    # Same table name, other program: the application id tells them apart.
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE measurements (id INTEGER PRIMARY KEY, value REAL)")
    conn.commit()
    conn.close()
    before = _snapshot(path)
    with pytest.raises(TuningLogError, match="another program"):
        TuningDatabase(path)
    assert _snapshot(path) == before


def _set_meta(path: Path, key: str, value: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = ?", [value, key])
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def test_newer_schema_version_is_refused_with_a_message(db_path, make_record):
    with TuningDatabase(db_path) as db:
        db.add(make_record())
    _set_meta(db_path, "schema_version", str(SCHEMA_VERSION + 1))
    before = db_path.read_bytes()
    with pytest.raises(TuningLogError, match=f"written by a newer Tessel \\(schema version "
                                             f"{SCHEMA_VERSION + 1}; this Tessel reads up to "
                                             f"version {SCHEMA_VERSION}\\); upgrade Tessel"):
        TuningDatabase(db_path)
    assert db_path.read_bytes() == before


def test_wrong_magic_is_refused(db_path):
    TuningDatabase(db_path).close()
    _set_meta(db_path, "magic", "someone-else")
    with pytest.raises(TuningLogError, match="without Tessel's magic"):
        TuningDatabase(db_path)


def test_directory_path_is_refused(tmp_path):
    with pytest.raises(TuningLogError, match="is a directory; give a file path"):
        TuningDatabase(tmp_path)


def test_readonly_open_of_a_missing_database_says_so(tmp_path):
    with pytest.raises(TuningLogError, match="no tuning database at .*run `tessel tune`"):
        TuningDatabase(tmp_path / "missing.db", readonly=True)
    assert not (tmp_path / "missing.db").exists()


def test_readonly_database_refuses_writes(db_path, make_record):
    TuningDatabase(db_path).close()
    with TuningDatabase(db_path, readonly=True) as db:
        with pytest.raises(TuningLogError, match="opened read-only"):
            db.add(make_record())
        assert db.count() == 0
