"""benchmarks.tuned_model end to end on a tiny ResNet-18: tune, resume, compile, compare.

Runs the benchmark's main path with 2 trials per task and one timed repeat; it checks the
rows and that the outputs agree (main stops otherwise), never a timing. 20-30 s on 2 cores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from benchmarks.tuned_model import main, tune_model  # noqa: E402

TINY = ["--image", "32", "--width", "8", "--classes", "10", "--repeat", "1", "--warmup", "1",
        "--pause", "0", "--min-repeat-ms", "1"]


@pytest.mark.slow
def test_tune_then_compile_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "tiny.db")
    first = main([*TINY, "--trials", "2", "--db", db])
    rows = first["tasks"]
    assert rows and all(trials == 2 and new == 2 for _, trials, new, _, _ in rows)
    assert {"tessel tuned", "tessel untuned", "onnxruntime"} <= set(first["seconds"])
    out = capsys.readouterr().out
    assert "relative error vs onnxruntime" in out and "tessel_tuned / onnxruntime" in out
    if all(errors < trials for _, trials, _, errors, _ in rows):
        # the tuned build found a record for every task (on several threads a record that
        # splits the output otherwise than the default may still run the default: a
        # warning of its own, lower_group.default_partition)
        assert "have no tuning record" not in out

    again = main([*TINY, "--db", db, "--no-tune"])
    assert [(r[0], r[1]) for r in again["tasks"]] == [(r[0], r[1]) for r in rows]
    # resuming measures nothing twice
    resumed = tune_model(first["task_list"], Path(db), 2, 10.0, 1.0, 0)
    assert [(r[1], r[2]) for r in resumed] == [(2, 0)] * len(rows)
