"""A compiled model's arenas (constants, intermediates) lie on huge pages from a huge page's
size up, whatever memory numpy would have given (executor.arena_bytes); below, numpy's."""

from __future__ import annotations

import mmap
import os

import numpy as np
import pytest

import relay_ir
from relay_ir import nn
from relay_ir.backend.executor import Step, Value, arena_bytes, pack_constants
from relay_ir.backend.huge_pages import HUGE_PAGE, advised_huge
from relay_ir.backend.memory_plan import PAGE
from tests.relay_ir import programs as P
from tests.rng import seeded_rng

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/smaps"),
                                reason="reads /proc/self/smaps (Linux)")


def _owner(a: np.ndarray) -> object:
    """What holds the memory of `a`: the ndarray that owns it, or the mapping."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def test_an_arena_of_a_huge_page_or_more_starts_on_one_advised_for_them() -> None:
    a = arena_bytes(HUGE_PAGE, PAGE)
    assert a.size == HUGE_PAGE and a.ctypes.data % HUGE_PAGE == 0 and advised_huge(a)
    assert isinstance(_owner(a), memoryview) and isinstance(_owner(a).obj, mmap.mmap)


def test_a_smaller_arena_is_numpys_at_its_alignment() -> None:
    # not a mapping of its own (2 MiB of memory for a few KiB); whether numpy's memory is
    # advised for huge pages depends on what the process freed before (numpy advises
    # allocations of 4 MiB or more, and glibc reuses them), so that is not asserted
    a = arena_bytes(HUGE_PAGE - 1, PAGE)
    assert a.size == HUGE_PAGE - 1 and a.ctypes.data % PAGE == 0
    assert isinstance(_owner(a), np.ndarray)


def test_large_constants_lie_on_huge_pages_with_their_values() -> None:
    rng = seeded_rng()
    vals = [Value("const", (768, 768), "float32",
                  data=rng.standard_normal((768, 768)).astype("float32")),
            Value("const", (5,), "float32", data=rng.standard_normal(5).astype("float32"))]
    before = [v.data.copy() for v in vals]
    pack_constants(vals, [Step(0, [0, 1], [], "a")])
    assert all(advised_huge(v.data) for v in vals)
    for v, want in zip(vals, before):
        np.testing.assert_array_equal(v.data, want)


def test_large_intermediates_lie_on_huge_pages_at_their_planned_page_offsets() -> None:
    x = P.tvar("x", (768, 768))  # 2.25 MiB a value
    e = x
    for k in range(4):
        e = relay_ir.tanh(relay_ir.transpose(e, (1, 0))) if k % 2 else nn.softmax(e, axis=-1)
    mod = P.main_module([x], e)
    lib = relay_ir.build(mod)
    data = seeded_rng().standard_normal((768, 768)).astype("float32")
    env = lib.plan.execute([data])
    temps = [v for v, val in enumerate(lib.plan.values) if val.kind == "temp"]
    assert temps and all(advised_huge(env[v]) for v in temps)
    assert [env[v].ctypes.data % PAGE for v in temps] == \
        [o % PAGE for o in lib.memory_plan.offsets]
    np.testing.assert_allclose(lib.run(x=data), relay_ir.interpret(mod, data), rtol=1e-4,
                               atol=1e-6)
