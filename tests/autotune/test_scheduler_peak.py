"""The scheduler's cap by the room above the peak: a task's predicted fall is at most its
best time less its FLOPs at one core's FMA peak, so trials go to the tasks far above the
peak rather than to those near it that occur often; a target without a known peak keeps
the uncapped rule. Decisions pinned on fake tasks and a fake runner (deterministic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune import FakeRunner, RandomTuner, Task
from autotune.task_scheduler import (
    ALPHA,
    TaskScheduler,
    TaskState,
    gain_of,
    measure_peaks,
    room_above_peak,
)
from tessel_errors import TesselError
from tuning_logs import TuningDatabase

PEAK = 1e11  # FLOP/s
US = 1e-6


def _mm(n: int, name: str) -> Task:
    return Task("matmul.x86", [((n, n), "float32"), ((n, n), "float32")], name=name)


def _state(task: Task, best_s: list[float], occurrences: int = 1) -> TaskState:
    st = TaskState(task, occurrences, RandomTuner(task))
    st.best = list(best_s)
    st.batches = len(best_s)
    return st


def test_the_room_is_the_best_time_less_the_flops_at_the_peak() -> None:
    t = _mm(64, "a")  # 2 x 64^3 FLOP: 5.24288 us at 1e11 FLOP/s
    assert room_above_peak(8e-6, t.flop, PEAK) == pytest.approx(8e-6 - t.flop / PEAK)
    assert room_above_peak(5e-6, t.flop, PEAK) == 0.0  # measured under the peak: no room
    assert room_above_peak(8e-6, t.flop, None) == float("inf")


def test_a_task_near_the_peak_gains_no_more_than_its_room() -> None:
    t = _mm(64, "near")
    floor = t.flop / PEAK
    st = _state(t, [1.1 * floor, 1.05 * floor], occurrences=4)
    uncapped = gain_of(st, [st])
    capped = gain_of(st, [st], peak_flops=PEAK)
    assert uncapped.value == pytest.approx(
        4 * (ALPHA * 0.05 * floor + (1 - ALPHA) * 1.05 * floor / 2))
    assert capped.value == pytest.approx(4 * 0.05 * floor)
    assert capped.room_s == pytest.approx(0.05 * floor)
    text = capped.explain()
    assert "room above the peak 0.000262 ms caps the predicted fall of" in text
    assert "room above the peak" not in uncapped.explain()


def test_a_task_whose_guess_is_below_its_room_is_not_capped() -> None:
    t = _mm(64, "far")
    st = _state(t, [40 * US, 40 * US, 40 * US, 40 * US])  # forward guess 10 us, room 35
    g = gain_of(st, [st], peak_flops=PEAK)
    assert g.value == pytest.approx(gain_of(st, [st]).value)
    assert "room above the peak 0.0348 ms;" in g.explain() + ";"
    assert "caps" not in g.explain()


def _cost(task: Task, cfg) -> float:
    # "near" runs at 0.95-0.98 of the peak whatever its config; "far" at a third of it,
    # and some configs nearly twice as fast
    floor = task.flop / PEAK
    if task.name == "near":
        return floor * (1.02 + 0.03 * (cfg.index % 7) / 7)
    return floor * (3.0 - 1.5 * (cfg.index % 50) / 50)


def _run(tmp_path: Path, peaks: dict[str, float] | None) -> dict[str, int]:
    tasks = [(_mm(64, "near"), 4), (_mm(72, "far"), 1)]
    with TuningDatabase(tmp_path / "t.db") as db:
        result = TaskScheduler(tasks, [RandomTuner(t, seed=0) for t, _ in tasks], db,
                               FakeRunner(_cost), 64, batch_size=4, confirm=0,
                               peaks=peaks).run()
    return {st.task.name: st.trials for st in result.tasks}


def test_with_the_peak_the_task_with_room_gets_the_trials(tmp_path: Path) -> None:
    uncapped = _run(tmp_path / "a", None)
    capped = _run(tmp_path / "b", {"llvm": PEAK})
    # uncapped, the four occurrences near the peak take most batches (40 of 64 trials);
    # capped, "near" gets its first batch only: its 4 x 2-5% of room loses to far's 50%
    assert uncapped["near"] > uncapped["far"], uncapped
    assert capped == {"near": 4, "far": 60}


def test_a_target_left_out_of_the_peaks_keeps_the_uncapped_rule(tmp_path: Path) -> None:
    assert _run(tmp_path / "a", {"llvm -mcpu=haswell": PEAK}) == _run(tmp_path / "b", None)


def test_a_peak_must_be_positive(tmp_path: Path) -> None:
    t = _mm(8, "a")
    with TuningDatabase(tmp_path / "t.db") as db, pytest.raises(TesselError, match="peaks"):
        TaskScheduler([(t, 1)], [RandomTuner(t)], db, FakeRunner(lambda t, c: 1.0), 4,
                      peaks={"llvm": 0.0})


class _PeakRunner(FakeRunner):
    def __init__(self, peaks: dict[str, float | None]) -> None:
        super().__init__(lambda t, c: 1.0)
        self.peaks, self.asked = peaks, []

    def peak_flops(self, task: Task) -> float | None:
        self.asked.append(str(task.target))
        return self.peaks[str(task.target)]


def test_the_peaks_come_from_the_runner_once_per_target() -> None:
    tasks = [_mm(8, "a"), _mm(16, "b"), Task("matmul.x86", [((8, 8), "float32")] * 2,
                                             target="llvm -mcpu=haswell")]
    runner = _PeakRunner({"llvm": 2e11, "llvm -mcpu=haswell": None})
    assert measure_peaks(tasks, runner) == {"llvm": 2e11}  # None: not known, not capped
    assert sorted(runner.asked) == ["llvm", "llvm -mcpu=haswell"]


def test_a_runner_without_a_peak_leaves_every_target_uncapped() -> None:
    assert measure_peaks([_mm(8, "a")], FakeRunner(lambda t, c: 1.0)) == {}


def test_the_scheduler_asks_the_runner_for_its_peaks_after_calibrating(
        tmp_path: Path) -> None:
    calls: list[str] = []

    class Calibrated(_PeakRunner):
        def calibrate(self, tasks, peaks=True):  # type: ignore[no-untyped-def]
            calls.append("calibrate" if peaks else "calibrate without the peak")

        def peak_flops(self, task: Task) -> float | None:
            calls.append("peak")
            return super().peak_flops(task)

    t = _mm(8, "a")
    with TuningDatabase(tmp_path / "t.db") as db:
        result = TaskScheduler([(t, 1)], [RandomTuner(t)], db, Calibrated({"llvm": 3e11}),
                               4, confirm=0, cap_by_peak=True).run()
    assert calls == ["calibrate", "peak"] and result.peaks == {"llvm": 3e11}
    calls.clear()
    with TuningDatabase(tmp_path / "u.db") as db:  # off by default: no peak, no cap
        result = TaskScheduler([(t, 1)], [RandomTuner(t)], db, Calibrated({"llvm": 3e11}),
                               4, confirm=0).run()
    assert calls == ["calibrate without the peak"] and result.peaks == {}
