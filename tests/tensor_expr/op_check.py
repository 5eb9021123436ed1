"""Shared checks for the op tests: an op against numpy through te.evaluate (the oracle)
and through the compiled path (default schedule, or a given one, built for "llvm")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import lowering
import tensor_expr as te
from schedule import create_schedule


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if got.dtype.kind in "biu" and want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got.astype("float64"), want.astype("float64"), rtol=rtol,
                                   atol=atol, err_msg=what, equal_nan=True)


def run_compiled(outs: Any, inputs: dict[te.Tensor, np.ndarray], sch: Any = None,
                 out_shapes: Sequence[tuple[int, ...]] | None = None) -> list[np.ndarray]:
    """Build `sch` (default: create_schedule(outs)) for llvm and run it on the inputs."""
    outs_l = _as_list(outs)
    s = create_schedule(outs_l) if sch is None else sch
    args = list(inputs) + outs_l
    kernel = lowering.build(s, args, target="llvm")
    if out_shapes is None:
        out_shapes = [tuple(int(d.value) for d in t.shape) for t in outs_l]
    results = [np.full(shape, 7, t.dtype) for shape, t in zip(out_shapes, outs_l)]
    kernel(*[inputs[t] for t in inputs], *results)
    return results


def check(outs: Any, inputs: dict[te.Tensor, np.ndarray], expected: Any, rtol: float = 1e-5,
          atol: float = 1e-6, compiled: bool = True, sch: Any = None) -> None:
    """Compare `outs` with `expected` via te.evaluate and via the compiled kernel."""
    outs_l, want_l = _as_list(outs), _as_list(expected)
    got = _as_list(te.evaluate(outs_l, inputs))
    for g, w, t in zip(got, want_l, outs_l):
        assert g.dtype == np.dtype(t.dtype), f"evaluate dtype {g.dtype} for {t.name}"
        assert_close(g, w, rtol, atol, f"te.evaluate of {t.name}")
    if compiled:
        shapes = [np.asarray(w).shape for w in want_l]
        for g, w, t in zip(run_compiled(outs_l, inputs, sch, shapes), want_l, outs_l):
            assert_close(g, w, rtol, atol, f"compiled {t.name}")


def rand(rng: np.random.Generator, shape: Sequence[int], dtype: str = "float32",
         low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """Fresh random data of a dtype (integers in [low, high))."""
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(low), int(high), size=shape).astype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return (rng.random(shape) * (high - low) + low).astype(dtype)
