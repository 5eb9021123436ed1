"""DeadCodeElimination: unused effect-free bindings go, effects and used values stay."""

from __future__ import annotations

import relay_ir.transform as T
from relay_ir.expr import Call, Function, GlobalVar, Let, RefCreate, RefWrite, Tuple, Var
from relay_ir.module import IRModule
from relay_ir.op import tensor as Tn
from relay_ir.transform.analysis import post_order
from tests.relay_ir.programs import PROGRAMS_BY_NAME, const, main_module, tvar


def _lets(expr) -> list[str]:
    return [e.var.name_hint for e in post_order(expr) if isinstance(e, Let)]


def test_unused_binding_is_removed():
    out = T.DeadCodeElimination()(PROGRAMS_BY_NAME["let_chain"].build())
    assert _lets(out["main"]) == ["c", "b", "a"]  # 'unused' is gone


def test_chain_of_dead_bindings_disappears_at_once():
    x, a, b, c = tvar("x", (2,)), Var("a"), Var("b"), Var("c")
    body = Let(a, Tn.exp(x), Let(b, Tn.add(a, a), Let(c, Tn.negative(b), x)))
    out = T.DeadCodeElimination()(main_module([x], body))
    assert out["main"].body is out["main"].params[0]


def test_effectful_binding_is_kept():
    x, r, u = tvar("x", (2,)), Var("r"), Var("u")
    body = Let(r, RefCreate(x), Let(u, RefWrite(r, Tn.exp(x)), x))
    out = T.DeadCodeElimination()(main_module([x], body))
    assert _lets(out["main"]) == ["u", "r"]


def test_unused_ref_creation_is_removed():
    x, r = tvar("x", (2,)), Var("r")
    out = T.DeadCodeElimination()(main_module([x], Let(r, RefCreate(x), x)))
    assert _lets(out["main"]) == []


def test_call_of_a_pure_global_is_removable_but_not_of_an_impure_one():
    y = tvar("y", (2,))
    pure, impure = GlobalVar("pure"), GlobalVar("impure")
    r = Var("r")
    mod = IRModule({pure: Function((y,), Tn.exp(y)),
                    impure: Function((y,), Let(r, RefCreate(y),
                                               Tuple((RefWrite(r, y), y))))})
    x, a, b = tvar("x", (2,)), Var("a"), Var("b")
    body = Let(a, Call(pure, (x,)), Let(b, Call(impure, (x,)), x))
    out = T.DeadCodeElimination()(mod.with_function("main", Function((x,), body)))
    assert _lets(out["main"]) == ["b"]


def test_used_binding_stays():
    x, a = tvar("x", (2,)), Var("a")
    mod = main_module([x], Let(a, Tn.exp(x), Tn.add(a, const(1.0))))
    out = T.DeadCodeElimination()(mod)
    assert out is mod
