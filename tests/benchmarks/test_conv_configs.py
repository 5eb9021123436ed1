"""benchmarks.conv_configs at a tiny size: the default and an override are built in model
layouts and timed beside ONNX Runtime; no timing checked."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from benchmarks.conv_configs import main  # noqa: E402


def test_a_tiny_conv_times_the_default_an_override_and_onnxruntime() -> None:
    rows = main(["32", "8", "32", "3", "1", '{"acc_scope": "row", "tile_oh": [-1, 2]}',
                 "--rounds", "1", "--number", "1"])
    assert [r["config"] for r in rows] == ["default", '{"acc_scope": "row", "tile_oh": [-1, 2]}',
                                           "onnxruntime"]
    assert all(r["gflops"] > 0 for r in rows)


def test_an_unknown_knob_is_refused_with_the_template_s_knobs() -> None:
    with pytest.raises(SystemExit, match="unknown knobs \\['tile_q'\\]"):
        main(["32", "8", "32", "3", "1", '{"tile_q": 4}', "--rounds", "1"])


def test_cold_weights_rotate_copies_for_tessel_and_onnxruntime() -> None:
    rows = main(["32", "8", "32", "1", "1", "--cold-weights", "0.01", "--rounds", "1",
                 "--number", "1"])
    assert [r["config"] for r in rows] == ["default", "onnxruntime"]
    assert all(r["gflops"] > 0 for r in rows)
