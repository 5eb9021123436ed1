"""benchmarks/task_scheduler.py runs end to end on a tiny budget and prints its table."""

from __future__ import annotations

import pytest

from benchmarks.task_scheduler import main


@pytest.mark.slow
def test_the_benchmark_compares_both_strategies_at_each_budget(capsys) -> None:
    assert main(["--model", "small", "--budgets", "12", "--seeds", "1", "--repeat", "2",
                 "--no-cache-flush"]) == 0
    out = capsys.readouterr().out
    assert "budget    12 equal     seed 0" in out and "budget    12 scheduler seed 0" in out
    assert "equal/scheduler" in out and "within 5% of the best" in out
