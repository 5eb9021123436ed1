"""SimplifyInference: batch_norm becomes scale and shift, dropout goes, layer_norm is
expanded (or kept)."""

from __future__ import annotations

import numpy as np

import relay_ir.transform as T
from relay_ir import nn
from relay_ir.expr import Call, TupleGetItem
from relay_ir.interpreter import interpret
from relay_ir.op import tensor as Tn
from relay_ir.op.registry import Op
from relay_ir.transform.analysis import post_order
from tests.relay_ir.programs import PROGRAMS_BY_NAME, main_module, tvar
from tests.rng import seeded_rng


def _ops(expr) -> list[str]:
    return [e.op.name for e in post_order(expr) if isinstance(e, Call) and isinstance(e.op, Op)]


def test_batch_norm_becomes_multiply_add():
    out = T.SimplifyInference()(PROGRAMS_BY_NAME["conv_bn_relu"].build())
    ops = _ops(out["main"].body)
    assert "nn.batch_norm" not in ops
    assert ops.count("expand_dims") == 2 and "sqrt" in ops
    # the data path: conv2d -> multiply -> add -> relu
    relu = out["main"].body
    add = relu.args[0]
    assert add.op.name == "add" and add.args[0].op.name == "multiply"
    assert add.args[0].args[0].op.name == "nn.conv2d"


def test_batch_norm_statistics_outputs_are_its_arguments():
    x = tvar("x", (2, 3))
    g, b, m, v = (tvar(n, (3,)) for n in "gbmv")
    bn = nn.batch_norm(x, g, b, m, v, axis=1)
    mod = main_module([x, g, b, m, v], Tn.add(TupleGetItem(bn, 1), TupleGetItem(bn, 2)))
    out = T.SimplifyInference()(mod)
    body, params = out["main"].body, out["main"].params
    assert body.args[0] is params[3] and body.args[1] is params[4]


def test_batch_norm_on_the_last_axis_matches_the_op():
    rng = seeded_rng()
    x = tvar("x", (2, 5, 3))
    g, b, m, v = (tvar(n, (3,)) for n in "gbmv")
    bn = nn.batch_norm(x, g, b, m, v, axis=-1, epsilon=1e-3)
    mod = main_module([x, g, b, m, v], TupleGetItem(bn, 0))
    args = [rng.standard_normal((2, 5, 3)).astype("float32")] + [
        rng.standard_normal(3).astype("float32") for _ in range(3)] + [
        (rng.random(3) + 0.5).astype("float32")]
    out = T.SimplifyInference()(mod)
    assert "expand_dims" not in _ops(out["main"].body)  # the last axis needs no reshape
    np.testing.assert_allclose(interpret(out, *args), interpret(mod, *args), rtol=1e-5,
                               atol=1e-5)


def test_dropout_is_removed():
    x = tvar("x", (4,))
    mod = main_module([x], Tn.exp(TupleGetItem(nn.dropout(x, rate=0.3), 0)))
    out = T.SimplifyInference()(mod)
    body = out["main"].body
    assert _ops(body) == ["exp"] and body.args[0] is out["main"].params[0]


def test_layer_norm_expanded_or_kept():
    mod = PROGRAMS_BY_NAME["transformer_block"].build()
    assert "nn.layer_norm" not in _ops(T.SimplifyInference()(mod)["main"].body)
    assert "mean" in _ops(T.SimplifyInference()(mod)["main"].body)
    kept = T.SimplifyInference(expand_layer_norm=False)(mod)
    assert "nn.layer_norm" in _ops(kept["main"].body)
