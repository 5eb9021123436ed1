"""Shape ops and reductions: references against numpy, relations with gradual dims."""

from __future__ import annotations

import numpy as np
import pytest

from relay_ir.op._common import Refined, RelationError
from relay_ir.ty import ANY, ShapeVar, TupleType
from tests.relay_ir.op_helpers import T, rand, ref, rel, rel_full, type_of_value
from tests.rng import seeded_rng


def test_reshape_zero_and_minus_one() -> None:
    rng = seeded_rng()
    x = rand(rng, 2, 3, 4)
    got = ref("reshape", x, newshape=(0, -1))
    np.testing.assert_array_equal(got, x.reshape(2, 12))
    assert rel("reshape", T((2, 3, 4)), newshape=(0, -1)) == type_of_value(got)
    assert rel("reshape", T((2, 3, 4)), newshape=(-1, 4)).shape == (6, 4)


def test_reshape_gradual() -> None:
    assert rel("reshape", T((None, 6)), newshape=(-1, 3)).shape == (ANY, 3)
    assert rel("reshape", T((None, 6)), newshape=(0, -1, 3)).shape == (ANY, 2, 3)
    out = rel_full("reshape", T((2, None)), newshape=(12,))
    assert isinstance(out, Refined) and out.args[0] == T((2, 6))
    assert rel("reshape", T(("n", 4)), newshape=(0, 2, 2)).shape == (ShapeVar("n"), 2, 2)


def test_reshape_errors() -> None:
    with pytest.raises(RelationError, match=r"cannot reshape \(2, 3\) \(6 elements\) to \[4\]"):
        rel("reshape", T((2, 3)), newshape=(4,))
    with pytest.raises(RelationError, match="more than one -1"):
        rel("reshape", T((2, 3)), newshape=(-1, -1))
    with pytest.raises(RelationError, match="5 elements are not a multiple of 2"):
        rel("reshape", T((2, None)), newshape=(5,))


def test_transpose_and_layout_transform() -> None:
    rng = seeded_rng()
    x = rand(rng, 2, 3, 4)
    np.testing.assert_array_equal(ref("transpose", x, axes=(1, 0, 2)), x.transpose(1, 0, 2))
    np.testing.assert_array_equal(ref("transpose", x), x.T)
    assert rel("transpose", T((2, None, 4)), axes=(2, 0, 1)).shape == (4, 2, ANY)
    with pytest.raises(RelationError, match="is not a permutation"):
        rel("transpose", T((2, 3)), axes=(0, 0))
    y = rand(rng, 1, 3, 4, 5)
    np.testing.assert_array_equal(ref("layout_transform", y, src_layout="NCHW",
                                      dst_layout="NHWC"), y.transpose(0, 2, 3, 1))
    assert rel("layout_transform", T((1, 3, 4, 5)), src_layout="NCHW",
               dst_layout="NHWC").shape == (1, 4, 5, 3)


def test_concatenate_refines_other_dims() -> None:
    rng = seeded_rng()
    a, b = rand(rng, 2, 3), rand(rng, 4, 3)
    np.testing.assert_array_equal(ref("concatenate", (a, b)), np.vstack([a, b]))
    assert rel("concatenate", TupleType((T((2, 3)), T((4, 3))))).shape == (6, 3)
    out = rel_full("concatenate", TupleType((T((None, 3)), T((2, None)))), axis=0)
    assert out.ret.shape == (ANY, 3)
    assert out.args[0] == TupleType((T((None, 3)), T((2, 3))))
    with pytest.raises(RelationError, match="field 1 has dim 1 = 4, an earlier field has 3"):
        rel("concatenate", TupleType((T((2, 3)), T((2, 4)))))


def test_split_sections_and_indices() -> None:
    rng = seeded_rng()
    x = rand(rng, 6, 4)
    parts = ref("split", x, indices_or_sections=3)
    assert [p.shape for p in parts] == [(2, 4)] * 3
    assert rel("split", T((6, 4)), indices_or_sections=3) == type_of_value(parts)
    parts = ref("split", x, indices_or_sections=(1, 4), axis=0)
    np.testing.assert_array_equal(parts[1], x[1:4])
    assert rel("split", T((6, 4)), indices_or_sections=(1, 4)) == type_of_value(parts)
    gradual = rel("split", T((None, 4)), indices_or_sections=(1, 4))
    assert [f.shape[0] for f in gradual.fields] == [1, 3, ANY]
    with pytest.raises(RelationError, match="does not split into 4 equal sections"):
        rel("split", T((6, 4)), indices_or_sections=4)


