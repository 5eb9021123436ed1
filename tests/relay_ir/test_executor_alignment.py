"""The graph executor hands kernels vector-aligned memory: constants (packed weights among
them) and planned intermediates start at a 64-byte boundary, whatever numpy's allocator
gave, so no AVX-512 load of them splits across two cache lines."""

from __future__ import annotations

import numpy as np

import relay_ir
from relay_ir.backend.executor import ALIGN, aligned, aligned_empty


def test_aligned_empty_starts_at_the_boundary_for_every_dtype_and_shape() -> None:
    for dtype in ("float32", "int8", "float64", "int32"):
        for shape in ((1,), (3, 7), (1000, 513)):
            a = aligned_empty(shape, dtype)
            assert a.shape == shape and a.dtype == np.dtype(dtype)
            assert a.flags.c_contiguous and a.ctypes.data % ALIGN == 0


def test_aligned_copies_a_misaligned_array_and_keeps_its_values() -> None:
    base = np.random.default_rng(3).standard_normal(1001).astype("float32")
    misaligned = base[1:]  # 4 bytes past an aligned start at best
    assert misaligned.ctypes.data % ALIGN != 0
    a = aligned(misaligned)
    assert a.ctypes.data % ALIGN == 0
    np.testing.assert_array_equal(a, misaligned)


def test_an_aligned_contiguous_array_is_used_as_it_is() -> None:
    a = aligned_empty((8, 8), "float32")
    assert aligned(a) is a


def test_a_built_models_constants_and_intermediates_are_aligned() -> None:
    mod = relay_ir.parse("""
    def @main(%x: Tensor[(1, 96), float32], %w: Tensor[(200, 96), float32],
              %v: Tensor[(10, 200), float32]) {
      nn.dense(nn.relu(nn.dense(%x, %w)), %v)
    }""")
    rng = np.random.default_rng(5)
    w = rng.standard_normal((200, 96)).astype("float32")
    v = rng.standard_normal((10, 200)).astype("float32")
    lib = relay_ir.build(mod, params={"w": w, "v": v})
    x = rng.standard_normal((1, 96)).astype("float32")
    np.testing.assert_allclose(lib.run(x), np.maximum(x @ w.T, 0) @ v.T, rtol=1e-4, atol=1e-4)
    plan = lib.plan
    env = plan.bind([x])
    kinds = {val.kind for val in plan.values}
    assert {"const", "temp"} <= kinds
    for i, val in enumerate(plan.values):
        if val.kind in ("const", "temp"):
            assert env[i].ctypes.data % ALIGN == 0, (val.kind, val.shape)
