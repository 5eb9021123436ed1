"""CUDA templates for dense, matmul and batch_matmul: shared-memory tiles of both operands.

Each block computes a tile_y x tile_x tile of C, one thread per element (threadIdx.y,
threadIdx.x); the k loop steps by tile_k, and at each step the block's threads load the
tile of A (tile_y x tile_k) and of B (tile_k x tile_x) into shared memory together (the
fused tile split over all threads), then every thread accumulates its element from
shared memory. The storage-sync pass puts the barriers in. Batch indices go to
blockIdx.z. An epilogue (bias, relu, ...) becomes a second, elementwise kernel.

Knobs: tile_y, tile_x (threads per block along each axis, at most 32 each), tile_k.
Register blocking (several outputs per thread from a local accumulator) is the next
step; today's lowering cannot yet infer the shared tiles through two levels of compute_at.

    >>> from schedule.templates import instantiate
    >>> s, args = instantiate("dense.cuda", [((64, 32), "float32"), ((48, 32), "float32")],
    ...                       target="cuda")
    >>> [t.name for t in args]
    ['data', 'weight', 'dense']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensor_expr as te
from schedule.schedule import Schedule, create_schedule
from schedule.space import FallbackConfig
from schedule.templates.common import (
    best_divisor,
    const_extent,
    fallback_split,
    find_anchor,
    inline_injective,
    shape_of,
)
from schedule.templates.cuda_generic import bind_elementwise
from schedule.templates.registry import expect_args, placeholders, register_template
from tensor_expr import tensor as T
from tensor_expr.tensor import Tensor

GEMM = "gemm"
MAX_TILE = 32  # threads per block axis: 32 x 32 = 1024, CUDA's limit


def _gemm(cfg: Any, a: Tensor, b: Tensor, trans_b: bool, batch: bool, name: str) -> Tensor:
    ash, bsh = shape_of(a), shape_of(b)
    M, K = ash[-2], ash[-1]
    N = bsh[-2] if trans_b else bsh[-1]
    k = T.reduce_axis((0, K), name="k")
    lead = (bsh[0],) if batch else ()

    def body(*ix: Any) -> Any:
        bt, i, j = ix[:-2], ix[-2], ix[-1]
        bv = b[(*bt, j, k)] if trans_b else b[(*bt, k, j)]
        return T.sum(a[(*bt, i, k)] * bv, axis=k)

    cfg.add_flop(2.0 * M * N * K * (bsh[0] if batch else 1))
    return T.compute((*lead, M, N), body, name=name, tag=GEMM)


def _dense_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                   ) -> tuple[list[Tensor], list[Tensor]]:
    expect_args("dense.cuda", args, 2, [2, 2])
    a, w = placeholders(args, ["data", "weight"])
    return [a, w], [_gemm(cfg, a, w, trans_b=True, batch=False, name="dense")]


def _matmul_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                    ) -> tuple[list[Tensor], list[Tensor]]:
    expect_args("matmul.cuda", args, 2, [2, 2])
    a, b = placeholders(args, ["A", "B"])
    return [a, b], [_gemm(cfg, a, b, bool(attrs.get("transpose_b", False)), False, "C")]


def _batch_matmul_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                          ) -> tuple[list[Tensor], list[Tensor]]:
    expect_args("batch_matmul.cuda", args, 2, [3, 3])
    a, b = placeholders(args, ["A", "B"])
    return [a, b], [_gemm(cfg, a, b, bool(attrs.get("transpose_b", False)), True, "C")]


def _bind(s: Schedule, t: Tensor, axis: Any, tag: str) -> None:
    s[t].bind(axis, te.thread_axis(tag))


def _cooperative_fetch(s: Schedule, load: Tensor, threads_y: int, threads_x: int) -> None:
    """All threads of the block copy the tile `load` together."""
    axes = list(s[load].op.axis)
    fused = s[load].fuse(*axes) if len(axes) > 1 else axes[0]
    _, inner = s[load].split(fused, factor=threads_y * threads_x)
    ty, tx = s[load].split(inner, factor=threads_x)
    _bind(s, load, ty, "threadIdx.y")
    _bind(s, load, tx, "threadIdx.x")


def schedule_gemm_cuda(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Shared-memory tiled GEMM, one output element per thread (see the module doc)."""
    outs = list(outs)
    s = create_schedule(outs)
    C = find_anchor(outs, (GEMM, "dense", "matmul", "batch_matmul"))
    inline_injective(s, outs)
    M, N = shape_of(C)[-2:]
    K = const_extent(C.op.reduce_axis[0].dom.extent)
    cfg.define_split("tile_y", M, num_outputs=2, filter=lambda f: f[-1] <= MAX_TILE)
    cfg.define_split("tile_x", N, num_outputs=2, filter=lambda f: f[-1] <= MAX_TILE)
    cfg.define_split("tile_k", K, num_outputs=2, filter=lambda f: f[-1] <= MAX_TILE)
    if isinstance(cfg, FallbackConfig):
        fallback_split(cfg, "tile_y", [best_divisor(M, [16, 8, 32, 4, 2])])
        fallback_split(cfg, "tile_x", [best_divisor(N, [16, 32, 8, 4, 2])])
        fallback_split(cfg, "tile_k", [best_divisor(K, [16, 8, 32, 4, 2])])
    a, b = C.op.input_tensors[:2]
    AA = s.cache_read(a, "shared", [C])
    BB = s.cache_read(b, "shared", [C])
    axes = list(s[C].op.axis)
    by, ty = cfg["tile_y"].apply(s, C, axes[-2])
    bx, tx = cfg["tile_x"].apply(s, C, axes[-1])
    ko, ki = cfg["tile_k"].apply(s, C, s[C].op.reduce_axis[0])
    s[C].reorder(*axes[:-2], by, bx, ty, tx, ko, ki)
    if axes[:-2]:
        _bind(s, C, axes[0], "blockIdx.z")
    _bind(s, C, by, "blockIdx.y")
    _bind(s, C, bx, "blockIdx.x")
    _bind(s, C, ty, "threadIdx.y")
    _bind(s, C, tx, "threadIdx.x")
    threads_y, threads_x = int(cfg["tile_y"].size[-1]), int(cfg["tile_x"].size[-1])
    for load in (AA, BB):
        s[load].compute_at(s[C], ko)
        _cooperative_fetch(s, load, threads_y, threads_x)
    for o in outs:
        if o.op is not C.op:  # the epilogue: its own elementwise kernel
            bind_elementwise(s[o])
    return s


for _name, _compute in (("dense.cuda", _dense_compute), ("matmul.cuda", _matmul_compute),
                        ("batch_matmul.cuda", _batch_matmul_compute)):
    register_template(_name, "cuda", compute=_compute)(schedule_gemm_cuda)
