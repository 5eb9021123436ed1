"""CUDA templates for dense, matmul and batch_matmul: shared-memory tiles of both operands.

The output splits four ways per axis (tile_y, tile_x): blocks (blockIdx.y / x), virtual
threads (vthread), threads (threadIdx.y / x, at most 32 each) and registers: every
thread accumulates yi x xi outputs in a local buffer (unrolled, kept in registers), for
each virtual thread. The k loop steps by tile_k; at each step the block's threads load
the tiles of A and B into shared memory together (the fused tile split over all
threads), and every thread accumulates from shared memory. The storage-sync pass puts
the barriers in. Batch indices go to blockIdx.z. An epilogue (bias, relu, ...) is
computed as the accumulators are written out.

float16 inputs are multiplied and summed in float32 and rounded to float16 once, as the
output is written (cuBLAS's default for half GEMM).

Knobs: tile_y, tile_x (4-way splits), tile_k.

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
    accumulator,
    best_divisor,
    const_extent,
    fallback_split,
    find_anchor,
    inline_injective,
    output_and_accumulator,
    shape_of,
)
from schedule.templates.registry import expect_args, placeholders, register_template
from tensor_expr import tensor as T
from tensor_expr.expr import cast
from tensor_expr.tensor import Tensor

GEMM = "gemm"
MAX_TILE = 32  # threads per block axis: 32 x 32 = 1024, CUDA's limit


def _gemm(cfg: Any, a: Tensor, b: Tensor, trans_b: bool, batch: bool, name: str,
          attrs: dict[str, Any] | None = None) -> Tensor:
    ash, bsh = shape_of(a), shape_of(b)
    M, K = ash[-2], ash[-1]
    N = bsh[-2] if trans_b else bsh[-1]
    k = T.reduce_axis((0, K), name="k")
    lead = (bsh[0],) if batch else ()

    def body(*ix: Any) -> Any:
        bt, i, j = ix[:-2], ix[-2], ix[-1]
        bv = b[(*bt, j, k)] if trans_b else b[(*bt, k, j)]
        av = a[(*bt, i, k)]
        if half:  # float16 products summed in float32, rounded once at the end
            av, bv = cast(av, "float32"), cast(bv, "float32")
        return T.sum(accumulator(attrs or {}, av) * accumulator(attrs or {}, bv), axis=k)

    half = a.dtype == "float16"
    cfg.add_flop(2.0 * M * N * K * (bsh[0] if batch else 1))
    acc = T.compute((*lead, M, N), body, name=name + ("_acc" if half else ""), tag=GEMM)
    if not half:
        return acc
    return T.compute(acc.shape, lambda *ix: cast(acc[ix], "float16"), name=name)


def _dense_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                   ) -> tuple[list[Tensor], list[Tensor]]:
    expect_args("dense.cuda", args, 2, [2, 2])
    a, w = placeholders(args, ["data", "weight"])
    return [a, w], [_gemm(cfg, a, w, trans_b=True, batch=False, name="dense", attrs=attrs)]


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
    """Shared-memory tiled, register-blocked GEMM (see the module doc)."""
    outs = list(outs)
    s = create_schedule(outs)
    C = find_anchor(outs, (GEMM, "dense", "matmul", "batch_matmul"))
    inline_injective(s, outs)
    O, CL = output_and_accumulator(s, outs, C)
    a, b = C.op.input_tensors[:2]
    AA = s.cache_read(a, "shared", [CL])
    BB = s.cache_read(b, "shared", [CL])
    axes = list(s[O].op.axis)
    if axes[:-2]:
        _bind(s, O, axes[0], "blockIdx.z")
    tile_gemm(cfg, s, O, CL, (axes[-2], axes[-1]), (AA, BB))
    return s


def tile_gemm(cfg: Any, s: Schedule, O: Tensor, CL: Tensor, yx: tuple[Any, Any],
              loads: Sequence[Tensor]) -> None:
    """Tile a GEMM whose output stage O computes rows `yx[0]` by columns `yx[1]` (axes of
    O; outer axes of O stay outside) from the local accumulator CL, whose last two data
    axes and one reduce axis are the GEMM's: the knobs tile_y, tile_x (4-way: blocks,
    vthreads, threads, registers) and tile_k, the thread bindings, the accumulator at the
    thread, and the shared `loads` fetched by all threads at each k step."""
    M, N = shape_of(CL)[-2:]
    K = const_extent(CL.op.reduce_axis[0].dom.extent)
    cfg.define_split("tile_y", M, num_outputs=4,
                     filter=lambda f: f[-2] <= MAX_TILE and f[-1] <= 8 and f[-3] <= 4)
    cfg.define_split("tile_x", N, num_outputs=4,
                     filter=lambda f: f[-2] <= MAX_TILE and f[-1] <= 8 and f[-3] <= 4)
    cfg.define_split("tile_k", K, num_outputs=2, filter=lambda f: f[-1] <= MAX_TILE)
    if isinstance(cfg, FallbackConfig):
        ry = best_divisor(M, [4, 2])
        rx = best_divisor(N, [4, 2])
        fallback_split(cfg, "tile_y", [1, best_divisor(M // ry, [8, 16, 4, 2]), ry])
        fallback_split(cfg, "tile_x", [1, best_divisor(N // rx, [16, 8, 32, 4, 2]), rx])
        fallback_split(cfg, "tile_k", [best_divisor(K, [8, 16, 9, 4, 2])])
    by, vy, ty, yi = cfg["tile_y"].apply(s, O, yx[0])
    bx, vx, tx, xi = cfg["tile_x"].apply(s, O, yx[1])
    outer = [a for a in s[O].leaf_iter_vars
             if a not in (by, vy, ty, yi, bx, vx, tx, xi)]
    s[O].reorder(*outer, by, bx, vy, vx, ty, tx, yi, xi)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (vy, "vthread"), (vx, "vthread"),
                    (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        _bind(s, O, ax, tag)
    # each thread's yi x xi accumulators live in registers; k steps outside them
    s[CL].compute_at(s[O], tx)
    ci, cj = s[CL].op.axis[-2:]
    ko, ki = cfg["tile_k"].apply(s, CL, s[CL].op.reduce_axis[0])
    s[CL].reorder(*s[CL].op.axis[:-2], ko, ki, ci, cj)
    s[CL].unroll(ci)
    s[CL].unroll(cj)
    threads_y, threads_x = int(cfg["tile_y"].size[-2]), int(cfg["tile_x"].size[-2])
    for load in loads:
        s[load].compute_at(s[CL], ko)
        _cooperative_fetch(s, load, threads_y, threads_x)


for _name, _compute in (("dense.cuda", _dense_compute), ("matmul.cuda", _matmul_compute),
                        ("batch_matmul.cuda", _batch_matmul_compute)):
    register_template(_name, "cuda", compute=_compute)(schedule_gemm_cuda)
