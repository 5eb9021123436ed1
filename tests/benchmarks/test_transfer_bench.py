"""benchmarks/transfer.py runs end to end at a tiny size and prints cold against warm."""

from __future__ import annotations

import pytest

from benchmarks.transfer import main, trials_to_reach


def test_trials_to_reach_counts_to_within_five_percent() -> None:
    assert trials_to_reach([3.0, 2.0, 1.04, 1.0], 1.0) == 3
    assert trials_to_reach([3.0, 2.0], 1.0) is None


@pytest.mark.slow
def test_the_benchmark_tunes_cold_and_warm_and_prints_the_trials_each_needs(capsys) -> None:
    assert main(["--tasks", "1", "--trials", "3", "--source-trials", "2", "--seeds", "1",
                 "--source", "small"]) == 0
    out = capsys.readouterr().out
    assert "seed 0 cold: estimate" in out and "seed 0 warm: estimate" in out
    assert "medians over 1 seed(s): cold" in out and "cold / warm" in out
