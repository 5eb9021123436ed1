"""x86 int8 dense (int8 data [M, K] and weight [N, K], int32 [M, N]), its inner reduction
the 4-wide int8 dot of schedule.templates.x86_int8_dot (vpdpbusd with VNNI, exact vpmaddwd
pairs without; TVM's dense_int8).

The accumulator tile is mr rows x nr columns (nr a multiple of the vector): per group of 4
reduction values the micro-kernel broadcasts 4 data bytes per row and does one dot per row
and vector. The data is shifted (x + 128; uint8, or uint16 pairs where the dot is vpmaddwd)
and padded to a multiple of 4 along K by one injective stage; attrs `weight_layout`
"plain" (default: words and compensation built by stages at every call) or "packed" (what
build asks for a constant weight): the weight argument, spec'd [N, K] int8, arrives as
int32 [ceil(N/nr), K/4 + 1, nr], each word 4 weights of one output, the last row
128 * sum(w) per output, packed once by `input_packers`.

    >>> from schedule.templates import instantiate
    >>> s, ts = instantiate("dense_int8.x86", [((4, 64), "int8"), ((32, 64), "int8")],
    ...                     {"out_dtype": "int32", "weight_layout": "packed"},
    ...                     target="llvm -mcpu=cascadelake")
    >>> [(t.name, tuple(int(d.value) for d in t.shape)) for t in ts]
    [('data', (4, 64)), ('weight', (1, 17, 32)), ('dense_int8_out', (4, 32))]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from schedule.schedule import Schedule, create_schedule
from schedule.space import FallbackConfig
from schedule.templates.common import (
    best_divisor,
    divisor_at_most,
    fallback_split,
    parallel_fuse,
    schedule_copy_stage,
)
from schedule.templates.conv_common import PAD
from schedule.templates.registry import expect_args, placeholders, register_template
from schedule.templates.x86_int8_dot import (
    COMP_SHIFT,
    Activations,
    check_int8,
    dot4_intrin,
    dot4_term,
    guarded,
    int8_stages,
    int32_lanes,
    pack_words,
    word_of,
)
from tensor_expr import tensor as T
from tensor_expr.expr import cast, const
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError

GEMM, OUT, PADDED = "dense_int8", "dense_int8_out", "dense_int8_padded"
NAME = "dense_int8.x86"

# ---------------------------------------------------------------------------------------
# The computation


def _check(args: Sequence[Any], attrs: dict[str, Any]) -> bool:
    expect_args(NAME, args, 2, [2, 2])
    check_int8(NAME, args, attrs, "weight")
    layout = attrs.get("weight_layout", "plain")
    if layout not in ("plain", "packed"):
        raise ScheduleError(f"{NAME}: weight_layout must be 'plain' or 'packed', got "
                            f"{layout!r}")
    if args[0][0][1] != args[1][0][1]:
        raise ScheduleError(f"{NAME}: the data has K = {args[0][0][1]}, the weight "
                            f"{args[1][0][1]}")
    return layout == "packed"


def _declare_tiles(cfg: Any, M: int, NV: int, lanes: int) -> int:
    """The column tile nr (vectors side by side, one accumulator each per row): enough
    accumulators for 8 independent chains where the rows allow, within the registers."""
    budget = cfg.target.vector_registers - (4 if cfg.target.vector_registers == 32 else 6)
    cfg.define_split("tile_x", NV, num_outputs=2, filter=lambda f: f[-1] <= 8)
    rows = best_divisor(M, [8, 6, 4, 3, 2])
    rows = min(rows, max(1, budget // 2))
    vecs = [v for v in (8, 4, 2, 1) if NV % v == 0 and rows * v + 2 * v <= budget]
    good = [v for v in vecs if rows * v >= 8]
    fallback_split(cfg, "tile_x", [min(good) if good else max(vecs or [1])])
    return lanes * int(cfg["tile_x"].size[-1])


def _compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
             ) -> tuple[list[Tensor], list[Tensor]]:
    packed = _check(args, attrs)
    data, weight = placeholders(args, ["data", "weight"])
    (M, K), N = args[0][0], args[1][0][0]
    lanes = int32_lanes(cfg.target)
    K4, NV = -(-K // 4), -(-N // lanes)
    nr = _declare_tiles(cfg, M, NV, lanes)
    NB = NV * lanes // nr

    acts = Activations.for_target(cfg.target, lanes)
    dpack = T.compute((M, 4 * K4), lambda m, k: guarded(
        [acts.channel(k) < K] if K4 * 4 > K else [], acts.shifted(data[m, acts.channel(k)]),
        acts.pad), name="data_u8", tag=PAD)
    if packed:
        wp = T.placeholder((NB, K4 + 1, nr), "int32", name="weight")
        weight_in, word, comp = wp, (lambda o, q, b: wp[o, q, b]), \
            (lambda o, b: wp[o, K4, b])
    else:
        weight_in, word, comp = weight, *_weight_stages(weight, N, K, nr)
    k4 = T.reduce_axis((0, K4), name="k_outer")
    k = T.reduce_axis((0, 4), name="k_four")
    acc = T.compute((M, NB, nr), lambda m, o, b: T.sum(
        dot4_term(dpack[m, k4 * 4 + acts.slot(k)], word(o, k4, b), k), axis=[k4, k]), name=GEMM,
        tag=GEMM)
    cfg.add_flop(2.0 * M * N * K)
    if N % nr:
        # the dot writes whole vectors: with padded columns the accumulators are kept
        # whole by a blocked result, which the output stage crops
        blocked = T.compute((M, NB, nr), lambda m, o, b: acc[m, o, b] - comp(o, b),
                            name=PADDED, tag=PADDED)
        out = T.compute((M, N), lambda m, n: blocked[m, n // nr, n % nr], name=OUT, tag=OUT)
    else:
        out = T.compute((M, N), lambda m, n: acc[m, n // nr, n % nr] - comp(n // nr, n % nr),
                        name=OUT, tag=OUT)
    return [data, weight_in], [out]


def _weight_stages(weight: Tensor, N: int, K: int, nr: int
                   ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """word(block, k4, col) and comp(block, col) from a plain [N, K] weight, by stages."""
    K4, NB = -(-K // 4), -(-N // nr)

    def w_at(n: Any, k: Any) -> Any:
        conds = ([n < N] if NB * nr > N else []) + ([k < K] if K4 * 4 > K else [])
        return guarded(conds, weight[n, k], const(0, "int8"))

    words = T.compute((NB, K4, nr), lambda o, q, b: word_of(
        [w_at(o * nr + b, q * 4 + j) for j in range(4)]), name="weight_words",
        tag="weight_words")
    rk = T.reduce_axis((0, K), name="rk")
    comp = T.compute((NB, nr), lambda o, b: T.sum(
        cast(w_at(o * nr + b, rk), "int32") * COMP_SHIFT, axis=rk), name="weight_comp",
        tag="weight_comp")
    return (lambda o, q, b: words[o, q, b]), (lambda o, b: comp[o, b])


# ---------------------------------------------------------------------------------------
# The schedule


def schedule_dense_int8(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Blocked int8 GEMM: parallel (row block, column block), mr x nr accumulators, the
    4-wide dot tensorized over each vector of them."""
    outs = list(outs)
    s = create_schedule(outs)
    O, CC, keep, cropped = int8_stages(s, outs, GEMM, PADDED)
    M, _, nr = (int(d.value) for d in CC.shape)
    K4 = int(CC.op.reduce_axis[0].dom.extent.value)
    lanes = int32_lanes(cfg.target)

    # rows are unrolled, k4 steps too with unroll_kw: bigger tiles only spill registers
    cfg.define_split("tile_y", M, num_outputs=3, filter=lambda f: f[-1] <= 8)
    cfg.define_split("tile_k", K4, num_outputs=2, filter=lambda f: f[-1] <= 16)
    cfg.define_knob("unroll_kw", [True, False])
    if isinstance(cfg, FallbackConfig):
        budget = cfg.target.vector_registers - 4
        vecs = nr // lanes
        mr = best_divisor(M, [p for p in (8, 6, 4, 3, 2) if p * vecs + 2 * vecs <= budget]
                          or [1])
        fallback_split(cfg, "tile_y", [divisor_at_most(M // mr, max(1, 32 // mr)), mr])
        fallback_split(cfg, "tile_k", [best_divisor(K4, [4, 2, 8])])

    if len(O.shape) == 2:
        m, n = s[O].op.axis
        no, ni = s[O].split(n, factor=nr)
    else:
        m, no, ni = s[O].op.axis
    yo, ym, yi = cfg["tile_y"].apply(s, O, m)
    s[O].reorder(yo, no, ym, yi, ni)
    s[CC].compute_at(s[O], ym)
    s[O].vectorize(ni)
    parallel_fuse(s, O, [yo, no])

    # the micro-kernel: k outside, rows and vectors unrolled, the dot over each vector
    cm, cno, cni = s[CC].op.axis
    rk4, rk = s[CC].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(s, CC, rk4)
    nio, nii = s[CC].split(cni, factor=lanes)
    s[CC].reorder(cno, ko, ki, cm, nio, nii, rk)
    if cfg["unroll_kw"].val:
        s[CC].unroll(ki)
    s[CC].unroll(cm)
    s[CC].unroll(nio)
    s[CC].tensorize(nii, dot4_intrin(lanes, Activations.for_target(cfg.target, lanes)))

    if cropped:  # the cropping output stage
        schedule_copy_stage(s, outs[0])
    for t in keep:
        schedule_copy_stage(s, t, vector_ok=t.op.tag == PAD)
    return s


def pack_weight(nr: int) -> Callable[[np.ndarray], np.ndarray]:
    """The numpy packing of an int8 [N, K] weight into the "packed" layout with nr
    columns per block: `pack_weight(32)(w)`."""
    def pack(w: np.ndarray) -> np.ndarray:
        n, k = w.shape
        k4 = -(-k // 4)
        w = np.pad(np.asarray(w, "int8"), ((0, 0), (0, 4 * k4 - k)))
        words, comp = pack_words(w.reshape(n, k4, 4), nr)
        return np.ascontiguousarray(np.concatenate([words, comp[:, None, :]], axis=1))
    return pack


def _packers(ins: Sequence[Tensor], args: Sequence[Any], attrs: dict[str, Any]
             ) -> dict[int, Callable[[np.ndarray], np.ndarray]]:
    if attrs.get("weight_layout") != "packed":
        return {}
    return {1: pack_weight(int(ins[1].shape[2].value))}


register_template(NAME, "llvm", compute=_compute, packers=_packers,
                  constant_weight_attrs={"weight_layout": "packed"})(schedule_dense_int8)
