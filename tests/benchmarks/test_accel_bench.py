"""benchmarks/accel.py runs on a tiny ResNet-18 and prints its layer and model tables."""

from __future__ import annotations

from benchmarks.accel import main


def test_the_benchmark_prints_layers_threads_batches_and_the_model_row(capsys) -> None:
    out = main(["--image", "32", "--width", "16", "--calibration", "2", "--inputs", "2"])
    text = capsys.readouterr().out
    assert "cycles b1" in text and "b4 x4 core" in text and "virtual threads on / off" in text
    assert "functional check of 1x1/2 512@7: output equals numpy" in text
    assert "int8 on accel vs fp32" in text
    totals, model = out["layers"], out["model"]
    assert totals["b1 on"] <= totals["b1 off"]
    assert model["bit_exact"] == 1.0 and model["accel_groups"] >= 15
    assert 0.0 <= model["top1_agreement"] <= 1.0


def test_the_layer_table_shows_the_configs_the_model_was_tuned_with(capsys, tmp_path) -> None:
    main(["--image", "32", "--width", "16", "--calibration", "2", "--inputs", "2",
          "--db", str(tmp_path / "t.db"), "--tune-model", "2"])
    text = capsys.readouterr().out
    tuned_rows = [line for line in text.splitlines()
                  if line.startswith("3x3") and len(line.split()) == 5
                  and "record" not in line]
    assert len(tuned_rows) >= 4, text  # layer, default, tuned, ratio (not "(no record)")
