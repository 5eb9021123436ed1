"""FoldConstant: constant subgraphs become constants; nothing else changes."""

from __future__ import annotations

import numpy as np

import relay_ir.transform as T
from relay_ir import nn
from relay_ir.expr import Call, Constant, If, Let, Tuple, TupleGetItem, Var
from relay_ir.interpreter import interpret
from relay_ir.op import tensor as Tn
from relay_ir.op import transform as X
from relay_ir.op.registry import Op
from relay_ir.transform.analysis import post_order
from tests.relay_ir.programs import const, main_module, tvar
from tests.rng import seeded_rng


def _ops(expr) -> list[str]:
    return [e.op.name for e in post_order(expr) if isinstance(e, Call) and isinstance(e.op, Op)]


def test_constant_op_chain_is_evaluated():
    rng = seeded_rng()
    c = rng.standard_normal((2, 3)).astype("float32")
    x = tvar("x", (2, 3))
    mod = main_module([x], Tn.add(x, Tn.exp(Tn.multiply(const(c), const(2.0)))))
    out = T.FoldConstant()(mod)
    assert _ops(out["main"].body) == ["add"]
    folded = out["main"].body.args[1]
    assert isinstance(folded, Constant) and folded.data.dtype == np.float32
    np.testing.assert_allclose(folded.data, np.exp(c * 2), rtol=1e-6)


def test_tuple_valued_op_folds_to_a_tuple_of_constants():
    c = np.arange(6, dtype="float32").reshape(2, 3)
    x = tvar("x", (2, 1))
    mod = main_module([x], Tn.add(x, TupleGetItem(X.split(const(c), 3, axis=1), 2)))
    body = T.FoldConstant()(mod)["main"].body
    assert _ops(body) == ["add"]
    np.testing.assert_array_equal(body.args[1].data, c[:, 2:3])


def test_if_on_a_constant_condition_takes_the_branch():
    x = tvar("x", (2,))
    mod = main_module([x], If(Tn.less(const(1.0), const(2.0)), Tn.exp(x), Tn.negative(x)))
    body = T.FoldConstant()(mod)["main"].body
    assert _ops(body) == ["exp"]


def test_let_bound_constant_is_inlined_and_folded():
    x, c = tvar("x", (2,)), Var("c")
    mod = main_module([x], Let(c, Tn.exp(const([0.0, 1.0])), Tn.add(x, Tn.multiply(c, c))))
    body = T.FoldConstant()(mod)["main"].body
    assert not isinstance(body, Let) and _ops(body) == ["add"]
    np.testing.assert_allclose(body.args[1].data, np.exp([0.0, 1.0]) ** 2, rtol=1e-6)


def test_projection_of_a_literal_tuple():
    x = tvar("x", (2,))
    mod = main_module([x], TupleGetItem(Tuple((Tn.exp(x), x)), 1))
    assert T.FoldConstant()(mod)["main"].body is mod["main"].params[0]


def test_non_constant_parts_are_left_alone():
    x, w = tvar("x", (2, 3)), tvar("w", (4, 3))
    mod = main_module([x, w], nn.relu(nn.dense(x, w)))
    out = T.FoldConstant()(mod)
    assert out["main"] is mod["main"]


def test_failing_constant_call_is_kept_for_run_time():
    # add of (2,) and (3,) constants fails: folding keeps the call, running reports it
    bad = Tn.add(const([1.0, 2.0]), const([1.0, 2.0, 3.0]))
    x = tvar("x", (2,))
    mod = main_module([x], Tuple((x, bad)))
    assert _ops(T.FoldConstant()(mod)["main"].body) == ["add"]


def test_large_results_are_not_folded():
    x = tvar("x", (64, 64))
    mod = main_module([x], Tn.add(x, Tn.ones((64, 64))))
    assert _ops(T.FoldConstant(max_elements=100)(mod)["main"].body) == ["ones", "add"]
    assert _ops(T.FoldConstant()(mod)["main"].body) == ["add"]


def test_folding_keeps_the_result():
    rng = seeded_rng()
    x = tvar("x", (3,))
    mod = main_module([x], Tn.multiply(x, Tn.sqrt(Tn.add(const([1.0, 4.0, 9.0]), const(0.0)))))
    a = rng.standard_normal(3).astype("float32")
    np.testing.assert_allclose(interpret(T.FoldConstant()(mod), a), a * np.array([1, 2, 3]),
                               rtol=1e-6)
