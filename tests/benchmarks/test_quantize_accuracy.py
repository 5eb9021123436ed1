"""benchmarks/quantize_accuracy.py runs on a small ResNet-18 and prints its table."""

from __future__ import annotations

from benchmarks.quantize_accuracy import main


def test_the_benchmark_prints_agreement_error_and_time_per_mode(capsys) -> None:
    rows = main(["--image", "32", "--width", "8", "--calibration", "2", "--inputs", "3",
                 "--repeat", "1", "--modes", "minmax/shift", "kl/float"])
    out = capsys.readouterr().out
    assert "top-1 agree" in out and "minmax/shift" in out and "kl/float" in out
    assert set(rows) == {"minmax/shift", "kl/float", "fp32"}
    assert 0.0 <= rows["kl/float"]["top1_agreement"] <= 1.0
    assert rows["minmax/shift"]["rel_err_mean"] < 0.2
