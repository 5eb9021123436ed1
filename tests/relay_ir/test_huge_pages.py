"""relay_ir.backend.huge_pages: memory on 2 MiB pages, for a model's arenas and a tuning
runner's arrays."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from relay_ir.backend.huge_pages import (
    ALIGN,
    HUGE_PAGE,
    advised_huge,
    huge_page_arrays,
    huge_page_bytes,
    mapping_field,
)

LINUX_SMAPS = os.path.exists("/proc/self/smaps")


def test_the_copies_hold_the_arrays_values_shapes_and_dtypes() -> None:
    rng = np.random.default_rng(3)
    src = [rng.standard_normal((3, 5)).astype("float32"), rng.integers(0, 9, 7),
           rng.standard_normal(1000)]
    got = huge_page_arrays(src)
    for a, b in zip(src, got):
        assert b.shape == a.shape and b.dtype == a.dtype
        np.testing.assert_array_equal(a, b)


def test_the_copies_lie_in_order_at_aligned_boundaries_from_a_2mib_boundary() -> None:
    got = huge_page_arrays([np.ones(3, "float32"), np.ones(100, "float64"), np.ones(1)])
    starts = [a.ctypes.data for a in got]
    assert starts[0] % HUGE_PAGE == 0
    assert all(s % ALIGN == 0 for s in starts)
    assert starts[1] - starts[0] == ALIGN  # 12 bytes, then the next boundary
    assert starts[2] - starts[1] == 832  # 800 bytes, then the next boundary


def test_a_copy_writes_do_not_reach_the_source() -> None:
    src = np.zeros(16, "float32")
    [copy] = huge_page_arrays([src])
    copy[:] = 5
    assert not src.any()


def test_the_copies_outlive_the_call_and_every_other_reference() -> None:
    [a, _b] = huge_page_arrays([np.arange(10.0), np.arange(3.0)])
    del _b
    gc.collect()
    a += 1  # the mapping is still there: writes and reads do not fault
    assert a.tolist() == list(np.arange(1.0, 11.0))


@pytest.mark.skipif(not LINUX_SMAPS, reason="reads /proc/self/smaps (Linux)")
def test_the_copies_lie_in_memory_advised_for_huge_pages() -> None:
    [a, b] = huge_page_arrays([np.ones(5 << 10, "float32"), np.ones(3, "float32")])
    assert advised_huge(a) and advised_huge(b)


@pytest.mark.skipif(not LINUX_SMAPS, reason="reads /proc/self/smaps (Linux)")
def test_mapping_field_reads_the_smaps_entry_of_the_mapping_holding_an_address() -> None:
    b = huge_page_bytes(8)  # a mapping of two huge pages (one for the 2 MiB alignment)
    size, unit = mapping_field(b.ctypes.data, "Size:")
    assert unit == "kB" and int(size) >= 2 * HUGE_PAGE // 1024  # (a neighbour may merge)
    assert mapping_field(b.ctypes.data, "NoSuchField:") is None
    assert mapping_field(0, "Size:") is None  # no mapping holds address 0
