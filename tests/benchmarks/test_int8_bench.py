"""benchmarks/int8.py at a tiny size: every distinct conv of a small ResNet-18 checked
against ONNX Runtime's ConvInteger (bit for bit) and QLinearConv (within 1) and timed, and
the quantized model checked against relay_ir.interpret and timed; no timing checked."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from benchmarks.int8 import main  # noqa: E402

SYSTEMS = {"tessel int8", "ort int8", "tessel fp32", "ort fp32"}


def test_tiny_run_checks_and_times_every_conv_and_the_model(capsys) -> None:
    out = main(["--image", "32", "--width", "8", "--repeat", "1", "--warmup", "1",
                "--rounds", "1", "--calibration", "1", "--check", "--int8-first-conv"])
    assert len(out["convs"]) == 11  # ResNet-18's distinct convs (stem included)
    assert all(SYSTEMS <= set(r["seconds"]) for r in out["convs"])
    # the conv as the model runs it, blocked by 16: where the channels allow
    assert all(("tessel int8 NCHWc" in r["seconds"]) == (r["input"][1] % 16 == 0)
               for r in out["convs"])
    assert set(out["model"]["seconds"]) == {"tessel int8", "tessel int8 all", "tessel fp32",
                                            "ort fp32"}
    assert "ort int8/int8" in capsys.readouterr().out
