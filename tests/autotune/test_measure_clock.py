"""Which clock a timed slot reads: CPU time for one-thread kernels, wall time for
several threads, or what TESSEL_MEASURE_CLOCK says."""

from __future__ import annotations

import time

import pytest

from autotune.measure import kernel_clock
from tessel_errors import TesselError


def test_one_thread_kernels_are_timed_on_cpu_time(monkeypatch) -> None:
    monkeypatch.delenv("TESSEL_MEASURE_CLOCK", raising=False)
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    assert kernel_clock() is time.process_time


def test_several_threads_are_timed_on_wall_time(monkeypatch) -> None:
    monkeypatch.delenv("TESSEL_MEASURE_CLOCK", raising=False)
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    assert kernel_clock() is time.perf_counter


@pytest.mark.parametrize("choice, clock", [("wall", time.perf_counter),
                                           ("cpu", time.process_time)])
def test_the_environment_chooses_the_clock(monkeypatch, choice, clock) -> None:
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1" if choice == "wall" else "2")
    monkeypatch.setenv("TESSEL_MEASURE_CLOCK", choice)
    assert kernel_clock() is clock


def test_an_unknown_clock_name_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setenv("TESSEL_MEASURE_CLOCK", "cycles")
    with pytest.raises(TesselError, match="TESSEL_MEASURE_CLOCK must be 'wall' or 'cpu'"):
        kernel_clock()


def test_a_runner_refuses_an_unknown_clock_before_measuring(monkeypatch) -> None:
    from autotune import LocalRunner

    monkeypatch.setenv("TESSEL_MEASURE_CLOCK", "cycles")
    with pytest.raises(TesselError, match="TESSEL_MEASURE_CLOCK"):
        LocalRunner()
