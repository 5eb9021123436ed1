"""benchmarks.memory_plans at a tiny size: both plans run the same kernels, are checked
against ORT and timed; the in-place plan shares storage; no timing checked."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

import relay_ir  # noqa: E402
from benchmarks.memory_plans import PLANS, main, plans_of  # noqa: E402
from relay_ir.frontend.onnx import from_onnx  # noqa: E402
from tests.e2e.onnx_models import resnet18  # noqa: E402


def test_tiny_resnet18_runs_both_plans_beside_ort(capsys: pytest.CaptureFixture[str]) -> None:
    out = main(["--models", "resnet18", "--image", "32", "--width", "16", "--rounds", "2",
                "--repeat", "1", "--arenas", "2"])
    assert set(out["resnet18"]) == {*PLANS, "onnxruntime"}
    assert all(v > 0 for v in out["resnet18"].values())
    assert "x apart" in capsys.readouterr().out


def test_the_plans_differ_only_in_sharing_and_each_arena_is_its_own() -> None:
    mod, params = from_onnx(resnet18(image=32, width=16, classes=10))
    plans = plans_of(relay_ir.build(mod, params=params), 2)
    inplace, apart = plans["in place"][0].memory_plan, plans["apart"][0].memory_plan
    assert inplace.peak_bytes < apart.peak_bytes
    assert plans["apart"][0] is not plans["apart"][1]
