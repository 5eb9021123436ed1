"""ONNX ops composed from several relay ops, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.relay_ir.frontend.onnx_helpers import check_against_ort, graph_model, randn

F32 = "float32"


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_integers_take_the_divisor_or_dividend_sign(rng, fmod):
    model = graph_model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)],
                        {"a": ("int64", (12,)), "b": ("int64", (12,))}, ["y"], opset=13)
    b = rng.integers(1, 6, 12) * rng.choice([-1, 1], 12)
    check_against_ort(model, {"a": rng.integers(-20, 20, 12), "b": b})


def test_mod_floats_fmod(rng):
    model = graph_model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=1)],
                        {"a": (F32, (3, 4)), "b": (F32, (4,))}, ["y"], opset=13)
    check_against_ort(model, {"a": randn(rng, 3, 4) * 10, "b": np.abs(randn(rng, 4)) + 0.5},
                      rtol=1e-4, atol=1e-4)


def test_round_halves_to_even(rng):
    model = graph_model([helper.make_node("Round", ["x"], ["y"])], {"x": (F32, (10,))}, ["y"],
                        opset=11)
    x = np.concatenate([np.array([0.5, 1.5, 2.5, -0.5, -1.5], F32), randn(rng, 5) * 4])
    check_against_ort(model, {"x": x})


@pytest.mark.parametrize("op", ["Sign", "Swish"])
def test_sign_and_swish(rng, op):
    opset = 24 if op == "Swish" else 13
    model = graph_model([helper.make_node(op, ["x"], ["y"])], {"x": (F32, (3, 5))}, ["y"],
                        opset=opset)
    x = randn(rng, 3, 5)
    x[0, 0] = 0.0
    if op == "Swish":  # onnxruntime may not know Swish yet: compare with its formula
        from tests.relay_ir.frontend.onnx_helpers import run_ours

        np.testing.assert_allclose(run_ours(model, {"x": x})[0], x / (1 + np.exp(-x)),
                                   rtol=1e-5, atol=1e-6)
        return
    check_against_ort(model, {"x": x})


@pytest.mark.parametrize("upper,k", [(1, 0), (0, 1), (1, -1)])
def test_trilu(rng, upper, k):
    model = graph_model([helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)],
                        {"x": (F32, (2, 4, 5))}, ["y"], opset=14,
                        initializers={"k": np.array(k, "int64")})
    check_against_ort(model, {"x": randn(rng, 2, 4, 5)})


def test_hardmax(rng):
    model = graph_model([helper.make_node("Hardmax", ["x"], ["y"], axis=1)],
                        {"x": (F32, (3, 4, 2))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 3, 4, 2)})


@pytest.mark.parametrize("op,mode", [("DepthToSpace", "DCR"), ("DepthToSpace", "CRD"),
                                     ("SpaceToDepth", None)])
def test_depth_to_space_and_back(rng, op, mode):
    attrs = {"blocksize": 2} | ({"mode": mode} if mode else {})
    shape = (1, 8, 2, 3) if op == "DepthToSpace" else (1, 2, 4, 6)
    model = graph_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": (F32, shape)},
                        ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, *shape)})


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization(rng, p):
    model = graph_model([helper.make_node("LpNormalization", ["x"], ["y"], p=p, axis=1)],
                        {"x": (F32, (3, 4))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 3, 4)})


def test_mean_variance_normalization(rng):
    model = graph_model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"])],
                        {"x": (F32, (2, 3, 4, 5))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 2, 3, 4, 5)}, rtol=1e-4, atol=1e-4)


def test_group_normalization_per_channel_scale(rng):
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)
    model = graph_model([node], {"x": (F32, (2, 4, 3, 3))}, ["y"], opset=21,
                        initializers={"s": randn(rng, 4), "b": randn(rng, 4)})
    check_against_ort(model, {"x": randn(rng, 2, 4, 3, 3)}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_extremum_select_last_index(rng, op):
    node = helper.make_node(op, ["x"], ["y"], axis=1, keepdims=1, select_last_index=1)
    model = graph_model([node], {"x": ("int64", (3, 6))}, ["y"], opset=13)
    check_against_ort(model, {"x": rng.integers(0, 3, (3, 6))})  # many ties


def test_pad_with_a_run_time_constant_value(rng):
    model = graph_model([helper.make_node("Pad", ["x", "pads", "v"], ["y"])],
                        {"x": (F32, (2, 3)), "v": (F32, ())}, ["y"], opset=13,
                        initializers={"pads": np.array([1, 0, 0, 2], "int64")})
    check_against_ort(model, {"x": randn(rng, 2, 3), "v": np.array(-np.inf, F32)})
