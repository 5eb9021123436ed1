"""A malformed JSON line is a TuningLogError naming the file, the line and the fault, and a
merge of a damaged or foreign database is one too; either way the database keeps exactly
the records it had (all or nothing). Each test is named for the input that showed the gap
(the fuzz target tests/fuzz/tuning_import.py found the lone surrogate, the long numbers,
the deep nesting and the damaged-database ones)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tessel_errors import TuningLogError
from tuning_logs import MeasureRecord, TuningDatabase
from tuning_logs.database import MAX_LINE_BYTES
from tuning_logs.record import RECORD_SCHEMA_VERSION


@pytest.fixture
def filled(db: TuningDatabase, make_record) -> TuningDatabase:
    db.add_many([make_record(config={"held": i}) for i in range(3)])
    return db


def _contents(db: TuningDatabase) -> list[str]:
    return [r.to_json() for r in db.records()]


def _import_fails(db: TuningDatabase, path: Path, lines: list[bytes], match: str) -> None:
    path.write_bytes(b"\n".join(lines) + b"\n")
    before = _contents(db)
    with pytest.raises(TuningLogError, match=match):
        db.import_jsonl(path)
    assert db.count() == len(before) and _contents(db) == before


def _good(make_record, i: int) -> bytes:
    return make_record(config={"new": i}).to_json(versioned=True).encode()


def _bad(make_record, text_edit) -> bytes:
    return text_edit(make_record(config={"bad": 1}).to_json()).encode()


def test_line_with_a_lone_surrogate_in_a_name_is_refused_by_line(tmp_path, filled,
                                                                 make_record) -> None:
    # found by fuzzing: sqlite3 raised UnicodeEncodeError at the insert
    bad = _bad(make_record, lambda t: t.replace('"tuner":"', '"tuner":"\\ud800', 1))
    _import_fails(filled, tmp_path / "l.jsonl", [_good(make_record, 0), bad],
                  r"l\.jsonl:2: bad measure record: field 'tuner' must be valid Unicode text "
                  r".*nothing was imported")


def test_line_with_a_5000_digit_timestamp_is_refused_by_line(tmp_path, filled,
                                                             make_record) -> None:
    # found by fuzzing: json raised ValueError (Python's integer string limit)
    r = make_record().to_dict()
    text = json.dumps(r).replace(json.dumps(r["timestamp"]), "9" * 5000, 1)
    _import_fails(filled, tmp_path / "l.jsonl", [_good(make_record, 0), text.encode()],
                  r"l\.jsonl:2: bad measure record: not a JSON line this reader accepts "
                  r"\(ValueError")


def test_line_with_a_400_digit_flops_is_refused_by_line(tmp_path, filled, make_record) -> None:
    # past float's range: math.isfinite raised OverflowError
    text = json.dumps(make_record().to_dict() | {"flops": "@"}).replace('"@"', "9" * 400)
    _import_fails(filled, tmp_path / "l.jsonl", [text.encode(), _good(make_record, 0)],
                  r"l\.jsonl:1: bad measure record: field 'flops' must be a finite number, "
                  r"got 9999")


def test_line_with_config_nested_100000_deep_is_refused_by_line(tmp_path, filled,
                                                                make_record) -> None:
    # found by fuzzing: json raised RecursionError
    bad = _bad(make_record, lambda t: t.replace('"config":{"bad":1}',
                                                '"config":' + "[" * 100_000 + "]" * 100_000))
    _import_fails(filled, tmp_path / "l.jsonl", [_good(make_record, 0), bad],
                  r"l\.jsonl:2: .*\(RecursionError")


def test_line_of_invalid_utf8_is_refused_by_line(tmp_path, filled, make_record) -> None:
    bad = make_record().to_json().encode().replace(b'"tuner":"', b'"tuner":"\xc3\x28', 1)
    _import_fails(filled, tmp_path / "l.jsonl", [_good(make_record, 0), _good(make_record, 1),
                                                 bad],
                  r"l\.jsonl:3: bad measure record: not UTF-8 text \(invalid continuation "
                  r"byte at byte \d+\)")


def test_line_over_the_size_limit_is_refused_by_line(tmp_path, filled, make_record) -> None:
    r = make_record().to_dict() | {"error_msg": "x" * (MAX_LINE_BYTES + 10)}
    _import_fails(filled, tmp_path / "l.jsonl", [_good(make_record, 0), json.dumps(r).encode()],
                  rf"l\.jsonl:2: bad measure record: the line is over {MAX_LINE_BYTES} bytes")


def test_line_with_a_nan_cost_is_refused_by_line(tmp_path, filled, make_record) -> None:
    bad = _bad(make_record, lambda t: t.replace('"costs":[', '"costs":[NaN,', 1))
    _import_fails(filled, tmp_path / "l.jsonl", [bad],
                  r"l\.jsonl:1: bad measure record: field 'costs' must be a finite number, "
                  r"got nan")


def test_line_with_a_negative_cost_is_refused_by_line(tmp_path, filled, make_record) -> None:
    bad = _bad(make_record, lambda t: t.replace('"costs":[', '"costs":[-0.5,', 1))
    _import_fails(filled, tmp_path / "l.jsonl", [_good(make_record, 0), bad],
                  r"l\.jsonl:2: bad measure record: field 'costs' must be a positive number")


def test_line_missing_a_field_is_refused_by_line(tmp_path, filled, make_record) -> None:
    r = make_record().to_dict()
    del r["template"]
    _import_fails(filled, tmp_path / "l.jsonl", [_good(make_record, 0), json.dumps(r).encode()],
                  r"l\.jsonl:2: bad measure record: missing field\(s\) template")


def test_line_with_a_field_of_the_wrong_type_is_refused_by_line(tmp_path, filled,
                                                                make_record) -> None:
    r = make_record().to_dict() | {"costs": "fast"}
    _import_fails(filled, tmp_path / "l.jsonl", [json.dumps(r).encode()],
                  r"l\.jsonl:1: bad measure record: field 'costs' must be a list of seconds")


def test_line_of_an_unknown_schema_version_is_refused_by_line(tmp_path, filled,
                                                              make_record) -> None:
    r = make_record().to_dict() | {"schema_version": RECORD_SCHEMA_VERSION + 1}
    _import_fails(filled, tmp_path / "l.jsonl", [_good(make_record, 0), json.dumps(r).encode()],
                  rf"l\.jsonl:2: bad measure record: schema_version {RECORD_SCHEMA_VERSION + 1} "
                  r"is not one this Tessel reads")


def test_exported_lines_carry_the_schema_version_and_import_back(tmp_path, db,
                                                                  make_record) -> None:
    records = [make_record(config={"i": i}) for i in range(3)]
    db.add_many(records)
    db.export_jsonl(tmp_path / "out.jsonl")
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert all(json.loads(line)["schema_version"] == RECORD_SCHEMA_VERSION for line in lines)
    with TuningDatabase(tmp_path / "b.db") as b:
        assert b.import_jsonl(tmp_path / "out.jsonl").added == 3
        assert [r.digest() for r in b.records()] == [r.digest() for r in records]


def test_lines_without_a_schema_version_still_import(db, make_record) -> None:
    import io

    assert db.import_jsonl(io.StringIO(make_record().to_json() + "\n")).added == 1


# -- merge -------------------------------------------------------------------------------

def _merge_fails(db: TuningDatabase, source: Path, match: str) -> None:
    before = _contents(db)
    with pytest.raises(TuningLogError, match=match):
        db.merge(source)
    assert db.count() == len(before) and _contents(db) == before


def _source(tmp_path: Path, make_record) -> Path:
    path = tmp_path / "src.db"
    with TuningDatabase(path) as src:
        src.add_many([make_record(config={"src": i}) for i in range(4)])
    conn = sqlite3.connect(path)  # fold the WAL in, so that the file alone is the database
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    return path


def _alter(path: Path, sql: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute(sql)
    conn.commit()
    conn.close()


def test_merge_of_a_database_whose_text_is_not_utf8_is_refused(tmp_path, filled,
                                                              make_record) -> None:
    # found by fuzzing: sqlite3 raised UnicodeDecodeError while fetching a row
    path = _source(tmp_path, make_record)
    _alter(path, "UPDATE measurements SET tuner = CAST(X'C328' AS TEXT) WHERE id = 3")
    _merge_fails(filled, path, r"cannot read tuning database .*src\.db'.*(UTF-8|utf-8)")


def test_merge_of_a_database_missing_a_column_is_refused(tmp_path, filled,
                                                         make_record) -> None:
    # found by fuzzing (a flipped byte in the schema text): _from_row raised KeyError
    path = _source(tmp_path, make_record)
    _alter(path, "ALTER TABLE measurements RENAME COLUMN attrs TO attrz")
    _merge_fails(filled, path, r"measurement row 1 of the tuning database is damaged: 'attrs'")


def test_merge_of_a_truncated_database_is_refused(tmp_path, filled, make_record) -> None:
    path = _source(tmp_path, make_record)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2 + 100])
    _merge_fails(filled, path, r"src\.db'")


def test_merge_of_a_file_that_is_not_a_database_is_refused(tmp_path, filled) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are not records\n")
    _merge_fails(filled, path, r"is not a tuning database: it is not a SQLite file")


def test_merge_of_a_row_breaking_a_record_rule_adds_nothing(tmp_path, filled,
                                                             make_record) -> None:
    path = _source(tmp_path, make_record)
    _alter(path, "UPDATE measurements SET costs = '[-1.0]' WHERE id = 4")
    _merge_fails(filled, path, r"measurement row 4 of the tuning database is damaged: bad "
                               r"measure record: field 'costs'")


def test_a_record_with_a_lone_surrogate_is_refused_where_it_is_made() -> None:
    with pytest.raises(TuningLogError, match="field 'workload_key' must be valid Unicode"):
        MeasureRecord("\ud800", "t", "llvm", "d", {}, (1.0,))


def test_tessel_db_import_of_a_bad_line_prints_it_and_exits_2(tmp_path, make_record) -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    with TuningDatabase(tmp_path / "t.db") as db:
        db.add(make_record())
    lines = tmp_path / "l.jsonl"
    lines.write_bytes(_good(make_record, 0) + b"\n{\"workload_key\": \n")
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "autotune.cli", "db", "import", "--db",
                        str(tmp_path / "t.db"), str(lines)], env=env, capture_output=True,
                       text=True, timeout=240)
    assert p.returncode == 2
    assert "l.jsonl:2: bad measure record: not valid JSON" in p.stderr
    assert "Traceback" not in p.stderr
    with TuningDatabase(tmp_path / "t.db", readonly=True) as db:
        assert db.count() == 1
