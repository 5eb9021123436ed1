"""The Relay text parser: every construct, spans, and errors with line, column and caret."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir as r
from relay_ir.expr import (
    Call,
    Constant,
    Constructor,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from relay_ir.op.registry import get_op
from relay_ir.ty import ANY, FuncType, RefType, ShapeVar, TensorType, TupleType, TypeCall, TypeVar
from tessel_errors import ParseError
from tests.rng import seeded_rng

LIST = "type List[A] { Cons(A, List[A]), Nil }\n"


def main_body(text: str, prefix: str = ""):
    return r.parse(prefix + text)["main"].body


def test_def_with_typed_params_and_return_type():
    mod = r.parse(
        "def @main(%x: Tensor[(1, 3, ?), float32], %n: int32) -> Tensor[(1, 3, ?), float32] {"
        " %x }"
    )
    fn = mod["main"]
    assert isinstance(fn, Function)
    assert fn.params[0].type_annotation == TensorType((1, 3, ANY), "float32")
    assert fn.params[1].type_annotation == TensorType((), "int32")
    assert fn.ret_type == TensorType((1, 3, None))
    assert fn.body is fn.params[0]


def test_symbolic_dims_are_shape_vars():
    fn = r.parse("def @main(%x: Tensor[(n, 3, m), int8]) { %x }")["main"]
    assert fn.params[0].type_annotation.shape == (ShapeVar("n"), 3, ShapeVar("m"))


def test_let_chain_and_scoping():
    body = main_body("def @main(%x) { let %y = %x; let %z: float32 = %y; (%y, %z) }")
    assert isinstance(body, Let) and isinstance(body.body, Let)
    y, z = body.var, body.body.var
    assert body.value.name_hint == "x"
    assert body.body.value is y
    assert z.type_annotation == TensorType((), "float32")
    assert body.body.body.fields == (y, z)


def test_let_var_is_in_scope_in_its_own_value():
    body = main_body("def @main() { let %f = fn (%i) { %f(%i) }; %f }")
    assert body.value.body.op is body.var


def test_if_else_and_else_if():
    body = main_body(
        "def @main(%c: bool, %d: bool) { if (%c) { 1 } else if (%d) { 2 } else { 3 } }"
    )
    assert isinstance(body, If) and isinstance(body.false_branch, If)
    assert int(body.false_branch.false_branch.data) == 3


def test_match_with_all_pattern_kinds():
    mod = r.parse(
        LIST + "def @main(%l: List[int32]) {"
        " match ((%l, %l)) { (Cons(%h, _), Nil) => %h, (_, %other) => 0 } }"
    )
    m = mod["main"].body
    assert isinstance(m, Match) and m.complete
    lhs = m.clauses[0].lhs
    assert isinstance(lhs, PatternTuple)
    cons = lhs.patterns[0]
    assert isinstance(cons, PatternConstructor) and cons.constructor.name_hint == "Cons"
    assert isinstance(cons.patterns[0], PatternVar)
    assert isinstance(cons.patterns[1], PatternWildcard)
    assert m.clauses[0].rhs is cons.patterns[0].var
    assert isinstance(m.clauses[1].lhs.patterns[1], PatternVar)


def test_incomplete_match_is_marked():
    mod = r.parse(LIST + "def @main(%l: List[int32]) { match? (%l) { Cons(%h, _) => %h } }")
    assert mod["main"].body.complete is False


def test_match_on_a_bare_tuple_scrutinee():
    mod = r.parse(LIST + "def @main(%a: List[int32], %b) { match (%a, %b) { _ => 0 } }")
    assert isinstance(mod["main"].body.data, Tuple)


def test_type_definition_builds_type_data_and_constructors():
    mod = r.parse(LIST + "type Pair[A, B] { MkPair(A, B) }")
    td = mod[mod.get_global_type_var("List")]
    assert [c.name_hint for c in td.constructors] == ["Cons", "Nil"]
    cons = td.constructors[0]
    assert cons.tag == 0 and td.constructors[1].tag == 1
    assert cons.inputs == (TypeVar("A"), TypeCall(td.header, (TypeVar("A"),)))
    assert mod.get_constructor("MkPair").belong_to.name == "Pair"


def test_types_used_before_their_definition():
    mod = r.parse("def @main(%l: List[int32]) { Nil }\n" + LIST)
    assert mod["main"].body.op.name_hint == "Nil"


def test_nullary_constructor_is_a_call_and_others_are_constructors():
    mod = r.parse(LIST + "def @main() { (Nil, Nil(), Cons, Cons(1, Nil)) }")
    nil, nil2, cons, cons1 = mod["main"].body.fields
    assert isinstance(nil, Call) and nil.args == () and nil.op.name_hint == "Nil"
    assert isinstance(nil2, Call) and nil2.op is nil.op
    assert isinstance(cons, Constructor)
    assert isinstance(cons1, Call) and cons1.op is cons


def test_polymorphic_function_expression():
    body = main_body("def @main() { fn [A](%x: A) -> A { %x } }")
    a = TypeVar("A")
    assert body.type_params == (a,)
    assert body.params[0].type_annotation == a and body.ret_type == a


def test_function_attrs_after_params():
    body = main_body('def @main() { fn (%x, Primitive=1, Name="f") { %x } }')
    assert body.attr("Primitive") == 1 and body.attr("Name") == "f"


def test_tuples_and_projections():
    body = main_body("def @main(%a, %b) { ((), (%a,), (%a, %b).1, %a.0.2) }")
    empty, one, proj, nested = body.fields
    assert empty.fields == () and len(one.fields) == 1
    assert isinstance(proj, TupleGetItem) and proj.index == 1
    assert isinstance(nested, TupleGetItem) and nested.index == 2
    assert nested.tuple_value.index == 0


def test_parenthesized_expression_is_not_a_tuple():
    body = main_body("def @main(%a) { (%a) }")
    assert isinstance(body, Var)


def test_refs():
    body = main_body("def @main(%x) { let %r = ref(%x); let %u = ref_write(%r, %x); ref_read(%r) }")
    assert isinstance(body.value, RefCreate)
    assert isinstance(body.body.value, RefWrite)
    assert isinstance(body.body.body, RefRead) and body.body.body.ref is body.var


def test_op_call_with_keyword_attrs():
    body = main_body(
        "def @main(%x, %w) { nn.conv2d(%x, %w, strides=[2, 2], padding=[1, 1], "
        'data_layout="NCHW") }'
    )
    assert body.op is get_op("nn.conv2d")
    assert body.attrs.strides == (2, 2) and body.attrs.padding == (1, 1)


def test_op_without_attrs_gets_its_default_attrs():
    body = main_body("def @main(%x, %w) { nn.conv2d(%x, %w) }")
    assert body.attrs == get_op("nn.conv2d").make_attrs({})


def test_global_calls_and_recursion():
    mod = r.parse("def @f(%x) { @g(%x) }\ndef @g(%y) { @f(%y) }")
    f, g = mod.get_global_var("f"), mod.get_global_var("g")
    assert mod["f"].body.op is g and mod["g"].body.op is f
    assert isinstance(mod["f"].body.op, GlobalVar)


def test_call_of_a_called_expression():
    body = main_body("def @main(%f, %x) { %f(%x)(%x) }")
    assert isinstance(body.op, Call) and body.op.op.name_hint == "f"


@pytest.mark.parametrize(
    "literal, dtype, value",
    [
        ("1", "int32", 1),
        ("-7", "int32", -7),
        ("2i64", "int64", 2),
        ("3u8", "uint8", 3),
        ("4i16", "int16", 4),
        ("1.5", "float32", 1.5),
        ("1f", "float32", 1.0),
        ("2.5f64", "float64", 2.5),
        ("0.5f16", "float16", 0.5),
        ("1e-3f64", "float64", 1e-3),
        ("True", "bool", True),
        ("False", "bool", False),
    ],
)
def test_scalar_literals(literal, dtype, value):
    c = main_body(f"def @main() {{ {literal} }}")
    assert isinstance(c, Constant) and c.dtype == dtype and c.data.shape == ()
    assert c.data == np.array(value, dtype=dtype)


def test_metadata_constants_round_trip_exactly_and_share():
    rng = seeded_rng()
    data = rng.standard_normal((2, 3)).astype("float32")
    import base64

    text = (
        "def @main() { (meta[relay.Constant][0], meta[relay.Constant][0]) }\n"
        "#[metadata]\n"
        f"relay.Constant 0 float32 (2,3) {base64.b64encode(data.tobytes()).decode()}\n"
    )
    a, b = main_body(text).fields
    assert a is b
    assert a.data.dtype == np.float32 and np.array_equal(a.data, data)


def test_comments_and_version_header_are_ignored():
    mod = r.parse(
        '#[version = "0.0.5"]\n// a comment\ndef @main(/* inline */ %x) {\n'
        "  /* nested /* block */ comment */ %x // trailing\n}\n"
    )
    assert mod["main"].body is mod["main"].params[0]


def test_graph_bindings_are_shared_nodes():
    body = main_body("def @main(%x) { %0 = nn.relu(%x); %1 = add(%0, %0); (%1, %0) }")
    add, relu = body.fields
    assert add.args[0] is relu and add.args[1] is relu


def test_type_syntax():
    parse_type = r.parse_type
    assert parse_type("(int32, float32)") == TupleType(
        (TensorType((), "int32"), TensorType((), "float32"))
    )
    assert parse_type("(int32,)") == TupleType((TensorType((), "int32"),))
    assert parse_type("()") == TupleType(())
    assert parse_type("(int32)") == TensorType((), "int32")
    assert parse_type("Ref[float32]") == RefType(TensorType(()))
    ft = parse_type("fn [A](A, Tensor[(?,), int8]) -> A")
    assert isinstance(ft, FuncType) and ft.type_params == (TypeVar("A"),)
    assert ft.arg_types[1] == TensorType((ANY,), "int8")


def test_spans_point_into_the_source():
    text = "def @main(%x) {\n  let %y = nn.relu(%x);\n  %y\n}"
    body = r.parse(text, source_name="m.rly")["main"].body
    span = body.value.span
    assert (span.file, span.line, span.col) == ("m.rly", 2, 12)
    assert span.caret().endswith("^" * len("nn.relu(%x)"))


def test_parse_expr_makes_free_vars_with_optional_types():
    e = r.parse_expr("add(%a: Tensor[(3,), float32], %a)")
    a = e.args[0]
    assert e.args[1] is a and a.type_annotation == TensorType((3,))


def test_parse_with_init_module_sees_the_prelude():
    prelude = r.IRModule().import_prelude()
    mod = r.parse("def @main(%l: List[int32]) { @length(%l) }", init_module=prelude)
    assert mod.has_function("map") and mod["main"].body.op is prelude.get_global_var("length")


def test_ten_thousand_lets_parse():
    lines = ["def @main(%x) {"] + [f"  let %v{i} = %x;" for i in range(10_000)] + ["  %v9999", "}"]
    body = r.parse("\n".join(lines))["main"].body
    n = 0
    while isinstance(body, Let):
        body, n = body.body, n + 1
    assert n == 10_000


# --- errors --------------------------------------------------------------------------------


def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        r.parse(text)
    return info.value


def test_error_has_line_column_and_caret_under_the_spot():
    err = parse_error("def @main(%x) {\n  add(%x, 1;\n}")
    assert (err.line, err.col) == (2, 12)
    lines = str(err).split("\n")
    assert lines[0] == "<string>:2:12: expected ',' between call arguments, got ';'"
    assert lines[1] == "    2 |   add(%x, 1;"
    assert lines[2] == "      |            ^"


def test_unbound_variable_suggests_a_near_name():
    err = parse_error("def @main(%input) {\n  nn.relu(%inptu)\n}")
    assert (err.line, err.col) == (2, 11)
    assert "unbound variable %inptu; did you mean %input?" in str(err)
    assert str(err).split("\n")[-1] == "      | " + " " * 10 + "^" * len("%inptu")


def test_unknown_op_names_near_ops():
    err = parse_error("def @main(%x) { nn.rleu(%x) }")
    assert "unknown op 'nn.rleu'; did you mean nn.relu" in str(err)
    assert err.col == 17


def test_bad_attribute_is_a_parse_error_naming_the_op():
    err = parse_error("def @main(%x, %w) { nn.conv2d(%x, %w, stride=[1, 1]) }")
    assert "nn.conv2d" in str(err) and "strides" in str(err)


def test_wrong_number_of_op_arguments():
    err = parse_error("def @main(%x) { nn.relu(%x, %x) }")
    assert "op 'nn.relu' takes 1 argument(s), got 2" in str(err)


def test_integer_out_of_range():
    err = parse_error("def @main() { 3000000000 }")
    assert "3000000000 is out of range for int32" in str(err)
    assert "out of range for int8" in str(parse_error("def @main() { 300i8 }"))


def test_float_out_of_range():
    assert "out of range for float16" in str(parse_error("def @main() { 1e10f16 }"))


def test_bad_number_suffix():
    err = parse_error("def @main() { 1q }")
    assert "bad number literal '1q'" in str(err)


def test_undefined_global():
    assert "undefined global function @nope" in str(parse_error("def @main() { @nope() }"))


def test_unknown_type_and_dtype():
    assert "unknown type 'Lst'" in str(parse_error("def @main(%x: Lst[int32]) { %x }"))
    err = parse_error("def @main(%x: Tensor[(1,), float33]) { %x }")
    assert "unknown dtype 'float33'" in str(err)


def test_duplicate_definitions():
    assert "@f is defined twice" in str(parse_error("def @f() { 1 }\ndef @f() { 2 }"))
    assert "type T is defined twice" in str(parse_error("type T { A }\ntype T { B }"))


def test_graph_binding_used_before_definition():
    assert "%3 is used before it is defined" in str(parse_error("def @main() { %3 }"))


def test_pattern_arity_is_checked():
    err = parse_error(LIST + "def @main(%l) { match (%l) { Cons(%h) => %h } }")
    assert "constructor Cons has 2 field(s), the pattern gives 1" in str(err)


def test_unterminated_comment_points_at_its_start():
    err = parse_error("def @main() {\n  /* never closed\n 1 }")
    assert (err.line, err.col) == (2, 3) and "unterminated /* comment" in str(err)


def test_missing_closing_brace():
    err = parse_error("def @main(%x) {\n  %x\n")
    assert "missing '}'" in str(err)


def test_top_level_junk():
    err = parse_error("def @main() { 1 }\nlet %x = 1;")
    assert "expected 'def' or 'type' at top level, got 'let'" in str(err) and err.line == 2


def test_deep_nesting_is_a_parse_error_not_a_crash():
    with pytest.raises(ParseError, match="nested deeper than"):
        r.parse_expr("(" * 5000 + "1" + ")" * 5000)


def test_op_must_be_called():
    assert "an op must be called" in str(parse_error("def @main() { nn.relu }"))


def test_bad_metadata_line():
    err = parse_error(
        "def @main() { meta[relay.Constant][0] }\n#[metadata]\nrelay.Constant 0 float32"
    )
    assert err.line == 3 and "bad metadata line" in str(err)


def test_missing_metadata_constant():
    err = parse_error("def @main() { meta[relay.Constant][1] }")
    assert "meta[relay.Constant][1] is not in the #[metadata] section" in str(err)


def test_parse_rejects_non_text():
    with pytest.raises(ParseError, match="takes a str"):
        r.parse(b"def @main() { 1 }")


def test_reserved_names_cannot_name_types_params_or_constructors():
    assert "'Tensor' cannot be the name of a type" in str(parse_error("type Tensor { A }"))
    assert "'float32' cannot be a type parameter name" in str(
        parse_error("def @f[float32](%x) { %x }")
    )
    assert "'List' cannot be a type parameter name" in str(
        parse_error(LIST + "def @f[List](%x: List) { %x }")
    )
    assert "constructor name _ is a keyword" in str(parse_error("type T { _ }"))
    assert "constructor name Nil is a keyword or already used" in str(
        parse_error(LIST + "type U { Nil }")
    )
