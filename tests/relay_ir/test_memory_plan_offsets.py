"""The memory plan's arena offsets: buffers live at the same time never overlap and start
at different offsets modulo the 4 KiB page (so they do not alias in the cache), and the
executor puts each planned buffer exactly at its planned offset."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from relay_ir.backend.memory_plan import ALIGN, PAGE, block_offsets, plan_memory
from tests.relay_ir.test_build import _chain
from tests.rng import seeded_rng


def _random_spans(n: int) -> list[tuple[int, int, int]]:
    rng = seeded_rng()
    spans = []
    for _ in range(n):
        start = int(rng.integers(0, 40))
        spans.append((start, start + int(rng.integers(0, 8)), int(rng.integers(1, 3 << 16))))
    return spans


def _overlap(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def test_values_live_together_start_at_distinct_page_offsets() -> None:
    spans = _random_spans(120)
    plan = plan_memory(spans, skew=True)
    assert len(plan.block_bytes) <= PAGE // ALIGN  # the case the skew covers fully
    offs = plan.offsets
    for i in range(len(spans)):
        for j in range(i):
            if _overlap(spans[i], spans[j]):
                assert offs[i] % PAGE != offs[j] % PAGE, (i, j)


def test_values_live_together_never_share_bytes() -> None:
    spans = _random_spans(120)
    for skew in (True, False):
        plan = plan_memory(spans, skew=skew)
        offs = plan.offsets
        for i in range(len(spans)):
            for j in range(i):
                if _overlap(spans[i], spans[j]):
                    lo, hi = sorted([(offs[i], spans[i][2]), (offs[j], spans[j][2])])
                    assert lo[0] + lo[1] <= hi[0], (i, j)


def test_block_offsets_are_cache_line_aligned_and_fit_the_arena() -> None:
    sizes = [int(n) for n in seeded_rng().integers(1, 1 << 20, 70) // ALIGN * ALIGN + ALIGN]
    offs = block_offsets(sizes, skew=True)
    assert all(o % ALIGN == 0 for o in offs)
    assert all(a + n <= b for a, n, b in zip(offs, sizes, offs[1:]))
    assert all(b - (a + n) < PAGE for a, n, b in zip(offs, sizes, offs[1:]))  # padding
    assert len({o % PAGE for o in offs[:64]}) == 64


def test_without_skew_every_block_starts_on_a_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSEL_PLAN_SKEW", "0")
    offs = block_offsets([100, 5000, 64])
    assert offs == [0, 4096, 12288]


def test_executor_places_buffers_at_the_planned_page_offsets() -> None:
    lib = relay_ir.build(_chain(6))
    x = seeded_rng().standard_normal((64, 64)).astype("float32")
    env = lib.plan.execute([x])
    temps = [v for v, val in enumerate(lib.plan.values) if val.kind == "temp"]
    got = [env[v].ctypes.data % PAGE for v in temps]
    assert got == [o % PAGE for o in lib.memory_plan.offsets]
    assert len(set(got)) == len(lib.memory_plan.block_bytes) == 2
    np.testing.assert_allclose(lib.run(x=x), relay_ir.interpret(_chain(6), x), rtol=1e-4,
                               atol=1e-6)


def test_table_lists_each_block_offset() -> None:
    plan = plan_memory([(0, 1, 8192), (1, 2, 8192), (2, 3, 8192)], skew=True)
    rows = plan.table().splitlines()[1:]
    assert [r.split()[:3] for r in rows] == [["0", "0", "0"], ["1", "8768", "576"]]
