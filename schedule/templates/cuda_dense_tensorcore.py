"""dense_tensorcore.cuda: float16 dense (data [M, K] x weight [N, K]^T) on tensor cores,
16x16x16 warp matrix operations with float32 accumulators (schedule.templates.cuda_wmma),
TVM's dense_tensorcore recipe.

A block computes a (16 * warps_m * tiles_m) x (16 * warps_n * tiles_n) tile of the output
with warps_m x warps_n warps (threadIdx.y / threadIdx.z; threadIdx.x is the warp's 32
lanes); each warp owns tiles_m x tiles_n accumulator fragments. The k loop steps by
16 * chunk: the block's threads copy the A and B tiles into shared memory together
(vectorized), then, per 16-wide k slice, each warp loads its matrix_a / matrix_b fragments
from shared memory and multiplies into its accumulators. The accumulators go back
through shared memory (rows padded by `offset` against bank conflicts), and all threads
write the output from there, rounded to float16 once, with the group's epilogue.

Takes float16 operands of any size: the tiles are padded to multiples of 16 (TVM's recipe:
rows and columns past M, N and K read as zeros where the shared tiles are loaded, the
accumulators computed over the padded tiles, the output written only inside [M, N]), and
needs a GPU of sm_70 or later (templates_for leaves the template out on older targets,
and lowering.cuda refuses them).

Knobs: tile_m, tile_n (3-way splits of M/16 and N/16, rounded up: blocks, warps, fragments
per warp; at most 4 fragments per block axis, so that every config fits the 48 KiB of
static shared memory), tile_k (K/16 rounded up: steps, chunk), offset.

    >>> from schedule.templates import instantiate
    >>> s, args = instantiate("dense_tensorcore.cuda", [((64, 32), "float16"),
    ...                       ((48, 32), "float16")], target="cuda")
    >>> [t.name for t in args]
    ['data', 'weight', 'dense']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import tensor_expr as te
from schedule.schedule import Schedule, create_schedule
from schedule.space import FallbackConfig
from schedule.templates.common import (
    best_divisor,
    fallback_split,
    fallback_value,
    find_anchor,
    inline_injective,
    shape_of,
    walk_ops,
)
from schedule.templates.cuda_dense import GEMM
from schedule.templates.cuda_wmma import (
    SCOPE_A,
    SCOPE_ACC,
    SCOPE_B,
    TILE,
    has_tensor_cores,
    intrin_load,
    intrin_mma,
    intrin_store,
)
from schedule.templates.registry import expect_args, placeholders, register_template
from tensor_expr import tensor as T
from tensor_expr.expr import cast, const, if_then_else
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError

WARP = 32
MAX_WARPS = 4  # per block axis
MAX_TILES = 4  # fragments per warp axis
MAX_CHUNK = 4
# fragments per block axis: a 64 x 64 block tile keeps the float32 tile through shared
# memory (64 x 72 x 4 bytes) and the A and B tiles within the 48 KiB of static shared
# memory (lowering.cuda refuses more); 128 rows would not fit
MAX_BLOCK_FRAGMENTS = 4


def _compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
             ) -> tuple[list[Tensor], list[Tensor]]:
    expect_args("dense_tensorcore.cuda", args, 2, [2, 2])
    (m, k), dtype = args[0]
    (n, k2), wdtype = args[1]
    if dtype != "float16" or wdtype != "float16":
        raise ScheduleError(f"template dense_tensorcore.cuda: tensor cores take float16 "
                            f"operands, got {dtype} x {wdtype}; use dense.cuda")
    if k != k2:
        raise ScheduleError(f"template dense_tensorcore.cuda: data [M, K] = [{m}, {k}] and "
                            f"weight [N, K] = [{n}, {k2}] disagree on K")
    a, w = placeholders(args, ["data", "weight"])
    ap, wp = pad_to_tiles(a), pad_to_tiles(w)
    kp = T.reduce_axis((0, round_up(k)), name="k")
    acc = T.compute((round_up(m), round_up(n)), lambda i, j: T.sum(
        cast(ap[i, kp], "float32") * cast(wp[j, kp], "float32"), axis=kp),
        name="dense_acc", tag=GEMM)
    cfg.add_flop(2.0 * m * n * k)  # the product's own work, not the padding's
    return [a, w], [T.compute((m, n), lambda i, j: cast(acc[i, j], "float16"), name="dense")]


def round_up(n: int) -> int:
    """`n` rounded up to a multiple of the tensor-core tile (16)."""
    return -(-n // TILE) * TILE


def pad_to_tiles(t: Tensor) -> Tensor:
    """A 2-D `t` with zeros appended to multiples of 16 rows and columns (an injective view,
    inlined into the shared-tile loads that read it: the zero fill happens there); `t`
    itself when both dims already are multiples of 16.

        >>> import tensor_expr as te
        >>> shape_of(pad_to_tiles(te.placeholder((17, 50), "float16", name="A")))
        [32, 64]
    """
    rows, cols = shape_of(t)
    if rows % TILE == 0 and cols % TILE == 0:
        return t
    zero = const(0, t.dtype)
    return T.compute((round_up(rows), round_up(cols)), lambda r, c: if_then_else(
        te.all(r < rows, c < cols), t[r, c], zero), name=f"{t.op.name}_pad")


def _bind(s: Schedule, t: Tensor, axis: Any, tag: str) -> None:
    s[t].bind(axis, te.thread_axis(tag))


def _define(cfg: Any, M: int, N: int, K: int) -> None:
    def mn(f: list[int]) -> bool:
        return f[-2] <= MAX_WARPS and f[-1] <= MAX_TILES and f[-2] * f[-1] <= \
            MAX_BLOCK_FRAGMENTS

    cfg.define_split("tile_m", M // TILE, num_outputs=3, filter=mn)
    cfg.define_split("tile_n", N // TILE, num_outputs=3, filter=mn)
    cfg.define_split("tile_k", K // TILE, num_outputs=2, filter=lambda f: f[-1] <= MAX_CHUNK)
    cfg.define_knob("offset", [0, 8])
    if isinstance(cfg, FallbackConfig):
        for name, units in (("tile_m", M // TILE), ("tile_n", N // TILE)):
            warps = best_divisor(units, [2, 1])
            fallback_split(cfg, name, [warps, best_divisor(units // warps, [2, 1])])
        fallback_split(cfg, "tile_k", [best_divisor(K // TILE, [2, 1])])
        fallback_value(cfg, "offset", 8)


def schedule_dense_tensorcore(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Tensor-core dense (see the module doc)."""
    outs = list(outs)
    s = create_schedule(outs)
    acc = find_anchor(outs, GEMM)
    tile_tensorcore(cfg, s, outs, acc, lambda sch, O: tuple(sch[O].op.axis[-2:]))
    return s


