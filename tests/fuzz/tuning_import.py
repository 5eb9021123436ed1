"""Fuzz target: mutated JSON lines through TuningDatabase.import_jsonl, and damaged
database files through TuningDatabase.merge.

The lines come from a real export (records of several kinds: successes with flops and
attrs, timeouts, build errors). Each input changes one line (a field renamed, deleted or
retyped, bytes flipped, the line cut short, invalid UTF-8, a 5,000-digit number, nesting
100,000 deep, an unknown schema_version, a line of several MiB) or damages a copy of an
exported SQLite file. The thunk imports (or merges) into a fresh database that already holds
records; when that fails, the database must hold exactly what it held before (all or
nothing), else the thunk raises AssertionError, which is a finding.

    >>> import numpy as np
    >>> what, thunk = one_input(np.random.default_rng(0))  # doctest: +SKIP
    >>> thunk()                                             # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tessel_errors import TuningLogError
from tests.json_mutations import mutate_json

NAME = "tuning_import"


def _records(rng: np.random.Generator, n: int) -> list:
    from tuning_logs import MeasureRecord

    out = []
    for i in range(n):
        kind = ["none", "none", "timeout", "build_error"][i % 4]
        costs = tuple(float(c) for c in rng.uniform(1e-4, 1e-2, 3)) if kind == "none" else ()
        out.append(MeasureRecord(
            f"matmul|{i % 3}", "matmul_x86", "llvm", "llvm -mcpu=x|cpu|00", {"tile": [i, 4]},
            costs, error_kind=kind, error_msg="" if kind == "none" else "ran past 10 s",
            timestamp=1.0 + i, tuner="xgb", flops=2e9 if kind == "none" else None,
            attrs_json={"n": i}))
    return out


@functools.lru_cache(maxsize=1)
def _base() -> tuple[list[str], bytes, Path]:
    """Exported lines, the bytes of the database they came from, and a scratch folder."""
    from tuning_logs import TuningDatabase

    folder = Path(tempfile.mkdtemp(prefix="tessel-fuzz-db-"))
    atexit.register(shutil.rmtree, folder, True)
    with TuningDatabase(folder / "src.db") as db:
        db.add_many(_records(np.random.default_rng(7), 8))
        db.export_jsonl(folder / "src.jsonl")
    # checkpoint the WAL into the main file, so the file alone is the database
    import sqlite3

    conn = sqlite3.connect(folder / "src.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    return ((folder / "src.jsonl").read_text().splitlines(), (folder / "src.db").read_bytes(),
            folder)


def _flip(data: bytes, rng: np.random.Generator, lo: int = 0) -> bytes:
    buf = bytearray(data)
    for _ in range(int(rng.integers(1, 9))):
        buf[int(rng.integers(lo, len(buf)))] ^= 1 << int(rng.integers(8))
    return bytes(buf)


def _bad_line(line: str, rng: np.random.Generator) -> tuple[bytes, str]:
    kind = str(rng.choice(["json", "json", "json", "flip", "cut", "utf8", "digits", "deep",
                           "version", "huge", "not_object", "nan_cost", "negative_cost"]))
    raw = line.encode()
    if kind == "json":
        doc, what = mutate_json(json.loads(line), rng)
        return json.dumps(doc).encode(), what
    if kind == "flip":
        return _flip(raw, rng), "bytes flipped"
    if kind == "cut":
        return raw[:int(rng.integers(len(raw)))], "cut short"
    if kind == "utf8":
        k = int(rng.integers(len(raw)))
        return raw[:k] + bytes([0xC3 + int(rng.integers(40)) % 61]) + raw[k:], "invalid UTF-8"
    doc = json.loads(line)
    if kind == "digits":
        field = str(rng.choice(["timestamp", "flops", "costs"]))
        digits = int(rng.choice([400, 5000]))  # past float's range; past Python's int limit
        doc[field] = "@"
        number = "9" * digits
        text = json.dumps(doc).replace('"@"', f"[{number}]" if field == "costs" else number)
        return text.encode(), f"{field}: a {digits}-digit number"
    if kind == "deep":
        doc["config"] = "@"
        return json.dumps(doc).replace('"@"', "[" * 100_000 + "]" * 100_000).encode(), \
            "config nested 100,000 deep"
    if kind == "version":
        doc["schema_version"] = [2, "2", None, 0, 1.5][int(rng.integers(5))]
        return json.dumps(doc).encode(), f"schema_version {doc['schema_version']!r}"
    if kind == "huge":
        doc["error_msg"] = "x" * (3 << 20)
        return json.dumps(doc).encode(), "a 3 MiB line"
    if kind == "not_object":
        return [b"[]", b"1", b"null", b'"x"', b"{}"][int(rng.integers(5))], "not a record"
    if kind == "nan_cost":
        doc["costs"] = ["NaN"]
        return json.dumps(doc).replace('"NaN"', "NaN").encode(), "cost NaN"
    doc["costs"] = [-1.0]
    doc["error_kind"] = "none"
    return json.dumps(doc).encode(), "cost negative"


def _import_input(rng: np.random.Generator) -> tuple[str, bytes]:
    lines, _, _ = _base()
    k = int(rng.integers(len(lines)))
    bad, what = _bad_line(lines[k], rng)
    raw = [line.encode() for line in lines]
    raw[k] = bad
    return f"line {k + 1}: {what}", b"\n".join(raw) + b"\n"


def _merge_input(rng: np.random.Generator) -> tuple[str, bytes]:
    _, data, _ = _base()
    kind = str(rng.choice(["flip", "truncate", "flip_header"]))
    if kind == "flip":
        return "database: bytes flipped after the header", _flip(data, rng, lo=100)
    if kind == "flip_header":
        return "database: header bytes flipped", _flip(data[:100], rng) + data[100:]
    n = int(rng.integers(len(data)))
    return f"database: truncated to {n} bytes", data[:n]


def _snapshot(db) -> list:
    return [r.to_json() for r in db.records()]


def one_input(rng: np.random.Generator) -> tuple[str, Callable[[], object]]:
    """A damaged JSON-lines file or database file and a thunk importing or merging it."""
    merge = bool(rng.integers(4) == 0)
    what, data = _merge_input(rng) if merge else _import_input(rng)
    existing = _records(np.random.default_rng(int(rng.integers(2**32))), 3)

    def thunk() -> object:
        from tuning_logs import TuningDatabase

        folder = Path(tempfile.mkdtemp(prefix="tessel-fuzz-import-", dir=_base()[2]))
        try:
            source = folder / ("other.db" if merge else "lines.jsonl")
            source.write_bytes(data)
            with TuningDatabase(folder / "t.db") as db:
                db.add_many(existing)
                before = _snapshot(db)
                try:
                    return db.merge(source) if merge else db.import_jsonl(source)
                except TuningLogError:
                    if _snapshot(db) != before:
                        raise AssertionError(f"a failed {'merge' if merge else 'import'} "
                                             f"changed the database ({what})") from None
                    raise
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    return ("merge " if merge else "import ") + what, thunk


__all__ = ["NAME", "one_input"]
