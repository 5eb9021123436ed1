"""dyn.strided_slice: its type keeps the dims it does not slice and makes the sliced ones
`?`, with rank errors naming the op; its reference is ONNX's Slice (negative indices, out
of range bounds clamped, negative strides), checked against the ONNX specification's
clamping written out here index by index, and numpy's slicing but where the two differ (a
backwards slice from before the first element to before it); a stride of 0 and malformed
bounds are run-time errors naming the op; the text format, the interpreter and the builder
name it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relay_ir
from relay_ir.op._common import RelationError
from relay_ir.ty import ANY
from tessel_errors import RelayError, RelayRuntimeError
from tests.relay_ir.op_helpers import T, rand, ref, rel
from tests.rng import seeded_rng

I64 = "int64"
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, I64)


def onnx_slice(x: np.ndarray, starts, ends, steps, axes=None) -> np.ndarray:
    """ONNX Slice as its specification words it (no Python slicing): per axis, a negative
    bound gets the dim added, then starts clamp to [0, d] (step > 0) or [0, d - 1]
    (step < 0), ends to [0, d] or [-1, d - 1]; the kept indices are start, start + step,
    ... while before end."""
    axes = list(range(len(starts))) if axes is None else [a % x.ndim for a in axes]
    out = x
    for a, s, e, k in zip(axes, starts, ends, steps):
        d = x.shape[a]
        s, e = int(s) + d if s < 0 else int(s), int(e) + d if e < 0 else int(e)
        if k > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        idx = []
        while (k > 0 and s < e) or (k < 0 and s > e):
            idx.append(s)
            s += int(k)
        out = np.take(out, np.array(idx, "int64"), axis=a)
    return out


# --- the type relation ---------------------------------------------------------------------


def test_the_sliced_dims_are_question_marks_and_the_others_kept():
    b = T((1,), I64)
    assert rel("dyn.strided_slice", T((5, 4, 3)), b, b, b) == T((ANY, 4, 3))
    assert rel("dyn.strided_slice", T((5, 4, 3), "int8"), b, b, b, axes=(-1,)) == \
        T((5, 4, ANY), "int8")
    two = T((2,), "int32")
    assert rel("dyn.strided_slice", T((ANY, 4, 3)), two, two, two, axes=(2, 0)) == \
        T((ANY, 4, ANY))


@pytest.mark.parametrize("bounds, arg, why", [
    ((T((1, 1), I64), T((1,), I64), T((1,), I64)), "begin", "a 2-D begin"),
    ((T((1,), I64), T((), I64), T((1,), I64)), "end", "a scalar end"),
    ((T((1,), I64), T((1,), I64), T((1,), "float32")), "strides", "float strides"),
    ((T((1,), "uint8"), T((1,), I64), T((1,), I64)), "begin", "an unsigned begin"),
], ids=["begin_2d", "end_0d", "strides_float", "begin_unsigned"])
def test_bounds_that_are_not_1d_signed_integer_tensors_are_a_type_error_naming_the_op(
        bounds, arg, why):
    with pytest.raises(RelationError, match=rf"^dyn.strided_slice: {arg} must be a 1-D tensor "
                                            r"of a signed integer dtype"):
        rel("dyn.strided_slice", T((5, 4)), *bounds)


def test_bounds_of_different_lengths_or_a_question_mark_length_are_type_errors():
    one, two = T((1,), I64), T((2,), I64)
    with pytest.raises(RelationError, match=r"one value per sliced dim, got lengths \[1, 2, 1\]"):
        rel("dyn.strided_slice", T((5, 4)), one, two, one)
    with pytest.raises(RelationError, match=r"begin Tensor\[\(\?,\), int64\] has a `\?` "
                                            r"length: which dims are sliced must be known"):
        rel("dyn.strided_slice", T((5, 4)), T((ANY,), I64), one, one)


def test_more_bounds_than_dims_or_axes_that_do_not_fit_are_type_errors():
    three, one = T((3,), I64), T((1,), I64)
    with pytest.raises(RelationError, match=r"3 bounds per array but data \(5, 4\) has rank 2"):
        rel("dyn.strided_slice", T((5, 4)), three, three, three)
    with pytest.raises(RelationError, match=r"axes \[0, 1\] name 2 dims but begin/end/strides "
                                            r"hold 1 values"):
        rel("dyn.strided_slice", T((5, 4)), one, one, one, axes=(0, 1))
    with pytest.raises(RelationError, match=r"axis 2 is out of range for a tensor of rank 2"):
        rel("dyn.strided_slice", T((5, 4)), one, one, one, axes=(2,))
    two = T((2,), I64)
    with pytest.raises(RelationError, match=r"axes \[1, -1\] name a dim twice"):
        rel("dyn.strided_slice", T((5, 4)), two, two, two, axes=(1, -1))


def test_type_inference_of_a_wrong_rank_begin_names_the_op_and_the_argument():
    x = relay_ir.var("x", shape=(5, 4))
    b = relay_ir.var("b", shape=(1, 1), dtype=I64)
    mod = relay_ir.IRModule.from_expr(relay_ir.Function(
        (x, b), relay_ir.dyn_strided_slice(x, b, [4], [1])))
    with pytest.raises(RelayError, match=r"dyn.strided_slice") as info:
        relay_ir.transform.InferType()(mod)
    assert "begin" in str(info.value)


# --- the reference -------------------------------------------------------------------------


def test_the_reference_clamps_out_of_range_bounds_and_counts_negative_ones_from_the_end():
    x = rand(seeded_rng(), 6, 5)
    got = ref("dyn.strided_slice", x, _i64(-4, INT64_MIN), _i64(INT64_MAX, 3), _i64(1, 2))
    np.testing.assert_array_equal(got, x[2:, 0:3:2])
    got = ref("dyn.strided_slice", x, _i64(INT64_MAX), _i64(INT64_MIN), _i64(-2), axes=(1,))
    np.testing.assert_array_equal(got, x[:, ::-2])
    assert got.flags.c_contiguous  # a fresh array, not a view of x


def test_int32_bounds_work_as_int64_and_empty_slices_have_a_zero_extent():
    x = rand(seeded_rng(), 4, 3)
    got = ref("dyn.strided_slice", x, np.array([3], "int32"), np.array([1], "int32"),
              np.array([1], "int32"))
    assert got.shape == (0, 3)


@st.composite
def _slices(draw):
    """(data shape, begin, end, strides, axes or None) with bounds in and out of range,
    negative, and strides of either sign."""
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    rank = len(shape)
    if draw(st.booleans()):
        axes = draw(st.permutations(range(rank)))[:draw(st.integers(1, rank))]
        axes = [a - rank if draw(st.booleans()) else a for a in axes]
    else:
        axes = None
    n = len(axes) if axes is not None else draw(st.integers(1, rank))
    bound = st.one_of(st.integers(-8, 8), st.sampled_from([INT64_MAX, INT64_MIN]))
    begin = draw(st.lists(bound, min_size=n, max_size=n))
    end = draw(st.lists(bound, min_size=n, max_size=n))
    strides = draw(st.lists(st.integers(-3, 3).filter(bool), min_size=n, max_size=n))
    return tuple(shape), begin, end, strides, axes


@settings(max_examples=80, deadline=None, derandomize=True)
@given(_slices())
def test_random_slices_give_onnx_slice_as_its_specification_words_it_and_numpys_slicing(case):
    shape, begin, end, strides, axes = case
    x = np.arange(int(np.prod(shape)), dtype="float32").reshape(shape)
    got = ref("dyn.strided_slice", x, _i64(*begin), _i64(*end), _i64(*strides),
              axes=None if axes is None else tuple(axes))
    np.testing.assert_array_equal(got, onnx_slice(x, begin, end, strides, axes))
    dims = list(range(len(begin))) if axes is None else [a % len(shape) for a in axes]
    if not any(k < 0 and b < -shape[a] and e < -shape[a]  # where ONNX and numpy differ
               for a, b, e, k in zip(dims, begin, end, strides)):
        index = [slice(None)] * len(shape)
        for a, b, e, k in zip(dims, begin, end, strides):
            index[a] = slice(b, e, k)
        np.testing.assert_array_equal(got, x[tuple(index)])


# --- bounds that do not fit: run-time errors naming the op -----------------------------------


def test_a_stride_of_0_is_a_runtime_error_naming_the_op_and_the_strides():
    with pytest.raises(RelayRuntimeError, match=r"^dyn.strided_slice: a stride of 0 \(strides "
                                                 r"\[1, 0\]\) on data of shape \(4, 3\)"):
        ref("dyn.strided_slice", rand(seeded_rng(), 4, 3), _i64(0, 0), _i64(4, 3), _i64(1, 0))


@pytest.mark.parametrize("begin, end, strides, why", [
    (np.zeros((1, 1), I64), _i64(3), _i64(1), r"begin must be a 1-D integer tensor, got "
                                                r"int64 of shape \(1, 1\)"),
    (_i64(0), np.array([2.0]), _i64(1), r"end must be a 1-D integer tensor, got float64"),
    (_i64(0, 1), _i64(3), _i64(1), r"begin \[0, 1\], end \[3\] and strides \[1\] must have "
                                    r"one value per sliced dim"),
], ids=["begin_2d", "end_float", "lengths"])
def test_malformed_bounds_are_runtime_errors_not_crashes(begin, end, strides, why):
    with pytest.raises(RelayRuntimeError, match=r"^dyn.strided_slice: " + why):
        ref("dyn.strided_slice", rand(seeded_rng(), 4, 3), begin, end, strides)


# --- text, builder, interpreter --------------------------------------------------------------


def test_the_text_format_round_trips_and_the_interpreter_runs_it():
    text = """#[version = "0.0.5"]
def @main(%x: Tensor[(?, 6), float32], %b: Tensor[(1,), int64], %e: Tensor[(1,), int64],
          %s: Tensor[(1,), int64]) -> Tensor[(?, ?), float32] {
  dyn.strided_slice(%x, %b, %e, %s, axes=[1])
}"""
    mod = relay_ir.parse(text)
    again = relay_ir.parse(relay_ir.astext(mod))
    assert relay_ir.structural_equal(mod, again)
    x = rand(seeded_rng(), 3, 6)
    got = relay_ir.interpret(again, x, _i64(5), _i64(-7), _i64(-2))
    np.testing.assert_array_equal(got, x[:, 5::-2])


def test_the_builder_takes_numbers_and_needs_strides_or_axes_when_both_bounds_are_exprs():
    x = relay_ir.var("x", shape=(5,))
    b = relay_ir.var("b", shape=(1,), dtype=I64)
    call = relay_ir.dyn_strided_slice(x, b, b, axes=[0])
    np.testing.assert_array_equal(call.args[3].data, _i64(1))
    with pytest.raises(RelayError, match=r"give strides \(or axes\) when begin and end are "
                                         r"both expressions"):
        relay_ir.dyn_strided_slice(x, b, b)
