"""Bad Relay text found by fuzzing (tests/fuzz/relay_text.py): each test is named for the
input that found a crash, and pins the ParseError (kind, line, column, message) that
replaces it. Parsing and type inference run under Python's own recursion limit."""

from __future__ import annotations

import sys

import pytest

import relay_ir as r
from tessel_errors import ParseError

PROGRAM = "def @main(%x: Tensor[(2,), float32]) {\n  let %y = add(%x, 1f);\n  %y\n}\n"


def parse_error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        r.parse(text)
    return info.value


@pytest.fixture
def recursion_limit_unchanged():
    limit = sys.getrecursionlimit()
    yield
    assert sys.getrecursionlimit() == limit


# --- characters outside the grammar ---------------------------------------------------


def test_e_acute_in_a_variable_name_is_a_parse_error_naming_the_character():
    err = parse_error(PROGRAM.replace("  %y\n", "  %yé\n"))
    assert (err.line, err.col) == (3, 5)
    assert "unexpected character U+00E9 'é' (LATIN SMALL LETTER E WITH ACUTE)" in str(err)
    assert "names are ASCII letters, digits and '_'" in str(err)


def test_e_acute_starting_an_op_name_is_a_parse_error_not_an_assertion():
    err = parse_error(PROGRAM.replace("add(", "éadd("))
    assert (err.line, err.col) == (2, 12) and "U+00E9" in str(err)


def test_non_breaking_space_in_let_is_a_parse_error_with_column():
    err = parse_error(PROGRAM.replace("let %y", "let\u00a0%y"))
    assert (err.line, err.col) == (2, 6)
    assert "U+00A0 (NO-BREAK SPACE)" in str(err) and "pasted from a web page" in str(err)


def test_typographic_quotes_around_an_attribute_string_are_a_parse_error_with_the_fix():
    text = PROGRAM.replace("add(%x, 1f)", "nn.softmax(%x, axis=-1, layout=\u201cNCHW\u201d)")
    err = parse_error(text)
    assert "U+201C '\u201c' (LEFT DOUBLE QUOTATION MARK)" in str(err)
    assert 'straight double quotes "' in str(err)


def test_nul_in_a_number_is_a_parse_error_and_the_caret_line_shows_it_as_a_question_mark():
    err = parse_error(PROGRAM.replace("1f", "1\x00f"))
    assert (err.line, err.col) == (2, 21) and "U+0000 (a control character)" in str(err)
    assert "\x00" not in str(err) and "add(%x, 1?f)" in str(err)


def test_lone_surrogate_is_a_parse_error_whose_message_encodes_as_utf8():
    err = parse_error(PROGRAM.replace("1f", "1\udc80f"))
    assert "U+DC80 (a lone surrogate)" in str(err) and "save the file as UTF-8" in str(err)
    str(err).encode("utf-8")  # printable on any terminal: the surrogate is not in it


def test_superscript_two_as_a_number_is_a_parse_error_not_an_assertion():
    err = parse_error(PROGRAM.replace("1f", "\u00b2"))
    assert "U+00B2 '\u00b2' (SUPERSCRIPT TWO)" in str(err)
    assert "ASCII digits 0-9" in str(err)


def test_arabic_indic_digit_is_a_parse_error_not_the_number_three():
    err = parse_error(PROGRAM.replace("1f", "\u0663"))
    assert (err.line, err.col) == (2, 20) and "U+0663" in str(err)


def test_unicode_minus_sign_is_a_parse_error_suggesting_the_ascii_one():
    err = parse_error(PROGRAM.replace("1f", "\u22121f"))
    assert "U+2212" in str(err) and "ASCII '-'" in str(err)


def test_non_ascii_text_in_strings_and_comments_is_fine():
    text = PROGRAM.replace("let %y", "// caf\u00e9 \u201cq\u201d\n  let %y")
    assert r.parse(text)["main"] is not None
    e = r.parse_expr('nn.global_avg_pool2d(%x, layout="\u00e9")')
    assert e.attrs is not None


def test_caret_after_a_form_feed_shows_the_line_the_lexer_counted():
    err = parse_error("def @main() {\f 1 }\n  é\n")
    assert err.line == 2 and "    2 |   é" in str(err)


