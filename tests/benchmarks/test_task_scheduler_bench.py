"""benchmarks/task_scheduler.py runs end to end on a tiny budget and prints its table."""

from __future__ import annotations

import pytest

from benchmarks.task_scheduler import main


@pytest.mark.slow
def test_the_benchmark_compares_both_strategies_at_each_budget(capsys) -> None:
    assert main(["--model", "small", "--budgets", "12", "--seeds", "1", "--repeat", "2",
                 "--no-cache-flush"]) == 0
    out = capsys.readouterr().out
    assert "equal     seed 0 ms at budget 12:" in out
    assert "scheduler seed 0 ms at budget 12:" in out and "noise floor" in out
    assert "equal/scheduler" in out
    assert "(a) within 5% of the best latency: equal / scheduler" in out
    assert "(b) 95% of the best improvement: equal / scheduler" in out
