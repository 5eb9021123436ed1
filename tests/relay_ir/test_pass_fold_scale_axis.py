"""FoldScaleAxis: each rewrite, each refusal, and the folded models against the Relay
interpreter on fresh random inputs."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import relay_ir.transform as T
from relay_ir import nn
from relay_ir.expr import Call, Constant, Var
from relay_ir.interpreter import interpret
from relay_ir.op import tensor as Tn
from relay_ir.op.registry import Op
from relay_ir.structural import structural_equal
from relay_ir.transform.analysis import post_order
from relay_ir.transform.pass_manager import verify_module
from tests.relay_ir import programs as P
from tests.relay_ir.programs import main_module, tvar
from tests.rng import seeded_rng

C = 6  # output channels of the convs below


def _ops(mod) -> list[str]:
    return [e.op.name for e in post_order(mod["main"].body)
            if isinstance(e, Call) and isinstance(e.op, Op)]


def _const(rng, *shape, dtype="float32", low=0.5, high=1.5) -> Constant:
    return Constant(rng.uniform(low, high, shape).astype(dtype))


def _weight(rng, *shape, dtype="float32") -> Constant:
    return Constant((rng.standard_normal(shape) * 0.3).astype(dtype))


def _folds(mod, *shapes, dtype="float32", rtol=1e-5, atol=1e-5):
    """The folded module, checked against the original by the interpreter on two fresh
    inputs of these shapes, well-formed and typed."""
    rng = seeded_rng()
    out = T.FoldScaleAxis()(mod)
    verify_module(out)
    for _ in range(2):
        args = [rng.standard_normal(s).astype(dtype) for s in shapes]
        np.testing.assert_allclose(interpret(out, *args), interpret(mod, *args),
                                   rtol=rtol, atol=atol)
    return out


def _unchanged(mod) -> None:
    out = T.FoldScaleAxis()(mod)
    assert "multiply" in _ops(out)
    assert structural_equal(out["main"], mod["main"])


# --- rewrites ---------------------------------------------------------------------------


@pytest.mark.parametrize("scale_shape", [(C, 1, 1), (1, C, 1, 1), (1, 1, 1), ()])
def test_conv_times_channel_scale_folds_into_the_weight(scale_shape):
    rng = seeded_rng()
    x = tvar("x", (1, 4, 7, 7))
    w, s = _weight(rng, C, 4, 3, 3), _const(rng, *scale_shape)
    mod = main_module([x], Tn.multiply(nn.conv2d(x, w, padding=(1, 1)), s))
    out = _folds(mod, (1, 4, 7, 7))
    assert _ops(out) == ["nn.conv2d"]
    folded = out["main"].body.args[1].data
    want = w.data.astype(np.float64) * np.broadcast_to(s.data.reshape(-1), (C,))[:, None,
                                                                                 None, None]
    assert folded.dtype == np.float32
    np.testing.assert_allclose(folded, want, rtol=1e-6)


def test_scale_on_the_left_folds_too():
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5))
    mod = main_module([x], Tn.multiply(_const(rng, C, 1, 1), nn.conv2d(x, _weight(rng, C, 4,
                                                                                   1, 1))))
    assert _ops(_folds(mod, (1, 4, 5, 5))) == ["nn.conv2d"]


def test_nhwc_hwio_conv_folds_along_its_last_axis():
    rng = seeded_rng()
    x = tvar("x", (1, 6, 6, 4))
    conv = nn.conv2d(x, _weight(rng, 3, 3, 4, C), padding=(1, 1), data_layout="NHWC",
                     kernel_layout="HWIO")
    mod = main_module([x], Tn.multiply(conv, _const(rng, C)))
    assert _ops(_folds(mod, (1, 6, 6, 4))) == ["nn.conv2d"]


@pytest.mark.parametrize("groups", [2, C])  # grouped, depthwise
def test_grouped_and_depthwise_convs_fold_per_output_channel(groups):
    rng = seeded_rng()
    x = tvar("x", (1, C, 6, 6))
    conv = nn.conv2d(x, _weight(rng, C, C // groups, 3, 3), padding=(1, 1), groups=groups)
    mod = main_module([x], Tn.multiply(conv, _const(rng, C, 1, 1)))
    assert _ops(_folds(mod, (1, C, 6, 6))) == ["nn.conv2d"]


def test_scale_folds_through_an_add_bias():
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5))
    biased = Tn.add(nn.conv2d(x, _weight(rng, C, 4, 3, 3)), _const(rng, C, 1, 1, low=-1))
    mod = main_module([x], Tn.add(Tn.multiply(biased, _const(rng, C, 1, 1)),
                                  _const(rng, C, 1, 1)))
    assert _ops(_folds(mod, (1, 4, 5, 5))) == ["nn.conv2d", "add", "add"]


def test_scale_folds_through_bias_add_and_subtract_chains():
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5))
    y = nn.bias_add(nn.conv2d(x, _weight(rng, C, 4, 3, 3)), _const(rng, C, low=-1))
    y = Tn.subtract(y, _const(rng, 1, C, 1, 1, low=-1))
    y = Tn.add(_const(rng, low=-1), y)  # a scalar bias becomes a per-channel one
    mod = main_module([x], Tn.multiply(y, _const(rng, C, 1, 1)))
    out = _folds(mod, (1, 4, 5, 5))
    assert sorted(_ops(out)) == ["add", "nn.bias_add", "nn.conv2d", "subtract"]


def test_dense_times_unit_scale_folds_into_its_rows():
    rng = seeded_rng()
    x = tvar("x", (3, 8))
    y = nn.bias_add(nn.dense(x, _weight(rng, 5, 8)), _const(rng, 5), axis=-1)
    mod = main_module([x], Tn.multiply(y, _const(rng, 1, 5)))
    assert _ops(_folds(mod, (3, 8))) == ["nn.dense", "nn.bias_add"]


def test_consecutive_scales_fold_one_after_the_other():
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5))
    y = Tn.multiply(nn.conv2d(x, _weight(rng, C, 4, 1, 1)), _const(rng, C, 1, 1))
    mod = main_module([x], Tn.multiply(y, _const(rng, 1, C, 1, 1)))
    assert _ops(_folds(mod, (1, 4, 5, 5))) == ["nn.conv2d"]


def test_float64_keeps_its_dtype():
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5), "float64")
    conv = nn.conv2d(x, _weight(rng, C, 4, 3, 3, dtype="float64"))
    mod = main_module([x], Tn.multiply(conv, _const(rng, C, 1, 1, dtype="float64")))
    out = _folds(mod, (1, 4, 5, 5), dtype="float64", rtol=1e-12)
    assert out["main"].body.args[1].data.dtype == np.float64
    assert T.InferType()(out)["main"].checked_type.ret_type.dtype == "float64"


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize("scale_shape", [(1, 1, 5, 1), (C, 5, 1), (1, 1, 1, 5), (2, C, 1, 1)])
def test_scale_along_another_axis_or_a_new_batch_is_left(scale_shape):
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5))
    mod = main_module([x], Tn.multiply(nn.conv2d(x, _weight(rng, C, 4, 1, 1)),
                                       _const(rng, *scale_shape)))
    _unchanged(mod)


def test_conv_with_a_second_consumer_is_left():
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5))
    conv = nn.conv2d(x, _weight(rng, C, 4, 1, 1))
    mod = main_module([x], Tn.add(Tn.multiply(conv, _const(rng, C, 1, 1)), conv))
    _unchanged(mod)


def test_bias_add_with_a_second_consumer_is_left():
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5))
    biased = Tn.add(nn.conv2d(x, _weight(rng, C, 4, 1, 1)), _const(rng, C, 1, 1))
    mod = main_module([x], Tn.add(Tn.multiply(biased, _const(rng, C, 1, 1)), biased))
    _unchanged(mod)


def test_non_constant_weight_is_left():
    rng = seeded_rng()
    x, w = tvar("x", (1, 4, 5, 5)), tvar("w", (C, 4, 1, 1))
    _unchanged(main_module([x, w], Tn.multiply(nn.conv2d(x, w), _const(rng, C, 1, 1))))


def test_non_constant_scale_is_left():
    rng = seeded_rng()
    x, s = tvar("x", (1, 4, 5, 5)), tvar("s", (C, 1, 1))
    _unchanged(main_module([x, s], Tn.multiply(nn.conv2d(x, _weight(rng, C, 4, 1, 1)), s)))


def test_int8_conv_is_left():
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5), "int8")
    w = Constant(rng.integers(-100, 100, (C, 4, 1, 1)).astype("int8"))
    s = Constant(rng.integers(1, 4, (C, 1, 1)).astype("int32"))
    _unchanged(main_module([x], Tn.multiply(nn.conv2d(x, w, out_dtype="int32"), s)))


def test_non_finite_scale_is_left():
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5))
    s = Constant(np.array([1, 2, np.inf, 1, 1, 1], "float32").reshape(C, 1, 1))
    _unchanged(main_module([x], Tn.multiply(nn.conv2d(x, _weight(rng, C, 4, 1, 1)), s)))


def test_a_residual_add_is_not_a_bias():
    rng = seeded_rng()
    x = tvar("x", (1, C, 5, 5))
    y = Tn.add(nn.conv2d(x, _weight(rng, C, C, 1, 1)), x)
    _unchanged(main_module([x], Tn.multiply(y, _const(rng, C, 1, 1))))


def test_odd_graphs_do_not_crash_the_pass():
    # every shared test program (control flow, closures, ADTs, refs, `?` dims) goes
    # through; their meaning is checked in test_pass_preserves_meaning
    for program in P.PROGRAMS:
        verify_module(T.FoldScaleAxis()(program.build()))
    # a multiply of untyped-width values, of scalars, and one with no anchor at all
    a = Var("a", relay_ir.TensorType((relay_ir.ty.ANY, C, 1, 1)))
    mod = main_module([a], Tn.multiply(a, Constant(np.ones((C, 1, 1), "float32"))))
    _unchanged(mod)
    b = tvar("b", ())
    _unchanged(main_module([b], Tn.multiply(b, Constant(np.float32(2)))))


# --- in the standard sequence -----------------------------------------------------------


def _bound_resnet_block():
    rng = seeded_rng()
    params = {"w1": P.rand(rng, 8, 8, 3, 3, scale=0.2), "w2": P.rand(rng, 8, 8, 3, 3,
                                                                     scale=0.2)}
    return P.resnet_block(), params


def test_standard_sequence_folds_batch_norms_and_can_be_disabled():
    mod, params = _bound_resnet_block()
    from relay_ir.backend.pipeline import bind_params

    bound = bind_params(mod, params)
    with T.PassContext(disabled_pass=["FuseOps"]):
        assert "multiply" not in _ops(T.optimize(bound))
    with T.PassContext(disabled_pass=["FuseOps", "FoldScaleAxis"]):
        assert _ops(T.optimize(bound)).count("multiply") == 2
    assert "FoldScaleAxis" not in [p.name for p in T.standard_sequence().passes
                                   if p.opt_level <= 1]


def test_built_resnet_block_kernels_lose_the_multiply():
    mod, params = _bound_resnet_block()
    lib = relay_ir.build(mod, target="llvm", params=params)
    names = sorted(g for g, _ in lib.group_schedules)
    assert names == ["fused_conv2d_add_add_relu", "fused_conv2d_add_relu"]
    rng = seeded_rng()
    for _ in range(2):
        x = P.rand(rng, 1, 8, 6, 6)
        want = interpret(mod, x, params["w1"], params["w2"])
        np.testing.assert_allclose(lib.run(x=x), want, rtol=1e-4, atol=1e-4)


def test_tuning_tasks_are_the_same_with_and_without_the_fold():
    from autotune.extract import extract_tasks

    mod, params = _bound_resnet_block()
    folded = extract_tasks(mod, "llvm", params)
    with T.PassContext(disabled_pass=["FoldScaleAxis"]):
        plain = extract_tasks(mod, "llvm", params)
    assert [(t, n) for t, n in folded] == [(t, n) for t, n in plain]
    # two convs (two tasks: lower_group.record_attrs), each also a task of the Winograd
    # template, the direct conv's alternate for 3x3 stride-1 convs
    assert sum(n for t, n in folded if t.template == "conv2d_NCHWc.x86") == 2
    assert sum(n for t, n in folded if t.template == "conv2d_NCHWc_winograd.x86") == 2


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_folded_onnx_models_equal_the_interpreter(name):
    from relay_ir.backend.pipeline import bind_params
    from relay_ir.frontend.onnx import from_onnx
    from tests.e2e import onnx_models

    model = getattr(onnx_models, name)(image=32, width=8)
    mod, params = from_onnx(model)
    bound = bind_params(mod, params)
    with T.PassContext(disabled_pass=["FuseOps"]):
        plain = T.optimize(bound, disabled_pass=["FuseOps", "FoldScaleAxis"])
        folded = T.optimize(bound)
    assert _ops(plain).count("multiply") >= 10 and "multiply" not in _ops(folded)
    rng = seeded_rng()
    shape = tuple(model.graph.input[0].type.tensor_type.shape.dim[i].dim_value
                  for i in range(4))
    for _ in range(2):
        x = rng.standard_normal(shape).astype("float32")
        np.testing.assert_allclose(interpret(folded, x), interpret(bound, x), rtol=1e-4,
                                   atol=1e-4)


# --- forward: a scale on the input channels -----------------------------------------------


@pytest.mark.parametrize("groups", [1, 2, C])  # plain, grouped, depthwise
def test_input_channel_scale_folds_into_the_weight(groups):
    rng = seeded_rng()
    x = tvar("x", (1, C, 6, 6))
    scaled = Tn.multiply(x, _const(rng, C, 1, 1))
    conv = nn.conv2d(scaled, _weight(rng, 2 * C, C // groups, 3, 3), padding=(1, 1),
                     groups=groups)  # zero padding: 0 * s = 0
    out = _folds(main_module([x], conv), (1, C, 6, 6))
    assert _ops(out) == ["nn.conv2d"] and out["main"].body.args[0] is out["main"].params[0]


def test_input_channel_scale_folds_in_nhwc_hwio_and_dense():
    rng = seeded_rng()
    x = tvar("x", (1, 5, 5, C))
    conv = nn.conv2d(Tn.multiply(_const(rng, C), x), _weight(rng, 3, 3, C // 2, 4),
                     groups=2, data_layout="NHWC", kernel_layout="HWIO")
    assert _ops(_folds(main_module([x], conv), (1, 5, 5, C))) == ["nn.conv2d"]
    v = tvar("v", (3, 8))
    dense = nn.dense(Tn.multiply(v, _const(rng, 1, 8)), _weight(rng, 5, 8))
    assert _ops(_folds(main_module([v], dense), (3, 8))) == ["nn.dense"]


def test_both_directions_fold_around_one_conv():
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5))
    conv = nn.conv2d(Tn.multiply(x, _const(rng, 4, 1, 1)), _weight(rng, C, 4, 3, 3))
    mod = main_module([x], Tn.multiply(conv, _const(rng, C, 1, 1)))
    assert _ops(_folds(mod, (1, 4, 5, 5))) == ["nn.conv2d"]


def test_input_scale_with_a_second_consumer_or_along_another_axis_is_left():
    rng = seeded_rng()
    x = tvar("x", (1, 4, 5, 5))
    scaled = Tn.multiply(x, _const(rng, 4, 1, 1))
    conv = nn.conv2d(scaled, _weight(rng, C, 4, 1, 1))
    _unchanged(main_module([x], relay_ir.Tuple((conv, scaled))))
    along_w = nn.conv2d(Tn.multiply(x, _const(rng, 1, 1, 5)), _weight(rng, C, 4, 1, 1))
    _unchanged(main_module([x], along_w))
    w = tvar("w", (C, 4, 1, 1))
    _unchanged(main_module([x, w], nn.conv2d(Tn.multiply(x, _const(rng, 4, 1, 1)), w)))
