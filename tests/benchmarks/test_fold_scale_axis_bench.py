"""benchmarks/fold_scale_axis.py builds a model with and without the fold, checks both
against ONNX Runtime and prints both beside it."""

from __future__ import annotations

from benchmarks.fold_scale_axis import main


def test_the_benchmark_prints_both_builds_and_the_fold_removes_the_multiplies(capsys) -> None:
    secs = main(["--models", "mobilenet_v2", "--image", "32", "--width", "8", "--rounds", "1",
                 "--repeat", "1"])
    assert set(secs["mobilenet_v2"]) == {"fold", "no fold", "onnxruntime"}
    out = capsys.readouterr().out
    assert "tessel fold " in out and "(0 multiply in its groups" in out
    assert "tessel no fold" in out and "x no fold" in out and "onnxruntime" in out
