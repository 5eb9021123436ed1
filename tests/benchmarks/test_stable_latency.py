"""benchmarks.stable_latency at a tiny size: every build is timed once a round, the skew
settings build the plans they name, the environment is put back; relative times divide a
round's slowdown out; no timing checked."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("onnx", reason="onnx is not installed")

from benchmarks.stable_latency import Build, halves_spread, main, relative_rounds, time_in_rounds  # noqa: E402

TINY = ["resnet18", "--image", "32", "--width", "8", "--builds", "2", "--rounds", "2",
        "--repeat", "1"]


def test_tiny_run_times_every_build_each_round_and_restores_the_environment() -> None:
    before = os.environ.get("TESSEL_PLAN_SKEW")
    builds = main(TINY)
    assert [(b.skew, b.index, len(b.rounds)) for b in builds] == [
        ("off", 0, 2), ("off", 1, 2), ("on", 0, 2), ("on", 1, 2)]
    for b in builds:
        assert b.layout["blocks"] > 1 and b.layout["temps % 4K"] == 0
        # skew off: every block on a page boundary; on: each at a page offset of its own
        assert b.layout["at distinct % 4K"] == (1 if b.skew == "off" else b.layout["blocks"])
    assert os.environ.get("TESSEL_PLAN_SKEW") == before


@pytest.mark.slow  # two processes, each importing the compiler and building
def test_a_process_per_build_sends_its_rounds_and_layout() -> None:
    builds = main([*TINY, "--processes", "--skew", "on"])
    assert [(b.skew, b.index, len(b.rounds)) for b in builds] == [("on", 0, 2), ("on", 1, 2)]
    assert all(b.layout["at distinct % 4K"] == b.layout["blocks"] for b in builds)


def test_time_in_rounds_calls_each_once_a_round_in_orders_that_change() -> None:
    calls: list[int] = []
    rounders = [lambda k=k: calls.append(k) or float(k) for k in range(4)]
    times = time_in_rounds(rounders, 6, seed=1)
    assert times == [[float(k)] * 6 for k in range(4)]
    orders = [tuple(calls[r * 4:(r + 1) * 4]) for r in range(6)]
    assert all(sorted(o) == [0, 1, 2, 3] for o in orders)
    assert len(set(orders)) > 1


def test_relative_rounds_divide_out_a_round_where_every_build_ran_slow() -> None:
    builds = [Build("on", k, {}, [t, 1.5 * t, t]) for k, t in enumerate([1.0, 1.02, 1.3])]
    rel = relative_rounds(builds)
    assert [max(r) - min(r) for r in rel] == pytest.approx([0, 0, 0])
    assert rel[2][0] == pytest.approx(1.3 / 1.02)
    assert halves_spread(rel[2]) == pytest.approx(1.0)
