"""The fast IR builder leans on llvmlite internals; on an llvmlite whose internals differ it
turns itself off and kernels still build, through llvmlite's plain path, to the same
results. The code generator's type and constant caches stay bounded."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
import lowering.llvm.fastir as fastir
import tensor_expr as te
from lowering.ir import Buffer, BufferStore, For, ForKind, PrimFunc
from tests.rng import seeded_rng


def _axpy() -> PrimFunc:
    A, B = Buffer("A", (64,), "float32"), Buffer("B", (64,), "float32")
    i, j = te.var("i"), te.var("j")
    idx = i * 4 + j
    body = BufferStore(B, A[idx] * 3.0 + B[idx], (idx,))
    return PrimFunc("axpy", (A, B), For(i, te.const(0), te.const(16), ForKind.SERIAL,
                                        For(j, te.const(0), te.const(4), ForKind.UNROLLED,
                                            body)))


def _run(func: PrimFunc) -> None:
    rng = seeded_rng()
    a = rng.standard_normal(64).astype("float32")
    b = rng.standard_normal(64).astype("float32")
    want = a * np.float32(3.0) + b
    lowering.build(func, target="llvm")(a, b)
    np.testing.assert_allclose(b, want, rtol=1e-6, atol=1e-6)


def test_the_installed_llvmlite_passes_the_self_check() -> None:
    assert fastir._same_text_as_llvmlite()
    assert fastir.FAST_OK


def test_changed_llvmlite_internals_turn_the_shortcuts_off_with_a_warning(monkeypatch) -> None:
    def renamed(self, name, deduplicate=False):  # as if NameScope's fields had moved
        raise AttributeError("_useset")

    monkeypatch.setattr(fastir, "FAST_OK", True)  # restored after the test
    monkeypatch.setattr(fastir._FastScope, "register", renamed)
    with pytest.warns(RuntimeWarning, match="plain path"):
        assert not fastir._same_text_as_llvmlite()
    assert not fastir.FAST_OK


def test_a_kernel_builds_and_matches_numpy_without_the_shortcuts(monkeypatch) -> None:
    monkeypatch.setattr(fastir, "FAST_OK", False)
    _run(_axpy())


def test_the_type_and_constant_caches_both_keep_recent_entries_when_full(monkeypatch) -> None:
    from llvmlite import ir

    from lowering.llvm import types

    monkeypatch.setattr(types, "_CONST_MAX", 4)
    monkeypatch.setattr(types, "_VEC", {})
    monkeypatch.setattr(types, "_CONST", {})
    f32 = ir.FloatType()
    for lanes in range(1, 10):
        types.vec(f32, lanes)
        types.const(f32, float(lanes))
    assert 0 < len(types._VEC) <= 4 and 0 < len(types._CONST) <= 4
    # the last ones made are the ones kept, and a kept entry is the same object again
    assert types.vec(f32, 9) is types.vec(f32, 9)
    assert types.const(f32, 9.0) is types.const(f32, 9.0)
    assert str(types.vec(f32, 9)) == "<9 x float>"