# --- numbers out of range ---------------------------------------------------------------


def test_5000_digit_integer_is_a_parse_error_not_a_value_error():
    err = parse_error(PROGRAM.replace("1f", "9" * 5000))
    assert (err.line, err.col) == (2, 20)
    assert ("999999...999999 (5000 characters) is out of range for int32 "
            "(legal: -2147483648..2147483647); the suffix i64 gives an int64") in str(err)
    assert len(str(err)) < 600  # the literal is cut, not echoed


def test_5000_digit_float_literal_is_out_of_range_with_the_literal_cut():
    err = parse_error(PROGRAM.replace("1f", "9" * 5000 + "f"))
    assert "(5001 characters) is out of range for float32 (largest finite: 3.4028235e+38)" \
        in str(err)


def test_1e999f_overflows_float32_and_1e_minus_999f_underflows_it():
    assert "1e999f is out of range for float32" in str(parse_error(
        PROGRAM.replace("1f", "1e999f")))
    err = parse_error(PROGRAM.replace("1f", "1e-999f"))
    assert "1e-999f is too small for float32: it would round to 0" in str(err)


def test_zero_written_with_an_exponent_and_the_smallest_subnormal_are_legal():
    assert float(r.parse_expr("0e5f").data) == 0.0
    assert float(r.parse_expr("1e-45f").data) > 0


def test_2147483648_is_out_of_range_for_int32_and_legal_as_int64():
    assert "legal: -2147483648..2147483647" in str(parse_error(
        PROGRAM.replace("1f", "2147483648")))
    assert int(r.parse_expr("2147483648i64").data) == 2**31
    assert int(r.parse_expr("-2147483648").data) == -2**31


def test_minus_one_u8_is_out_of_range_for_uint8():
    assert "-1u8 is out of range for uint8 (legal: 0..255)" in str(parse_error(
        PROGRAM.replace("1f", "-1u8")))


def test_5000_digit_dimension_is_a_parse_error():
    err = parse_error(PROGRAM.replace("(2,)", "(" + "9" * 5000 + ",)"))
    assert (err.line, err.col) == (1, 23)
    assert "a dimension 999999...999999 (5000 characters) is out of range " \
        "(legal: 0..9223372036854775807)" in str(err)


def test_dimension_past_int64_is_a_parse_error():
    err = parse_error(PROGRAM.replace("(2,)", "(9223372036854775808,)"))
    assert "a dimension 9223372036854775808 is out of range" in str(err)


def test_5000_digit_tuple_index_is_a_parse_error():
    err = parse_error(PROGRAM.replace("  %y\n", "  (%y,)." + "9" * 5000 + "\n"))
    assert (err.line, err.col) == (3, 9) and "a tuple field index 999999" in str(err)


def test_5000_digit_metadata_index_is_a_parse_error():
    err = parse_error(PROGRAM.replace("1f", "meta[relay.Constant][" + "9" * 5000 + "]"))
    assert "a metadata index 999999...999999 (5000 characters) is out of range" in str(err)


def test_5000_digit_index_on_a_metadata_line_is_a_parse_error_without_python_advice():
    text = ("def @main() { meta[relay.Constant][0] }\n#[metadata]\n"
            f"relay.Constant {'9' * 5000} float32 (2) AAAAAAAAAAA=")
    err = parse_error(text)
    assert err.line == 3 and "set_int_max_str_digits" not in str(err)
    assert "bad metadata line: the index 999999...999999 (5000 characters) is out of range" \
        in str(err)


def test_negative_dimension_on_a_metadata_line_is_a_parse_error():
    text = ("def @main() { meta[relay.Constant][0] }\n#[metadata]\n"
            "relay.Constant 0 float32 (-2) AAAAAAAAAAA=")
    assert "a dimension '-2' is not a plain integer" in str(parse_error(text))


# --- attribute values of the wrong type -------------------------------------------------


def test_float_in_transpose_axes_is_a_parse_error_not_a_type_error():
    err = parse_error(PROGRAM.replace("add(%x, 1f)", "transpose(%x, axes=[1.5])"))
    assert (err.line, err.col) == (2, 21)
    assert "op 'transpose': attribute axes takes tuple[int, ...] | None, got (1.5,)" in str(err)


