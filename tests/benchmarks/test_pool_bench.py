"""benchmarks.pool at a tiny size: the blocked and NCHW max pools are checked against ORT's
MaxPool (main stops otherwise) and timed beside a copy; no timing checked."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from benchmarks.pool import main  # noqa: E402


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_tiny_run_checks_and_times_each_system(target: str) -> None:
    secs = main(["--channels", "16", "--size", "10", "--repeat", "1", "--rounds", "1",
                 "--pause", "0", "--target", target])
    assert set(secs) == {"tessel blocked", "tessel nchw", "tessel copy", "numpy copy",
                         "onnxruntime"}
    assert all(v > 0 for v in secs.values())
