"""benchmarks.tuned_ab: a model untuned and with each database, in turn, in one process."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from benchmarks import tuned_ab
from tests.e2e.onnx_models import resnet18
from tuning_logs import TuningDatabase


def test_it_times_every_build_each_round_and_prints_the_paired_ratios(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "r18.onnx"
    onnx.save(resnet18(image=32, width=8, classes=10), model)
    empty = str(tmp_path / "empty.db")  # no records: the build equals the untuned one
    TuningDatabase(empty).close()
    got = tuned_ab.main([str(model), empty, "--rounds", "2", "--repeat", "1"])
    assert list(got) == ["untuned", empty] and all(len(v) == 2 for v in got.values())
    assert all(t > 0 for v in got.values() for t in v)
    out = capsys.readouterr().out
    assert "of untuned (per round: median" in out and "below 1 in" in out


def test_cpu_time_with_several_threads_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tuned_ab, "num_threads", lambda: 2)
    with pytest.raises(SystemExit):
        tuned_ab.main([str(tmp_path / "m.onnx"), "x.db", "--cpu-time"])


def test_with_ort_it_times_onnx_runtime_in_turn_and_prints_each_build_against_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "r18.onnx"
    onnx.save(resnet18(image=32, width=8, classes=10), model)
    empty = str(tmp_path / "empty.db")
    TuningDatabase(empty).close()
    got = tuned_ab.main([str(model), empty, "--rounds", "2", "--repeat", "1", "--ort",
                         "--target", "llvm -mcpu=haswell"])
    assert list(got) == ["untuned", empty, "onnxruntime"]
    out = capsys.readouterr().out
    assert out.count("of onnxruntime per round") == 2