def test_squeeze_expand_dims() -> None:
    rng = seeded_rng()
    x = rand(rng, 1, 3, 1)
    np.testing.assert_array_equal(ref("squeeze", x), x.reshape(3))
    np.testing.assert_array_equal(ref("squeeze", x, axis=(0,)), x.reshape(3, 1))
    assert rel("squeeze", T((1, 3, 1)), axis=(-1,)).shape == (1, 3)
    refined = rel_full("squeeze", T((None, 3)), axis=(0,))
    assert refined.args[0] == T((1, 3)) and refined.ret == T((3,))
    with pytest.raises(RelationError, match="dim 1 is 3, but squeeze"):
        rel("squeeze", T((1, 3)), axis=(1,))
    np.testing.assert_array_equal(ref("expand_dims", x, axis=1, num_newaxis=2),
                                  x.reshape(1, 1, 1, 3, 1))
    assert rel("expand_dims", T((2, 3)), axis=-1).shape == (2, 3, 1)


def test_take_and_strided_slice() -> None:
    rng = seeded_rng()
    x = rand(rng, 5, 3)
    idx = np.array([[4, 0], [2, 9]], "int32")
    got = ref("take", x, idx, axis=0)
    want = np.array([[x[min(i, 4)] for i in row] for row in idx.tolist()])
    np.testing.assert_array_equal(got, want)
    assert rel("take", T((5, 3)), T((2, 2), "int32"), axis=0).shape == (2, 2, 3)
    assert rel("take", T((5, 3)), T((7,), "int64")).shape == (7,)
    with pytest.raises(RelationError, match="indices must be integers"):
        rel("take", T((5, 3)), T((2,)))
    s = ref("strided_slice", x, begin=(1, 0), end=(5, 3), strides=(2, 2))
    np.testing.assert_array_equal(s, x[1:5:2, 0:3:2])
    assert rel("strided_slice", T((5, 3)), begin=(1, 0), end=(5, 3), strides=(2, 2)) == \
        type_of_value(s)
    assert rel("strided_slice", T((None, 3)), begin=(-2,), end=(100,), axes=(1,)).shape == \
        (ANY, 2)


@pytest.mark.parametrize("name,fn", [("sum", np.sum), ("mean", np.mean), ("max", np.max),
                                     ("min", np.min), ("prod", np.prod)])
def test_reductions_match_numpy(name, fn) -> None:
    rng = seeded_rng()
    x = rand(rng, 2, 3, 4)
    for attrs, axes in [({"axis": (1,)}, (1,)), ({"axis": (0, 2), "keepdims": True}, (0, 2)),
                        ({}, (0, 1, 2)), ({"axis": (1,), "exclude": True}, (0, 2))]:
        got = ref(name, x, **attrs)
        want = fn(x.astype(np.float64), axis=axes, keepdims=attrs.get("keepdims", False))
        np.testing.assert_allclose(got, want, rtol=1e-5)
        assert rel(name, T((2, 3, 4)), **attrs) == type_of_value(got)


def test_argmax_argmin() -> None:
    rng = seeded_rng()
    x = rand(rng, 3, 5)
    got = ref("argmax", x, axis=(1,))
    assert got.dtype == np.int32
    assert got.tolist() == [int(np.argmax(r)) for r in x]
    assert int(ref("argmin", x)) == int(np.argmin(x))
    assert rel("argmax", T((3, None)), axis=(0,), keepdims=True) == T((1, None), "int32")
    with pytest.raises(RelationError, match="take one axis"):
        rel("argmax", T((3, 4)), axis=(0, 1))


def test_reduction_relation_with_gradual_dims() -> None:
    assert rel("sum", T((None, 3, 4)), axis=(1,)).shape == (ANY, 4)
    assert rel("mean", T((None, 3)), axis=(-1,), keepdims=True).shape == (ANY, 1)
    with pytest.raises(RelationError, match="names a dim twice"):
        rel("sum", T((2, 3)), axis=(1, -1))
