"""FuseOps on random dataflow programs (hypothesis): the fused program computes the same
values, and every group obeys the fusion rules and the depth limit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import relay_ir.transform as T
from relay_ir import nn
from relay_ir.expr import Call, Expr, Function, Tuple
from relay_ir.interpreter import interpret
from relay_ir.module import IRModule
from relay_ir.op import reduce as R
from relay_ir.op import tensor as Tn
from relay_ir.op import transform as X
from relay_ir.op.registry import PATTERNS, Op, OpPattern
from relay_ir.transform.analysis import post_order
from tests.relay_ir.programs import assert_values_close, main_module, tvar

SHAPE = (2, 3)
KINDS = ["exp", "tanh", "negative", "add", "multiply", "bias", "transpose2", "reshape2",
         "sum_add", "dense", "softmax", "concat_slice"]


def _build(choices: list[tuple[str, int, int]], n_outputs: int) -> IRModule:
    """A program from a list of (kind, operand index, operand index) choices."""
    x, y, b = tvar("x", SHAPE), tvar("y", SHAPE), tvar("b", (3,))
    w = tvar("w", (3, 3))
    nodes: list[Expr] = [x, y]
    for kind, i, j in choices:
        a, c = nodes[i % len(nodes)], nodes[j % len(nodes)]
        if kind in ("exp", "tanh", "negative"):
            e = getattr(Tn, kind)(Tn.multiply(a, Tn.tanh(a)) if kind == "exp" else a)
        elif kind == "add":
            e = Tn.add(a, c)
        elif kind == "multiply":
            e = Tn.multiply(a, c)
        elif kind == "bias":
            e = Tn.add(a, b)  # broadcast of a (3,) vector
        elif kind == "transpose2":
            e = X.transpose(Tn.negative(X.transpose(a)))
        elif kind == "reshape2":
            e = X.reshape(Tn.exp(Tn.tanh(X.reshape(a, (6,)))), SHAPE)
        elif kind == "sum_add":
            e = Tn.add(c, R.sum(a, axis=(1,), keepdims=True))
        elif kind == "dense":
            e = nn.dense(a, w)
        elif kind == "softmax":
            e = nn.softmax(a)
        else:  # concat_slice
            cat = X.concatenate(Tuple((a, c)), axis=0)
            e = X.strided_slice(cat, begin=(1, 0), end=(3, 3))
        nodes.append(e)
    outs = [nodes[-1]] + nodes[2:-1][-n_outputs + 1:] if n_outputs > 1 else [nodes[-1]]
    body = outs[0] if len(outs) == 1 else Tuple(tuple(outs))
    return main_module([x, y, b, w], body)


def _groups(mod: IRModule) -> list[tuple[Function, list[Call]]]:
    """Each Primitive function called from @main with its op calls."""
    return [(n.op, [e for e in post_order(n.op.body)
                    if isinstance(e, Call) and isinstance(e.op, Op)])
            for n in post_order(mod["main"].body)
            if isinstance(n, Call) and isinstance(n.op, Function) and n.op.attr("Primitive")]


programs = st.tuples(
    st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 50), st.integers(0, 50)),
             min_size=1, max_size=12),
    st.integers(1, 3),
    st.integers(1, 10),
    st.integers(0, 2**32 - 1),
)


@settings(max_examples=40, deadline=None)
@given(programs)
def test_random_programs_fuse_correctly(case):
    choices, n_outputs, max_depth, seed = case
    mod = _build(choices, n_outputs)
    fused = T.FuseOps(max_depth=max_depth)(mod)
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(SHAPE).astype("float32"),
            rng.standard_normal(SHAPE).astype("float32"),
            rng.standard_normal(3).astype("float32"),
            (rng.standard_normal((3, 3)) * 0.5).astype("float32")]
    assert_values_close(interpret(fused, *args), interpret(mod, *args), 1e-5, 1e-5)
    groups = _groups(fused)
    n_ops = sum(1 for e in post_order(mod["main"].body)
                if isinstance(e, Call) and isinstance(e.op, Op))
    assert sum(len(calls) for _, calls in groups) == n_ops  # every op in exactly one group
    for fn, calls in groups:
        kinds = [PATTERNS[c.op] for c in calls]
        assert len(calls) <= max_depth
        assert kinds.count(OpPattern.OUT_ELEMWISE_FUSABLE) <= 1
        if OpPattern.OPAQUE in kinds:
            assert len(calls) == 1
        for c, k in zip(calls, kinds):
            if k == OpPattern.COMM_REDUCE:
                assert c is fn.body  # a reduction never feeds another op of its group


@settings(max_examples=25, deadline=None)
@given(programs)
def test_random_programs_survive_the_whole_pipeline(case):
    choices, n_outputs, max_depth, seed = case
    mod = _build(choices, n_outputs)
    out = T.optimize(mod, opt_level=3, verify=True, max_fuse_depth=max_depth)
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(SHAPE).astype("float32"),
            rng.standard_normal(SHAPE).astype("float32"),
            rng.standard_normal(3).astype("float32"),
            (rng.standard_normal((3, 3)) * 0.5).astype("float32")]
    assert_values_close(interpret(out, *args), interpret(mod, *args), 1e-5, 1e-5)
