"""benchmarks/transfer.py runs end to end at a tiny size and prints cold against warm."""

from __future__ import annotations

import pytest

from benchmarks.transfer import main, trials_to_close, trials_to_reach


def test_trials_to_reach_counts_to_within_five_percent() -> None:
    assert trials_to_reach([3.0, 2.0, 1.04, 1.0], 1.0) == 3
    assert trials_to_reach([3.0, 2.0], 1.0) is None


def test_trials_to_close_counts_to_95_percent_of_the_improvement() -> None:
    assert trials_to_close([10.0, 8.0, 6.1, 6.0], 10.0, 6.0) == 3
    assert trials_to_close([10.0, 9.0], 10.0, 6.0) is None


@pytest.mark.slow
def test_the_benchmark_tunes_cold_and_warm_and_prints_the_trials_each_needs(capsys) -> None:
    assert main(["--tasks", "1", "--trials", "3", "--source-trials", "2", "--seeds", "1",
                 "--source", "small"]) == 0
    out = capsys.readouterr().out
    assert "seed 0 cold: estimate" in out and "seed 0 warm: estimate" in out
    assert "medians over 1 seed(s), trials per task:" in out
    assert "(a) within 5% of cold's final latency: cold" in out
    assert "(b) 95% of cold's final improvement" in out and "cold / warm" in out
