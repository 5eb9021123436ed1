"""FuseOps: the group structure on the ResNet-style and transformer-style blocks, the
fusion rules one by one, the depth limit, and the shape of the fused functions."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir.transform as T
from relay_ir import nn
from relay_ir.expr import Call, Function, Let, Tuple, TupleGetItem, Var
from relay_ir.interpreter import interpret
from relay_ir.module import IRModule
from relay_ir.op import reduce as R
from relay_ir.op import tensor as Tn
from relay_ir.op import transform as X
from relay_ir.op.registry import Op
from relay_ir.transform.analysis import post_order
from relay_ir.transform.fuse_ops import build_graph, post_dominators
from tessel_errors import RelayError, RelayRuntimeError
from tests.relay_ir.programs import (
    PROGRAMS_BY_NAME,
    assert_values_close,
    const,
    main_module,
    resnet_block,
    transformer_block,
    tvar,
)
from tests.rng import seeded_rng


def _names(fn: Function) -> list[str]:
    return [e.op.name if isinstance(e, Call) else type(e).__name__
            for e in post_order(fn.body) if isinstance(e, (Call, Tuple, TupleGetItem))]


def groups(mod: IRModule) -> list[list[str]]:
    """The ops of each Primitive function called from @main, in evaluation order."""
    return [_names(n.op) for n in post_order(mod["main"].body)
            if isinstance(n, Call) and isinstance(n.op, Function) and n.op.attr("Primitive")]


def _loose_op_calls(mod: IRModule) -> list[str]:
    """Op calls of @main that are not inside a Primitive function."""
    skip = lambda e: isinstance(e, Function) and bool(e.attr("Primitive"))  # noqa: E731
    return [e.op.name for e in post_order(mod["main"].body, skip=skip)
            if isinstance(e, Call) and isinstance(e.op, Op)]


def test_resnet_block_groups():
    mod = T.optimize(resnet_block(), opt_level=3)
    assert groups(mod) == [
        ["nn.conv2d", "multiply", "add", "nn.relu"],  # conv + folded bn + relu
        ["nn.conv2d", "multiply", "add", "add", "nn.relu"],  # conv + bn + residual + relu
    ]
    assert _loose_op_calls(mod) == []


def test_transformer_block_groups():
    mod = T.optimize(transformer_block(), opt_level=3)
    assert groups(mod) == [
        ["nn.dense"], ["reshape"],                  # q: dense takes no injective consumer
        ["nn.dense"], ["reshape"],                  # k
        ["nn.batch_matmul", "multiply"],            # scores, scaled
        ["nn.softmax"],                             # opaque
        ["nn.dense"], ["reshape", "transpose"],     # v, an injective chain
        ["nn.batch_matmul"],
        ["reshape", "add"],                         # injective into the residual add
        ["mean"],                                   # layer_norm, expanded
        ["subtract"],
        ["multiply", "mean"],                       # elementwise into a reduction
        ["add", "sqrt", "divide", "multiply", "add"],
        ["nn.dense", "nn.bias_add", "multiply", "multiply", "erf", "add", "multiply"],  # gelu
        ["nn.dense", "add"],                        # second residual
    ]


def test_fused_blocks_compute_the_same():
    rng = seeded_rng()
    for name in ("resnet_block", "transformer_block"):
        p = PROGRAMS_BY_NAME[name]
        args = p.inputs(rng)
        fused = T.optimize(p.build(), opt_level=3)
        assert_values_close(interpret(fused, *args), interpret(p.build(), *args),
                            p.rtol, p.atol, where=name)


def test_conv_bias_relu_is_one_group():
    x, w, b = tvar("x", (1, 3, 6, 6)), tvar("w", (4, 3, 3, 3)), tvar("b", (4,))
    mod = main_module([x, w, b], nn.relu(nn.bias_add(nn.conv2d(x, w), b)))
    assert groups(T.FuseOps()(mod)) == [["nn.conv2d", "nn.bias_add", "nn.relu"]]


def test_dense_does_not_take_an_injective_consumer():
    x, w = tvar("x", (2, 4)), tvar("w", (6, 4))
    mod = main_module([x, w], X.transpose(nn.dense(x, w)))
    assert groups(T.FuseOps()(mod)) == [["nn.dense"], ["transpose"]]


def test_injective_chain_is_one_group():
    x = tvar("x", (2, 3, 4))
    e = X.reshape(X.transpose(X.reshape(x, (6, 4)), (1, 0)), (4, 3, 2))
    mod = main_module([x], Tn.exp(e))
    assert groups(T.FuseOps()(mod)) == [["reshape", "transpose", "reshape", "exp"]]


def test_reduction_takes_its_elementwise_inputs_but_not_its_consumers():
    x = tvar("x", (2, 3))
    mod = main_module([x], Tn.exp(R.sum(Tn.exp(x), axis=(1,))))
    assert groups(T.FuseOps()(mod)) == [["exp", "sum"], ["exp"]]


def test_tuple_fields_fuse_into_concatenate():
    x, y = tvar("x", (2, 3)), tvar("y", (2, 3))
    mod = main_module([x, y], X.concatenate(Tuple((Tn.exp(x), Tn.exp(y))), axis=0))
    assert groups(T.FuseOps()(mod)) == [["exp", "exp", "Tuple", "concatenate"]]


def test_result_tuple_stays_outside_groups():
    x = tvar("x", (2, 3))
    mod = T.FuseOps()(main_module([x], Tuple((Tn.exp(x), Tn.negative(x)))))
    assert groups(mod) == [["exp"], ["negative"]]
    assert isinstance(mod["main"].body, Tuple)


def test_projection_of_a_tuple_valued_op_is_fused():
    x = tvar("x", (2, 3))
    mod = main_module([x], TupleGetItem(X.split(Tn.exp(x), 3, axis=1), 1))
    assert groups(T.FuseOps()(mod)) == [["exp", "split", "TupleGetItem"]]


def test_opaque_op_is_alone():
    x = tvar("x", (2, 3))
    mod = main_module([x], Tn.exp(nn.softmax(Tn.exp(x))))
    assert groups(T.FuseOps()(mod)) == [["exp"], ["nn.softmax"], ["exp"]]


def test_diamond_fuses_at_its_post_dominator():
    x = tvar("x", (4,))
    a = Tn.exp(x)
    mod = main_module([x], Tn.add(Tn.negative(a), Tn.sqrt(a)))
    assert groups(T.FuseOps()(mod)) == [["exp", "negative", "sqrt", "add"]]


def _chain(n: int) -> IRModule:
    x = tvar("x", (3,))
    e = x
    for _ in range(n):
        e = Tn.tanh(e)
    return main_module([x], e)


def test_fusion_depth_limit_is_honoured():
    assert groups(T.FuseOps()(_chain(10))) == [["tanh"] * 10]
    limited = groups(T.FuseOps(max_depth=3)(_chain(10)))
    assert all(len(g) <= 3 for g in limited)
    assert sum(len(g) for g in limited) == 10
    assert max(len(g) for g in limited) == 3


def test_max_depth_one_means_no_fusion():
    assert groups(T.FuseOps(max_depth=1)(_chain(4))) == [["tanh"]] * 4


def test_bad_max_depth_is_rejected():
    with pytest.raises(RelayError, match="max_depth must be at least 1"):
        T.FuseOps(max_depth=0)


def test_fuse_opt_level_zero_puts_each_op_alone():
    assert groups(T.FuseOps(fuse_opt_level=0)(_chain(3))) == [["tanh"]] * 3


def test_optimize_at_level_zero_does_not_fuse():
    mod = T.optimize(resnet_block(), opt_level=0)
    assert all(len(g) == 1 for g in groups(mod))


def test_fused_function_params_are_typed_and_scalars_inlined():
    x = tvar("x", (2, 2))
    mod = T.FuseOps()(main_module([x], Tn.multiply(Tn.exp(x), const(2.0))))
    call = mod["main"].body
    assert isinstance(call, Call) and isinstance(call.op, Function)
    fn = call.op
    assert fn.attr("Primitive") == 1
    assert [str(p.type_annotation) for p in fn.params] == ["Tensor[(2, 2), float32]"]
    assert call.args[0] is mod["main"].params[0]
    assert _names(fn) == ["exp", "multiply"]  # the scalar 2.0 is inside, not a param


def test_let_bound_values_are_not_fused_across_the_let():
    x = tvar("x", (3,))
    a = Var("a")
    mod = main_module([x], Let(a, Tn.exp(x), Tn.negative(a)))
    assert groups(T.FuseOps()(mod)) == [["exp"], ["negative"]]
    assert groups(T.FuseOps()(T.ToGraphNormalForm()(mod))) == [["exp", "negative"]]


def test_fusing_twice_changes_nothing():
    once = T.FuseOps()(resnet_block())
    twice = T.FuseOps()(once)
    assert groups(twice) == groups(once)


def test_post_dominator_of_a_diamond():
    x = tvar("x", (4,))
    a = Tn.exp(x)
    top = Tn.add(Tn.negative(a), Tn.sqrt(a))
    mod = T.InferType()(main_module([x], top))
    graph = build_graph(mod["main"].body)
    tree = post_dominators(graph)
    by_name = {type(g.ref).__name__ + getattr(getattr(g.ref, "op", None), "name", ""): t
               for g, t in zip(graph, tree)}
    assert by_name["Callexp"].parent.gnode.ref is mod["main"].body  # the add
    assert by_name["Calladd"].parent is None  # the result is external


def test_run_time_shape_check_stays_outside_the_groups():
    mod = T.optimize(PROGRAMS_BY_NAME["gradual_checked"].build(), opt_level=3)
    assert _loose_op_calls(mod) == ["runtime.check_shape"]
    assert groups(mod) == [["nn.dense", "nn.relu"]]
    bad = np.ones((2, 4), "float32")
    with pytest.raises(RelayRuntimeError,
                       match=r"%x: dim 1 must be 3 \(required by nn.dense\): expected shape "
                             r"\(\?, 3\), got a value of shape \(2, 4\)"):
        interpret(mod, bad, np.ones((16, 3), "float32"))
