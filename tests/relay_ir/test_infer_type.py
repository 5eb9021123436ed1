"""Type inference: successful cases, gradual refinement, polymorphism, ADTs, recursion."""

from __future__ import annotations

import relay_ir
from relay_ir.expr import Call, Function, Let, Match, PatternConstructor, PatternVar, Var
from relay_ir.ty import ANY, FuncType, ShapeVar, TensorType, TupleType, TypeCall
from relay_ir.typing import infer_expr_type, infer_type
from relay_ir.visitor import post_order


def main_type(text: str, prelude: bool = False) -> FuncType:
    """The checked type of @main after inference."""
    return infer(text, prelude)["main"].checked_type


def infer(text: str, prelude: bool = False) -> relay_ir.IRModule:
    """Parse (with the prelude if asked) and infer."""
    init = relay_ir.IRModule().import_prelude() if prelude else None
    return infer_type(relay_ir.parse(text, init_module=init))


def T(shape: tuple, dtype: str = "float32") -> TensorType:  # noqa: N802
    return TensorType(shape, dtype)


def test_simple_function_type() -> None:
    t = main_type("def @main(%x: Tensor[(2, 3), float32]) { nn.relu(add(%x, %x)) }")
    assert t == FuncType((T((2, 3)),), T((2, 3)))


def test_every_node_gets_a_checked_type_and_sharing_survives() -> None:
    x = relay_ir.var("x", shape=(2, 3))
    shared = relay_ir.exp(x)
    body = relay_ir.add(shared, shared)
    mod = infer_type(relay_ir.IRModule.from_expr(Function((x,), body)))
    fn = mod["main"]
    assert all(n.checked_type is not None for n in post_order(fn)
               if not isinstance(n, relay_ir.Constructor))
    assert fn.body.args[0] is fn.body.args[1]  # one node, still shared
    assert fn.body.args[0].args[0] is fn.params[0]


def test_dense_with_gradual_batch() -> None:
    mod = infer("""def @main(%x: Tensor[(?, 3), float32], %w: Tensor[(16, 3), float32]) {
      nn.dense(%x, %w)
    }""")
    assert mod["main"].checked_type.ret_type == T((None, 16))
    assert mod.refinements == []
    assert mod.type_report.runtime_checks == []


def test_dense_refines_unknown_input_dim_and_reports_it() -> None:
    mod = infer("""def @main(%x: Tensor[(?, ?), float32], %w: Tensor[(16, 3), float32]) {
      nn.dense(%x, %w)
    }""")
    assert mod["main"].checked_type.arg_types[0] == T((None, 3))
    assert mod.refinements == ["%x: dim 1 refined from ? to 3 by nn.dense at line 2"]
    assert mod.type_report.refinements == mod.refinements


def test_reshape_with_minus_one_keeps_unknown_batch() -> None:
    t = main_type("""def @main(%x: Tensor[(?, 6), float32]) {
      reshape(%x, newshape=[-1, 3])
    }""")
    assert t.ret_type == T((None, 3))


def test_reshape_refines_its_input() -> None:
    mod = infer("def @main(%x: Tensor[(2, ?), float32]) { reshape(%x, newshape=[12]) }")
    assert mod["main"].checked_type.arg_types[0] == T((2, 6))
    assert mod.refinements == ["%x: dim 1 refined from ? to 6 by reshape at line 1"]


def test_concatenate_of_unknown_dims() -> None:
    mod = infer("""def @main(%a: Tensor[(?, 3), float32], %b: Tensor[(2, ?), float32]) {
      concatenate((%a, %b), axis=0)
    }""")
    t = mod["main"].checked_type
    assert t.ret_type == T((None, 3))
    assert t.arg_types[1] == T((2, 3))
    assert mod.refinements == ["%b: dim 1 refined from ? to 3 by concatenate at line 2"]


def test_refinement_flows_through_later_uses() -> None:
    # %y's unknown dim 1 is fixed by the dense *after* the relu that produced it
    mod = infer("""def @main(%x: Tensor[(4, ?), float32], %w: Tensor[(8, 5), float32]) {
      let %y = nn.relu(%x);
      nn.dense(%y, %w)
    }""")
    fn = mod["main"]
    assert fn.checked_type.arg_types[0] == T((4, 5))
    relu = next(n for n in post_order(fn) if isinstance(n, Call) and n.op.name == "nn.relu")
    assert relu.checked_type == T((4, 5))


