"""EliminateCommonSubexpr: duplicates merge; effects and different attrs do not."""

from __future__ import annotations

import relay_ir.transform as T
from relay_ir.expr import Call, Let, RefCreate, RefRead, Tuple, Var
from relay_ir.op import reduce as R
from relay_ir.op import tensor as Tn
from relay_ir.op.registry import Op
from relay_ir.transform.analysis import post_order
from tests.relay_ir.programs import const, main_module, tvar


def _ops(expr) -> list[str]:
    return [e.op.name for e in post_order(expr) if isinstance(e, Call) and isinstance(e.op, Op)]


def test_duplicate_calls_merge():
    x = tvar("x", (3,))
    mod = main_module([x], Tn.multiply(Tn.exp(Tn.add(x, const(1.0))),
                                       Tn.exp(Tn.add(x, const(1.0)))))
    body = T.EliminateCommonSubexpr()(mod)["main"].body
    assert body.args[0] is body.args[1]
    assert _ops(body) == ["add", "exp", "multiply"]


def test_different_attrs_do_not_merge():
    x = tvar("x", (2, 3))
    mod = main_module([x], Tuple((R.sum(x, axis=(0,)), R.sum(x, axis=(1,)),
                                  R.sum(x, axis=(0,)))))
    body = T.EliminateCommonSubexpr()(mod)["main"].body
    assert body.fields[0] is body.fields[2] and body.fields[0] is not body.fields[1]


def test_ref_reads_and_creations_never_merge():
    x, r = tvar("x", (2,)), Var("r")
    mod = main_module([x], Let(r, RefCreate(x), Tuple((RefRead(r), RefRead(r), RefCreate(x)))))
    body = T.EliminateCommonSubexpr()(mod)["main"].body.body
    assert body.fields[0] is not body.fields[1]


def test_repeated_let_binding_is_replaced_by_the_first():
    x, a, b = tvar("x", (3,)), Var("a"), Var("b")
    mod = main_module([x], Let(a, Tn.exp(x), Let(b, Tn.exp(x), Tn.add(a, b))))
    body = T.EliminateCommonSubexpr()(mod)["main"].body
    assert isinstance(body, Let) and body.var is a
    assert not isinstance(body.body, Let)
    assert body.body.args[0] is a and body.body.args[1] is a
