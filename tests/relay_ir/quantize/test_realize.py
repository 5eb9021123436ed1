"""The realized graph: int8 x int8 conv2d / dense accumulating in int32, an int32 bias,
requantization by an add-half-then-right-shift (power-of-two scales) or a float multiply
(requantize="float"), integer residual adds, batch norms folded into the weights, float
only at the quantized input and the dequantized output."""

from __future__ import annotations

import numpy as np

import relay_ir as R
from relay_ir import nn
from relay_ir.quantize import quantize
from tests.relay_ir.quantize.helpers import op_calls
from tests.relay_ir.quantize.models import images, small_cnn
from tests.rng import seeded_rng


def _quantized_cnn(**options: object) -> R.IRModule:
    rng = seeded_rng()
    mod, params = small_cnn(rng)
    return quantize(mod, params, dataset=images(rng, 4), skip_conv_layers=[], **options)


def test_anchors_read_int8_and_accumulate_in_int32() -> None:
    qmod = _quantized_cnn()
    anchors = op_calls(qmod, "nn.conv2d") + op_calls(qmod, "nn.dense")
    assert len(anchors) == 4
    for call in anchors:
        assert call.attrs.out_dtype == "int32"
        assert [a.checked_type.dtype for a in call.args] == ["int8", "int8"]
        assert call.checked_type.dtype == "int32"


def test_requantization_adds_half_then_shifts_right() -> None:
    qmod = _quantized_cnn()
    shifts = op_calls(qmod, "right_shift")
    assert len(shifts) == 3  # into conv 1, conv 2 and the dense
    for s in shifts:
        k = int(s.args[1].data)
        added = s.args[0]
        assert added.op.name == "add" and int(added.args[1].data) == 1 << (k - 1)
        assert s.checked_type.dtype == "int32"
    # the only float multiplies: quantizing the input and dequantizing the output
    assert len(op_calls(qmod, "multiply")) == 2
    assert [c.checked_type.dtype for c in op_calls(qmod, "round")] == ["float32"]


def test_float_requantization_multiplies_instead_of_shifting() -> None:
    qmod = _quantized_cnn(requantize="float")
    assert op_calls(qmod, "right_shift") == []
    assert len(op_calls(qmod, "round")) == 4  # the input and three requantizations
    conv0 = op_calls(qmod, "nn.conv2d")[0]
    w = conv0.args[1].data  # one scale per output channel: each channel reaches 127
    assert w.dtype == np.int8 and np.all(np.abs(w).reshape(w.shape[0], -1).max(axis=1) == 127)


def test_biases_and_the_residual_add_stay_integer() -> None:
    qmod = _quantized_cnn()
    adds = [a for a in op_calls(qmod, "add") if a.checked_type.dtype == "int32"]
    biases = [a for a in adds if isinstance(a.args[1], R.Constant) and a.args[1].data.ndim]
    assert len(biases) == 4 and all(b.args[1].data.dtype == np.int32 for b in biases)
    residual = [a for a in adds if not isinstance(a.args[1], R.Constant)]
    assert len(residual) == 1
    assert [c.checked_type.dtype for c in op_calls(qmod, "cast")].count("float32") == 1


def test_batch_norm_is_folded_into_the_conv_weight() -> None:
    rng = seeded_rng()
    x = R.Var("x", R.TensorType((1, 4, 6, 6), "float32"))
    w = R.Constant(rng.standard_normal((8, 4, 3, 3)).astype("float32"))
    bn = [R.Constant(v.astype("float32")) for v in (
        rng.uniform(-2, 2, 8), rng.standard_normal(8), rng.standard_normal(8),
        rng.uniform(0.5, 2, 8))]
    y = R.TupleGetItem(nn.batch_norm(nn.conv2d(x, w, padding=(1, 1)), *bn), 0)
    out = nn.conv2d(nn.relu(y), R.Constant(rng.standard_normal((2, 8, 1, 1)).astype("float32")))
    data = [{"x": rng.standard_normal((1, 4, 6, 6)).astype("float32")} for _ in range(2)]
    qmod = quantize(R.IRModule.from_expr(R.Function((x,), out)), dataset=data,
                    skip_conv_layers=[])
    assert op_calls(qmod, "nn.batch_norm") == []
    assert len(op_calls(qmod, "right_shift")) == 1  # conv -> conv is a shift, no multiply
    assert len(op_calls(qmod, "multiply")) == 2


def test_shortcut_from_a_skipped_float_conv_joins_the_residual_add_as_int8() -> None:
    # conv 0 stays float, so the block input is float; conv 1 quantizes it anyway, and the
    # residual add takes that int8 value instead of dequantizing the other branch
    rng = seeded_rng()
    mod, params = small_cnn(rng)
    qmod = quantize(mod, params, dataset=images(rng, 4), skip_conv_layers=[0])
    (residual,) = [a for a in op_calls(qmod, "add") if not isinstance(a.args[1], R.Constant)]
    assert residual.checked_type.dtype == "int32"
    int8_inputs = [c for c in op_calls(qmod, "cast") if c.checked_type.dtype == "int8"]
    assert len(int8_inputs) == 3  # conv 1's input (shared with the add), conv 2's, dense's


def _two_branch_sum(k: int) -> R.IRModule:
    # add(dense(x, Wa), dense(x, Wb)): |Wa| < 1 and |Wb| < 2**-8 get weight scales 2**-7
    # and 2**-15, so Wa's accumulator is left-shifted by 8 before the add
    rng = seeded_rng()
    x = R.Var("x", R.TensorType((1, k), "float32"))
    wa = rng.uniform(-1, 1, (4, k)).astype("float32")
    wb = (rng.uniform(-1, 1, (4, k)) / 256).astype("float32")
    body = R.add(nn.dense(x, R.Constant(wa)), nn.dense(x, R.Constant(wb)))
    data = [{"x": rng.uniform(-1, 1, (1, k)).astype("float32")}]
    return quantize(R.IRModule.from_expr(R.Function((x,), body)), dataset=data)


def test_residual_add_that_fits_int32_is_shifted_and_added_in_int32() -> None:
    qmod = _two_branch_sum(16)
    (s,) = op_calls(qmod, "left_shift")
    assert int(s.args[1].data) == 8
    assert op_calls(qmod, "add")[-1].checked_type.dtype == "int32"


def test_residual_add_that_could_wrap_int32_is_done_in_float() -> None:
    # 4096 products of up to 127 * 127, shifted by 8, could pass 2**31
    qmod = _two_branch_sum(4096)
    assert op_calls(qmod, "left_shift") == []
    assert op_calls(qmod, "add")[-1].checked_type.dtype == "float32"
