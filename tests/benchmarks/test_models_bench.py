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


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_cpu_time_runs_on_one_thread_and_is_refused_on_two(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = ["--models", "resnet18", "--image", "32", "--width", "16", "--repeat", "1",
            "--rounds", "1", "--pause", "0", "--top", "1", "--cpu-time"]
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    with pytest.raises(SystemExit, match="TESSEL_NUM_THREADS=1"):
        main(tiny)
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    out = main(tiny)
    assert all(v > 0 for v in out["resnet18"].values())
