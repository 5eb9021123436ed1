"""right_shift / left_shift: integer-only relations, exact references (arithmetic right
shift, wrapping left shift, out-of-range amounts clamped as documented), and relay_ir.build
equal to the interpreter bit for bit; round compiles half away from zero like its
reference."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir as R
from tessel_errors import RelayTypeError
from tests.relay_ir import programs as P
from tests.relay_ir.op_helpers import T, ref, rel
from tests.rng import seeded_rng


def test_right_shift_is_arithmetic_on_negative_values() -> None:
    x = np.array([-7, -1, 5, 2**31 - 1, -(2**31)], "int32")
    got = ref("right_shift", x, np.int32(1))
    np.testing.assert_array_equal(got, [-4, -1, 2, 2**30 - 1, -(2**30)])


def test_shift_amounts_outside_the_width_are_clamped() -> None:
    x = np.array([-5, 5, 3], "int32")
    np.testing.assert_array_equal(ref("right_shift", x, np.array([40, 40, -2], "int32")),
                                  [-1, 0, 3])
    np.testing.assert_array_equal(ref("left_shift", x, np.array([32, 1, -2], "int32")),
                                  [0, 10, 3])


def test_left_shift_wraps_around_int32() -> None:
    got = ref("left_shift", np.array([3, 2**30], "int32"), np.int32(2))
    np.testing.assert_array_equal(got, [12, 0])


def test_shift_relation_broadcasts_integers() -> None:
    assert rel("right_shift", T((2, 3), "int32"), T((3,), "int32")) == T((2, 3), "int32")


@pytest.mark.parametrize("name", ["right_shift", "left_shift"])
def test_shift_of_float_tensors_is_a_type_error(name: str) -> None:
    x = P.tvar("x", (4,), "float32")
    mod = P.main_module([x], getattr(R, name)(x, x))
    with pytest.raises(RelayTypeError, match="shifts integer tensors"):
        R.transform.InferType()(mod)


@pytest.mark.parametrize("dtype", ["int32", "int8", "int64"])
def test_shifts_compile_to_interpreter_semantics(dtype: str) -> None:
    rng = seeded_rng()
    info = np.iinfo(dtype)
    width = info.bits
    x = P.tvar("x", (5, 19), dtype)
    s = P.tvar("s", (19,), dtype)
    mod = P.main_module([x, s], R.left_shift(R.right_shift(x, s), P.const(2, dtype)))
    xv = rng.integers(info.min, info.max, (5, 19), endpoint=True).astype(dtype)
    sv = rng.integers(-2, width + 3, (19,)).astype(dtype)
    got = R.build(mod).run(xv, sv)
    np.testing.assert_array_equal(got, R.interpret(mod, xv, sv))


def test_round_compiles_half_away_from_zero() -> None:
    # every value a multiple of 0.5: ties everywhere, where half-to-even would differ
    rng = seeded_rng()
    x = P.tvar("x", (4, 33))
    mod = P.main_module([x], R.round(R.multiply(x, P.const(0.5))))
    xv = rng.integers(-40, 40, (4, 33)).astype("float32")
    got = R.build(mod).run(xv)
    want = R.interpret(mod, xv)
    np.testing.assert_array_equal(got, want)


def test_round_reference_rounds_ties_away_from_zero() -> None:
    got = ref("round", np.array([0.5, -1.5, 2.5, -0.49999997], "float32"))
    np.testing.assert_array_equal(got, [1.0, -2.0, 3.0, -0.0])
