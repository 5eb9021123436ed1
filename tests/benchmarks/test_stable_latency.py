"""benchmarks.stable_latency runs at a tiny size and builds each setting's plans as asked
(skew off: blocks on page boundaries; on: at distinct page offsets); no timing checked."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("onnx", reason="onnx is not installed")

from benchmarks.stable_latency import main  # noqa: E402


def test_tiny_run_builds_both_settings_and_restores_the_environment() -> None:
    before = os.environ.get("TESSEL_PLAN_SKEW")
    res = main(["--image", "32", "--width", "8", "--builds", "2", "--repeat", "1"])
    assert [len(res["off"]), len(res["on"])] == [2, 2]
    assert all(len(pages) > 1 and set(pages) == {0} for _, pages in res["off"])
    assert all(len(set(pages)) == len(pages) for _, pages in res["on"])
    assert os.environ.get("TESSEL_PLAN_SKEW") == before
