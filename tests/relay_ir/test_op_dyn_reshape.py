"""dyn.reshape: its type has the new shape's length as rank and `?` dims (but where the
values cannot change a dim), its reference resolves 0 and -1 as numpy and ONNX do (with
allowzero), a shape that does not fit is a run-time error naming the op and both shapes,
and the text format and the builder name it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relay_ir
from relay_ir.op._common import RelationError
from relay_ir.ty import ANY
from tessel_errors import RelayRuntimeError
from tests.relay_ir.op_helpers import T, rand, ref, rel
from tests.rng import seeded_rng


def _shape(*values: int) -> np.ndarray:
    return np.array(values, "int64")


# --- the type relation ---------------------------------------------------------------------


def test_the_rank_is_the_new_shapes_length_and_the_dims_are_question_marks():
    assert rel("dyn.reshape", T((2, 3, 4)), T((2,), "int64")) == T((ANY, ANY))
    assert rel("dyn.reshape", T((ANY, 6), "int8"), T((3,), "int32")) == T((ANY, ANY, ANY),
                                                                          "int8")


def test_a_rank_1_result_holds_every_element_whatever_the_values():
    assert rel("dyn.reshape", T((2, 3, 4)), T((1,), "int64")) == T((24,))
    assert rel("dyn.reshape", T((ANY, 4)), T((1,), "int64")) == T((ANY,))


def test_a_rank_0_result_needs_data_of_one_element():
    assert rel("dyn.reshape", T((1, 1)), T((0,), "int64")) == T(())
    with pytest.raises(RelationError, match=r"newshape has 0 values \(a scalar\), but data "
                                            r"\(2, 3\) has 6 elements"):
        rel("dyn.reshape", T((2, 3)), T((0,), "int64"))


@pytest.mark.parametrize("newshape, what", [
    (T((2,), "float32"), "a float shape"), (T((2, 2), "int64"), "a 2-D shape"),
    (T((2,), "uint8"), "an unsigned shape (no -1)")])
def test_a_new_shape_that_is_not_a_1d_signed_integer_tensor_is_a_type_error(newshape, what):
    with pytest.raises(RelationError, match=r"newshape must be a 1-D tensor of a signed "
                                            r"integer dtype"):
        rel("dyn.reshape", T((2, 3)), newshape)


def test_a_new_shape_of_question_mark_length_is_a_type_error_asking_for_a_static_length():
    with pytest.raises(RelationError, match=r"has a `\?` length: the result's rank must be "
                                            r"known when compiling"):
        rel("dyn.reshape", T((2, 3)), T((ANY,), "int64"))


def test_allowzero_other_than_0_or_1_is_a_type_error():
    with pytest.raises(RelationError, match=r"allowzero is 0 or 1, got 2"):
        rel("dyn.reshape", T((2, 3)), T((2,), "int64"), allowzero=2)


# --- the reference -------------------------------------------------------------------------


def test_the_reference_reshapes_to_the_given_extents():
    x = rand(seeded_rng(), 2, 3, 4)
    np.testing.assert_array_equal(ref("dyn.reshape", x, _shape(4, 6)), x.reshape(4, 6))


def test_minus_1_is_inferred_and_0_copies_the_datas_dim():
    x = rand(seeded_rng(), 2, 3, 4)
    np.testing.assert_array_equal(ref("dyn.reshape", x, _shape(0, -1)), x.reshape(2, 12))
    np.testing.assert_array_equal(ref("dyn.reshape", x, _shape(-1, 0, 2)), x.reshape(4, 3, 2))


def test_with_allowzero_a_0_is_an_extent_of_0_where_without_it_the_0_copies():
    x = np.zeros((0, 3), "float32")
    assert ref("dyn.reshape", x, _shape(3, 0), allowzero=1).shape == (3, 0)
    with pytest.raises(RelayRuntimeError, match=r"the new shape holds 9 elements"):
        ref("dyn.reshape", x, _shape(3, 0))  # the 0 copies dim 1: (3, 3)


def test_an_int32_new_shape_works_as_int64():
    x = rand(seeded_rng(), 6)
    got = ref("dyn.reshape", x, np.array([3, -1], "int32"))
    np.testing.assert_array_equal(got, x.reshape(3, 2))


@st.composite
def _reshapes(draw):
    """(data shape, a new shape of as many elements with maybe a -1 and 0s copying equal
    dims, the numpy shape it means)."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    factors = [p for d in shape for p in (2, 3) for _ in range(_times(d, p))]
    slots = draw(st.integers(1, 4))
    target = [1] * slots
    for f in factors:
        target[draw(st.integers(0, slots - 1))] *= f
    newshape = list(target)
    for i in range(min(slots, len(shape))):
        if target[i] == shape[i] and draw(st.booleans()):
            newshape[i] = 0
    if draw(st.booleans()):
        newshape[draw(st.integers(0, slots - 1))] = -1
    return tuple(shape), newshape, tuple(target)