def tile_tensorcore(cfg: Any, s: Schedule, outs: Sequence[Tensor], acc: Tensor,
                    gemm_axes: Callable[[Schedule, Tensor], tuple[Any, Any]]) -> None:
    """Schedule a GEMM on tensor cores (see the module doc): `acc` is the float32 sum of
    products of two float16 matrices [M, K] and [N, K] (views of other tensors are
    inlined into their shared tiles), read by a stage that rounds it; `gemm_axes(s, O)`
    gives the axes of the output stage O = outs[0] that run over M and N (reordering or
    fusing O's axes as needed)."""
    if acc.dtype != "float32" or acc.op.input_tensors[0].dtype != "float16":
        raise ScheduleError("tensor-core templates expect float16 operands summed in "
                            "float32")
    O = outs[0]
    if O.op is acc.op:
        raise ScheduleError("tensor-core templates need an output stage that rounds the "
                            "float32 sums")
    M, N = shape_of(acc)
    K = int(acc.op.reduce_axis[0].dom.extent.value)
    _define(cfg, M, N, K)
    _, wm, tm = (int(x) for x in cfg["tile_m"].size)
    _, wn, tn = (int(x) for x in cfg["tile_n"].size)
    chunk = int(cfg["tile_k"].size[-1])
    offset = int(cfg["offset"].val)

    a, w = acc.op.input_tensors[:2]
    AS = s.cache_read(a, "shared", [acc])
    WS = s.cache_read(w, "shared", [acc])
    AF = s.cache_read(AS, SCOPE_A, [acc])
    WF = s.cache_read(WS, SCOPE_B, [acc])
    s[acc].set_scope(SCOPE_ACC)
    # the stage that rounds the sums to float16 reads them from shared memory; it and the
    # epilogue after it are then inlined into the output stage (views into the tiles)
    rounding = [op.output(0) for op in walk_ops(outs)
                if any(t.op is acc.op for t in op.input_tensors)]
    CS = s.cache_read(acc, "shared", rounding)
    inline_injective(s, outs, keep=[AS, WS])

    # the output: a block tile per block, every thread writing from shared memory
    i, j = gemm_axes(s, O)
    bi, ii = s[O].split(i, factor=TILE * wm * tm)
    bj, jj = s[O].split(j, factor=TILE * wn * tn)
    s[O].reorder(bi, bj, ii, jj)
    t = s[O].fuse(ii, jj)
    t, tx = s[O].split(t, factor=WARP)
    t, ty = s[O].split(t, factor=wm)
    t, tz = s[O].split(t, factor=wn)
    s[O].reorder(bi, bj, t, tz, ty, tx)
    for ax, tag in ((bi, "blockIdx.y"), (bj, "blockIdx.x"), (tz, "threadIdx.z"),
                    (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        _bind(s, O, ax, tag)

    # the accumulators through shared memory: each warp stores its fragments
    s[CS].compute_at(s[O], bj)
    ci, cj = s[CS].op.axis
    s[CS].storage_align(ci, 32, offset)
    ci, ci16 = s[CS].split(ci, factor=TILE)
    cj, cj16 = s[CS].split(cj, factor=TILE)
    ci, cit = s[CS].split(ci, factor=tm)
    cj, cjt = s[CS].split(cj, factor=tn)
    s[CS].reorder(ci, cj, cit, cjt, ci16, cj16)
    _bind(s, CS, ci, "threadIdx.y")
    _bind(s, CS, cj, "threadIdx.z")
    s[CS].tensorize(ci16, intrin_store())

    # the warp's accumulators: k in steps of 16 * chunk, fragments loaded per 16-wide slice
    s[acc].compute_at(s[CS], cj)
    fi, fj = s[acc].op.axis
    fi, fi16 = s[acc].split(fi, factor=TILE)
    fj, fj16 = s[acc].split(fj, factor=TILE)
    (k,) = s[acc].op.reduce_axis
    k, k16 = s[acc].split(k, factor=TILE)
    ko, ki = s[acc].split(k, factor=chunk)
    s[acc].reorder(ko, ki, fi, fj, fi16, fj16, k16)
    s[acc].tensorize(fi16, intrin_mma())
    for frag, which in ((AF, "a"), (WF, "b")):
        s[frag].compute_at(s[acc], ki)
        r, c = s[frag].op.axis
        r, r16 = s[frag].split(r, factor=TILE)
        c, c16 = s[frag].split(c, factor=TILE)  # one 16-wide k slice where computed
        s[frag].reorder(r, c, r16, c16)
        s[frag].tensorize(r16, intrin_load(which))

    # the shared tiles of A and B: all threads copy them, four halves at a time
    for load in (AS, WS):
        s[load].compute_at(s[acc], ko)
        r, c = s[load].op.axis
        s[load].storage_align(r, 32, offset)
        f = s[load].fuse(r, c)
        f, vec = s[load].split(f, factor=4)
        f, lx = s[load].split(f, factor=WARP)
        f, ly = s[load].split(f, factor=wm)
        f, lz = s[load].split(f, factor=wn)
        s[load].reorder(f, lz, ly, lx, vec)
        _bind(s, load, lz, "threadIdx.z")
        _bind(s, load, ly, "threadIdx.y")
        _bind(s, load, lx, "threadIdx.x")
        s[load].vectorize(vec)


register_template("dense_tensorcore.cuda", "cuda", compute=_compute,
                  available=has_tensor_cores)(
    schedule_dense_tensorcore)

__all__ = ["schedule_dense_tensorcore", "tile_tensorcore"]