def test_symbolic_dims_flow_through() -> None:
    t = main_type("""def @main(%x: Tensor[(n, 3), float32], %w: Tensor[(16, 3), float32]) {
      nn.softmax(nn.dense(%x, %w))
    }""")
    assert t.ret_type == TensorType((ShapeVar("n"), 16))


def test_split_and_tuple_get_item() -> None:
    t = main_type("""def @main(%x: Tensor[(6, 4), float32]) {
      let %parts = split(%x, indices_or_sections=3, axis=0);
      (%parts.0, %parts.2)
    }""")
    assert t.ret_type == TupleType((T((2, 4)), T((2, 4))))


def test_batch_norm_tuple_projection() -> None:
    t = main_type("""def @main(%x: Tensor[(1, 3, 4, 4), float32], %g: Tensor[(3,), float32],
                              %b: Tensor[(3,), float32], %m: Tensor[(3,), float32],
                              %v: Tensor[(3,), float32]) {
      nn.batch_norm(%x, %g, %b, %m, %v).0
    }""")
    assert t.ret_type == T((1, 3, 4, 4))


def test_let_annotation_and_if() -> None:
    t = main_type("""def @main(%x: Tensor[(3,), float32], %y: Tensor[(3,), float32]) {
      let %c: bool = greater(sum(%x), sum(%y));
      if (%c) { %x } else { negative(%y) }
    }""")
    assert t.ret_type == T((3,))


def test_local_closure_parameter_inferred_from_its_call() -> None:
    mod = infer("""def @main(%x: Tensor[(2, 2), float32]) {
      let %f = fn (%a) { multiply(%a, %a) };
      %f(%x)
    }""")
    fn = mod["main"]
    closure = fn.body.value
    assert closure.checked_type == FuncType((T((2, 2)),), T((2, 2)))
    assert closure.params[0].checked_type == T((2, 2))


def test_polymorphic_map_over_a_list_of_tensors() -> None:
    mod = infer("""def @main(%a: Tensor[(2, 3), float32], %b: Tensor[(2, 3), float32]) {
      @map(fn (%t: Tensor[(2, 3), float32]) { sum(%t, axis=[1]) }, Cons(%a, Cons(%b, Nil)))
    }""", prelude=True)
    list_gtv = mod.get_global_type_var("List")
    assert mod["main"].checked_type.ret_type == TypeCall(list_gtv, (T((2,)),))
    map_t = mod["map"].checked_type
    assert [p.name for p in map_t.type_params] == ["A", "B"]


def test_polymorphic_function_used_at_two_types() -> None:
    t = main_type("""def @main(%x: Tensor[(2,), float32], %i: int32) {
      (@id(%x), @id(%i), @length(Cons(%i, Nil)))
    }""", prelude=True)
    assert t.ret_type == TupleType((T((2,)), T((), "int32"), T((), "int32")))


def test_recursive_global_with_declared_signature() -> None:
    t = main_type("""
    def @loop(%i: int32, %acc: Tensor[(3,), float32]) -> Tensor[(3,), float32] {
      if (less(%i, 1)) { %acc } else { @loop(subtract(%i, 1), multiply(%acc, 2f)) }
    }
    def @main(%x: Tensor[(3,), float32]) { @loop(5, %x) }""")
    assert t.ret_type == T((3,))


def test_recursive_global_without_return_annotation() -> None:
    mod = infer("""
    def @count(%i: int32, %acc: Tensor[(2,), float32]) {
      if (less(%i, 1)) { %acc } else { @count(subtract(%i, 1), add(%acc, 1f)) }
    }
    def @main(%x: Tensor[(2,), float32]) { @count(3, %x) }""")
    assert mod["count"].checked_type == FuncType((T((), "int32"), T((2,))), T((2,)))


def test_mutually_recursive_globals() -> None:
    mod = infer("""
    def @even(%n: int32) { if (equal(%n, 0)) { True } else { @odd(subtract(%n, 1)) } }
    def @odd(%n: int32) { if (equal(%n, 0)) { False } else { @even(subtract(%n, 1)) } }
    def @main() { @even(4) }""")
    assert mod["even"].checked_type.ret_type == T((), "bool")
    assert mod["odd"].checked_type.ret_type == T((), "bool")


