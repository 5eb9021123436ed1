"""Layout propagation in build (relay_ir.backend.layout_plan): values between NCHWc conv
groups stay blocked, the layout changes only at the model's edges, and results equal the
interpreter's and the all-NCHW build's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import relay_ir
from autotune.extract import extract_tasks
from relay_ir import transform as T
from relay_ir.backend.pipeline import bind_params, compile_static
from relay_ir.frontend.onnx import from_onnx
from tessel_target import Target
from tests.e2e import onnx_models
from tests.relay_ir.conftest import concurrent_mismatches
from tests.rng import seeded_rng
from tuning_logs import MeasureRecord, TuningDatabase

AVX2, AVX512 = "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"
HOST_RUNS_AVX512 = "avx512f" in Target.parse("llvm").features


def _model(name: str) -> tuple[object, dict, str, tuple[int, ...]]:
    builders = {"resnet18": lambda: onnx_models.resnet18(image=32, width=8, classes=10),
                "mobilenet_v2": lambda: onnx_models.mobilenet_v2(image=32, width=8, classes=10),
                "resnext26": lambda: onnx_models.resnext26(image=32, cardinality=4,
                                                           base_width=4, classes=10)}
    m = builders[name]()
    mod, params = from_onnx(m)
    inp = m.graph.input[0]
    shape = tuple(d.dim_value for d in inp.type.tensor_type.shape.dim)
    return mod, params, inp.name, shape


def _run(lib, name: str, x: np.ndarray) -> np.ndarray:
    y = lib.run(**{name: x})
    return y[0] if isinstance(y, (list, tuple)) else y


def _blocked_values(lib) -> list[tuple[int, ...]]:
    # values computed in the blocked layout (a packed constant weight, e.g. the stem's
    # [O/o, I, KH, KW, o], is not one)
    return [v.shape for v in lib.plan.values if len(v.shape) == 5 and v.kind != "const"]


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "resnext26"])
def test_blocked_build_equals_the_interpreter(name: str) -> None:
    mod, params, inp, shape = _model(name)
    x = seeded_rng().standard_normal(shape).astype("float32")
    lib = relay_ir.build(mod, target="llvm", params=params)
    want = relay_ir.interpret(bind_params(mod, params), **{inp: x})
    want = want[0] if isinstance(want, (list, tuple)) else want
    np.testing.assert_allclose(_run(lib, inp, x), want, rtol=1e-4, atol=1e-4)


def test_resnet18_keeps_convs_blocked_between_its_input_and_its_pooling() -> None:
    mod, params, _, _ = _model("resnet18")
    lib = relay_ir.build(mod, target="llvm", params=params)
    # one change in (the first conv packs the image), one out (the global pool reads the
    # last block's output); the flatten and the classifier then run on NCHW
    assert [(g.split("_")[1], what) for g, _, what in lib.layout_changes] == [
        ("conv2d", "NCHW -> NCHWc"), ("global", "NCHWc -> NCHW")]
    assert len(_blocked_values(lib)) >= 15


def test_mobilenet_v2_keeps_depthwise_convs_blocked_too() -> None:
    mod, params, _, _ = _model("mobilenet_v2")
    lib = relay_ir.build(mod, target="llvm", params=params)
    assert [(g.split("_")[1], what) for g, _, what in lib.layout_changes] == [
        ("conv2d", "NCHW -> NCHWc"), ("global", "NCHWc -> NCHW")]
    assert ("fused_conv2d_add_clip", "depthwise_conv2d_NCHWc.x86") in \
        lib.group_schedules


def test_disabling_alter_op_layout_keeps_every_value_nchw() -> None:
    mod, params, inp, shape = _model("resnet18")
    x = seeded_rng().standard_normal(shape).astype("float32")
    blocked = relay_ir.build(mod, target="llvm", params=params)
    with T.PassContext(disabled_pass=["AlterOpLayout"]):
        plain = relay_ir.build(mod, target="llvm", params=params)
    assert _blocked_values(plain) == []
    # then every one of the 20 convs packs its input (and scatters its output back)
    assert [what for _, _, what in plain.layout_changes] == ["NCHW -> NCHWc"] * 20
    np.testing.assert_allclose(_run(blocked, inp, x), _run(plain, inp, x), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("target, lanes", [(AVX2, 8), (AVX512, 16)])
def test_the_blocks_are_the_targets_vector_widths(target: str, lanes: int) -> None:
    # planned for the target, not the host: an AVX-512 plan is made on an AVX2 host too
    # (narrower blocks only where a layer has fewer channels than a vector)
    mod, params, _, _ = _model("resnet18")
    plan, _ = compile_static(bind_params(mod, params), target)
    got = {v.shape[4] for v in plan.values if len(v.shape) == 5}
    assert max(got) in (lanes, 2 * lanes) and max(got) <= 2 * lanes


@pytest.mark.skipif(not HOST_RUNS_AVX512, reason="the host runs no AVX-512 code")
def test_an_avx512_blocked_build_equals_the_avx2_one() -> None:
    mod, params, inp, shape = _model("resnet18")
    x = seeded_rng().standard_normal(shape).astype("float32")
    a = relay_ir.build(mod, target=AVX2, params=params)
    b = relay_ir.build(mod, target=AVX512, params=params)
    np.testing.assert_allclose(_run(a, inp, x), _run(b, inp, x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tuned_configs_whose_blocks_disagree_still_equal_the_interpreter(
        tmp_path: Path, seed: int) -> None:
    # each conv's tuned tile_ic / tile_oc at random: a conv reads its producer's blocks
    # re-blocked by its pad stage where they differ
    mod, params, inp, shape = _model("resnet18")
    bound = bind_params(mod, params)
    rng = np.random.default_rng(seed)
    path = tmp_path / "tuned.db"
    with TuningDatabase(path) as db:
        for task, _ in extract_tasks(bound, "llvm"):
            cfg = task.config_space().get(int(rng.integers(task.config_space().size)))
            db.add(MeasureRecord(task.workload_key, task.template, task.target,
                                 task.device_key, cfg.to_json(), costs=(1e-4,), tuner="test"))
    x = seeded_rng().standard_normal(shape).astype("float32")
    lib = relay_ir.build(bound, target="llvm", tuning_db=str(path))
    want = relay_ir.interpret(bound, **{inp: x})
    want = want[0] if isinstance(want, (list, tuple)) else want
    np.testing.assert_allclose(_run(lib, inp, x), want, rtol=1e-4, atol=1e-4)


def test_two_threads_running_a_blocked_model_get_the_serial_results() -> None:
    # the blocked values between convs live in each thread's own planned storage
    mod, params, inp, shape = _model("resnet18")
    lib = relay_ir.build(mod, target="llvm", params=params)
    assert len(_blocked_values(lib)) >= 15
    rng = seeded_rng()
    inputs = [rng.standard_normal(shape).astype("float32") for _ in range(4)]
    assert concurrent_mismatches(lambda x: _run(lib, inp, x), inputs, rounds=10) == []


LIGHT = ["squeezenet", "shufflenet", "inception_v1", "densenet121"]


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT)
def test_blocked_build_of_a_light_model_equals_the_interpreter(name: str) -> None:
    # the onnx wheel's light models at their sizes: concatenations, channel shuffles,
    # grouped convs, LRN and pools between blocked convs
    import os

    import onnx

    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        f"light_{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not in this onnx wheel")
    model = onnx_models.randomize_constant_weights(onnx.load(path))
    mod, params = from_onnx(model)
    lib = relay_ir.build(mod, target="llvm", params=params)
    assert _blocked_values(lib), "no value stayed blocked: the test would prove nothing"
    ((inp, shape, dtype),) = lib.input_specs  # the image (the weights are params)
    x = seeded_rng().standard_normal(shape).astype(dtype)
    want = relay_ir.interpret(bind_params(mod, params), **{inp: x})
    want = want[0] if isinstance(want, (list, tuple)) else want
    got = _run(lib, inp, x)
    scale = float(np.max(np.abs(want)))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)


def test_an_avx2_model_keeps_one_vector_blocks_at_28x28_and_equals_the_interpreter() -> None:
    # AVX2's default tile at a 28-wide output is 8 channels x 14 columns (ONE_VECTOR_ROWS):
    # the convs' 16-channel values there stay in blocks of 8 (the stem's output, pooled
    # to 28x28, has its own template's block)
    m = onnx_models.resnet18(image=112, width=16, classes=10)
    mod, params = from_onnx(m)
    inp = m.graph.input[0]
    shape = tuple(d.dim_value for d in inp.type.tensor_type.shape.dim)
    lib = relay_ir.build(mod, target=AVX2, params=params)
    assert (1, 2, 28, 28, 8) in _blocked_values(lib)
    x = seeded_rng().standard_normal(shape).astype("float32")
    want = relay_ir.interpret(bind_params(mod, params), **{inp.name: x})
    want = want[0] if isinstance(want, (list, tuple)) else want
    np.testing.assert_allclose(_run(lib, inp.name, x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_a_resnext_keeps_its_grouped_convs_blocked_and_equals_the_interpreter(
        target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # groups of 16-128 channels: every grouped conv takes group_conv2d_NCHWc.x86, which
    # reads the 1x1 conv's blocks and writes its own (GROUP_CONV_BLOCKED)
    import relay_ir.backend.lower_group as lower_group

    m = onnx_models.resnext26(image=32, cardinality=4, base_width=16, classes=10)
    mod, params = from_onnx(m)
    lib = relay_ir.build(mod, target=target, params=params)
    assert [(g.split("_")[1], what) for g, _, what in lib.layout_changes] == [
        ("conv2d", "NCHW -> NCHWc"), ("global", "NCHWc -> NCHW")]
    schedules = {s for _, s in lib.group_schedules}
    assert "group_conv2d_NCHWc.x86" in schedules and "conv2d_nchw (ops graph)" not in schedules
    if target == AVX512 and not HOST_RUNS_AVX512:
        return
    x = seeded_rng().standard_normal((1, 3, 32, 32)).astype("float32")
    want = relay_ir.interpret(bind_params(mod, params), x)
    np.testing.assert_allclose(_run(lib, m.graph.input[0].name, x), want, rtol=1e-4,
                               atol=1e-4)
    monkeypatch.setattr(lower_group, "GROUP_CONV_BLOCKED", False)
    nchw = relay_ir.build(mod, target=target, params=params)
    # each grouped conv then packs its input, and its output goes back to NCHW
    assert len(nchw.layout_changes) == 2 + 2 * 8
