"""benchmarks.step_sequence times every step of a tiny model in sequence and alone; no
timing checked."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx", reason="onnx is not installed")

from benchmarks.step_sequence import format_table, main  # noqa: E402


def test_tiny_run_times_every_step_in_sequence_and_alone() -> None:
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
