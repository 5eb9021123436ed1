"""ONNX models end to end: from_onnx + relay_ir.build against ONNX Runtime.

The quick part runs small variants of ResNet-18 and MobileNetV2 (built with onnx.helper,
random weights); the full-size networks and the onnx wheel's light models (SqueezeNet
compiles in about 25 s, ResNet-50 in minutes) are marked slow (`pytest -m slow tests/e2e`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

import relay_ir
from relay_ir.frontend.onnx import from_onnx
from tests.e2e import onnx_models
from tests.rng import seeded_rng

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT_SLOW = ["squeezenet", "resnet50", "densenet121", "inception_v1", "inception_v2", "shufflenet",
              "bvlc_alexnet", "vgg19", "zfnet512"]
RTOL = 1e-4


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """Max abs difference relative to the output's magnitude."""
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def _check(model_or_path: Any, feeds_rng: np.random.Generator) -> relay_ir.CompiledModel:
    mod, params = from_onnx(model_or_path)
    lib = relay_ir.build(mod, params=params)
    feeds = {n: feeds_rng.standard_normal(s).astype(dt) for n, s, dt in lib.input_specs}
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model_or_path.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    got = lib.run(**feeds)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert _relative_error(g, w) < RTOL
    return lib


def _light(name: str) -> object:
    """The light model with random weights (its own weights make all outputs alike)."""
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} is not in this onnx wheel")
    return onnx_models.randomize_constant_weights(onnx.load(path))


@pytest.mark.slow
@pytest.mark.parametrize("name", LIGHT_SLOW)
def test_light_model_matches_onnxruntime_slow(name: str) -> None:
    _check(_light(name), seeded_rng())


def test_small_resnet18_matches_onnxruntime() -> None:
    lib = _check(onnx_models.resnet18(image=32, width=8), seeded_rng())
    scheds = [s for _, s in lib.group_schedules]
    # 20 convs; identical groups share a kernel when their values' layouts agree too (15
    # identical-group classes, a few split by where the blocked layout starts); the 7x7
    # stem reads the 3-channel image as it is
    assert scheds.count("conv2d_stem.x86") == 1
    assert 14 <= scheds.count("conv2d_NCHWc.x86") < 19
    assert lib.memory_plan.peak_bytes < lib.memory_plan.total_bytes


def test_small_mobilenet_v2_matches_onnxruntime() -> None:
    lib = _check(onnx_models.mobilenet_v2(image=32, width=8), seeded_rng())
    assert "depthwise_conv2d_NCHWc.x86" in {s for _, s in lib.group_schedules}


@pytest.mark.slow
def test_resnet18_matches_onnxruntime() -> None:
    _check(onnx_models.resnet18(), seeded_rng())


@pytest.mark.slow
def test_mobilenet_v2_matches_onnxruntime() -> None:
    _check(onnx_models.mobilenet_v2(), seeded_rng())


def test_small_resnet18_on_two_threads_equals_one_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # every parallel loop splits its iterations between the threads (rows or oc chunks,
    # conv2d_NCHWc.x86's loop_order) and each runs once and alone: one thread's outputs,
    # bit for bit (the compile cache keeps the two thread counts' kernels apart)
    mod, params = from_onnx(onnx_models.resnet18(image=64, width=16))
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    serial = relay_ir.build(mod, params=params)
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    parallel = relay_ir.build(mod, params=params)
    rng = seeded_rng()
    for _ in range(3):
        feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in serial.input_specs}
        want = np.asarray(serial.run(**feeds))
        for _ in range(3):
            np.testing.assert_array_equal(np.asarray(parallel.run(**feeds)), want)
