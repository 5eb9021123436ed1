"""benchmarks.models at a tiny size: every system's output is checked against ORT (main
stops otherwise), each system is timed, and the conv gap table matches convs; no timing
checked."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from benchmarks.models import main  # noqa: E402


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tiny_resnet18_runs_every_system(capsys: pytest.CaptureFixture[str]) -> None:
    out = main(["--models", "resnet18", "--image", "32", "--width", "16", "--repeat", "1",
                "--rounds", "2", "--pause", "0", "--top", "2"])
    assert {"onnxruntime", "tessel", "tessel NCHW"} <= set(out["resnet18"])
    assert "20 convs matched, 0 unmatched" in capsys.readouterr().out
