"""Inline: globals marked ("Inline", 1) are inlined at their calls, with fresh variables."""

from __future__ import annotations

import numpy as np

import relay_ir.transform as T
from relay_ir.expr import Call, Function, GlobalVar, If, Let
from relay_ir.interpreter import interpret
from relay_ir.module import IRModule
from relay_ir.op import tensor as Tn
from relay_ir.transform.analysis import check_well_formed, post_order
from tests.relay_ir.programs import PROGRAMS_BY_NAME, const, tvar
from tests.rng import seeded_rng


def test_marked_global_is_inlined_and_removed():
    out = T.Inline()(PROGRAMS_BY_NAME["inline_square"].build())
    assert [gv.name_hint for gv in out.functions] == ["main"]
    assert not any(isinstance(n, GlobalVar) for n in post_order(out["main"]))
    check_well_formed(out["main"], "main")  # two copies, fresh variables each


def test_atomic_argument_is_substituted_and_compound_one_let_bound():
    out = T.Inline()(PROGRAMS_BY_NAME["inline_square"].build())
    body = out["main"].body
    first, second = body.args
    assert first.op.name == "multiply" and first.args[0] is out["main"].params[0]
    assert isinstance(second, Let) and second.value.op.name == "exp"


def test_unmarked_global_is_not_inlined():
    y, x = tvar("y", (2,)), tvar("x", (2,))
    gv = GlobalVar("f")
    mod = IRModule({gv: Function((y,), Tn.exp(y))})
    mod = mod.with_function("main", Function((x,), Call(gv, (x,))))
    assert T.Inline()(mod) is mod


def test_recursive_global_is_not_inlined():
    i = tvar("i", (), "int32")
    gv = GlobalVar("down")
    one = const(1, "int32")
    fn = Function((i,), If(Tn.less(i, one), i, Call(gv, (Tn.subtract(i, one),))),
                  attrs=(("Inline", 1),))
    n = tvar("n", (), "int32")
    mod = IRModule({gv: fn}).with_function("main", Function((n,), Call(gv, (n,))))
    out = T.Inline()(mod)
    assert out is mod
    assert int(interpret(out, np.int32(5))) == 0


def test_nested_inline_globals_are_all_inlined():
    rng = seeded_rng()
    y, z, x = tvar("y", (2,)), tvar("z", (2,)), tvar("x", (2,))
    inner, outer = GlobalVar("inner"), GlobalVar("outer")
    mod = IRModule({inner: Function((y,), Tn.exp(y), attrs=(("Inline", 1),)),
                    outer: Function((z,), Tn.add(Call(inner, (z,)), z), attrs=(("Inline", 1),))})
    mod = mod.with_function("main", Function((x,), Call(outer, (x,))))
    out = T.Inline()(mod)
    assert [gv.name_hint for gv in out.functions] == ["main"]
    a = rng.standard_normal(2).astype("float32")
    # float32: exp(a) + a cancels near a = -0.57, so allow an ulp of the terms, not of the sum
    np.testing.assert_allclose(interpret(out, a), np.exp(a) + a, rtol=1e-6, atol=1e-6)