def test_adt_match_types_pattern_variables() -> None:
    mod = infer("""def @main(%l: List[Tensor[(4,), float32]]) {
      match (%l) {
        Cons(%h, %rest) => add(%h, @sum_all(%rest)),
        Nil => zeros(shape=[4], dtype="float32"),
      }
    }
    def @sum_all(%xs: List[Tensor[(4,), float32]]) -> Tensor[(4,), float32] {
      match (%xs) { Cons(%y, %ys) => add(%y, @sum_all(%ys)), Nil => zeros(shape=[4]) }
    }""", prelude=True)
    fn = mod["main"]
    assert isinstance(fn.body, Match)
    lhs = fn.body.clauses[0].lhs
    assert isinstance(lhs, PatternConstructor)
    h, rest = (p.var for p in lhs.patterns if isinstance(p, PatternVar))
    assert h.checked_type == T((4,))
    assert rest.checked_type == TypeCall(mod.get_global_type_var("List"), (T((4,)),))
    assert fn.checked_type.ret_type == T((4,))


def test_user_defined_adt_with_tuple_pattern() -> None:
    mod = infer("""
    type Pair[A, B] { MkPair(A, B) }
    def @main(%x: Tensor[(2,), float32], %i: int32) {
      match (MkPair((%x, %i), %i)) { MkPair((%a, _), %b) => (%a, %b) }
    }""")
    assert mod["main"].checked_type.ret_type == TupleType((T((2,)), T((), "int32")))


def test_refs() -> None:
    t = main_type("""def @main(%x: Tensor[(3,), float32]) {
      let %r = ref(%x);
      let %u = ref_write(%r, add(ref_read(%r), %x));
      ref_read(%r)
    }""")
    assert t.ret_type == T((3,))


def test_infer_expr_type_on_builder_expressions() -> None:
    x = relay_ir.var("x", shape=(None, 8))
    w = relay_ir.var("w", shape=(4, 8))
    y = relay_ir.nn.dense(x, w)
    assert infer_expr_type(relay_ir.mean(y, axis=1)) == T((None,))
    x2 = relay_ir.var("x2", shape=(1, 3, 8, 8))
    k = relay_ir.var("k", shape=(6, 3, 3, 3))
    conv = relay_ir.nn.conv2d(x2, k, strides=(2, 2), padding=(1, 1))
    pooled = relay_ir.nn.max_pool2d(conv, pool_size=(2, 2), strides=(2, 2))
    assert infer_expr_type(pooled) == T((1, 6, 2, 2))


def test_long_let_chain_does_not_hit_the_recursion_limit() -> None:
    x = Var("x", T((2,)))
    body = x
    lets = []
    for i in range(10_000):
        v = Var(f"v{i}")
        lets.append((v, relay_ir.add(body, body)))
        body = v
    for v, value in reversed(lets):
        body = Let(v, value, body)
    mod = infer_type(relay_ir.IRModule.from_expr(Function((x,), body)))
    assert mod["main"].checked_type.ret_type == T((2,))


def test_inference_is_idempotent() -> None:
    mod = infer("""def @main(%x: Tensor[(?, ?), float32], %w: Tensor[(16, 3), float32]) {
      nn.dense(%x, %w)
    }""")
    again = infer_type(mod)
    assert again.refinements == [] and again.type_report.runtime_checks == []
    assert again["main"].checked_type == mod["main"].checked_type
    assert relay_ir.astext(again) == relay_ir.astext(mod)


def test_unknown_dims_stay_unknown_when_nothing_fixes_them() -> None:
    t = main_type("def @main(%x: Tensor[(?, 4), float32]) { nn.relu(%x) }")
    assert t == FuncType((T((ANY, 4)),), T((ANY, 4)))


def test_explicit_type_arguments_instantiate_a_polymorphic_call() -> None:
    import pytest

    from tessel_errors import RelayTypeError

    pre = relay_ir.IRModule().import_prelude()
    x = relay_ir.var("x", shape=(2,))
    ident = pre.get_global_var("id")

    def main_with(targs: tuple) -> relay_ir.IRModule:
        return pre.with_function("main", Function((x,), Call(ident, (x,), type_args=targs)))

    assert infer_type(main_with((T((2,)),)))["main"].checked_type.ret_type == T((2,))
    with pytest.raises(RelayTypeError, match=r"the call of @id: argument 0 \(%x, %x\) has the "
                       r"wrong type: dim 0: 2 vs 3"):
        infer_type(main_with((T((3,)),)))
