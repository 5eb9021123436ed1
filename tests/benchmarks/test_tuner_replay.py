"""benchmarks.tuner_replay on a small synthetic landscape: tables, export files, counting."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import tests.autotune.synthetic  # noqa: F401  (registers synthetic.test)
from autotune import FakeRunner, Task, make_tuner, tune
from benchmarks.tuner_replay import load_landscape, main, replay
from tuning_logs import ErrorKind, TuningDatabase

TASK = Task("synthetic.test", [((16, 8), "float32")])


def _cost(t: Task, cfg) -> float | ErrorKind:
    return ErrorKind.RUNTIME_ERROR if cfg.index == 3 else 1.0 + (cfg.index * 7) % 11


@pytest.fixture
def landscape(tmp_path: Path) -> Path:
    """Every config of TASK measured once (one of them failed), exported as .jsonl.gz."""
    with TuningDatabase(tmp_path / "land.db") as db:
        tune(TASK, make_tuner("grid", TASK), TASK.space.size, db, FakeRunner(_cost))
        out = tmp_path / "land.jsonl.gz"
        with gzip.open(out, "wt") as f:
            db.export_jsonl(f)
    return out


def test_a_landscape_loads_from_an_export_file_without_its_failures(landscape: Path) -> None:
    table = load_landscape([landscape], TASK)
    assert len(table) == TASK.space.size - 1 and 3 not in table
    assert table[0] == 1.0 and table[2] == 1.0 + 14 % 11


def test_a_replay_counts_trials_by_the_table_not_by_the_noisy_answer(
        landscape: Path, tmp_path: Path) -> None:
    table = load_landscape([landscape], TASK)
    curve = replay(TASK, table, "random", 0, 20, 0.5, tmp_path)
    true = [TASK.flop / s / 1e9 for s in table.values()]
    assert len(curve) == 20 and curve == sorted(curve)
    assert all(any(abs(v - t) < 1e-12 for t in true) for v in curve)


def test_the_command_prints_a_row_per_tuner(landscape: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    main(["--db", str(landscape), "--op", "none", "--tuners", "random,xgb", "--seeds", "2",
          "--trials", "24", "--checkpoints", "8,24"], task=TASK)
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines()[2:]]
    assert rows == ["random", "xgb"] and f"of {TASK.space.size} configs measured" in out