def test_parenthesised_number_in_reshape_newshape_is_a_parse_error_not_a_type_error():
    err = parse_error(PROGRAM.replace("add(%x, 1f)", "reshape(%x, newshape=[1, (2)])"))
    assert "attribute newshape takes tuple[int, ...], got (1, (2,))" in str(err)


def test_bool_for_an_int_attribute_is_a_parse_error():
    err = parse_error(PROGRAM.replace("add(%x, 1f)", "nn.softmax(%x, axis=True)"))
    assert "attribute axis takes int, got True" in str(err)


# --- nesting ----------------------------------------------------------------------------

DEEP = 100_000
NESTINGS = {
    "parentheses": ("(" * DEEP, ")" * DEEP),
    "tuples": ("(" * DEEP, ",)" * DEEP),
    "blocks": ("{" * DEEP, "}" * DEEP),
    "functions": ("fn () {" * DEEP, "}" * DEEP),
    "calls": ("negative(" * DEEP, ")" * DEEP),
    "let_values": ("let %a = " * DEEP, "; %a" * DEEP),
    "if_else_chain": ("if (True) { 1f } else " * DEEP, ""),
    "attribute_lists": ("", ""),
}


@pytest.mark.parametrize("kind", sorted(NESTINGS))
def test_expressions_nested_100000_deep_are_a_parse_error_with_position(
        kind, recursion_limit_unchanged):
    opening, closing = NESTINGS[kind]
    inner = "{ 1f }" if kind == "if_else_chain" else "1f"
    body = opening + inner + closing
    if kind == "attribute_lists":
        body = "nn.softmax(%x, axis=" + "[" * DEEP + "1" + "]" * DEEP + ")"
    err = parse_error(PROGRAM.replace("add(%x, 1f)", body))
    assert err.line == 2 and err.col > 1
    assert "nested deeper than 120 levels" in str(err) and "bind inner values with let" \
        in str(err)


@pytest.mark.parametrize("wrap", [("(", ",)"), ("(", ")"), ("Ref[", "]"), ("fn () -> ", "")])
def test_types_nested_100000_deep_are_a_parse_error(wrap, recursion_limit_unchanged):
    opening, closing = wrap
    ty = opening * DEEP + "Tensor[(2,), float32]" + closing * DEEP
    err = parse_error(PROGRAM.replace("Tensor[(2,), float32]", ty))
    assert err.line == 1 and "nested deeper than 120 levels" in str(err)


def test_patterns_nested_100000_deep_are_a_parse_error(recursion_limit_unchanged):
    match = "match (%y) { " + "(" * DEEP + "_" + ")" * DEEP + " => %y }"
    err = parse_error(PROGRAM.replace("  %y\n", "  " + match + "\n"))
    assert err.line == 3 and "nested deeper than 120 levels" in str(err)


def test_expressions_nested_100_deep_parse_and_infer(recursion_limit_unchanged):
    text = PROGRAM.replace("add(%x, 1f)", "add(%x, " + "(" * 100 + "1f" + ")" * 100 + ")")
    mod = r.transform.InferType()(r.parse(text))
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(2,), float32]"


def test_let_chain_of_20000_in_text_parses_and_infers(recursion_limit_unchanged):
    lets = "".join(f"  let %v{i} = add(%v{i - 1}, %v{i - 1});\n" for i in range(1, 20_001))
    text = "def @main(%v0: Tensor[(2,), float32]) {\n" + lets + "  %v20000\n}\n"
    mod = r.transform.InferType()(r.parse(text))
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(2,), float32]"


def test_graph_binding_chain_of_20000_in_text_parses_and_infers(recursion_limit_unchanged):
    chain = "".join(f"  %{i} = add(%{i - 1}, %x);\n" for i in range(1, 20_001))
    text = ("def @main(%x: Tensor[(2,), float32]) {\n  %0 = exp(%x);\n" + chain
            + "  %20000\n}\n")
    mod = r.transform.InferType()(r.parse(text))
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(2,), float32]"
