"""benchmarks.step_sequence times every step of a tiny model in sequence and alone; no
timing checked."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx", reason="onnx is not installed")

from benchmarks.step_sequence import format_table, main  # noqa: E402


def test_tiny_run_times_every_step_in_sequence_and_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # one thread: on a loaded machine two threads' samples may all be left out (a pool
    # worker off its CPU), and the table would have no figure to check
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    rows = main(["--models", "resnet18", "--image", "32", "--width", "8", "--runs", "4"])
    steps = rows["resnet18"]
    assert len(steps) > 5 and [r.index for r in steps] == list(range(len(steps)))
    # a step whose every sample waited for a CPU (a loaded machine) has no figure (nan)
    times = [t for r in steps for t in (r.in_sequence_us, r.alone_us)]
    assert not any(t <= 0 for t in times) and any(t > 0 for t in times)
    table = format_table(steps)
    assert table.count("\n") == len(steps) + 1 and "total" in table


def test_one_thread_watches_only_the_caller_and_its_run_queue_wait_never_falls() -> None:
    import threading

    from benchmarks.step_sequence import RunQueueWait, parallel_threads

    assert parallel_threads(1) == [threading.get_native_id()]
    waited = RunQueueWait(parallel_threads(1))
    try:
        first = waited()
        sum(range(100_000))
        assert waited() >= first >= 0
    finally:
        waited.close()


def test_parallel_threads_are_those_that_ran_during_the_run() -> None:
    # a thread that works while `run` runs is picked over one that sleeps through it,
    # whichever has run longer before
    import threading
    import time

    import numpy as np

    from benchmarks.step_sequence import OnCpu, parallel_threads

    stop, started, rested = threading.Event(), threading.Event(), threading.Event()
    ids: dict[str, int] = {}

    def busy() -> None:
        ids["busy"] = threading.get_native_id()
        a = np.ones(1 << 20, "float32")
        started.set()
        while not stop.is_set():
            np.sqrt(a, out=a)  # one thread (no BLAS pool), the GIL released

    def idle() -> None:
        ids["idle"] = threading.get_native_id()
        a = np.ones(1 << 20, "float32")
        for _ in range(300):  # run longer than the busy thread before the run
            np.sqrt(a, out=a)
        rested.set()
        stop.wait()

    sleeper = threading.Thread(target=idle)
    sleeper.start()
    rested.wait()
    worker = threading.Thread(target=busy)
    worker.start()
    try:
        started.wait()
        tids = parallel_threads(2, lambda: time.sleep(0.1))
        assert tids == [threading.get_native_id(), ids["busy"]]
        ran = OnCpu(tids[1:])
        first = ran.each()
        time.sleep(0.05)
        assert ran.each()[0] > first[0]
        ran.close()
    finally:
        stop.set()
        worker.join()
        sleeper.join()
