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
                "--repeat", "1", "--arenas", "2", "--switch", "constants"])
    assert set(out["resnet18"]) == {*PLANS, "onnxruntime"}
    assert all(v > 0 for v in out["resnet18"].values())
    assert "x off" in capsys.readouterr().out


def test_the_plans_differ_only_in_sharing_and_each_arena_is_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # without gaps: with them the plan apart puts each output in the stem's large block
    # too, and both peaks are that block's
    monkeypatch.setenv("TESSEL_PLAN_GAPS", "0")
    mod, params = from_onnx(resnet18(image=32, width=16, classes=10))
    plans = plans_of(relay_ir.build(mod, params=params), 2)
    inplace, apart = plans["on"][0].memory_plan, plans["off"][0].memory_plan
    assert inplace.peak_bytes < apart.peak_bytes
    assert plans["off"][0] is not plans["off"][1]


def test_the_constants_switch_gives_each_plan_constants_of_its_own() -> None:
    mod, params = from_onnx(resnet18(image=32, width=16, classes=10))
    plans = plans_of(relay_ir.build(mod, params=params), 2, "constants")
    weights = [max((val for val in g.values if val.kind == "const"), key=lambda v: v.data.size)
               for g in (*plans["on"], *plans["off"])]
    assert len({w.data.ctypes.data for w in weights}) == 4
    assert all(len({id(v.data.base) for v in g.values if v.kind == "const"}) == 1
               for g in plans["on"])


def test_a_loaded_model_and_the_vm_run_both_plans_and_the_steps_table_prints(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    out = main(["--models", "resnet18", "--image", "32", "--width", "8", "--rounds", "2",
                "--repeat", "1", "--arenas", "1", "--loaded", "--vm", "--steps", "3"])
    assert set(out["resnet18"]) == {*PLANS, "vm on", "vm off", "onnxruntime"}
    text = capsys.readouterr().out
    assert "(saved and loaded)" in text and "vm     TESSEL_PLAN_INPLACE=1" in text
    table = text.split("kernels inside whole runs")[1].splitlines()
    assert len(table) == 1 + 1 + 3 + 1  # the heading's tail, columns, 3 kernels, all
    assert all(len(ln.split("|")) == 2 and " -> " in ln for ln in table[2:5])
