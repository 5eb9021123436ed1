"""lowering.llvm.cache_flush: clflush over arrays' lines, for cold-cache timing."""

from __future__ import annotations

import platform

import numpy as np
import pytest

import lowering.llvm.cache_flush as cache_flush
from lowering.llvm.cache_flush import _byte_range, flush_arrays

X86 = platform.machine().lower() in ("x86_64", "amd64")


@pytest.mark.skipif(not X86, reason="clflush is an x86 instruction")
def test_flushing_leaves_every_value_as_it_was() -> None:
    rng = np.random.default_rng()
    arrays = [rng.standard_normal(n).astype(dt) for n, dt in
              ((1, "float32"), (17, "float64"), (100_003, "float32"), (4096, "int8"))]
    before = [a.copy() for a in arrays]
    assert flush_arrays(arrays) is True
    for a, b in zip(arrays, before, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(not X86, reason="clflush is an x86 instruction")
def test_views_at_odd_offsets_and_empty_arrays_are_flushed_without_error() -> None:
    base = np.random.default_rng().standard_normal(10_001).astype("float32")
    keep = base.copy()
    assert flush_arrays([base[3:], base[1:-5:3], base[:0], np.zeros((0, 4)), base[7:8]])
    np.testing.assert_array_equal(base, keep)


def test_a_view_spans_its_first_to_its_last_element() -> None:
    base = np.zeros(1000, "float32")
    addr, n = _byte_range(base[10:20:3])  # elements 10, 13, 16, 19
    assert addr == base.ctypes.data + 40
    assert n == (19 - 10 + 1) * 4
    assert _byte_range(base[:0]) == (0, 0)


def test_a_host_without_clflush_flushes_nothing_and_says_so(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_flush.platform, "machine", lambda: "aarch64")
    cache_flush._flush_fn.cache_clear()
    try:
        assert flush_arrays([np.ones(8)]) is False
    finally:
        cache_flush._flush_fn.cache_clear()
