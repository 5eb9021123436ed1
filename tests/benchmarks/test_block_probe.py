"""benchmarks.block_probe at a tiny size: an override makes the stage's convs write its
block (and only inside the override), the overridden build still equals the
interpreter, bad overrides are clear errors; no timing checked."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from benchmarks.block_probe import main, overridden, parse_overrides, probe_builds
from relay_ir.frontend.onnx import from_onnx
from schedule.templates import x86_conv2d_nchwc as nchwc
from schedule.templates import x86_conv2d_stem as stem
from tests.e2e.onnx_models import resnet18
from tests.rng import seeded_rng

HASWELL = "llvm -mcpu=haswell"  # 8 lanes: blocks 8 and 16 (the default at this size) fit


def _conv_out_blocks(lib: relay_ir.CompiledModel, channels: int, width: int) -> set[int]:
    """The channel blocks the conv template steps with `channels` outputs of `width`
    columns store their output in (the blocked shapes of their output values)."""
    blocks = set()
    for step in lib.plan.steps:
        shape = lib.plan.values[step.outputs[0]].shape
        if step.workload_key.startswith("conv2d") and len(shape) == 5 and \
                shape[1] * shape[4] == channels and shape[3] == width:
            blocks.add(shape[4])
    return blocks


@pytest.fixture(scope="module")
def tiny() -> tuple[relay_ir.IRModule, dict]:
    return from_onnx(resnet18(image=32, width=16, classes=10))


def test_an_override_makes_the_stage_convs_write_its_block(tiny: tuple) -> None:
    mod, params = tiny
    libs = probe_builds(mod, params, HASWELL, {(32, 4): 8}, per_side=1)
    assert _conv_out_blocks(libs["on#1"], 32, 4) == {16}
    assert _conv_out_blocks(libs["off#1"], 32, 4) == {8}
    # the other stages keep their default
    assert _conv_out_blocks(libs["off#1"], 64, 2) == _conv_out_blocks(libs["on#1"], 64, 2)


def test_an_overridden_build_equals_the_interpreter(tiny: tuple) -> None:
    mod, params = tiny
    with overridden({(16, 16): 8, (16, 8): 8, (32, 4): 8}) as seen:
        lib = relay_ir.build(mod, target=HASWELL, params=params)
    assert ("conv2d_stem", 16, 16, 8) in seen and ("conv2d_NCHWc", 32, 4, 8) in seen
    x = seeded_rng().standard_normal((1, 3, 32, 32)).astype(np.float32)
    want = relay_ir.interpret(mod, input=x, **params)
    np.testing.assert_allclose(np.asarray(lib.run(input=x)), np.asarray(want),
                               rtol=1e-4, atol=1e-4)


def test_the_templates_are_restored_after_the_override() -> None:
    pick, stem_pick = nchwc.pick_blocks, stem.stem_blocks
    with pytest.raises(RuntimeError), overridden({(64, 56): 16}):
        assert nchwc.pick_blocks is not pick
        raise RuntimeError
    assert (nchwc.pick_blocks, stem.stem_blocks) == (pick, stem_pick)


def test_a_malformed_override_or_a_block_not_dividing_the_channels_is_a_clear_error() -> None:
    with pytest.raises(SystemExit, match="expected CO@OW=BLOCK"):
        parse_overrides(["64x56=16"])
    with pytest.raises(SystemExit, match="block 24 does not divide the 64 output channels"):
        parse_overrides(["64@56=24"])


def test_main_prints_the_per_conv_and_whole_model_table(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    text = main(["resnet18", "--image", "32", "--width", "16", "--target", HASWELL,
                 "--override", "32@4=8", "--rounds", "1", "--whole", "1", "--builds", "1"])
    lines = text.splitlines()
    assert lines[0].split()[-7:] == ["on", "us", "off", "us", "on/off", "same", "side"]
    assert any(ln.startswith("all convs in order") for ln in lines)
    assert "override (off) 32@4=8" in capsys.readouterr().out


def test_list_prints_each_conv_block_with_the_overrides() -> None:
    text = main(["resnet18", "--image", "32", "--width", "16", "--target", HASWELL,
                 "--override", "32@4=8", "--list"])
    assert "conv2d_NCHWc      32@4    block 8" in text.splitlines()
