"""x86 templates for dense, matmul and batch_matmul: a register-blocked GEMM micro-kernel.

The accumulator tile (mr rows x nr columns, nr a multiple of the vector width) lives in a
"local" buffer that LLVM keeps in registers: the k loop outside it, the rows unrolled, the
columns vectorized. B is packed to [N/nr, K, nr] so that the micro-kernel reads one
contiguous nr-wide row of B per k (the `pack_b` knob turns that off). A constant B (a
model's weight) comes packed instead: with attrs weight_layout="packed" (what build asks
for, constant_weight_attrs) the template takes B in that layout and the packers pack the
numpy weight once at build, not at every call.

    >>> from schedule.templates import instantiate
    >>> s, args = instantiate("matmul.x86", [((64, 32), "float32"), ((32, 48), "float32")])
    >>> [t.name for t in args]
    ['A', 'B', 'C']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from schedule.schedule import Schedule, create_schedule
from schedule.space import FallbackConfig
from schedule.templates.common import (
    accumulator,
    best_divisor,
    const_extent,
    divisor_at_most,
    fallback_split,
    fallback_value,
    find_anchor,
    injective_inputs,
    inline_injective,
    output_and_accumulator,
    parallel_fuse,
    parallel_knob_split,
    schedule_copy_stage,
    shape_of,
)
from schedule.templates.registry import expect_args, placeholders, register_template
from tensor_expr import tensor as T
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError

GEMM, PACK = "gemm", "gemm_pack"

# Below this many multiply-adds a parallel region costs more than it saves: waking the
# pool's other thread takes 5-10 us on an idle machine, and on a loaded one (another
# process on the other core) 100-300 us were measured for a batch-1 dense of 150 x 450
# (about 2 us of work on one thread), the case of RNN and TreeLSTM cells on the VM.
PARALLEL_MIN_MACS = 1 << 20

# ---------------------------------------------------------------------------------------
# The computation


def _declare_tile_x(cfg: Any, M: int, N: int, K: int, pad_ok: bool = False) -> int:
    """The column split [-1, panels, nr]; nr is the register tile's width (and B's packing).
    With `pad_ok` (B packed once at build) the fallback's nr need not divide N: B's last
    panel is padded with zeros and the last column tile is partial."""
    lanes = cfg.target.fp32_lanes
    # nr vectors are unrolled in the micro-kernel: past 4 vectors a row only spills.
    # With B packed once (pad_ok), widths that overhang N (its last panel zero-padded) are
    # points of the space too, so the fallback's padded tile is one and a tuned record
    # is measured against it (N=1000: 16 tiles of 64 were the default, outside the space,
    # and a record 1.10x slower than it was applied)
    cfg.define_split("tile_x", N, num_outputs=3, filter=lambda f: f[-1] <= 4 * lanes,
                     extra=_padded_tiles(N, lanes) if pad_ok else ())
    nr = best_divisor(N, [2 * lanes, lanes, 4 * lanes, lanes // 2 or 1])
    rows = best_divisor(M, [8, 6, 4, 12, 14, 5, 7, 3, 2])  # the fallback's mr, roughly
    if rows * _vectors(nr, lanes)[0] < _CHAINS:
        nr = _widest_tile(N, rows, lanes, nr, pad_ok)
    panel = max(1, (256 * 1024) // (nr * K * 4))  # B panels that share L2
    if M == 1 and pad_ok:  # the accumulators span the block's panels (see BLOCK_VECTORS)
        vecs = _vectors(nr, lanes)[0]
        panel = max(1, min(BLOCK_VECTORS, cfg.target.vector_registers - 4) // vecs)
    fallback_split(cfg, "tile_x", [divisor_at_most(-(-N // nr), panel), nr])
    return int(cfg["tile_x"].size[-1])


def _padded_tiles(N: int, lanes: int) -> list[list[int]]:
    """[panels, nr] for the full-vector widths nr that do not divide N but waste at most a
    quarter of their columns (the ones _widest_tile may pick), panels dividing the
    padded panel count: `_padded_tiles(1000, 16)` has [16, 64] and [1, 64]."""
    out = []
    for nr in range(lanes, 4 * lanes + 1, lanes):
        tiles = -(-N // nr)
        if N % nr and N / (tiles * nr) >= 0.75:
            out += [[p, nr] for p in range(1, tiles + 1) if tiles % p == 0]
    return out


# A batch-1 dense with a packed weight is a matrix-vector product that streams its weight
# from memory in a model (ResNet-50's 2048 x 1000: 8 MiB): with knob acc_cols "block" the
# register tile spans the panels of a tile_x block, so that the k loop reads that many
# weight panels side by side, streams the prefetchers keep in flight together, rather than
# one panel after another. The fallback takes panels up to this many vectors of
# accumulators. 2048 -> 1000, weights cold (a copy per call), one Sapphire Rapids core (CPU
# time, load 4): 588 -> 538 us (4 panels of 64); in the models on one thread (load 3-4)
# ResNet-50's 610 -> 573 us, MobileNetV2's 1280 -> 1000 378 -> 332 us.
BLOCK_VECTORS = 16

# independent FMA chains that hide the FMA latency (two ports x four cycles on the x86 cores
# here): a tile with fewer accumulators waits on its own additions
_CHAINS = 8


def _vectors(nr: int, lanes: int) -> tuple[int, int]:
    """(vectors, width): how the micro-kernel splits an nr-wide row (see schedule_gemm)."""
    vec = best_divisor(nr, [lanes, lanes // 2 or 1])
    return nr // vec, vec


def _widest_tile(N: int, rows: int, lanes: int, default: int, pad_ok: bool) -> int:
    """The column tile for a GEMM with few rows (a batch-1 dense is a matrix-vector
    product): enough vectors side by side that `rows` x vectors accumulators make
    _CHAINS independent chains, as wide vectors as N allows, within the knob's 4 vectors
    (`default` where no such tile divides N). With `pad_ok` a tile may overhang N (1000
    columns: 16 tiles of 64, full AVX-512 vectors, rather than 25 of 40 in 8-lane ones),
    scored by the share of its work that is real."""
    half = lanes // 2 or 1
    def real(nr: int) -> float:  # the share of the padded columns that are N's
        return N / (-(-N // nr) * nr)

    cands = [default] + [d for d in range(half, 4 * lanes + 1, half)
                         if N % d == 0 or (pad_ok and d % lanes == 0 and real(d) >= 0.75)]

    def score(nr: int) -> tuple[float, float, int, int]:
        vecs, width = _vectors(nr, lanes)
        return min(rows * vecs, _CHAINS) * width * real(nr), real(nr), width, -nr

    return max(cands, key=score)


def _gemm(cfg: Any, a: Tensor, b: Tensor, trans_b: bool, batch: bool, name: str,
          prepacked: bool = False, attrs: dict[str, Any] | None = None
          ) -> tuple[Tensor, Tensor]:
    """C[(bt,) i, j] = sum_k A[(bt,) i, k] * B[(bt,) k, j] (B[(bt,) j, k] if trans_b), and
    the tensor B is read from: `b`, or with `prepacked` a placeholder in the packed layout
    [N/nr, K, nr] that the caller fills once from its constant B (see _packers). With
    attrs out_dtype (int8 operands, "int32") the operands are widened before the product."""
    attrs = attrs or {}

    def mul(x: Any, y: Any) -> Any:
        return accumulator(attrs, x) * accumulator(attrs, y)

    ash, bsh = shape_of(a), shape_of(b)
    M, K = ash[-2], ash[-1]
    N = bsh[-2] if trans_b else bsh[-1]
    # the packing width is the micro-kernel's column count: a compute-changing knob
    nr = _declare_tile_x(cfg, M, N, K, pad_ok=prepacked and not batch)
    if prepacked and not batch:
        bp = T.placeholder((-(-N // nr), K, nr), b.dtype, name=b.name + "_packed")
        k = T.reduce_axis((0, K), name="k")
        cfg.add_flop(2.0 * M * N * K)
        return T.compute((M, N), lambda i, j: T.sum(mul(a[i, k], bp[j // nr, k, j % nr]),
                                                    axis=k), name=name, tag=GEMM), bp
    cfg.define_knob("pack_b", [True, False])
    fallback_value(cfg, "pack_b", nr % cfg.target.fp32_lanes == 0 and M >= 4)
    k = T.reduce_axis((0, K), name="k")
    lead = (bsh[0],) if batch else ()

    def bval(bt: Any, kk: Any, j: Any) -> Any:
        idx = (kk, j) if not trans_b else (j, kk)
        return b[(*bt, *idx)]

    if cfg["pack_b"].val:
        bp = T.compute((*lead, N // nr, K, nr),
                       lambda *ix: bval(ix[:-3], ix[-2], ix[-3] * nr + ix[-1]),
                       name=b.name + "_packed", tag=PACK)

        def read_b(bt: Any, kk: Any, j: Any) -> Any:
            return bp[(*bt, j // nr, kk, j % nr)]
    else:
        read_b = bval
    shape = (*lead, M, N)
    cfg.add_flop(2.0 * M * N * K * (bsh[0] if batch else 1))
    return T.compute(shape, lambda *ix: T.sum(
        mul(a[(*ix[:-2], ix[-2], k)], read_b(ix[:-2], k, ix[-1])), axis=k), name=name,
        tag=GEMM), b


def _weight_packed(name: str, attrs: dict[str, Any]) -> bool:
    layout = attrs.get("weight_layout", "plain")
    if layout not in ("plain", "packed"):
        raise ScheduleError(f"{name}: weight_layout must be 'plain' or 'packed', got "
                            f"{layout!r}")
    return layout == "packed"


def _dense_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                   ) -> tuple[list[Tensor], list[Tensor]]:
    expect_args("dense.x86", args, 2, [2, 2])
    a, w = placeholders(args, ["data", "weight"])
    out, w_in = _gemm(cfg, a, w, trans_b=True, batch=False, name="dense",
                      prepacked=_weight_packed("dense.x86", attrs), attrs=attrs)
    return [a, w_in], [out]


def _matmul_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                    ) -> tuple[list[Tensor], list[Tensor]]:
    expect_args("matmul.x86", args, 2, [2, 2])
    a, b = placeholders(args, ["A", "B"])
    trans = bool(attrs.get("transpose_b", False))
    out, b_in = _gemm(cfg, a, b, trans_b=trans, batch=False, name="C",
                      prepacked=_weight_packed("matmul.x86", attrs))
    return [a, b_in], [out]


def _batch_matmul_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                          ) -> tuple[list[Tensor], list[Tensor]]:
    expect_args("batch_matmul.x86", args, 2, [3, 3])
    a, b = placeholders(args, ["A", "B"])
    trans = bool(attrs.get("transpose_b", False))
    out, _ = _gemm(cfg, a, b, trans_b=trans, batch=True, name="C")
    return [a, b], [out]


def _pack_b(b_transposed: Callable[[dict[str, Any]], bool]) -> Any:
    """Packers for a constant B into the [N/nr, K, nr] layout the instantiated template
    takes it in; `b_transposed(attrs)` says whether B is held [N, K] (else [K, N])."""
    def packers(ins: Sequence[Tensor], args: Sequence[Any], attrs: dict[str, Any]
                ) -> dict[int, Any]:
        bshape = shape_of(ins[1])
        if len(args[1][0]) != 2 or len(bshape) != 3:
            return {}
        nb, K, nr = bshape
        transposed = b_transposed(attrs)

        def pack(w: Any) -> Any:
            w = np.asarray(w)
            pad = nb * nr - (w.shape[0] if transposed else w.shape[1])  # zero columns
            if pad:
                w = np.pad(w, ((0, pad), (0, 0)) if transposed else ((0, 0), (0, pad)))
            blocks = w.reshape(nb, nr, K).transpose(0, 2, 1) if transposed else \
                w.reshape(K, nb, nr).transpose(1, 0, 2)
            return np.ascontiguousarray(blocks)

        return {1: pack}

    return packers


# ---------------------------------------------------------------------------------------
# The schedule


# Fallback, measured (python -m tests.schedule.templates.bench_templates) on the 2-core EPYC
# (Zen 3, AVX2, 8 fp32 lanes) build machine, shared with other jobs (load average 3-5):
# figures swing 2x between runs, so compare with numpy's GEMM from the same run.
# 1024^3 fp32, 1 thread: dense 40.9-44.3 GFLOP/s, matmul 44.2-67.5 (numpy/OpenBLAS 1 thread
# 55.7-68.2): 0.6-1.0 of numpy. 2 threads: dense 40.0, matmul 62.6 (numpy 35.9, load 2.9).
# dense pays for packing its [N, K] weight each call (a model packs constant weights once).
# batch_matmul 8x256^3: 26.7-50.7 (1 thread), 55.3 (2 threads).
def schedule_gemm(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Blocked GEMM: parallel outer tiles, mr x nr register tile, vectorized columns."""
    outs = list(outs)
    s = create_schedule(outs)
    C = find_anchor(outs, (GEMM, "dense", "matmul", "batch_matmul"))
    packs = injective_inputs(C)
    inline_injective(s, outs, keep=packs)
    O, CC = output_and_accumulator(s, outs, C)
    M, N = shape_of(C)[-2:]
    K = const_extent(C.op.reduce_axis[0].dom.extent)
    lanes = cfg.target.fp32_lanes
    if "tile_x" not in cfg.knobs:  # a graph from tensor_expr.ops: no packing knob
        _declare_tile_x(cfg, M, N, K)
    nr = cfg["tile_x"].size[-1]

    # mr rows (and ki steps with unroll_kw) are unrolled: bigger tiles only spill registers
    # and take seconds to compile (1024 unrolled k steps: 15 s, measured)
    cfg.define_split("tile_y", M, num_outputs=3, filter=lambda f: f[-1] <= 16)
    cfg.define_split("tile_k", K, num_outputs=2, filter=lambda f: f[-1] <= 32)
    cfg.define_knob("unroll_kw", [True, False])
    # parallel granularity: the fused (row-block, column-block) loop, or row blocks only
    cfg.define_knob("parallel", ["rows_cols", "rows"])
    # a batch-1 product: the accumulators of one panel, or of the block's panels (up to
    # BLOCK_VECTORS vectors; past that a "block" config runs as "panel"); only there, so
    # that the records of other shapes still name every knob of their space
    if M == 1:
        cfg.define_knob("acc_cols", ["panel", "block"])
    if isinstance(cfg, FallbackConfig):
        vecs = max(1, nr // lanes)
        budget = max(1, (cfg.target.vector_registers - 4) // vecs)  # accumulators that fit
        mr = best_divisor(M, [p for p in (8, 6, 4, 12, 14, 5, 7, 3, 2) if p <= budget] or [1])
        fallback_split(cfg, "tile_y", [divisor_at_most(M // mr, max(1, 32 // mr)), mr])
        fallback_split(cfg, "tile_k", [best_divisor(K, [4, 2, 8])])
        if M == 1:
            fallback_value(cfg, "acc_cols", "block")

    axes = list(s[O].op.axis)
    yo, ym, yi = cfg["tile_y"].apply(s, O, axes[-2])
    xo, xm, xi = cfg["tile_x"].apply(s, O, axes[-1])
    lead = axes[:-2]
    s[O].reorder(*lead, yo, xo, ym, xm, yi, xi)
    panels = int(cfg["tile_x"].size[-2])
    block = M == 1 and cfg["acc_cols"].val == "block" and \
        panels * _vectors(nr, lanes)[0] <= BLOCK_VECTORS
    s[CC].compute_at(s[O], xo if block else xm)
    if nr > 1:
        s[O].vectorize(xi)
    if math.prod(shape_of(C)) * K >= PARALLEL_MIN_MACS:
        parallel_fuse(s, O, [*lead, yo, xo] if cfg["parallel"].val == "rows_cols"
                      else [*lead, yo])

    # the micro-kernel: k outside, rows unrolled, columns split into unrolled vectors
    caxes = list(s[CC].op.axis)
    ci, cj = caxes[-2], caxes[-1]
    (kk,) = s[CC].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(s, CC, kk)
    vec = best_divisor(nr, [lanes, lanes // 2 or 1])
    cjo, cji = s[CC].split(cj, factor=vec)
    s[CC].reorder(*caxes[:-2], ko, ki, ci, cjo, cji)
    if cfg["unroll_kw"].val:
        s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].unroll(cjo)
    if vec > 1:
        s[CC].vectorize(cji)

    for bp in packs:
        schedule_copy_stage(s, bp, vector_ok=bp.op.tag == PACK)
    return s


# partition: the knob `parallel` (a batch-1 product has one row block: "rows" runs it on
# one thread, which a record tuned on one thread may choose at no cost there; ResNet-18's
# dense record so ran 1.46x its default on two threads)
register_template("dense.x86", "llvm", compute=_dense_compute,
                  packers=_pack_b(lambda attrs: True),
                  constant_weight_attrs={"weight_layout": "packed"},
                  partition=parallel_knob_split)(schedule_gemm)
register_template("matmul.x86", "llvm", compute=_matmul_compute,
                  packers=_pack_b(lambda attrs: bool(attrs.get("transpose_b", False))),
                  constant_weight_attrs={"weight_layout": "packed"},
                  partition=parallel_knob_split)(schedule_gemm)
register_template("batch_matmul.x86", "llvm", compute=_batch_matmul_compute,
                  partition=parallel_knob_split)(schedule_gemm)
