"""ToANormalForm and ToGraphNormalForm: the shapes of their results."""

from __future__ import annotations

import relay_ir.transform as T
from relay_ir.expr import (
    Call,
    Constant,
    Constructor,
    Function,
    GlobalVar,
    If,
    Let,
    RefCreate,
    RefWrite,
    Tuple,
    Var,
)
from relay_ir.op import tensor as Tn
from relay_ir.transform.analysis import check_well_formed, children, post_order
from tests.relay_ir.programs import PROGRAMS, PROGRAMS_BY_NAME, const, main_module, tvar

_ATOMS = (Var, GlobalVar, Constant, Constructor)


def _is_anf(fn: Function) -> bool:
    """Every child of a compound node is atomic, except bodies, branches and let parts."""
    primitive = lambda e: isinstance(e, Function) and bool(e.attr("Primitive"))  # noqa: E731
    for node in post_order(fn, skip=primitive):
        if isinstance(node, (Let, Function)):
            continue
        kids = children(node)
        if isinstance(node, If):
            kids = [node.cond]
        if hasattr(node, "clauses"):
            kids = [node.data]
        if any(not isinstance(k, _ATOMS) for k in kids):
            return False
    return True


def test_every_program_becomes_a_normal_form():
    for p in PROGRAMS:
        out = T.ToANormalForm()(p.build())
        for gv, fn in out.functions.items():
            assert _is_anf(fn), f"{p.name}: @{gv.name_hint} is not in A-normal form"
            check_well_formed(fn, gv.name_hint)


def test_shared_node_is_bound_once():
    x = tvar("x", (3,))
    a = Tn.exp(x)
    mod = main_module([x], Tn.add(a, a))
    body = T.ToANormalForm()(mod)["main"].body
    lets = [n for n in post_order(body) if isinstance(n, Let)]
    assert [type(lt.value).__name__ for lt in lets].count("Call") == 2  # exp and add
    add = next(lt.value for lt in lets if lt.value.op.name == "add")
    assert add.args[0] is add.args[1]


def test_branch_values_are_bound_inside_the_branch():
    x = tvar("x", (3,))
    mod = main_module([x], If(Tn.greater(const(1.0), const(0.0)), Tn.exp(x), Tn.negative(x)))
    body = T.ToANormalForm()(mod)["main"].body
    if_node = next(n for n in post_order(body) if isinstance(n, If))
    assert isinstance(if_node.true_branch, Let) and isinstance(if_node.false_branch, Let)


def test_graph_form_inlines_lets():
    out = T.ToGraphNormalForm()(PROGRAMS_BY_NAME["let_chain"].build())
    body = out["main"].body
    assert not any(isinstance(n, Let) for n in post_order(body))
    # a = x + x is used twice and stays one shared node
    assert body.args[1] is body.args[0].args[1]


def test_graph_form_keeps_effectful_and_recursive_lets():
    x, r, u, f = tvar("x", (2,)), Var("r"), Var("u"), Var("f")
    i = tvar("i", (), "int32")
    loop = Function((i,), Call(f, (i,)))  # refers to its own let variable
    body = Let(r, RefCreate(x), Let(u, RefWrite(r, x),
                                   Let(f, loop, Tuple((x, f)))))
    out = T.ToGraphNormalForm()(main_module([x], body))
    kept = [n.var.name_hint for n in post_order(out["main"].body) if isinstance(n, Let)]
    # the ref creation stays bound too: copied into its uses it would make a cell per use
    assert sorted(kept) == ["f", "r", "u"]


def test_graph_form_keeps_one_cell_for_a_ref_read_inside_a_closure():
    # let r = ref(x); let bump = fn () { r := r! + 1 }; bump(); r!  ->  x + 1
    import numpy as np

    from relay_ir.expr import RefRead
    from relay_ir.interpreter import interpret

    x, r, bump, u = tvar("x", (2,)), Var("r"), Var("bump"), Var("u")
    bump_fn = Function((), RefWrite(r, Tn.add(RefRead(r), const(1.0))))
    body = Let(r, RefCreate(x), Let(bump, bump_fn, Let(u, Call(bump, ()), RefRead(r))))
    out = T.ToGraphNormalForm()(main_module([x], body))
    np.testing.assert_array_equal(interpret(out, np.zeros(2, "float32")), [1, 1])


def test_anf_then_gnf_gives_back_dataflow():
    p = PROGRAMS_BY_NAME["mlp"]
    out = T.ToGraphNormalForm()(T.ToANormalForm()(p.build()))
    assert not any(isinstance(n, Let) for n in post_order(out["main"].body))
    ops = [n.op.name for n in post_order(out["main"].body) if isinstance(n, Call)]
    assert ops == ["nn.dense", "nn.bias_add", "nn.relu", "nn.dense", "nn.bias_add",
                   "nn.softmax"]


def test_anf_handles_a_long_chain_without_recursion_errors():
    x = tvar("x", (2,))
    e = x
    for _ in range(3000):
        e = Tn.negative(e)
    out = T.ToANormalForm()(main_module([x], e))
    depth, node = 0, out["main"].body
    while isinstance(node, Let):
        depth, node = depth + 1, node.body
    assert depth == 3000


def test_anf_leaves_fused_functions_as_dataflow():
    fused = T.optimize(PROGRAMS_BY_NAME["resnet_block"].build(), opt_level=3)
    out = T.ToANormalForm()(fused)
    prims = [n for n in post_order(out["main"].body)
             if isinstance(n, Function) and n.attr("Primitive")]
    assert len(prims) == 2
    assert not any(isinstance(n, Let) for p in prims for n in post_order(p.body))
    assert _is_anf(out["main"])
