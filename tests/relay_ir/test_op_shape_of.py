"""shape_of: its type is a vector as long as the input's rank (whatever its `?` dims), its
reference the value's shape, the text format names it, FoldConstant makes it a constant
where the shape is static (so relay_ir.build runs it), and FuseOps leaves it outside every
group."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from relay_ir.expr import Call, Constant, Function
from relay_ir.op._common import RelationError
from relay_ir.transform import FoldConstant, FuseOps, InferType
from relay_ir.ty import ANY
from tests.relay_ir.op_helpers import T, rand, ref, rel
from tests.rng import seeded_rng


def test_the_type_is_a_vector_of_the_input_rank_with_question_mark_dims_allowed():
    assert rel("shape_of", T((ANY, 3, ANY))) == T((3,), "int64")
    assert rel("shape_of", T(())) == T((0,), "int64")


def test_the_result_dtype_is_the_attribute():
    assert rel("shape_of", T((2, 3)), dtype="int32") == T((2,), "int32")


def test_a_non_integer_result_dtype_is_a_type_error_saying_which_are_allowed():
    with pytest.raises(RelationError, match=r"shape_of gives int32 or int64, not float32"):
        rel("shape_of", T((2, 3)), dtype="float32")


def test_the_reference_is_the_shape_of_the_value():
    got = ref("shape_of", rand(seeded_rng(), 4, 3, 2))
    np.testing.assert_array_equal(got, [4, 3, 2])
    assert got.dtype == np.int64


def test_the_text_format_parses_and_prints_it_by_name():
    text = ('def @main(%x: Tensor[(?, 3), float32]) -> Tensor[(2,), int32] {\n'
            '  shape_of(%x, dtype="int32")\n}')
    printed = relay_ir.astext(relay_ir.parse(text))
    assert 'shape_of(%x, dtype="int32")' in printed
    assert relay_ir.astext(relay_ir.parse(printed)) == printed


def test_the_builder_makes_a_call_of_the_op():
    x = relay_ir.var("x", shape=(None, 3))
    call = relay_ir.shape_of(x, "int32")
    assert call.op.name == "shape_of" and call.attrs.dtype == "int32"


def test_the_interpreter_gives_the_run_time_shape_of_a_question_mark_dim():
    mod = relay_ir.parse("def @main(%x: Tensor[(?, 3), float32]) { shape_of(%x) }")
    rng = seeded_rng()
    for batch in (2, 5):
        np.testing.assert_array_equal(relay_ir.interpret(mod, rand(rng, batch, 3)), [batch, 3])


def _folded(text: str) -> Function:
    return FoldConstant()(InferType()(relay_ir.parse(text)))["main"]


def test_fold_constant_makes_a_static_shape_a_constant():
    body = _folded("def @main(%x: Tensor[(2, 3), float32]) { shape_of(%x, dtype=\"int32\") }"
                   ).body
    assert isinstance(body, Constant)
    np.testing.assert_array_equal(body.data, [2, 3])
    assert body.data.dtype == np.int32


def test_fold_constant_keeps_the_call_while_a_dim_is_question_mark():
    body = _folded("def @main(%x: Tensor[(?, 3), float32]) { shape_of(%x) }").body
    assert isinstance(body, Call) and body.op.name == "shape_of"


def test_fuse_ops_leaves_it_outside_every_group():
    mod = relay_ir.parse("def @main(%x: Tensor[(?, 3), float32]) {"
                         " take(shape_of(exp(%x)), 0) }")
    body = FuseOps()(InferType()(mod))["main"].body
    assert isinstance(body.op, Function)  # the take's group ...
    inner = body.args[0]
    assert isinstance(inner, Call) and inner.op.name == "shape_of"  # ... reads shape_of
    assert isinstance(inner.args[0].op, Function)  # of the exp's group


def test_build_runs_a_program_computing_with_a_static_shape():
    mod = relay_ir.parse("def @main(%x: Tensor[(2, 3), float32]) {"
                         " multiply(%x, cast(take(shape_of(%x), 1), dtype=\"float32\")) }")
    x = rand(seeded_rng(), 2, 3)
    np.testing.assert_allclose(relay_ir.build(mod).run(x), x * 3, rtol=1e-6)


def test_build_without_fold_constant_makes_a_static_shape_a_constant():
    mod = relay_ir.parse("def @main(%x: Tensor[(2, 3), float32]) {"
                         " multiply(%x, cast(take(shape_of(%x), 1), dtype=\"float32\")) }")
    x = rand(seeded_rng(), 2, 3)
    with relay_ir.transform.PassContext(opt_level=0):
        lib = relay_ir.build(mod)
    np.testing.assert_allclose(lib.run(x), x * 3, rtol=1e-6)
