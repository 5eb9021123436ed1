"""Export to and import from JSON lines, and merging databases, without duplicates."""

from __future__ import annotations

import io
import json

import pytest

from tessel_errors import TuningLogError
from tuning_logs import ImportReport, TuningDatabase


def _fill(db: TuningDatabase, make_record, n: int, **overrides) -> list:
    records = [make_record(config={"i": i, **overrides.pop("config", {})}, **overrides)
               for i in range(n)]
    records.append(make_record(config={"i": -1}, costs=(), error_kind="timeout",
                               error_msg="ran past 10.0 s", **overrides))
    db.add_many(records)
    return records


def test_export_then_import_round_trip_is_equal(tmp_path, make_record):
    with TuningDatabase(tmp_path / "a.db") as a:
        records = _fill(a, make_record, 30)
        records += _fill(a, make_record, 5, workload_key="conv", template="conv2d_nchw")
        assert a.export_jsonl(tmp_path / "out" / "log.jsonl") == len(records)
    with TuningDatabase(tmp_path / "b.db") as b:
        report = b.import_jsonl(tmp_path / "out" / "log.jsonl")
        assert report == ImportReport(added=len(records), duplicates=0)
        assert b.records() == records
        assert [r.digest() for r in b.records()] == [r.digest() for r in records]


def test_export_writes_one_json_object_per_line(db, make_record):
    records = _fill(db, make_record, 4)
    out = io.StringIO()
    db.export_jsonl(out)
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["config"] for line in lines] == [r.config for r in records]
    assert json.loads(lines[-1])["error_kind"] == "timeout"


def test_export_can_select_one_workload(db, make_record):
    _fill(db, make_record, 3)
    _fill(db, make_record, 2, workload_key="other")
    out = io.StringIO()
    assert db.export_jsonl(out, workload_key="other") == 3


def test_import_twice_skips_exact_duplicates(tmp_path, db, make_record):
    with TuningDatabase(tmp_path / "src.db") as src:
        _fill(src, make_record, 10)
        src.export_jsonl(tmp_path / "log.jsonl")
    assert db.import_jsonl(tmp_path / "log.jsonl") == ImportReport(11, 0)
    assert db.import_jsonl(tmp_path / "log.jsonl") == ImportReport(0, 11)
    assert db.count() == 11


def test_import_skips_blank_lines(db, make_record):
    text = "\n" + make_record().to_json() + "\n\n   \n"
    assert db.import_jsonl(io.StringIO(text)).added == 1


def test_bad_line_names_file_and_line_and_imports_nothing(tmp_path, db, make_record):
    good = make_record().to_json()
    bad = json.dumps(make_record().to_dict() | {"error_kind": "exploded"})
    path = tmp_path / "log.jsonl"
    path.write_text(good + "\n" + bad + "\n")
    with pytest.raises(TuningLogError, match=r"log\.jsonl:2: bad measure record: field "
                                             r"'error_kind' .*nothing was imported"):
        db.import_jsonl(path)
    assert db.count() == 0


def test_import_of_a_missing_file_says_so(tmp_path, db):
    with pytest.raises(TuningLogError, match="cannot read JSON lines from"):
        db.import_jsonl(tmp_path / "nope.jsonl")


def test_merge_of_two_databases_has_no_duplicates(tmp_path, make_record):
    shared = [make_record(config={"shared": i}) for i in range(7)]
    with TuningDatabase(tmp_path / "a.db") as a:
        a.add_many(shared)
        only_a = _fill(a, make_record, 5, workload_key="a")
    with TuningDatabase(tmp_path / "b.db") as b:
        b.add_many(shared)
        only_b = _fill(b, make_record, 9, workload_key="b")
        report = b.merge(tmp_path / "a.db")
        assert report == ImportReport(added=len(only_a), duplicates=len(shared))
        assert b.count() == len(shared) + len(only_a) + len(only_b)
        digests = [r.digest() for r in b.records()]
        assert len(digests) == len(set(digests))
        assert b.merge(tmp_path / "a.db").added == 0


def test_merge_leaves_the_source_unchanged(tmp_path, make_record):
    with TuningDatabase(tmp_path / "a.db") as a:
        _fill(a, make_record, 5)
    before = (tmp_path / "a.db").read_bytes()
    with TuningDatabase(tmp_path / "b.db") as b:
        b.merge(tmp_path / "a.db")
    assert (tmp_path / "a.db").read_bytes() == before
    with TuningDatabase(tmp_path / "a.db") as a:
        assert a.count() == 6


def test_merge_of_a_foreign_file_is_refused(tmp_path, db, rng):
    junk = tmp_path / "junk.db"
    junk.write_bytes(rng.bytes(1000))
    with pytest.raises(TuningLogError, match="not a SQLite file"):
        db.merge(junk)
    assert db.count() == 0
