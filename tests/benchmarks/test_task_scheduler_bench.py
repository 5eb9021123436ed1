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


def test_a_prefix_counts_measurements_and_keeps_the_confirm_records_among_them(
        tmp_path) -> None:
    from benchmarks.task_scheduler import prefix_db
    from tuning_logs import CONFIRM_TUNER, MeasureRecord, TuningDatabase

    def rec(i: int, tuner: str = "xgb") -> MeasureRecord:
        return MeasureRecord("w", "t", "llvm", "d", {"i": i}, (1.0 + i,), tuner=tuner,
                             timestamp=float(len(order)))

    order: list[MeasureRecord] = []
    for i, tuner in [(0, "xgb"), (1, "xgb"), (1, CONFIRM_TUNER), (2, "xgb"), (3, "xgb"),
                     (3, CONFIRM_TUNER)]:
        order.append(rec(i, tuner))
    with TuningDatabase(tmp_path / "src.db") as src:
        src.add_many(order)
        with TuningDatabase(prefix_db(src, 2, str(tmp_path / "p2.db"))) as p2:
            assert [(r.config["i"], r.tuner) for r in p2.records()] == \
                [(0, "xgb"), (1, "xgb"), (1, CONFIRM_TUNER)]
        with TuningDatabase(prefix_db(src, 3, str(tmp_path / "p3.db"))) as p3:
            assert p3.count() == 4
