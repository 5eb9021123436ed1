"""The loop-IR reference interpreter against numpy, and its error cases."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering.interpreter import run
from lowering.ir import Allocate, Buffer, BufferStore, For, ForKind, PrimFunc, seq
from tessel_errors import KernelArgumentError, LoweringError
from tests.lowering import ir_examples as X
from tests.rng import seeded_rng
from tests.unwritten import unwritten

EXAMPLES = X.all_examples()


def tolerance(dtype: str) -> dict[str, float]:
    """Comparison tolerance for results of `dtype`."""
    if dtype == "float16":
        return {"rtol": 2e-3, "atol": 2e-3}
    if dtype == "float32":
        return {"rtol": 2e-5, "atol": 1e-4}
    return {"rtol": 1e-12, "atol": 1e-12}


def check_example(name: str, runner) -> None:
    """Run example `name` with `runner(func, *arrays)` and compare with its reference."""
    func, make, ref = EXAMPLES[name]
    arrays = make(seeded_rng())
    expected = ref([a.copy() for a in arrays])
    runner(func, *arrays)
    for pos, want in expected.items():
        got = arrays[pos]
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got, want, **tolerance(str(got.dtype)))
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_matches_numpy(name: str) -> None:
    check_example(name, run)


@pytest.mark.parametrize("name", X.INTRINSICS)
def test_intrinsic_float32_matches_numpy(name: str) -> None:
    func, make, ref = X.intrinsic(name, "float32")
    a, b = make(seeded_rng())
    run(func, a, b)
    np.testing.assert_allclose(b, ref([a, b])[1], rtol=1e-5, atol=1e-6)


def test_floor_division_follows_python() -> None:
    A, B, M = (Buffer(n, (9,), "int32") for n in ("A", "B", "M"))
    i = te.var("i")
    f = PrimFunc("fd", (A, B, M), For(i, te.const(0), te.const(9), ForKind.SERIAL, seq(
        BufferStore(B, A[i] // 4, (i,)), BufferStore(M, A[i] % 4, (i,)))))
    a = np.arange(-4, 5, dtype="int32")
    b, m = unwritten(9, "int32"), unwritten(9, "int32")
    run(f, a, b, m)
    assert b.tolist() == [x // 4 for x in range(-4, 5)]
    assert m.tolist() == [x % 4 for x in range(-4, 5)]


def test_if_then_else_does_not_evaluate_untaken_side() -> None:
    func, make, ref = EXAMPLES["padded_read"]
    a, b = make(seeded_rng())
    run(func, a, b)  # A[i - 2] at i = 0 would be out of bounds
    np.testing.assert_array_equal(b, ref([a, b])[1])


def test_select_evaluates_both_sides() -> None:
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    i = te.var("i")
    f = PrimFunc("sel", (A, B), For(i, te.const(0), te.const(4), ForKind.SERIAL,
                                     BufferStore(B, te.select(i > 0, A[i - 1], 0.0), (i,))))
    with pytest.raises(LoweringError, match=r"out-of-bounds read of A\[-1\]"):
        run(f, np.ones(4, "float32"), np.zeros(4, "float32"))


def test_out_of_bounds_write_names_buffer_and_index() -> None:
    B = Buffer("B", (4, 3), "float32")
    i = te.var("i")
    f = PrimFunc("oob", (B,), For(i, te.const(0), te.const(4), ForKind.SERIAL,
                                  BufferStore(B, te.const(1.0), (i, i))))
    with pytest.raises(LoweringError, match=r"out-of-bounds write of B\[3, 3\]: index 3 of "
                                            r"dimension 1 is outside \[0, 3\)"):
        run(f, np.zeros((4, 3), "float32"))


def test_assert_failure_raises_with_message() -> None:
    func, make, _ = EXAMPLES["lets_and_branches"]
    a, b = make(seeded_rng())
    a[0] = 5000
    with pytest.raises(KernelArgumentError, match="run-time check failed: A.0. must be below"):
        run(func, a, b)


def test_unwritten_local_memory_reads_nan() -> None:
    T = Buffer("T", (4,), "float32", scope="local")
    B = Buffer("B", (4,), "float32")
    i = te.var("i")
    f = PrimFunc("uninit", (B,), Allocate(T, For(i, te.const(0), te.const(4), ForKind.SERIAL,
                                                 BufferStore(B, T[i], (i,)))))
    b = np.zeros(4, "float32")
    run(f, b)
    assert np.isnan(b).all()


def test_int8_arithmetic_wraps() -> None:
    A, B = Buffer("A", (3,), "int8"), Buffer("B", (3,), "int8")
    i = te.var("i")
    f = PrimFunc("wrap", (A, B), For(i, te.const(0), te.const(3), ForKind.SERIAL,
                                     BufferStore(B, A[i] * 2 + 100, (i,))))
    a = np.array([100, -100, 7], "int8")
    b = unwritten(3, "int8")
    run(f, a, b)
    with np.errstate(all="ignore"):
        assert b.tolist() == (a * np.int8(2) + np.int8(100)).tolist()


def test_every_loop_kind_runs_serially() -> None:
    B = Buffer("B", (6,), "int32")
    i = te.var("i")
    for kind in ForKind:
        f = PrimFunc("k", (B,), For(i, te.const(0), te.const(6), kind,
                                    BufferStore(B, i * 3, (i,)), thread_tag="threadIdx.x"))
        b = np.zeros(6, "int32")
        run(f, b)
        assert b.tolist() == [0, 3, 6, 9, 12, 15], kind


def test_symbolic_shape_mismatch_is_reported() -> None:
    func, _, _ = EXAMPLES["symbolic"]
    with pytest.raises(KernelArgumentError,
                       match=r"argument 2 'B': expected shape \(5, 8\), got \(4, 8\) "
                             r"\(n = 5 from argument 1 'A'\)"):
        run(func, np.zeros((5, 8), "float32"), np.zeros((4, 8), "float32"))


def test_interpret_wrapper_runs_the_interpreter() -> None:
    func, make, ref = EXAMPLES["elementwise"]
    a, b = make(seeded_rng())
    lowering.interpret(func, a, b)
    np.testing.assert_allclose(b, ref([a, b])[1], rtol=1e-6)
