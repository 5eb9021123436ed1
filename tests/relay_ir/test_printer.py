"""The printer: golden text, graph form with shared nodes, literals, metadata, attrs."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import numpy as np
import pytest

import relay_ir as r
from relay_ir.expr import Call, Constant, Function, Let, Tuple, Var
from relay_ir.op.registry import get_op
from relay_ir.printer import scalar_literal
from relay_ir.ty import TensorType
from tessel_errors import RelayError
from tests.rng import seeded_rng


def test_golden_conv_block():
    x = r.var("x", shape=(1, 3, "h", None))
    w = r.var("w", shape=(8, 3, 3, 3))
    conv = get_op("nn.conv2d")
    y = Call(conv, (x, w), conv.make_attrs({"strides": (2, 2), "padding": (1, 1)}))
    body = Call(get_op("add"), (Call(get_op("nn.relu"), (y,)), r.const(1.0)))
    mod = r.IRModule.from_expr(r.function([x, w], body))
    assert r.astext(mod) == textwrap.dedent(
        """\
        #[version = "0.0.5"]
        def @main(%x: Tensor[(1, 3, h, ?), float32], %w: Tensor[(8, 3, 3, 3), float32]) {
          %0 = nn.conv2d(%x, %w, strides=[2, 2], padding=[1, 1]);
          %1 = nn.relu(%0);
          add(%1, 1.0f)
        }
        """
    )


def test_golden_prelude_style_function():
    mod = r.IRModule().import_prelude()
    text = r.astext(mod)
    assert textwrap.dedent(
        """\
        def @length[A](%xs: List[A]) -> int32 {
          match (%xs) {
            Cons(_, %rest) => {
              %0 = @length(%rest);
              add(1, %0)
            },
            Nil => 0,
          }
        }"""
    ) in text
    assert "type List[A] {\n  Cons(A, List[A]),\n  Nil,\n}" in text


def test_shared_node_is_printed_once():
    x = Var("x")
    shared = Call(get_op("nn.relu"), (x,))
    text = r.astext(Tuple((shared, shared)))
    assert text == "%0 = nn.relu(%x);\n(%0, %0)"


def test_unshared_tuples_and_projections_stay_inline():
    x = Var("x")
    assert r.astext(r.tuple_get_item(Tuple((x, x)), 1)) == "(%x, %x).1"


def test_let_chain_prints_one_binding_per_line():
    x, y = Var("x"), Var("y", TensorType((2,), "int8"))
    e = Let(y, Call(get_op("nn.relu"), (x,)), Tuple((y,)))
    assert r.astext(e) == "let %y: Tensor[(2,), int8] = nn.relu(%x);\n(%y,)"


def test_distinct_vars_with_one_name_get_distinct_names():
    a1, a2 = Var("a"), Var("a")
    text = r.astext(Function((a1, a2), Tuple((a2, a1))))
    assert "fn (%a, %a_1)" in text and "(%a_1, %a)" in text


def test_odd_names_are_sanitized():
    v = Var("0weird name")
    assert r.astext(Function((v,), v)).startswith("fn (%v0weird_name)")


@pytest.mark.parametrize(
    "value, text",
    [
        (np.array(3, "int32"), "3"),
        (np.array(-3, "int64"), "-3i64"),
        (np.array(200, "uint8"), "200u8"),
        (np.array(0.5, "float32"), "0.5f"),
        (np.array(0.1, "float64"), "0.1f64"),
        (np.array(1.5, "float16"), "1.5f16"),
        (np.array(-0.0, "float32"), "-0.0f"),
        (np.array(True), "True"),
    ],
)
def test_scalar_literals(value, text):
    assert scalar_literal(value) == text


def test_non_finite_and_non_scalar_constants_have_no_literal():
    assert scalar_literal(np.array(np.nan, "float32")) is None
    assert scalar_literal(np.array([1.0], "float32")) is None


def test_random_float_scalars_print_to_the_same_bits():
    rng = seeded_rng()
    for dtype in ("float16", "float32", "float64"):
        with np.errstate(over="ignore"):
            scale = 10.0 ** rng.integers(-30, 30, 200)
            values = (rng.standard_normal(200) * scale).astype(dtype)
        for v in values:
            if not np.isfinite(v):
                continue
            c = r.parse_expr(scalar_literal(np.array(v)))
            assert c.data.dtype == dtype and c.data.tobytes() == np.array(v).tobytes()


def test_array_constants_go_to_metadata():
    rng = seeded_rng()
    data = rng.standard_normal((2, 2)).astype("float32")
    c = Constant(data)
    text = r.astext(Tuple((c, c, Constant(np.array(np.inf, "float32")))))
    first = text.split("\n")[0]
    assert first == "(meta[relay.Constant][0], meta[relay.Constant][0], meta[relay.Constant][1])"
    assert "#[metadata]\nrelay.Constant 0 float32 (2,2) " in text
    assert "relay.Constant 1 float32 () " in text


def test_default_attrs_are_omitted():
    x, w = Var("x"), Var("w")
    conv = get_op("nn.conv2d")
    assert r.astext(Call(conv, (x, w), conv.make_attrs({}))) == "nn.conv2d(%x, %w)"


def test_function_attrs_and_type_params():
    a = r.TypeVar("A")
    x = Var("x", a)
    fn = r.function([x], x, ret_type=a, type_params=[a], attrs={"Primitive": 1, "Name": "f"})
    assert r.astext(fn) == 'fn [A](%x: A, Primitive=1, Name="f") -> A {\n  %x\n}'


def test_unprintable_attribute_is_an_error():
    x = Var("x")
    fn = r.function([x], x, attrs={"Weird": object()})
    with pytest.raises(RelayError, match="cannot print attribute value"):
        r.astext(fn)


def test_show_types_adds_type_comments():
    x = Var("x")
    y = Var("y")
    value = replace(Call(get_op("nn.relu"), (x,)), checked_type=TensorType((3,)))
    text = r.astext(Let(y, value, y), show_types=True)
    assert text.split("\n")[0] == "let %y = nn.relu(%x); /* ty=Tensor[(3,), float32] */"


def test_free_var_types_appear_at_first_use_in_expressions():
    x = r.var("x", shape=(3,))
    assert r.astext(Tuple((x, x))) == "(%x: Tensor[(3,), float32], %x)"


def test_str_of_nodes_types_and_modules():
    x = r.var("x", shape=(None, 3))
    assert str(x.type_annotation) == "Tensor[(?, 3), float32]"
    assert str(Tuple((x,))) == "(%x: Tensor[(?, 3), float32],)"
    assert str(r.IRModule.from_expr(x)).startswith('#[version = "0.0.5"]\ndef @main(%x:')


def test_types_print_in_relay_syntax():
    assert str(r.TupleType((TensorType((), "int32"),))) == "(int32,)"
    assert str(r.FuncType((r.TypeVar("A"),), r.TypeVar("A"), (r.TypeVar("A"),))) == "fn [A](A) -> A"
    assert str(r.RefType(TensorType((2,)))) == "Ref[Tensor[(2,), float32]]"
    gtv = r.GlobalTypeVar("List")
    assert str(r.TypeCall(gtv, ())) == "List[]" and str(gtv) == "List"


def test_deep_dataflow_chain_prints_without_recursion_error():
    x = Var("x")
    e = x
    for _ in range(5000):
        e = Call(get_op("nn.relu"), (e,))
    text = r.astext(e)
    assert text.count("\n") == 4999 and text.endswith("nn.relu(%4998)")


def test_a_var_bound_twice_prints_as_two_bindings():
    x = Var("x")
    one = Constant(np.int32(1))
    e = Let(x, one, Let(x, Tuple((x,)), x))
    text = r.astext(e)
    # a let var is in scope in its own value (recursive closures), so the inner use is %x_1
    assert text == "let %x = 1;\nlet %x_1 = (%x_1,);\n%x_1"
    assert r.astext(r.parse_expr(text)) == text
