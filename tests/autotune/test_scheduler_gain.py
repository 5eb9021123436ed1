"""The scheduler's gain (Ansor's): occurrences x best time, the recent slope, what similar
tasks reached, alternates counted once, per-task early stopping; decisions pinned on
synthetic curves, and each decision explained by its terms."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autotune import RandomTuner, Task
from autotune.extract import extract_model_tasks
from autotune.task_scheduler import (
    ALPHA,
    BETA,
    TaskScheduler,
    TaskState,
    _estimate,
    gain_of,
)
from tessel_errors import TesselError
from tests.autotune.synthetic import CurveRunner
from tuning_logs import TuningDatabase

MS = 1e-3


def _mm(n: int, name: str, template: str = "matmul.x86") -> Task:
    return Task(template, [((n, n), "float32"), ((n, n), "float32")], name=name)


def _state(task: Task, best_ms: list[float], occurrences: int = 1) -> TaskState:
    st = TaskState(task, occurrences, RandomTuner(task))
    st.best = [b * MS for b in best_ms]
    st.batches = len(best_ms)
    return st


def test_the_gain_is_occurrences_times_the_slope_and_the_forward_guess() -> None:
    st = _state(_mm(32, "a"), [10, 8, 6, 5], occurrences=3)
    g = gain_of(st, [st])
    assert g.backward_s == pytest.approx(5 * MS / 3)     # (10 - 5) over the last 3 batches
    assert g.forward_s == pytest.approx(5 * MS / 4)      # best / batches
    assert g.value == pytest.approx(3 * (ALPHA * 5 / 3 + (1 - ALPHA) * 5 / 4) * MS)
    text = g.explain()
    assert text.startswith(f"gain {g.value * 1e3:.4g} ms = x3 occurrences")
    assert "best 5 ms after 4 batches" in text and "slope 1.67 ms/batch" in text


def test_a_task_far_below_what_a_similar_task_reached_gains_the_way_to_it() -> None:
    fast, slow = _mm(32, "fast"), _mm(32, "slow")  # the same work
    a, b = _state(fast, [1, 1]), _state(slow, [10, 10, 10, 10, 10])
    g = gain_of(b, [a, b])
    # 1/BETA of fast's FLOP/s is BETA ms for the same flop: 8 ms to gain, not 10/5
    assert g.similar == "fast" and g.forward_s == pytest.approx((10 - BETA) * MS)
    assert "to 1/2 of the FLOP/s fast reached" in g.explain()
    other = _state(_mm(32, "other", "dense.x86"), [1, 1])  # another template: not similar
    assert gain_of(b, [other, b]).forward_s == pytest.approx(2 * MS)
    # the fast task itself is bounded by nothing above it
    assert gain_of(a, [a, b]).similar is None


def test_a_slower_alternate_gains_only_below_its_groups_best() -> None:
    direct, gemm = _mm(32, "direct"), _mm(32, "gemm", "dense.x86")
    a, b = _state(direct, [1, 1], 2), _state(gemm, [3, 3], 2)
    g = gain_of(b, [a, b], [a, b])
    assert g.value == 0.0 and g.alternate == "direct"
    assert "alternate of direct (group best 1 ms)" in g.explain()
    near = _state(gemm, [3, 1.05], 2)  # falling fast, predicted below 1 ms
    assert gain_of(near, [a, near], [a, near]).value > 0
    assert gain_of(a, [a, b], [a, b]).value == gain_of(a, [a, b]).value
    assert _estimate([a, b], [[0, 1]]) == pytest.approx(2 * MS)  # the min, not 2 + 6 ms
    assert _estimate([a, b], []) == pytest.approx(8 * MS)


def test_cuda_conv_groups_have_alternates_and_the_estimate_takes_their_min() -> None:
    from tests.relay_ir.programs import resnet_block

    found = extract_model_tasks(resnet_block(), "cuda -sim")
    assert [sorted(found.tasks[k][0].template for k in a) for a in found.alternates] == \
        [["conv2d_nchw.cuda", "conv2d_nchw_gemm.cuda"]]
    (pair,) = found.alternates
    states = [_state(t, [4.0 + k] * 6, n) for k, (t, n) in enumerate(found.tasks)]
    n = found.tasks[pair[0]][1]
    lone = sum(s.occurrences * s.best_time for k, s in enumerate(states) if k not in pair)
    group = n * min(states[k].best_time for k in pair)
    assert _estimate(states, found.alternates) == pytest.approx(lone + group)
    slower = max(pair, key=lambda k: states[k].best_time)
    g = gain_of(states[slower], states, [states[k] for k in pair])
    assert g.value == 0.0 and g.alternate is not None


def _run(tmp_path: Path, curves: dict, occurrences: dict, budget: int,
         early_stopping: int | None = None, alternates=()):
    tasks = [_mm(16 + 8 * k, name) for k, name in enumerate(curves)]
    runner = CurveRunner(curves)
    with TuningDatabase(tmp_path / "t.db") as db:
        sched = TaskScheduler([(t, occurrences[t.name]) for t in tasks],
                              [RandomTuner(t, seed=0) for t in tasks], db, runner, budget,
                              batch_size=4, early_stopping=early_stopping,
                              alternates=alternates)
        return sched.run(), runner


def test_decisions_on_a_falling_and_a_flat_curve_are_pinned(tmp_path: Path) -> None:
    curves = {"falls": lambda n: max(1, 8 - n) * MS, "flat": lambda n: 2 * MS}
    result, _ = _run(tmp_path, curves, {"falls": 1, "flat": 1}, 40)
    assert [d.task for d in result.decisions] == \
        ["falls", "flat", "falls", "flat", "falls", "flat", "falls", "flat", "falls", "flat"]
    # batch 3: falls has best 5 ms after 1 batch (forward 5), flat 2 ms (forward 2)
    third = result.decisions[2]
    assert third.gain.value == pytest.approx((1 - ALPHA) * 5 * MS)
    assert third.reason == third.gain.explain()
    # batch 4: falls fell 5 -> 1 ms (slope 4, forward 0.5): 1.2 ms < flat's 1.6 ms
    assert result.decisions[3].gain.value == pytest.approx((1 - ALPHA) * 2 * MS)


def test_occurrences_turn_the_first_choice(tmp_path: Path) -> None:
    curves = {"falls": lambda n: max(1, 8 - n) * MS, "flat": lambda n: 2 * MS}
    result, _ = _run(tmp_path, curves, {"falls": 1, "flat": 3}, 12)
    assert [d.task for d in result.decisions] == ["falls", "flat", "flat"]  # 4.8 > 4 ms


def test_a_task_stops_early_after_n_of_its_trials_without_a_better_time(
        tmp_path: Path) -> None:
    curves = {"falls": lambda n: 100 * MS / (1 + n), "flat": lambda n: 50 * MS}
    result, runner = _run(tmp_path, curves, {"falls": 1, "flat": 1}, 64, early_stopping=6)
    flat = next(s for s in result.tasks if s.task.name == "flat")
    assert flat.done and flat.trials == 8  # best at trial 1; 7 >= 6 after its 2nd batch
    assert flat.stop_reason == "stopped early: 7 trials without a better time"
    last = [d for d in result.decisions if d.task == "flat"][-1]
    assert last.reason.endswith("[stopped early: 7 trials without a better time]")
    assert runner.counts == {"flat": 8, "falls": 56}


def test_a_slower_alternate_gets_no_batch_after_its_first(tmp_path: Path) -> None:
    curves = {"direct": lambda n: 1 * MS / (1 + 0.01 * n), "gemm": lambda n: 5 * MS,
              "other": lambda n: 2 * MS / (1 + 0.01 * n)}
    result, runner = _run(tmp_path, curves, {"direct": 2, "gemm": 2, "other": 1}, 40,
                          alternates=[[0, 1]])
    assert runner.counts["gemm"] == 4
    best = {s.task.name: s.best_time for s in result.tasks}
    assert result.model_estimate_s == pytest.approx(2 * best["direct"] + best["other"])
    assert result.decisions[-1].model_estimate_s == pytest.approx(result.model_estimate_s)


def test_alternates_must_name_tasks_once_with_equal_occurrences(tmp_path: Path) -> None:
    curves = {"a": lambda n: MS, "b": lambda n: MS}
    with pytest.raises(TesselError, match="out of range"):
        _run(tmp_path, curves, {"a": 1, "b": 1}, 8, alternates=[[0, 2]])
    with pytest.raises(TesselError, match="different numbers"):
        _run(tmp_path, curves, {"a": 1, "b": 2}, 8, alternates=[[0, 1]])


def test_a_task_without_a_valid_time_keeps_trying_then_waits(tmp_path: Path) -> None:
    st = _state(_mm(32, "broken"), [math.inf])
    assert gain_of(st, [st]).value == math.inf
    st = _state(_mm(32, "broken"), [math.inf, math.inf])
    g = gain_of(st, [st])
    assert g.value == 0.0 and "left for last" in g.explain()
