"""x86 conv2d by Winograd's F(m x m, 3 x 3) in blocked layouts: the alternate template of
conv2d_NCHWc.x86 for 3x3 stride-1 convs (`applies`), tuned as a task of its own.

Stages (P = N x tile rows x tile columns of m x m outputs, alpha = m + 2):

- pad: the data zero-padded (and re-blocked to cb channels) so the tile grid fits:
  [N, C/cb, nH*m + 2, nW*m + 2, cb] (per chunk of tile rows where the stages run in
  chunks: PAD_PER_CHUNK);
- input transform V = B^T d B: [alpha, alpha, C/cb, P, cb], vector over cb;
- kernel transform U = G g G^T: [alpha, alpha, K/kb, C, kb]; a stage of the kernel, or,
  with the attr kernel_layout="winograd" (a model's constant weight), the argument itself
  transformed once by `input_packers` (numpy, float64);
- batched GEMM M[e, n, k/kb, p, kb] = sum_c V[e, n, c/cb, p, c%cb] * U[e, n, k/kb, c, kb]:
  a register tile of tile_p tiles x kb channels, the direct conv's micro-kernel (per input
  channel tile_p broadcasts, kb / lanes vector loads and tile_p x kb / lanes FMAs);
- output transform Y = A^T M A straight into the output ([N, K, OH, OW] or NCHWc
  [N, K/kb, OH, OW, kb]), the group's elementwise epilogue inlined into it.

Each transform runs as two 1-D passes (SEPARABLE), the first a stage computed per tile;
each pass is written per output position as a select over the constant positions of its
nonzero terms (winograd_matrices.linear_combination, choose); the schedule unrolls those
positions, so code generation emits one arm each: no multiply by 0 or 1 at run time.

    >>> from schedule.templates import instantiate
    >>> args = [((1, 16, 8, 8), "float32"), ((16, 16, 3, 3), "float32")]
    >>> s, ts = instantiate("conv2d_NCHWc_winograd.x86", args, {"padding": 1})
    >>> [t.name for t in ts]
    ['data', 'kernel', 'winograd_output']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from schedule.schedule import Schedule, create_schedule
from schedule.templates.common import (
    best_divisor,
    fallback_split,
    fallback_value,
    find_anchor,
    inline_injective,
    parallel_fuse,
    schedule_copy_stage,
    shape_of,
)
from schedule.templates.conv_common import PAD, conv_attrs, conv_layouts, pad_hw
from schedule.templates.registry import expect_args, placeholders, register_template
from schedule.templates.winograd_matrices import (
    choose,
    linear_combination,
    transform_2d,
    transform_matrices,
)
from schedule.templates.x86_conv2d_nchwc import pick_blocks
from tensor_expr import tensor as T
from tensor_expr.expr import min as te_min
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError

NAME = "conv2d_NCHWc_winograd.x86"
OUTPUT, GEMM = "winograd_output", "winograd_gemm"
INPUT_T, KERNEL_T = "winograd_input", "winograd_kernel"
INPUT_ROWS, OUTPUT_COLS = "winograd_input_rows", "winograd_output_cols"
# each 2-D transform as two 1-D passes, B^T d then (B^T d) B (A^T M A likewise), the first
# pass a stage computed per tile in registers: F(4, 3)'s input transform 264 terms a tile
# and channel instead of 484, its output transform 180 instead of 324. One core, CPU time,
# interleaved, medians of 9 rounds (load 1.0), two passes / 2-D (direct): AVX-512 64@56
# 419 / 527 us (954), 128@28 394 / 430 (936), 256@14 571 / 584 (935), 512@7 884 / 844
# (932); AVX2 64@56 753 / 821 (1866), 128@28 763 / 815 (1815), 256@14 1137 / 1132 (1931)
SEPARABLE = True
# at root, the GEMM's parallel loop runs over (alpha, alpha, output block) and reads one
# C x kb block of the transformed kernel each iteration, once from memory in a model (F(2,
# 3)'s at 512@7 is 16 MiB, used 16 times); each p tile of an iteration prefetches its share
# of the next block into L2, a channel a step. Interleaved in one process, one core, CPU
# time, weights cold (256 MiB of copies), medians of 9 rounds (load 1.1), on / off
# (direct): AVX-512 128@28 443 / 568 us (1000), 256@14 636 / 867 (1029), 512@7 1391 / 1916
# (1106); warm 395 / 405, 576 / 596, 805 / 917; AVX2 cold 128@28 835 / 977 (1907),
# 256@14 1303 / 1505 (1943), 512@7 2010 / 2780 (2217), 64@56 836 / 806 (1889)
PREFETCH_NEXT_BLOCK = True
# fuse "rows": each chunk pads (and re-blocks) its own rows of data, in cache, just before
# its input transform, instead of one padding stage over all the data at root. One core,
# CPU time, interleaved, medians of 9 rounds (load 0.6), on / off (direct): AVX-512 64@56
# 403 / 420 (955), 403 / 430, 400 / 436 us; weights cold 479 / 476 (978). (The padding
# stage itself: the same conv at padding 0 on a 58x58 input, no stage, 371 against 424 us)
PAD_PER_CHUNK = True
TILE_SIZES = (2, 4)
# the GEMM's register tiles over P (tiles; each kb / lanes vectors of accumulators)
TILE_P = (2, 4, 6, 7, 8, 12, 14)
# "rows": the output stage's parallel loop runs over chunks of rows of tiles, and each
# chunk computes its input transform (all channels), then per output channel block its
# GEMM and output transform, all in cache (the whole transformed kernel read per chunk);
# "gemm": the input transform at root, the parallel loop over (output channel block,
# chunk of rows), each chunk's GEMM and output transform in cache (the block's slice of
# the transformed kernel stays in cache across its chunks); "root": each stage over all
# tiles, in memory
FUSE = ("rows", "gemm", "root")
# rows of tiles a chunk (at most: the largest divisor of the tile rows up to it)
TILE_ROWS = (1, 2, 4)


def applies(specs: Sequence[Any], attrs: dict[str, Any]) -> bool:
    """Whether this template computes a conv2d call: a float32 3x3 kernel, stride 1,
    dilation 1, groups 1, padding 0 or 1 on each side, NCHW data (or NCHWc, NCHWxc: blocked
    by any x, as another conv wrote it), at least 8 input and output channels. Every
    other conv stays with conv2d_NCHWc.x86.

        >>> applies([((1, 64, 56, 56), "float32"), ((64, 64, 3, 3), "float32")],
        ...         {"padding": 1})
        True
        >>> applies([((1, 64, 56, 56), "float32"), ((64, 64, 3, 3), "float32")],
        ...         {"padding": 1, "strides": 2})
        False
    """
    try:
        return _check_call(specs, attrs) is None
    except (ScheduleError, TypeError, ValueError, IndexError):
        return False


def _check_call(specs: Sequence[Any], attrs: dict[str, Any]) -> str | None:
    """None when the call is one this template computes, else why not."""
    if len(specs) != 2:
        return f"takes 2 arguments (data, kernel), got {len(specs)}"
    (ds, dt), (ks, kt) = specs
    blocked = attrs.get("data_layout", "NCHW") in ("NCHWc", "NCHWxc")
    if dt != "float32" or kt != "float32":
        return f"computes float32 only, got data {dt} and kernel {kt}"
    if len(ds) != (5 if blocked else 4) or len(ks) != 4:
        return (f"needs data of rank {5 if blocked else 4} and an OIHW kernel, got shapes "
                f"{tuple(ds)} and {tuple(ks)}")
    C = ds[1] * ds[4] if blocked else ds[1]
    a = conv_attrs(attrs)
    if tuple(ks[2:]) != (3, 3):
        return f"computes 3x3 kernels only, got {ks[2]}x{ks[3]}"
    if a.strides != (1, 1) or a.dilation != (1, 1) or a.groups != 1:
        return (f"computes stride 1, dilation 1, groups 1 only, got strides {a.strides}, "
                f"dilation {a.dilation}, groups {a.groups}")
    if any(p not in (0, 1) for p in a.padding):
        return f"computes padding 0 or 1 only, got {a.padding}"
    if ks[1] != C or C < 8 or ks[0] < 8:
        return (f"needs the kernel's {ks[1]} input channels to equal the data's {C}, "
                f"and at least 8 input and output channels")
    return None


def _compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
             ) -> tuple[list[Tensor], list[Tensor]]:
    dl, kl, ol = conv_layouts(NAME, attrs, ("NCHW", "NCHWc", "NCHWxc"), ("OIHW", "winograd"))
    expect_args(NAME, args, 2, [4 if dl == "NCHW" else 5, 4])
    why = _check_call(args, attrs)
    if why is not None:
        raise ScheduleError(f"{NAME} {why}; conv2d_NCHWc.x86 computes every conv2d")
    data, kernel = placeholders(args, ["data", "kernel"])
    ds = shape_of(data)
    N, H, W = ds[0], ds[2], ds[3]
    C = ds[1] if dl == "NCHW" else ds[1] * ds[4]
    K = args[1][0][0]
    a = conv_attrs(attrs)
    OH, OW = a.out_hw(H, W, 3, 3)
    pt, pl, _, _ = a.padding

    cfg.define_knob("tile_m", list(TILE_SIZES))
    fallback_value(cfg, "tile_m", default_tile_m(N, OH, OW, cfg.target.fp32_lanes))
    m = int(cfg["tile_m"].val)
    alpha = m + 2
    nH, nW = -(-OH // m), -(-OW // m)
    P = N * nH * nW

    # the output block: the direct template's default for this call (the model's layout
    # plan keeps it between convs); a split of K like conv2d_NCHWc's tile_oc
    lanes = cfg.target.fp32_lanes
    _, oc0, _ = pick_blocks(C, K, OW, None, cfg.target)
    cfg.define_split("tile_oc", K, num_outputs=2,
                     filter=lambda f: f[-1] <= 4 * lanes or f[-1] == oc0)
    fallback_split(cfg, "tile_oc", [oc0])
    kb = int(cfg["tile_oc"].size[-1])
    # where the transforms and the GEMM run (FUSE): per chunk of tile_rows rows of tiles
    # ("rows") or each over all tiles at root ("root")
    cfg.define_knob("fuse", list(FUSE))
    fallback_value(cfg, "fuse", default_fuse(alpha * alpha * C * K * 4, cfg.target.l2_bytes))
    cfg.define_knob("tile_rows", list(TILE_ROWS))
    rows = chunk_rows(nH, int(cfg["tile_rows"].val))
    fallback_value(cfg, "tile_rows", default_tile_rows(nH, nW))
    # the GEMM's register tile: tile_p output tiles x kb channels. Its values do not depend
    # on P (which tile_m changes): at root P is padded to a multiple of it, the padding
    # tiles a copy of the last one whose outputs nobody reads; in a chunk of rows the tile
    # is the largest divisor of the chunk's tiles up to it
    vecs = max(1, kb // lanes)
    cfg.define_knob("tile_p", list(TILE_P))
    fused = cfg["fuse"].val != "root"
    fallback_value(cfg, "tile_p", default_tile_p(rows * nW if fused else P, vecs,
                                                 cfg.target.vector_registers))
    bp = int(cfg["tile_p"].val)
    Pp = P if fused else -(-P // bp) * bp

    # data -> padded, blocked by cb (the data's own block when it has one)
    cb = ds[4] if dl != "NCHW" else best_divisor(C, [lanes, 2 * lanes, 4])
    Hp, Wp = nH * m + 2, nW * m + 2
    pads = (pt, pl, Hp - H - pt, Wp - W - pl)
    shape5 = (N, C // cb, H, W, cb)
    if dl == "NCHW":
        dpad = pad_hw(data, 2, pads, shape=shape5, name="data_pad",
                      read=lambda n, c, h, w, b: data[n, c * cb + b, h, w])
    else:
        dpad = pad_hw(data, 2, pads, name="data_pad")

    at, g, bt = transform_matrices(m)

    def tile_of(p: Any) -> tuple[Any, Any, Any]:
        p = te_min(p, P - 1) if Pp > P else p  # the padding tiles repeat the last
        return p // (nH * nW), p // nW % nH, p % nW

    def read(i: Any, j: Any, co: Any, p: Any, ci: Any) -> Any:
        n, th, tw = tile_of(p)
        return dpad[n, co, th * m + i, tw * m + j, ci]

    vshape = (alpha, alpha, C // cb, Pp, cb)
    if SEPARABLE:  # B^T d first (a stage the schedule computes per tile), then (B^T d) B
        rows = T.compute(vshape, lambda e, j, co, p, ci: choose(e, [
            linear_combination(bt[u], [read(i, j, co, p, ci) for i in range(alpha)])
            for u in range(alpha)]), name="winograd_input_rows", tag=INPUT_ROWS)
        V = T.compute(vshape, lambda e, nu, co, p, ci: choose(nu, [
            linear_combination(bt[v], [rows[e, j, co, p, ci] for j in range(alpha)])
            for v in range(alpha)]), name="winograd_input", tag=INPUT_T)
    else:
        V = T.compute(vshape, lambda e, nu, co, p, ci: transform_2d(
            bt, bt, lambda i, j: read(i, j, co, p, ci), e, nu), name="winograd_input",
            tag=INPUT_T)
    if kl == "winograd":
        kernel = T.placeholder((alpha, alpha, K // kb, C, kb), kernel.dtype, name="kernel")
        U = kernel
    else:
        U = T.compute((alpha, alpha, K // kb, C, kb),
                      lambda e, nu, ko, c, k: transform_2d(
                          g, g, lambda i, j: kernel[ko * kb + k, c, i, j], e, nu),
                      name="winograd_kernel", tag=KERNEL_T)
    rco = T.reduce_axis((0, C // cb), name="ic_outer")
    rci = T.reduce_axis((0, cb), name="ic_inner")
    M = T.compute((alpha, alpha, K // kb, Pp, kb),
                  lambda e, nu, ko, p, k: T.sum(V[e, nu, rco, p, rci]
                                                * U[e, nu, ko, rco * cb + rci, k],
                                                axis=[rco, rci]),
                  name="winograd_gemm", tag=GEMM)

    if SEPARABLE:  # M A first (a stage the schedule computes per tile), then A^T (M A)
        cols = T.compute((alpha, m, K // kb, Pp, kb), lambda i, b, ko, p, k: choose(b, [
            linear_combination(at[v], [M[i, j, ko, p, k] for j in range(alpha)])
            for v in range(m)]), name="winograd_output_cols", tag=OUTPUT_COLS)

    def output_at(n: Any, ko: Any, h: Any, w: Any, k: Any) -> Any:
        p = (n * nH + h // m) * nW + w // m
        if SEPARABLE:
            return choose(h % m, [linear_combination(
                at[u], [cols[i, w % m, ko, p, k] for i in range(alpha)]) for u in range(m)])
        return transform_2d(at, at, lambda i, j: M[i, j, ko, p, k], h % m, w % m)

    if ol == "NCHWc":
        Y = T.compute((N, K // kb, OH, OW, kb), output_at, name="winograd_output", tag=OUTPUT)
    else:
        Y = T.compute((N, K, OH, OW),
                      lambda n, k, h, w: output_at(n, k // kb, h, w, k % kb),
                      name="winograd_output", tag=OUTPUT)
    cfg.add_flop(2.0 * N * K * OH * OW * C * 9)  # the direct conv's: rates compare
    return [data, kernel], [Y]


def default_tile_m(N: int, OH: int, OW: int, lanes: int) -> int:
    """The fallback's tile size: 4 where that leaves at least 2 x `lanes` tiles, else 2.
    Each element of the transformed kernel (F(4, 3)'s is 4x the kernel, F(2, 3)'s 1.8x)
    is used once per tile, a vector of `lanes` channels per FMA: with fewer tiles the GEMM
    waits on reading the kernel, and the wider the vector the sooner.

        >>> default_tile_m(1, 56, 56, 16), default_tile_m(1, 28, 28, 16)
        (4, 4)
        >>> default_tile_m(1, 14, 14, 16), default_tile_m(1, 14, 14, 8), default_tile_m(1, 7, 7, 8)
        (2, 4, 2)

    One Emerald Rapids core, model layouts, Winograd / direct, best over tile_p and fuse
    (python -m benchmarks.winograd_layers --cpu-time, 7 rounds, load 0.7-1.1): 256@14
    AVX-512 m=2 0.62 warm, 0.65 cold; m=4 0.68, 0.86; AVX2 m=4 0.54, 0.64; m=2 0.62, 0.69;
    512@7 AVX2 m=2 0.79, m=4 0.95.
    """
    return 4 if N * -(-OH // 4) * -(-OW // 4) >= 2 * lanes else 2


def default_fuse(kernel_bytes: int, l2_bytes: int) -> str:
    """The fallback's FUSE: "rows" where the transformed kernel (read whole by each chunk of
    rows) takes at most half the target's L2, else "root" (its GEMM keeps one (alpha, alpha,
    channel block) slice of it in L1 across all tiles).

        >>> default_fuse(36 * 64 * 64 * 4, 2 << 20), default_fuse(36 * 128 * 128 * 4, 2 << 20)
        ('rows', 'root')

    AVX-512, one Emerald Rapids core, Winograd / direct (load 1.1-1.7): 64@56 (590 KiB)
    rows 0.54, root 0.59-0.64; 128@28 (2.3 MiB) root 0.53-0.58, rows 0.73-0.76, "gemm"
    0.65-0.70."""
    return "rows" if kernel_bytes <= l2_bytes // 2 else "root"


def chunk_rows(nH: int, most: int) -> int:
    """The rows of tiles a chunk takes: the largest divisor of the nH rows of tiles up to
    `most` (tile_rows).

        >>> chunk_rows(14, 4), chunk_rows(7, 4), chunk_rows(4, 2)
        (2, 1, 2)
    """
    return max(d for d in range(1, min(nH, most) + 1) if nH % d == 0)


def default_tile_rows(nH: int, nW: int) -> int:
    """The fallback's tile_rows: the fewest rows whose chunk has 7 tiles or more (a
    register tile that keeps the FMA pipes busy), as TILE_ROWS offers them."""
    for r in TILE_ROWS:
        if chunk_rows(nH, r) * nW >= 7:
            return r
    return TILE_ROWS[-1]


def register_tile(tiles: int, most: int) -> int:
    """The GEMM's register tile in a chunk of `tiles` tiles: the largest divisor up to
    tile_p (`most`): `register_tile(14, 8)` is 7."""
    return max(d for d in range(1, min(tiles, most) + 1) if tiles % d == 0)


def default_tile_p(P: int, vecs: int, registers: int) -> int:
    """The fallback's register tile over P: of the TILE_P sizes whose accumulators (`vecs`
    vectors a tile) leave a register for each weight vector and the broadcast, the one
    with the most useful work per padded tile (P rounded up to it) and 8 accumulators or
    more (FMA latency x ports), the larger one on a tie.

        >>> default_tile_p(196, 2, 32), default_tile_p(49, 2, 32), default_tile_p(16, 2, 32)
        (14, 7, 8)
        >>> default_tile_p(196, 1, 16)
        14
    """
    fits = [d for d in TILE_P if d * vecs <= registers - vecs - 1] or [1]
    # per padded tile's work, as many useful tiles as possible: P / (P rounded up to d),
    # times the accumulators' share of the FMA pipes (8 keep them busy)
    def rate(d: int) -> float:
        return P / (-(-P // d) * d) * min(1.0, d * vecs / 8) + d * 1e-3
    return max(fits, key=rate)


def kernel_transform(m: int, kb: int) -> Callable[[np.ndarray], np.ndarray]:
    """The numpy transform of an OIHW 3x3 kernel into the GEMM's layout
    [alpha, alpha, K/kb, C, kb] (U = G g G^T in float64, then float32):
    `kernel_transform(4, 16)(w)`.

        >>> w = np.ones((16, 8, 3, 3), "float32")
        >>> kernel_transform(2, 8)(w).shape
        (4, 4, 2, 8, 8)
    """
    _, g, _ = transform_matrices(m)

    def transform(w: np.ndarray) -> np.ndarray:
        K, C = w.shape[:2]
        if w.shape[2:] != (3, 3) or K % kb:
            raise ScheduleError(f"{NAME}: the kernel transform takes a [K, C, 3, 3] kernel "
                                f"with K a multiple of {kb}, got {w.shape}")
        u = np.einsum("ai,kcij,bj->abkc", g, w.astype(np.float64), g)
        u = u.reshape(m + 2, m + 2, K // kb, kb, C).transpose(0, 1, 2, 4, 3)
        return np.ascontiguousarray(u, dtype=np.float32)

    return transform


def _packers(ins: Sequence[Tensor], args: Sequence[Any], attrs: dict[str, Any]
             ) -> dict[int, Callable[[np.ndarray], np.ndarray]]:
    """A logical OIHW kernel spec instantiated transformed: its numpy transform."""
    kshape = shape_of(ins[1])
    if len(args[1][0]) == 4 and len(kshape) == 5:
        return {1: kernel_transform(kshape[0] - 2, kshape[4])}
    return {}



def _unrolled_vector(s: Schedule, t: Tensor, outer: Sequence[Any], unrolled: Sequence[Any],
                     vector: Any) -> None:
    """A transform pass's loops: `outer`, then `unrolled` (each unrolled, so that its
    constant positions pick one arm of the transform's selects), the vector innermost."""
    s[t].reorder(*outer, *unrolled, vector)
    for ax in unrolled:
        s[t].unroll(ax)
    s[t].vectorize(vector)

