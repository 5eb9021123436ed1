"""Run-time checks of gradual shapes: inserted by inference, evaluated by the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from relay_ir.expr import Call
from relay_ir.interpreter import interpret
from relay_ir.typing import infer_type
from relay_ir.visitor import post_order
from tessel_errors import RelayRuntimeError
from tests.rng import seeded_rng

DENSE = """def @main(%x: Tensor[(?, ?), float32], %w: Tensor[(16, 3), float32]) {
  nn.dense(%x, %w)
}"""

RESHAPE_INTO_CALL = """
def @f(%y: Tensor[(8, 3), float32]) -> Tensor[(8, 3), float32] { nn.relu(%y) }
def @main(%x: Tensor[(?, 6), float32]) { @f(reshape(%x, newshape=[-1, 3])) }"""


def checks_in(mod: relay_ir.IRModule) -> list[Call]:
    """The runtime.check_shape calls of every function of `mod`."""
    return [n for fn in mod.functions.values() for n in post_order(fn)
            if isinstance(n, Call) and getattr(n.op, "name", "") == "runtime.check_shape"]


def test_check_inserted_for_a_refined_parameter() -> None:
    mod = infer_type(relay_ir.parse(DENSE))
    (check,) = checks_in(mod)
    assert check.attrs.shape == (-1, 3)
    assert mod.type_report.runtime_checks == [
        "%x: dim 1 must be 3 (required by nn.dense at line 2)"]


def test_checked_program_computes_like_numpy() -> None:
    rng = seeded_rng()
    x = rng.standard_normal((5, 3)).astype("float32")
    w = rng.standard_normal((16, 3)).astype("float32")
    got = interpret(infer_type(relay_ir.parse(DENSE)), x, w)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.T, rtol=1e-5, atol=1e-5)


def test_failing_check_raises_a_runtime_error_in_the_interpreter() -> None:
    rng = seeded_rng()
    x = rng.standard_normal((5, 4)).astype("float32")
    w = rng.standard_normal((16, 3)).astype("float32")
    mod = infer_type(relay_ir.parse(DENSE))
    with pytest.raises(RelayRuntimeError, match=r"%x: dim 1 must be 3 \(required by nn.dense "
                       r"at line 2\): expected shape \(\?, 3\), got a value of shape \(5, 4\)"):
        interpret(mod, x, w)


def test_check_wraps_a_call_result_that_a_later_use_refines() -> None:
    mod = infer_type(relay_ir.parse(RESHAPE_INTO_CALL))
    assert mod.refinements == [
        "the result of reshape at line 3: dim 0 refined from ? to 8 by the call of @f at line 3"]
    (check,) = checks_in(mod)
    assert check.args[0].op.name == "reshape" and check.attrs.shape == (8, -1)
    rng = seeded_rng()
    ok = rng.standard_normal((4, 6)).astype("float32")
    np.testing.assert_array_equal(interpret(mod, ok), np.maximum(ok.reshape(8, 3), 0))
    with pytest.raises(RelayRuntimeError, match=r"the result of reshape at line 3: dim 0 must "
                       r"be 8 .*got a value of shape \(6, 3\)"):
        interpret(mod, rng.standard_normal((3, 6)).astype("float32"))


def test_check_in_a_closure_parameter() -> None:
    mod = infer_type(relay_ir.parse("""def @main(%x: Tensor[(2, 4), float32],
                                                %w: Tensor[(5, 4), float32]) {
      let %f = fn (%a: Tensor[(?, ?), float32]) { nn.dense(%a, %w) };
      %f(%x)
    }"""))
    # the closure is monomorphic: its one call fixes both dims of %a
    assert [c.attrs.shape for c in checks_in(mod)] == [(2, 4)]
    rng = seeded_rng()
    x, w = rng.standard_normal((2, 4)).astype("float32"), rng.standard_normal((5, 4)).astype(
        "float32")
    np.testing.assert_allclose(interpret(mod, x, w), x.astype(np.float64) @ w.T, rtol=1e-5,
                               atol=1e-5)


def test_reinference_adds_no_checks() -> None:
    once = infer_type(relay_ir.parse(RESHAPE_INTO_CALL))
    twice = infer_type(once)
    assert len(checks_in(twice)) == 1
    assert twice.refinements == [] and twice.type_report.runtime_checks == []


def test_no_checks_when_everything_is_static() -> None:
    mod = infer_type(relay_ir.parse("""def @main(%x: Tensor[(2, 3), float32],
                                                %w: Tensor[(4, 3), float32]) {
      nn.dense(%x, %w)
    }"""))
    assert checks_in(mod) == []
