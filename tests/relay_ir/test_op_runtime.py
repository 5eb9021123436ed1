"""runtime.check_shape: the reference passes fitting values through and fails otherwise."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from relay_ir.op._common import RelationError
from relay_ir.op.registry import PATTERNS, OpPattern
from relay_ir.ty import ANY
from tessel_errors import RelayRuntimeError
from tests.relay_ir.op_helpers import T, rand, ref, rel
from tests.rng import seeded_rng


def test_check_shape_passes_fitting_values_through() -> None:
    x = rand(seeded_rng(), 4, 3)
    assert ref("runtime.check_shape", x, shape=(-1, 3)) is x


def test_check_shape_fails_with_its_message() -> None:
    x = rand(seeded_rng(), 4, 2)
    with pytest.raises(RelayRuntimeError, match=r"%x: dim 1 must be 3 \(required by nn.dense\):"
                       r" expected shape \(\?, 3\), got a value of shape \(4, 2\)"):
        ref("runtime.check_shape", x, shape=(-1, 3),
            message="%x: dim 1 must be 3 (required by nn.dense)")


def test_check_shape_fails_on_rank() -> None:
    with pytest.raises(RelayRuntimeError, match="run-time shape check failed"):
        ref("runtime.check_shape", np.zeros((2, 3, 1), "float32"), shape=(-1, 3))


def test_check_shape_relation_refines_its_output() -> None:
    assert rel("runtime.check_shape", T((None, None)), shape=(-1, 3)).shape == (ANY, 3)
    with pytest.raises(RelationError, match="dim 1 is statically 2, the check wants 3"):
        rel("runtime.check_shape", T((None, 2)), shape=(-1, 3))


def test_check_shape_is_opaque_and_has_a_builder() -> None:
    x = relay_ir.var("x", shape=(None, None))
    c = relay_ir.check_shape(x, (-1, 3), "msg")
    assert c.attrs.shape == (-1, 3) and c.attrs.message == "msg"
    assert PATTERNS[c.op] == OpPattern.OPAQUE


def test_check_op_arguments_runs_the_relation_on_values() -> None:
    from relay_ir.op.runtime import check_op_arguments

    rng = seeded_rng()
    op = relay_ir.get_op("nn.dense")
    check_op_arguments(op, [rand(rng, 2, 3), rand(rng, 4, 3)], op.make_attrs())
    with pytest.raises(RelayRuntimeError, match=r"nn.dense: argument 1 \(weight\) the reduction "
                       r"dim does not match: .*at run time, with arguments "
                       r"Tensor\[\(2, 3\), float32\], Tensor\[\(4, 5\), float32\]"):
        check_op_arguments(op, [rand(rng, 2, 3), rand(rng, 4, 5)], op.make_attrs())
