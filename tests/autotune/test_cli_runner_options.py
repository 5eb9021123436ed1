"""`tessel tune`'s runner settings: a model's tasks are timed as the model runs them."""

from __future__ import annotations

import pytest

from autotune.cli import build_parser, runner_options

BIG, SMALL = 45 << 20, 3 << 20  # ResNet-18's weights; the README's small ResNet's


def _opts(*argv: str, model: bool, weight_bytes: int = 0) -> dict:
    return runner_options(build_parser().parse_args(["tune", *argv]), model, weight_bytes)


def test_a_large_models_tasks_are_timed_cold_beside_the_default() -> None:
    o = _opts("m.onnx", model=True, weight_bytes=BIG)
    assert o["cache_flush"] and o["control"] and o["model_layout"]


def test_a_small_models_tasks_are_timed_warm_beside_the_default() -> None:
    o = _opts("m.onnx", model=True, weight_bytes=SMALL)
    assert not o["cache_flush"] and o["control"] and o["model_layout"]


def test_an_op_is_timed_warm_and_alone() -> None:
    o = _opts("--op", "matmul:8x8x8", model=False)
    assert not o["cache_flush"] and not o["control"] and not o["model_layout"]


@pytest.mark.parametrize("flag, want", [("--no-cache-flush", False), ("--cache-flush", True)])
def test_the_flag_overrides_the_default(flag: str, want: bool) -> None:
    assert _opts("m.onnx", flag, model=True, weight_bytes=BIG)["cache_flush"] is want
    assert _opts("m.onnx", flag, model=True, weight_bytes=SMALL)["cache_flush"] is want
    assert _opts("--op", "matmul:8x8x8", flag, model=False)["cache_flush"] is want


def test_a_models_tasks_are_timed_on_huge_pages_as_its_arenas_lie() -> None:
    assert _opts("m.onnx", model=True, weight_bytes=BIG)["huge_pages"] is True
    assert _opts("m.onnx", model=True, weight_bytes=SMALL)["huge_pages"] is True


def test_a_tiny_model_and_an_op_are_timed_on_the_pages_numpy_gives() -> None:
    # under a huge page of weights, the model's constant arena is numpy's (arena_bytes)
    assert _opts("m.onnx", model=True, weight_bytes=1 << 20)["huge_pages"] is False
    assert _opts("--op", "matmul:8x8x8", model=False)["huge_pages"] is False


@pytest.mark.parametrize("flag, want", [("--no-huge-pages", False), ("--huge-pages", True)])
def test_the_huge_pages_flag_overrides_the_default(flag: str, want: bool) -> None:
    assert _opts("m.onnx", flag, model=True, weight_bytes=BIG)["huge_pages"] is want
    assert _opts("--op", "matmul:8x8x8", flag, model=False)["huge_pages"] is want
