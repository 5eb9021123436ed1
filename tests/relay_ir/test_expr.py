"""Expression nodes and IRModule: immutability, identity, spans, attrs, module operations."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import relay_ir as r
from relay_ir.expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    Tuple,
    Var,
    pattern_vars,
)
from relay_ir.module import IRModule
from relay_ir.op.registry import get_op
from relay_ir.span import Span
from relay_ir.ty import TensorType
from tessel_errors import RelayError


def test_nodes_are_immutable():
    x = Var("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        x.name_hint = "y"


def test_nodes_compare_by_identity():
    a, b = Var("x"), Var("x")
    assert a != b and a == a
    assert len({a, b, a}) == 2
    c1, c2 = Constant(np.float32(1)), Constant(np.float32(1))
    assert c1 != c2


def test_span_and_checked_type_are_keyword_only_trailing_fields():
    span = Span("f.rly", 1, 2, 1, 5)
    x = Var("x", TensorType((3,)), span=span, checked_type=TensorType((3,)))
    assert x.span == span and x.checked_type == TensorType((3,))
    call = Call(get_op("nn.relu"), [x], span=span)
    assert call.args == (x,) and call.attrs is None and call.type_args == ()
    assert "span" not in repr(x)


def test_replace_keeps_children_shared():
    x = Var("x")
    inner = Call(get_op("nn.relu"), (x,))
    t = Tuple((inner, inner))
    t2 = dataclasses.replace(t, checked_type=TensorType(()))
    assert t2 is not t and t2.fields[0] is inner and t2.fields[1] is inner


def test_constant_coerces_to_numpy():
    c = Constant([1, 2, 3])
    assert isinstance(c.data, np.ndarray) and c.tensor_type == TensorType((3,), c.dtype)


def test_function_attrs():
    x = Var("x")
    f = Function([x], x, attrs={"Primitive": 1})
    assert f.attrs == (("Primitive", 1),) and f.attr("Primitive") == 1
    assert f.attr("Inline") is None and f.attr("Inline", 0) == 0
    g = f.with_attr("Primitive", 0).with_attr("Inline", 1)
    assert g.attr("Primitive") == 0 and g.attr("Inline") == 1 and f.attr("Primitive") == 1
    assert g.body is x


def test_pattern_vars_left_to_right():
    mod = IRModule().import_prelude()
    cons = mod.get_constructor("Cons")
    h, t, y = Var("h"), Var("t"), Var("y")
    p = PatternTuple((PatternConstructor(cons, (PatternVar(h), PatternVar(t))), PatternWildcard(),
                      PatternVar(y)))
    assert pattern_vars(p) == [h, t, y]


def test_module_lookup_by_name_and_global_var():
    mod = r.parse("def @main(%x) { @f(%x) }\ndef @f(%y) { %y }")
    gv = mod.get_global_var("f")
    assert mod["f"] is mod[gv] and "f" in mod and gv in mod and len(mod) == 2
    with pytest.raises(RelayError, match=r"no global function @g; it has \['@f', '@main'\]"):
        mod.get_global_var("g")
    with pytest.raises(RelayError, match="no global function @f"):
        _ = mod[GlobalVar("f")]  # a different GlobalVar with the same name


def test_with_function_returns_a_new_module_reusing_the_global_var():
    mod = r.parse("def @main(%x) { %x }")
    gv = mod.get_global_var("main")
    y = Var("y")
    new = mod.with_function("main", Function((y,), y))
    assert new.get_global_var("main") is gv
    assert mod["main"].params[0].name_hint == "x" and new["main"].params[0] is y
    other = new.with_function("g", Function((), Tuple(())))
    assert other.has_function("g") and not new.has_function("g")
    with pytest.raises(RelayError, match="already has a different @main"):
        mod.with_function(GlobalVar("main"), Function((), Tuple(())))
    with pytest.raises(RelayError, match="a global must be a Function"):
        mod.with_function("h", y)


def test_duplicate_global_names_are_an_error():
    with pytest.raises(RelayError, match=r"\['f'\] more than once"):
        IRModule({GlobalVar("f"): Function((), Tuple(())), GlobalVar("f"): Function((), Tuple(()))})


def test_from_expr_wraps_free_vars_as_params():
    a, b = Var("a"), Var("b")
    mod = IRModule.from_expr(Tuple((b, a, b)))
    assert mod["main"].params == (b, a)
    fn = Function((a,), a)
    assert IRModule.from_expr(fn)["main"] is fn


def test_module_constructor_and_type_lookups():
    mod = IRModule().import_prelude()
    assert mod.get_constructor("Rose").belong_to == mod.get_global_type_var("Tree")
    with pytest.raises(RelayError, match="no constructor 'Leaf'"):
        mod.get_constructor("Leaf")
    with pytest.raises(RelayError, match="no type definition 'Maybe'"):
        mod.get_global_type_var("Maybe")


def test_module_copy_keeps_extra_attributes():
    mod = IRModule()
    mod.refinements = ["x"]
    assert mod.copy().refinements == ["x"]
