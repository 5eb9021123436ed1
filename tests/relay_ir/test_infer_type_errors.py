"""Type errors: each names the operator or construct, the argument, both types, and where."""

from __future__ import annotations

import pytest

import relay_ir
from relay_ir.typing import infer_type
from tessel_errors import RelayTypeError


def infer(text: str) -> relay_ir.IRModule:
    """Parse with the prelude and infer."""
    return infer_type(relay_ir.parse(text, init_module=relay_ir.IRModule().import_prelude()))


def error_of(text: str) -> str:
    """The message of the RelayTypeError that inference raises on `text`."""
    with pytest.raises(RelayTypeError) as info:
        infer(text)
    return str(info.value)


def test_dense_mismatch_names_op_argument_types_and_line() -> None:
    msg = error_of("""def @main(%x: Tensor[(4, 3), float32], %w: Tensor[(16, 4), float32]) {
  nn.dense(%x, %w)
}""")
    assert msg.startswith("nn.dense: argument 1 (weight, %w): the reduction dim does not "
                          "match: data's last dim is 3, weight's dim 1 is 4")
    assert "  expected: Tensor[(16, 3), float32]\n  got:      Tensor[(16, 4), float32]" in msg
    assert "at <string>:2:3" in msg
    assert "2 |   nn.dense(%x, %w)\n" in msg and "|   ^^^^^^^^^^^^^^^^" in msg


def test_conv2d_channel_mismatch() -> None:
    msg = error_of("""def @main(%x: Tensor[(1, 4, 8, 8), float32],
          %w: Tensor[(8, 3, 3, 3), float32]) {
  nn.conv2d(%x, %w, padding=[1, 1])
}""")
    assert msg.startswith("nn.conv2d: argument 0 (data, %x): dim 1 is 4, but weight "
                          "Tensor[(8, 3, 3, 3), float32] with groups=1 needs 3")
    assert "expected: Tensor[(1, 3, 8, 8), float32]" in msg


def test_builder_error_prints_the_expression_instead_of_a_line() -> None:
    x, y = relay_ir.var("x", shape=(2, 3)), relay_ir.var("y", shape=(4, 3))
    with pytest.raises(RelayTypeError, match=r"(?s)add: argument 1 \(rhs, %y\): shapes "
                       r"\(2, 3\), \(4, 3\) do not broadcast.*got:      Tensor\[\(4, 3\), "
                       r"float32\].*in: add\(%x"):
        infer_type(relay_ir.IRModule.from_expr(relay_ir.add(x, y)))


def test_dtype_mismatch() -> None:
    msg = error_of("def @main(%x: Tensor[(4,), float32], %i: Tensor[(4,), int32]) "
                   "{ add(%x, %i) }")
    assert msg.startswith("add: argument 1 (rhs, %i): dtype mismatch: argument 0 has dtype "
                          "float32, argument 1 has int32")


def test_symbolic_dims_must_agree() -> None:
    msg = error_of("def @main(%x: Tensor[(4, n), float32], %w: Tensor[(8, m), float32]) "
                   "{ nn.dense(%x, %w) }")
    assert "data's last dim is n, weight's dim 1 is m" in msg


def test_call_argument_of_the_wrong_shape() -> None:
    msg = error_of("""def @f(%a: Tensor[(5, 3), float32]) { %a }
def @main(%x: Tensor[(4, 3), float32]) { @f(%x) }""")
    assert msg.startswith("the call of @f: argument 0 (%a, %x) has the wrong type: dim 0: 4 vs 5")
    assert "expected: Tensor[(5, 3), float32]" in msg and "got:      Tensor[(4, 3), float32]" in msg


def test_call_with_too_many_arguments() -> None:
    msg = error_of("""def @f(%a: int32) { %a }
def @main(%x: int32) { @f(%x, %x) }""")
    assert msg.startswith("the call of @f: expects 1 argument, got 2")


def test_if_condition_must_be_a_bool_scalar() -> None:
    msg = error_of("def @main(%x: Tensor[(4, 3), float32]) { if (%x) { %x } else { %x } }")
    assert msg.startswith("the condition of if must be a bool scalar, got "
                          "Tensor[(4, 3), float32]")


def test_if_branches_must_agree() -> None:
    msg = error_of("def @main(%c: bool, %x: Tensor[(4, 3), float32]) "
                   "{ if (%c) { %x } else { sum(%x) } }")
    assert msg.startswith("the branches of if have different types: rank 2 vs 0")


def test_return_annotation_mismatch() -> None:
    msg = error_of("def @main(%x: Tensor[(4, 3), float32]) -> Tensor[(4, 4), float32] { %x }")
    assert "annotated to return Tensor[(4, 4), float32]: dim 1: 3 vs 4" in msg


def test_let_annotation_mismatch() -> None:
    msg = error_of("def @main(%x: Tensor[(4,), float32]) { let %y: Tensor[(5,), float32] = %x; "
                   "%y }")
    assert msg.startswith("let %y: the value has type Tensor[(4,), float32], the annotation "
                          "says Tensor[(5,), float32]")


def test_list_elements_must_share_a_type() -> None:
    msg = error_of("def @main(%x: Tensor[(4, 3), float32], %y: Tensor[(2, 3), float32]) "
                   "{ Cons(%x, Cons(%y, Nil)) }")
    assert msg.startswith("constructor Cons: argument 1")
    assert "type argument 0: dim 0: 2 vs 4" in msg


def test_match_clauses_must_agree() -> None:
    msg = error_of("def @main(%l: List[int32]) { match (%l) { Cons(%h, _) => %h, Nil => 1f } }")
    assert msg.startswith("match: clause 1 has a different type than the earlier clauses: "
                          "dtype float32 vs int32")


def test_match_pattern_of_another_adt() -> None:
    msg = error_of("def @main(%l: List[int32]) { match (%l) { Some(%h) => %h, _ => 1 } }")
    assert "match: pattern Some(...) needs a value of type Option[" in msg
    assert "the matched value has type List[int32]: List vs Option" in msg


def test_polymorphic_function_misuse() -> None:
    msg = error_of("def @main(%x: Tensor[(4,), float32]) "
                   "{ @map(fn (%t: int32) { %t }, Cons(%x, Nil)) }")
    assert msg.startswith("the call of @map: argument 1 (%xs, ")
    assert "expected: List[int32]" in msg


def test_calling_a_non_function() -> None:
    assert error_of("def @main(%x: int32) { %x(%x) }").startswith(
        "%x is called but is not a function")


def test_tuple_index_out_of_range() -> None:
    assert error_of("def @main(%x: int32) { (%x, %x).2 }").startswith(
        "tuple index 2 is out of range for a tuple of 2 fields")


def test_ref_write_of_the_wrong_type() -> None:
    msg = error_of("def @main(%x: int32) { let %r = ref(%x); ref_write(%r, 1f) }")
    assert msg.startswith("ref_write: the value does not fit the reference")


def test_unannotated_parameter_that_nothing_determines() -> None:
    msg = error_of("def @main(%w: Tensor[(3, 3), float32]) { fn (%a) { nn.dense(%a, %w) } }")
    assert msg.startswith("nn.dense: cannot infer the type of argument 0 (data, %a); annotate it")


def test_unknown_global_in_a_builder_module() -> None:
    x = relay_ir.var("x", shape=(2,))
    fn = relay_ir.Function((x,), relay_ir.Call(relay_ir.GlobalVar("nope"), (x,)))
    with pytest.raises(RelayTypeError, match=r"unknown global function @nope; the module has "
                       r"\['@main'\]"):
        infer_type(relay_ir.IRModule.from_expr(fn))