def schedule_winograd(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """The output transform (with the epilogue) per tile, m x m outputs unrolled, vector
    over kb; the GEMM a register tile of tile_p tiles x kb channels (the accumulators),
    vector over kb; the input transform per tile and channel block, alpha x alpha unrolled,
    vector over cb. Where they run (FUSE): "rows" parallel over chunks of rows of tiles,
    each chunk's padding and input transform at the chunk, its GEMM at each output block;
    "gemm" parallel over (output block, chunk), the GEMM at the chunk, the padding and
    input transform at root; "root" each stage at root, the GEMM parallel over
    (alpha, alpha, K/kb) with the next kernel block prefetched (PREFETCH_NEXT_BLOCK)."""
    outs = list(outs)
    s = create_schedule(outs)
    Y = find_anchor(outs, OUTPUT)
    cols = next((t for t in Y.op.input_tensors if t.op.tag == OUTPUT_COLS), None)
    M = next(t for t in (cols or Y).op.input_tensors if t.op.tag == GEMM)
    V = next(t for t in M.op.input_tensors if t.op.tag == INPUT_T)
    U = next(t for t in M.op.input_tensors if t is not V)
    rows_t = next((t for t in V.op.input_tensors if t.op.tag == INPUT_ROWS), None)
    dpad = (rows_t or V).op.input_tensors[0]
    padded = dpad.op.tag == PAD if hasattr(dpad.op, "tag") else False
    computed_u = getattr(U.op, "tag", None) == KERNEL_T
    keep = [V] + ([dpad] if padded else []) + ([U] if computed_u else []) + \
        [t for t in (rows_t, cols) if t is not None]
    inline_injective(s, outs, keep=keep)
    O = outs[0]
    if O.op is not Y.op and Y.op.tag == OUTPUT and s[Y].attach_type != "inline":
        s[Y].compute_inline()
    lanes = cfg.target.fp32_lanes
    m = int(cfg["tile_m"].val)
    kb = int(cfg["tile_oc"].size[-1])
    bp = int(cfg["tile_p"].val)
    vec = best_divisor(kb, [lanes, lanes // 2 or 1])

    # data that needs no padding nor re-blocking is read as it is; in chunks of rows each
    # chunk pads its own rows (PAD_PER_CHUNK), else one stage pads all at root
    pad_in_chunk = padded and PAD_PER_CHUNK and cfg["fuse"].val == "rows"
    if padded and not pad_in_chunk:
        schedule_copy_stage(s, dpad)
    if computed_u:
        e, nu, ko, c, k = s[U].op.axis
        s[U].reorder(ko, c, e, nu, k)
        s[U].unroll(e)
        s[U].unroll(nu)
        s[U].vectorize(k)
        parallel_fuse(s, U, [ko, c])

    # the output transform (and the epilogue): m x m outputs a tile, unrolled
    if len(O.shape) == 4:
        n, c, h, w = s[O].op.axis
        oko, k = s[O].split(c, factor=kb)
    else:
        n, oko, h, w, k = s[O].op.axis
    th, hi = s[O].split(h, factor=m)
    tw, wi = s[O].split(w, factor=m)
    kvo, kvi = s[O].split(k, factor=vec)
    fuse = cfg["fuse"].val
    if fuse != "root":
        nH, nW = -(-shape_of(Y)[2] // m), -(-shape_of(Y)[3] // m)
        rows = chunk_rows(nH, int(cfg["tile_rows"].val))
        bp = register_tile(rows * nW, bp)
        tho, thi = s[O].split(th, factor=rows)
    if fuse == "rows":
        s[O].reorder(n, tho, oko, thi, tw, hi, wi, kvo, kvi)
        par = parallel_fuse(s, O, [n, tho])
        gemm_at = oko
    elif fuse == "gemm":
        s[O].reorder(n, oko, tho, thi, tw, hi, wi, kvo, kvi)
        gemm_at = parallel_fuse(s, O, [n, oko, tho])
    else:
        s[O].reorder(n, oko, th, tw, hi, wi, kvo, kvi)
        parallel_fuse(s, O, [n, oko, th])
    s[O].unroll(hi)
    s[O].unroll(wi)
    s[O].unroll(kvo)
    s[O].vectorize(kvi)
    if cols is not None:  # the first pass of the output transform, per tile
        s[cols].compute_at(s[O], tw)
        i, b, cko, cp, ck = s[cols].op.axis
        ckvo, ckvi = s[cols].split(ck, factor=vec)
        _unrolled_vector(s, cols, (cko, cp), (i, b, ckvo), ckvi)

    # the input transform: per (channel block, tile) all alpha x alpha outputs, unrolled
    e, nu, co, p, ci = s[V].op.axis
    _unrolled_vector(s, V, (co, p), (e, nu), ci)
    if rows_t is not None:  # the first pass of the input transform, per tile
        s[rows_t].compute_at(s[V], p)
        re_, rj, rco_, rp, rci_ = s[rows_t].op.axis
        _unrolled_vector(s, rows_t, (rco_, rp), (re_, rj), rci_)
    if fuse == "rows":
        s[V].compute_at(s[O], par)
        if pad_in_chunk:
            s[dpad].compute_at(s[O], par)
            s[dpad].vectorize(s[dpad].op.axis[-1])
    else:
        parallel_fuse(s, V, [co, p])

    # the GEMM: a register tile of bp tiles x kb channels, accumulators in registers
    MC = s.cache_write(M, "local")
    e, nu, ko, p, k = s[M].op.axis
    po, pi = s[M].split(p, factor=bp)
    ko2, ki = s[M].split(k, factor=vec)
    s[M].reorder(e, nu, ko, po, pi, ko2, ki)
    s[M].vectorize(ki)
    if fuse != "root":
        s[M].compute_at(s[O], gemm_at)
    else:
        parallel_fuse(s, M, [e, nu, ko])
    s[MC].compute_at(s[M], po)
    ce, cnu, cko, cp, ck = s[MC].op.axis
    rco, rci = s[MC].op.reduce_axis
    cko2, cki = s[MC].split(ck, factor=vec)
    s[MC].reorder(ce, cnu, cko, rco, rci, cp, cko2, cki)
    s[MC].unroll(cp)
    s[MC].unroll(cko2)
    s[MC].vectorize(cki)
    if PREFETCH_NEXT_BLOCK and fuse == "root":
        # each p tile of this (alpha, alpha, block) iteration prefetches its share of the
        # next block of the transformed kernel, a channel (kb floats) a step
        n_po = -(-shape_of(M)[3] // bp)
        s[MC].prefetch(U, rci, dim=2, shift=1, level=2, spread=(po, n_po),
                       aligned=not computed_u)
    return s


def winograd_partition(cfg: Any) -> str:
    """How the output stage's parallel loop splits the output among threads: by rows
    (chunks of rows of tiles, all channels each: fuse "rows") or by channel chunks
    (n, K/kb, rows of tiles: fuse "gemm" and "root").

        >>> from schedule.space import FallbackConfig
        >>> cfg = FallbackConfig("llvm")
        >>> cfg.define_knob("fuse", list(FUSE))
        >>> winograd_partition(cfg)
        'rows'
    """
    return "rows" if cfg["fuse"].val == "rows" else "channels"


register_template(NAME, "llvm", compute=_compute, packers=_packers,
                  constant_weight_attrs={"kernel_layout": "winograd"},
                  output_block="tile_oc", version=1, partition=winograd_partition,
                  applies=applies)(schedule_winograd)
