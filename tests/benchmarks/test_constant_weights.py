"""benchmarks/constant_weights.py runs and prints its three ways per batch."""

from __future__ import annotations

from benchmarks.constant_weights import main


def test_the_benchmark_prints_packed_once_per_call_and_numpy(capsys) -> None:
    assert main(["--batches", "2", "--k", "32", "--n", "64", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "batch   2: packed once" in out and "per call / once" in out and "numpy" in out
