"""ExprVisitor / ExprMutator: memo by identity, deep chains, missing cases, rebuilding."""

from __future__ import annotations

import numpy as np
import pytest

from relay_ir.expr import Call, Constant, Expr, Function, If, Let, Tuple, TupleGetItem, Var
from relay_ir.op.registry import get_op
from relay_ir.visitor import ExprMutator, ExprVisitor, children, free_vars, post_order
from tessel_errors import RelayError


def let_chain(n: int) -> tuple[Expr, list[Var]]:
    """let %v0 = (x,).0; let %v1 = (%v0,).0; ... %v{n-1}"""
    x = Var("x")
    vs = [Var(f"v{i}") for i in range(n)]
    body: Expr = vs[-1]
    for i in reversed(range(n)):
        prev = vs[i - 1] if i else x
        body = Let(vs[i], TupleGetItem(Tuple((prev,)), 0), body)
    return body, vs


class CountLets(ExprVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.lets = 0
        self.vars = 0

    def visit_let_binding(self, let: Let) -> None:
        self.lets += 1
        super().visit_let_binding(let)

    def visit_var(self, var: Var) -> None:
        self.vars += 1


def test_visitor_walks_a_10000_deep_let_chain():
    expr, _ = let_chain(10_000)
    v = CountLets()
    v.visit(expr)
    assert v.lets == 10_000
    assert v.vars == 10_001  # each bound var once (memo) plus the free x


def test_mutator_on_a_10000_deep_let_chain_returns_the_same_node():
    expr, _ = let_chain(10_000)
    assert ExprMutator().visit(expr) is expr


def test_mutator_renames_every_use_consistently_in_a_deep_chain():
    expr, vs = let_chain(10_000)

    class Rename(ExprMutator):
        def visit_var(self, var: Var) -> Expr:
            return Var(var.name_hint + "_r")

    out = Rename().visit(expr)
    link, seen = out, 0
    prev_var = None
    while isinstance(link, Let):
        assert link.var.name_hint.endswith("_r")
        if prev_var is not None:
            assert link.value.tuple_value.fields[0] is prev_var
        prev_var = link.var
        link = link.body
        seen += 1
    assert seen == 10_000
    assert link is prev_var


def test_visitor_walks_a_deep_dataflow_chain():
    x = Var("x")
    relu = get_op("nn.relu")
    e: Expr = x
    for _ in range(20_000):
        e = Call(relu, (e,))

    class CountCalls(ExprVisitor):
        calls = 0

        def visit_call(self, call: Call) -> None:
            CountCalls.calls += 1
            super().visit_call(call)

    CountCalls().visit(e)
    assert CountCalls.calls == 20_000
    assert ExprMutator().visit(e) is e


def test_shared_node_is_visited_once():
    x = Var("x")
    shared = Call(get_op("nn.relu"), (x,))
    e = Tuple((shared, shared, Tuple((shared,))))
    visits = []

    class Record(ExprVisitor):
        def visit_call(self, call: Call) -> None:
            visits.append(call)
            super().visit_call(call)

    Record().visit(e)
    assert visits == [shared]


def test_mutator_keeps_sharing_when_rebuilding():
    x, y = Var("x"), Var("y")
    shared = Call(get_op("nn.relu"), (x,))
    e = Tuple((shared, shared))

    class XtoY(ExprMutator):
        def visit_var(self, var: Var) -> Expr:
            return y if var is x else var

    out = XtoY().visit(e)
    assert out is not e
    assert out.fields[0] is out.fields[1]
    assert out.fields[0].args[0] is y


def test_mutator_rebuild_drops_checked_type_but_keeps_unchanged_nodes():
    from dataclasses import replace

    from relay_ir.ty import TensorType

    x, y = Var("x"), Var("y")
    keep = Call(get_op("nn.relu"), (y,), checked_type=TensorType((2,)))
    e = Tuple((keep, Call(get_op("nn.relu"), (x,))))
    e = replace(e, checked_type=TensorType(()))

    class XtoY(ExprMutator):
        def visit_var(self, var: Var) -> Expr:
            return y if var is x else var

    out = XtoY().visit(e)
    assert out.fields[0] is keep
    assert out.checked_type is None


def test_rebuild_let_override_can_drop_bindings():
    x = Var("x")
    dead, live = Var("dead"), Var("live")
    one = Constant(np.float32(1))
    e = Let(dead, one, Let(live, Tuple((x,)), live))

    class DropDead(ExprMutator):
        def rebuild_let(self, let: Let, var: Var, value: Expr, body: Expr) -> Expr:
            if var is dead:
                return body
            return super().rebuild_let(let, var, value, body)

    out = DropDead().visit(e)
    assert isinstance(out, Let) and out.var is live and isinstance(out.body, Var)


def test_missing_case_names_the_visitor_and_node_type():
    class NoTuples(ExprVisitor):
        visit_tuple = None

    with pytest.raises(RelayError, match="NoTuples has no case for Tuple nodes"):
        NoTuples().visit(Tuple(()))


def test_unknown_node_type_names_the_visitor():
    class Strange(Expr):
        pass

    with pytest.raises(RelayError, match="ExprMutator has no case for Strange"):
        ExprMutator().visit(Strange())


def test_visiting_a_non_expression_is_an_error():
    with pytest.raises(RelayError, match="ExprVisitor.visit got a list"):
        ExprVisitor().visit([1, 2])


def test_post_order_lists_children_before_parents_once():
    x = Var("x")
    inner = Tuple((x, x))
    outer = Tuple((inner, inner, x))
    order = list(post_order(outer))
    assert order == [x, inner, outer]


def test_children_of_if_and_function():
    c, a, b = Var("c"), Var("a"), Var("b")
    assert children(If(c, a, b)) == (c, a, b)
    assert children(Function((a,), b)) == (b,)  # a parameter is bound, not evaluated


def test_free_vars_of_a_node_shared_by_two_scopes_are_right_in_both():
    x, y = Var("x"), Var("y")
    shared = Tuple((x, y))  # reached inside a function binding x and outside it
    inside = Function((x,), shared)
    e = Tuple((inside, shared))
    assert free_vars(inside) == [y]
    assert free_vars(e) == [y, x]  # x is free where the shared node is used outside


def test_free_vars_of_a_let_bound_node_used_again_after_the_let():
    x, v = Var("x"), Var("v")
    shared = Tuple((x,))
    e = Tuple((Let(x, v, shared), shared))  # the second use of `shared` is outside the let
    assert free_vars(e) == [v, x]


def test_relay_ir_and_transform_free_vars_are_one_function():
    import relay_ir

    assert relay_ir.free_vars is relay_ir.transform.free_vars is free_vars
    assert relay_ir.post_order is relay_ir.transform.post_order is post_order


def test_free_vars_respect_binders_and_order_of_use():
    a, b, c, f = Var("a"), Var("b"), Var("c"), Var("f")
    e = Tuple((b, Function((a,), Tuple((a, c))), Let(f, a, f), b))
    assert free_vars(e) == [b, c, a]  # a is bound by the function only, free in the let
    assert free_vars(Function((a,), a)) == []


def test_free_vars_of_match_clauses():
    import relay_ir as r

    mod = r.IRModule().import_prelude()
    e = r.parse_expr(
        "match (%l) { Cons(%h, %t) => (%h, %t, %y), Nil => %h }", init_module=mod
    )
    names = [v.name_hint for v in free_vars(e)]
    assert names == ["l", "y", "h"]
