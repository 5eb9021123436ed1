"""The builder API: var, const, let, if_, function, tuples, refs, match, ScopeBuilder."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir as r
from relay_ir.expr import Function, If, Let, Match, RefCreate, RefRead, RefWrite, TupleGetItem
from relay_ir.interpreter import interpret
from relay_ir.ty import ANY, ShapeVar, TensorType
from tessel_errors import RelayError
from tests.rng import seeded_rng


def test_var_with_shape_dtype_or_type():
    x = r.var("x", shape=(1, 3, 224, 224))
    assert x.type_annotation == TensorType((1, 3, 224, 224), "float32")
    assert r.var("d", shape=(None, "?", "n"), dtype="int8").type_annotation == TensorType(
        (ANY, ANY, ShapeVar("n")), "int8"
    )
    assert r.var("s", dtype="bool").type_annotation == TensorType((), "bool")
    assert r.var("u").type_annotation is None
    assert r.var("t", "Tensor[(2, ?), float16]").type_annotation == TensorType((2, None), "float16")


def test_var_rejects_both_type_and_shape():
    with pytest.raises(RelayError, match="either type_annotation or shape/dtype"):
        r.var("x", TensorType(()), shape=(1,))
    with pytest.raises(RelayError, match="bad shape dimension"):
        r.var("x", shape=(-1,))


def test_const_dtypes_follow_relay_defaults():
    rng = seeded_rng()
    data = rng.standard_normal((2, 3))
    assert r.const(data).dtype == "float64"  # numpy values keep their dtype
    assert r.const(data, "float16").dtype == "float16"
    assert r.const(1.5).dtype == "float32" and r.const(2).dtype == "int32"
    assert r.const(True).dtype == "bool" and r.const([1.0, 2.0]).data.shape == (2,)
    np.testing.assert_array_equal(r.const(data).data, data)
    with pytest.raises(RelayError, match="does not fit int32"):
        r.const(2**40)
    with pytest.raises(RelayError, match="numeric or bool"):
        r.const("abc")


def test_let_if_function_tuple_and_refs_build_the_nodes():
    x = r.var("x", shape=(3,))
    y = r.var("y")
    c = r.var("c", dtype="bool")
    e = r.let(y, r.tuple_(x, x), r.if_(c, r.tuple_get_item(y, 0), r.tuple_get_item(y, 1)))
    assert isinstance(e, Let) and isinstance(e.body, If)
    assert isinstance(e.body.true_branch, TupleGetItem) and e.body.true_branch.index == 0
    assert r.tuple_([x, x]).fields == (x, x)
    f = r.function([x, c], e, attrs={"Primitive": 1})
    assert isinstance(f, Function) and f.attr("Primitive") == 1 and r.func is r.function
    cell = r.ref(x)
    assert isinstance(cell, RefCreate)
    assert isinstance(r.ref_read(cell), RefRead) and isinstance(r.ref_write(cell, x), RefWrite)
    with pytest.raises(RelayError, match="non-negative int"):
        r.tuple_get_item(y, -1)
    with pytest.raises(RelayError, match="parameters must be Vars"):
        r.function([r.const(1)], x)


def test_built_program_runs_in_the_interpreter():
    rng = seeded_rng()
    x = r.var("x", shape=(3,))
    c = r.var("c", dtype="bool")
    sb = r.ScopeBuilder()
    cell = sb.let("cell", r.ref(x))
    sb.let("w", r.ref_write(cell, r.tuple_get_item(r.tuple_(x, x), 1)))
    with sb.if_scope(c):
        sb.ret(r.ref_read(cell))
    with sb.else_scope():
        sb.ret(x)
    mod = r.IRModule.from_expr(r.function([x, c], sb.get()))
    value = rng.standard_normal(3).astype("float32")
    np.testing.assert_array_equal(interpret(mod, value, np.array(True)), value)


def test_match_builder_with_patterns():
    mod = r.IRModule().import_prelude()
    cons, nil = mod.get_constructor("Cons"), mod.get_constructor("Nil")
    lst = r.var("l")
    h = r.var("h")
    m = r.match(lst, [(r.pctor(cons, r.pvar(h), r.pwild()), h), (r.pctor(nil), r.const(0))])
    assert isinstance(m, Match) and m.complete and m.clauses[0].rhs is h
    incomplete = r.match(lst, [(r.ptuple(r.pvar("a")), r.const(0))], complete=False)
    assert not incomplete.complete and incomplete.clauses[0].lhs.patterns[0].var.name_hint == "a"
    with pytest.raises(RelayError, match="expected a Pattern"):
        r.match(lst, [(h, h)])


def test_scope_builder_builds_a_let_chain():
    x = r.var("x")
    sb = r.ScopeBuilder()
    a = sb.let("a", r.tuple_(x))
    b = sb.let("b", r.tuple_get_item(a, 0))
    sb.ret(b)
    e = sb.get()
    assert isinstance(e, Let) and e.var is a and e.body.var is b and e.body.body is b


def test_scope_builder_misuse_is_reported():
    sb = r.ScopeBuilder()
    with pytest.raises(RelayError, match="no ret"):
        sb.get()
    sb.ret(r.const(1))
    with pytest.raises(RelayError, match="ret\\(\\) called twice"):
        sb.ret(r.const(2))
    sb2 = r.ScopeBuilder()
    with pytest.raises(RelayError, match="else_scope\\(\\) must follow"):
        with sb2.else_scope():
            pass
    sb3 = r.ScopeBuilder()
    with sb3.if_scope(r.const(True)):
        sb3.ret(r.const(1))
    with pytest.raises(RelayError, match="needs an else_scope"):
        sb3.let("z", r.const(0))