def _times(d: int, p: int) -> int:
    n = 0
    while d % p == 0:
        d, n = d // p, n + 1
    return n


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_reshapes())
def test_random_new_shapes_with_0_and_minus_1_give_numpys_reshape(case):
    shape, newshape, target = case
    x = np.arange(int(np.prod(shape)), dtype="float32").reshape(shape)
    got = ref("dyn.reshape", x, _shape(*newshape))
    np.testing.assert_array_equal(got, np.reshape(x, target))


# --- shapes that do not fit: errors naming the op and both shapes ---------------------------


@pytest.mark.parametrize("newshape, allowzero, why", [
    ((5, 2), 0, r"to newshape \[5, 2\]: the new shape holds 10 elements"),
    ((5, -1), 0, r"to newshape \[5, -1\]: 12 is not a multiple of 5"),
    ((-1, -1), 0, r"to newshape \[-1, -1\]: more than one -1"),
    ((3, -2), 0, r"to newshape \[3, -2\]: -2 is not a dim"),
    ((0, 0, 0, 12), 0, r"to newshape \[0, 0, 0, 12\]: the 0 at position 2 copies a dim the "
                       r"rank-2 data lacks"),
    ((0, -1), 1, r"to newshape \[0, -1\]: with allowzero=1 a 0 and a -1 cannot go together"),
    ((0, -1, 2), 0, r"to newshape \[0, -1, 2\]: 12 is not a multiple of 8"),
], ids=["count", "indivisible", "two_minus_1", "below_minus_1", "copy_past_rank",
        "allowzero_0_and_minus_1", "copy_then_indivisible"])
def test_a_new_shape_that_does_not_fit_is_a_runtime_error_naming_the_op_and_both_shapes(
        newshape, allowzero, why):
    x = rand(seeded_rng(), 4, 3)
    with pytest.raises(RelayRuntimeError, match=r"^dyn.reshape: cannot reshape data of shape "
                                                 r"\(4, 3\) \(12 elements\) " + why):
        ref("dyn.reshape", x, _shape(*newshape), allowzero=allowzero)


def test_a_float_new_shape_value_is_a_runtime_error_not_a_crash():
    with pytest.raises(RelayRuntimeError, match=r"newshape must be a 1-D integer tensor, got "
                                                 r"float32 of shape \(2,\)"):
        ref("dyn.reshape", rand(seeded_rng(), 4, 3), np.array([6.0, 2.0], "float32"))


# --- text, builder, interpreter -------------------------------------------------------------

TEXT = ("def @main(%x: Tensor[(?, 3), float32], %s: Tensor[(2,), int64]) {\n"
        "  dyn.reshape(%x, %s, allowzero=1)\n}")


def test_the_text_format_parses_and_prints_it_by_name():
    printed = relay_ir.astext(relay_ir.parse(TEXT))
    assert "dyn.reshape(%x, %s, allowzero=1)" in printed
    assert relay_ir.astext(relay_ir.parse(printed)) == printed


def test_the_builder_makes_a_call_of_the_op_with_a_list_as_an_int64_constant():
    x = relay_ir.var("x", shape=(None, 6))
    call = relay_ir.dyn_reshape(x, [0, 2, -1], allowzero=False)
    assert call.op.name == "dyn.reshape" and call.attrs.allowzero == 0
    np.testing.assert_array_equal(call.args[1].data, [0, 2, -1])
    assert relay_ir.dyn_reshape(x, relay_ir.shape_of(x), allowzero=True).attrs.allowzero == 1


def test_the_interpreter_reshapes_to_shapes_given_at_run_time():
    mod = relay_ir.parse(TEXT)
    rng = seeded_rng()
    for batch, newshape in ((4, (2, -1)), (5, (-1, 5))):
        x = rand(rng, batch, 3)
        got = relay_ir.interpret(mod, x, _shape(*newshape))
        np.testing.assert_array_equal(got, x.reshape(newshape))


def test_type_inference_gives_the_rank_of_the_new_shape():
    mod = relay_ir.transform.InferType()(relay_ir.parse(TEXT))
    assert mod["main"].body.checked_type == T((ANY, ANY))
