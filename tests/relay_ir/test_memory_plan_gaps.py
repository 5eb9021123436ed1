"""Values placed in gaps of blocks held in part (memory_plan's nested blocks): a value that
no free block holds takes the room a smaller value left in a block, values live together
still never share bytes nor a page offset, the peak is never above the plan's without
gaps, and a model planned so equals the interpreter and the plan without them."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from relay_ir.backend.memory_plan import (
    ALIGN,
    PAGE,
    _best_fit,
    block_offsets,
    page_offset,
    plan_memory,
)
from relay_ir.backend.pipeline import bind_params
from tests.relay_ir.test_memory_plan_inplace import _small_resnet
from tests.relay_ir.test_memory_plan_offsets import _overlap, _random_spans
from tests.rng import seeded_rng

# 0: 8 KiB at steps 0-1; 1 and 2: 2 KiB live at step 3, when 0 is gone and 2 holds its
# block; 3, written at step 3, finds no free block: the gap past 2 in 0's block
SPANS = [(0, 1, 8192), (1, 3, 2048), (2, 3, 2048), (3, 4, 2048)]


def _apart(spans, plan, share=None) -> None:
    offs = plan.offsets
    share = share or {}
    for i in range(len(spans)):
        for j in range(i):
            if not _overlap(spans[i], spans[j]) or share.get(i) == j or share.get(j) == i:
                continue
            lo, hi = sorted([(offs[i], spans[i][2]), (offs[j], spans[j][2])])
            assert lo[0] + lo[1] <= hi[0], (i, j)
            assert offs[i] % PAGE != offs[j] % PAGE, (i, j)


def test_a_value_no_free_block_holds_takes_the_gap_a_smaller_value_left() -> None:
    plan = plan_memory(SPANS, skew=True, gaps=True)
    b = plan.storage_of[3]
    parent, at = plan.nested[b]
    assert parent == plan.storage_of[2] == plan.storage_of[0]
    assert at >= 2048 and at + 2048 <= 8192 and at % ALIGN == 0
    # its start modulo the page is that of a block of its own index
    assert plan.offsets[3] % PAGE == page_offset(b, skew=True)
    assert plan.peak_bytes == 8192 + 2048 < plan_memory(SPANS, gaps=False).peak_bytes
    assert plan.arena_bytes < plan_memory(SPANS, gaps=False).arena_bytes
    _apart(SPANS, plan)


def test_without_gaps_such_a_value_opens_a_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSEL_PLAN_GAPS", "0")
    plan = plan_memory(SPANS)
    assert not any(plan.nested) and len(plan.block_bytes) == 3
    assert plan.peak_bytes == 8192 + 2 * 2048


def test_a_nested_value_starts_on_a_page_without_skew() -> None:
    plan = plan_memory([(0, 1, 16384), (1, 3, 2048), (2, 3, 2048), (3, 4, 2048)],
                       skew=False, gaps=True)
    assert plan.nested[plan.storage_of[3]] is not None
    assert all(o % PAGE == 0 for o in plan.offsets)


def test_an_output_in_place_never_grows_over_a_value_in_its_block() -> None:
    # 1 takes 0's freed 8 KiB block, 2 the gap past it; 3 (6 KiB) may take 1's storage
    # in place, but that would reach over 2: it goes elsewhere (the greedy plan itself,
    # before plan_memory keeps the lower peak of the plans with gaps and without)
    spans = [(0, 1, 8192), (2, 3, 2048), (2, 4, 2048), (3, 4, 6144)]
    fit = _best_fit(spans, {3: 1}, skew=True, gaps=True)
    assert fit.nested[fit.storage_of[2]] == (fit.storage_of[1], 4672)
    assert fit.storage_of[3] != fit.storage_of[1]
    offs = block_offsets(fit.blocks, True, fit.nested)
    assert offs[fit.storage_of[3]] >= offs[fit.storage_of[1]] + 8192  # a block of its own


def test_random_plans_with_gaps_keep_live_values_apart_and_the_peak_no_higher() -> None:
    nested = 0
    for n in (40, 80, 120):
        spans = _random_spans(n)
        rng = seeded_rng()
        share = {}
        for v, (start, _, _) in enumerate(spans):
            dying = [u for u, s in enumerate(spans) if s[1] == start and u != v]
            if dying and rng.random() < 0.5:
                share[v] = int(rng.choice(dying))
        for sh in ({}, share):
            plan = plan_memory(spans, skew=True, share=sh, gaps=True)
            assert len(plan.block_bytes) <= PAGE // ALIGN  # the case the skew covers fully
            nested += sum(x is not None for x in plan.nested)
            _apart(spans, plan, sh)
            assert plan.peak_bytes <= plan_memory(spans, share=sh, gaps=False).peak_bytes
            for b, inside in enumerate(plan.nested):
                if inside is not None:  # inside its parent's bytes
                    assert inside[1] + plan.block_bytes[b] <= plan.block_bytes[inside[0]]
    assert nested > 0


def test_resnet_planned_with_gaps_equals_the_interpreter_and_the_plan_without(
        monkeypatch: pytest.MonkeyPatch) -> None:
    mod, params, name = _small_resnet()
    x = seeded_rng().standard_normal((1, 3, 32, 32)).astype("float32")
    lib = relay_ir.build(mod, target="llvm", params=params)
    assert any(lib.memory_plan.nested)  # the downsample convs' outputs
    got = lib.run(**{name: x})
    want = relay_ir.interpret(bind_params(mod, params), **{name: x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    monkeypatch.setenv("TESSEL_PLAN_GAPS", "0")
    off = relay_ir.build(mod, target="llvm", params=params)
    assert not any(off.memory_plan.nested)
    assert lib.memory_plan.peak_bytes < off.memory_plan.peak_bytes
    np.testing.assert_array_equal(off.run(**{name: x}), got)
