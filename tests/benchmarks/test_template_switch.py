"""benchmarks.template_switch at a tiny size: the switch builds models that differ only
where it acts, two a side, agree in their outputs, time interleaved, and restore the
switch; a name that is no switch is a clear error; no timing checked."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import schedule.templates.x86_conv2d_nchwc as template
from benchmarks.template_switch import main, resolve_switch, switched_builds
from relay_ir.frontend.onnx import from_onnx
from tests.e2e.onnx_models import resnet18
from tests.rng import seeded_rng


def _prefetching(lib: relay_ir.CompiledModel) -> int:
    """Kernels whose optimised LLVM IR calls the prefetch intrinsic."""
    return sum("@llvm.prefetch" in getattr(k.jit, "optimized_ir", "") for k in lib.plan.kernels)


PREFETCH_SWITCHES = ["PREFETCH_1X1_WEIGHTS", "PREFETCH_PLANE_WEIGHTS", "PREFETCH_TILE_WEIGHTS"]


@pytest.mark.slow  # two builds of a ResNet-18 of width 64
@pytest.mark.parametrize("switch", PREFETCH_SWITCHES)
def test_each_prefetch_switch_builds_two_models_that_agree(
        switch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # width 64: the 1x1 stride-2 conv at 4x4 (256 -> 512) has 16 oc chunks, chunks outside
    # the rows (more channels than pixels); the 3x3 convs at 4x4 accumulate a plane in 4+
    # chunks, those at 8x8 a tile of 16 accumulators in 2. The other switches are off:
    # the kernels that prefetch are this one's.
    for other in set(PREFETCH_SWITCHES) - {switch}:
        monkeypatch.setattr(template, other, False)
    mod, params = from_onnx(resnet18(image=32, width=64, classes=10))
    libs = switched_builds(mod, params, "llvm", *resolve_switch(switch), per_side=1)
    assert getattr(template, switch) is True  # put back
    assert _prefetching(libs["on#1"]) >= 1 and _prefetching(libs["off#1"]) == 0
    x = seeded_rng().standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.testing.assert_allclose(libs["on#1"].run(input=x), libs["off#1"].run(input=x),
                               rtol=1e-5, atol=1e-5)


def test_two_builds_a_side_alternate_which_side_is_built_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    flags: list[bool] = []
    monkeypatch.setattr(relay_ir, "build", lambda *a, **k: flags.append(template.PAD_GUARD))
    libs = switched_builds(None, None, "llvm", *resolve_switch("PAD_GUARD"), per_side=2)
    assert list(libs) == ["on#1", "off#1", "off#2", "on#2"]
    assert flags == [True, False, False, True]
    assert template.PAD_GUARD is True


@pytest.mark.slow  # two builds, two rounds of every conv in model order
def test_main_prints_the_per_conv_and_whole_model_table(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    out = main(["--models", "resnet18", "--image", "32", "--width", "16", "--rounds", "2",
                "--whole", "1", "--switch", "PAD_GUARD"])
    lines = out["resnet18"].splitlines()
    assert lines[0].split()[-7:] == ["on", "us", "off", "us", "on/off", "same", "side"]
    assert [ln.split(",")[0] for ln in lines[-2:]] == ["whole model"] * 2
    assert any(ln.startswith("all convs in order") for ln in lines)
    assert template.PAD_GUARD is True
    assert "load average" in capsys.readouterr().out


def test_a_name_that_is_no_switch_is_a_clear_error() -> None:
    with pytest.raises(SystemExit, match="has no boolean constant 'NOPE'.*PREFETCH_WEIGHTS"):
        resolve_switch("NOPE")
    with pytest.raises(SystemExit, match="MIN_PREFETCH_STEP_FMAS"):
        resolve_switch("MIN_PREFETCH_STEP_FMAS")  # a number, not a switch
