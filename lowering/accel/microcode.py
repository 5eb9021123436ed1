"""Microcode for an int8 dense layer, `C[M, N] = A[M, K] . W[N, K]^T`, from plain sizes.

The layer is cut into output tiles of tile_m x tile_n and reduction steps of tile_k
(all multiples of the GEMM core's BATCH, BLOCK_OUT, BLOCK_IN, dividing M, N, K). For
every output tile: reset its accumulators; for every reduction step load the input tile
(tile_m x tile_k) and the weight tile (tile_n x tile_k) and run one GEMM over them; then
the ALU tail (an arithmetic shift right, ReLU, a clip to int8, each optional) and one
STORE. Operands sit in DRAM in VTA's packed layouts: A as (M/BATCH, K/BLOCK_IN) input
elements, W as (N/BLOCK_OUT, K/BLOCK_IN) weight elements, C as (M/BATCH, N/BLOCK_OUT)
output elements, row-major, so every tile moves as one 2-D strided DMA.

The micro-op kernels (one GEMM kernel of tile_k / BLOCK_IN micro-ops, and one micro-op
for the reset and the ALU) depend only on the tiling: they are generated once, loaded by
one LOAD, and reused by every tile, the GEMM's two loops walking the tile's rows and
columns by their index factors.

A tile already on chip is not loaded again: with one reduction step the weight tile of
an output column stays for every row tile; of rows-outermost and columns-outermost the
tile order that loads fewer bytes is taken.

With `double_buffer` each on-chip buffer is split into two halves (VTA's two virtual
threads): new input and weight tiles alternate halves and output tiles alternate
accumulator halves, so the load module fetches step s + 1 while the GEMM of step s runs
and the store of one tile overlaps the next tile's compute. The dependency tokens come
from lowering.accel.deps, from what each instruction reads and writes.

    >>> import numpy as np
    >>> from lowering.accel.env import Env
    >>> a = np.ones((2, 32), "int8"); w = np.ones((16, 32), "int8")
    >>> c, stats, _ = run_dense(Env(), a, w, Tiling(1, 16, 16))
    >>> int(c[0, 0]), stats.counts["GEMM"]
    (32, 6)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lowering.accel.deps import insert_dependencies
from lowering.accel.dram import Dram
from lowering.accel.env import Env
from lowering.accel.isa import Alu, AluOp, Finish, Gemm, Insn, Load, MemType, Store, Uop
from lowering.accel.simulator import Stats, run
from tessel_errors import CodegenError


@dataclass(frozen=True)
class Tiling:
    """Tile sizes in rows (tile_m), output columns (tile_n) and reduction (tile_k)."""

    tile_m: int
    tile_n: int
    tile_k: int


@dataclass(frozen=True)
class Plan:
    """A dense layer's tiling in core blocks, its buffer halves and micro-op kernels.

    `uops` go to DRAM as they are and are loaded into micro-op buffer entries 0.. ."""

    env: Env
    blocks: tuple[int, int, int]     # M/BATCH, N/BLOCK_OUT, K/BLOCK_IN
    tile: tuple[int, int, int]       # the tile in blocks
    halves: int
    half_depth: tuple[int, int, int]  # INP, WGT, ACC elements per half
    uops: tuple[Uop, ...]

    def acc_kernel(self, ha: int) -> int:
        """Micro-op index of the one-micro-op kernel at accumulator half ha."""
        return ha

    def gemm_kernel(self, hi: int, hw: int, ha: int) -> tuple[int, int]:
        """[bgn, end) of the GEMM kernel for input half hi, weight half hw, accumulator
        half ha."""
        tk = self.tile[2]
        bgn = self.halves + ((hi * self.halves + hw) * self.halves + ha) * tk
        return bgn, bgn + tk


def split_buffers(env: Env, layer: str, tiling: object, needs: tuple[int, int, int],
                  double_buffer: bool) -> tuple[int, tuple[int, int, int]]:
    """(halves, INP/WGT/ACC elements per half), checking that `needs` (elements of each
    a tile takes) fit; the error names the layer kind and the tiling."""
    halves = 2 if double_buffer else 1
    depth = (env.depth("INP") // halves, env.depth("WGT") // halves,
             env.depth("ACC") // halves)
    for buf, need, have in zip(("input", "weight", "accumulator"), needs, depth):
        if need > have:
            raise CodegenError(
                f"{layer} on the accelerator: {tiling} needs {need} {buf} elements, the "
                f"{buf} buffer holds {have}" + (" per half" if halves == 2 else "")
                + "; use smaller tiles" + (" or no double buffering" if halves == 2 else ""))
    return halves, depth


def plan(env: Env, m: int, n: int, k: int, tiling: Tiling, double_buffer: bool = True
         ) -> Plan:
    """Check the sizes against the core and the buffers; build the micro-op kernels."""
    core = (env.BATCH, env.BLOCK_OUT, env.BLOCK_IN)
    blocks, tile = [], []
    for name, size, t, c in zip("mnk", (m, n, k), (tiling.tile_m, tiling.tile_n,
                                                   tiling.tile_k), core):
        if size <= 0 or size % c or t <= 0 or t % c or size % t:
            raise CodegenError(
                f"dense on the accelerator: {name.upper()}={size} and tile_{name}={t} must be "
                f"positive multiples of the core's {c}, the tile dividing the size")
        blocks.append(size // c)
        tile.append(t // c)
    tm, tn, tk = tile
    halves, half_depth = split_buffers(env, "dense", tiling, (tm * tk, tn * tk, tm * tn),
                                       double_buffer)
    inp_h, wgt_h, acc_h = half_depth
    uops = [Uop(ha * acc_h, 0, 0) for ha in range(halves)]
    for hi in range(halves):
        for hw in range(halves):
            for ha in range(halves):
                uops += [Uop(ha * acc_h, hi * inp_h + kk, hw * wgt_h + kk) for kk in range(tk)]
    if len(uops) > env.UOP_BUFF_DEPTH:
        raise CodegenError(f"dense on the accelerator: {len(uops)} micro-ops exceed the "
                           f"micro-op buffer's {env.UOP_BUFF_DEPTH}; use a smaller tile_k")
    return Plan(env, (blocks[0], blocks[1], blocks[2]), (tm, tn, tk), halves,
                (inp_h, wgt_h, acc_h), tuple(uops))


def dense(p: Plan, a_base: int, w_base: int, c_base: int, uop_base: int, *,
          shift: int = 0, relu: bool = False, clip: bool = False) -> list[Insn]:
    """The instruction stream, tokens inserted, for DRAM bases (in elements) of A, W, C
    and the plan's micro-ops."""
    mb, nb, kb = p.blocks
    tm, tn, tk = p.tile
    inp_h, wgt_h, acc_h = p.half_depth
    out: list[Insn] = [Load(mem=MemType.UOP, sram_base=0, dram_base=uop_base, y_size=1,
                            x_size=len(p.uops), x_stride=len(p.uops))]
    tile_loops = dict(iter_out=tm, iter_in=tn, dst_factor_out=tn, dst_factor_in=1)
    orders = ([(i, j) for i in range(mb // tm) for j in range(nb // tn)],
              [(i, j) for j in range(nb // tn) for i in range(mb // tm)])
    tiles = min(orders, key=lambda o: _load_bytes(p, o))
    inp = _Halves(p.halves)
    wgt = _Halves(p.halves)
    for t, (i, j) in enumerate(tiles):
        ha = t % p.halves
        acc_uop = p.acc_kernel(ha)
        out.append(Gemm(reset=True, uop_bgn=acc_uop, uop_end=acc_uop + 1, **tile_loops))
        for s in range(kb // tk):
            hi, new = inp.place((i, s))
            if new:
                out.append(Load(mem=MemType.INP, sram_base=hi * inp_h,
                                dram_base=a_base + i * tm * kb + s * tk, y_size=tm,
                                x_size=tk, x_stride=kb))
            hw, new = wgt.place((j, s))
            if new:
                out.append(Load(mem=MemType.WGT, sram_base=hw * wgt_h,
                                dram_base=w_base + j * tn * kb + s * tk, y_size=tn,
                                x_size=tk, x_stride=kb))
            bgn, end = p.gemm_kernel(hi, hw, ha)
            out.append(Gemm(uop_bgn=bgn, uop_end=end, src_factor_out=tk, wgt_factor_in=tk,
                            **tile_loops))
        tail = [(AluOp.SHR, shift)] if shift else []
        tail += [(AluOp.MAX, 0)] if relu else []
        tail += [(AluOp.MAX, -128), (AluOp.MIN, 127)] if clip else []
        for op, imm in tail:
            out.append(Alu(op=op, use_imm=True, imm=imm, uop_bgn=acc_uop, uop_end=acc_uop + 1,
                           src_factor_out=tn, src_factor_in=1, **tile_loops))
        out.append(Store(sram_base=ha * acc_h, dram_base=c_base + i * tm * nb + j * tn,
                         y_size=tm, x_size=tn, x_stride=nb))
    out.append(Finish())
    return insert_dependencies(out, p.uops)


def _load_bytes(p: Plan, tiles: list[tuple[int, int]]) -> int:
    """Input and weight bytes the tile order `tiles` loads, reused tiles not counted."""
    tm, tn, tk = p.tile
    inp, wgt = _Halves(p.halves), _Halves(p.halves)
    total = 0
    for i, j in tiles:
        for s in range(p.blocks[2] // tk):
            total += inp.place((i, s))[1] * tm * tk * p.env.INP_ELEM_BYTES
            total += wgt.place((j, s))[1] * tn * tk * p.env.WGT_ELEM_BYTES
    return total


class _Halves:
    """Which tile each half of a buffer holds: a tile found there is reused, a new one
    goes to the half the last GEMM did not read (so its load overlaps that GEMM)."""

    def __init__(self, halves: int) -> None:
        self.held: list[object] = [None] * halves
        self.last = halves - 1

    def place(self, key: object) -> tuple[int, bool]:
        """(the half holding `key`, whether it must be loaded there)."""
        if key in self.held:
            self.last = self.held.index(key)
            return self.last, False
        self.last = (self.last + 1) % len(self.held)
        self.held[self.last] = key
        return self.last, True


def pack(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """x[R*rows, C*cols] as its (R*C, rows, cols) blocks, row-major (VTA's packing)."""
    r, c = x.shape[0] // rows, x.shape[1] // cols
    return np.ascontiguousarray(x.reshape(r, rows, c, cols).transpose(0, 2, 1, 3)
                                ).reshape(r * c, rows, cols)


def unpack(blocks: np.ndarray, r: int, c: int) -> np.ndarray:
    """The inverse of `pack` for an (r*c, rows, cols) block array."""
    _, rows, cols = blocks.shape
    return blocks.reshape(r, c, rows, cols).transpose(0, 2, 1, 3).reshape(r * rows, c * cols)


def run_dense(env: Env, a: np.ndarray, w: np.ndarray, tiling: Tiling, *,
              double_buffer: bool = True, shift: int = 0, relu: bool = False,
              clip: bool = False) -> tuple[np.ndarray, Stats, list[Insn]]:
    """Pack int8 `a` [M, K] and `w` [N, K], run the layer on the simulator; returns the
    int8 C [M, N], the run's stats and the instruction stream."""
    (m, k), n = a.shape, w.shape[0]
    p = plan(env, m, n, k, tiling, double_buffer)
    dram = Dram(env)
    a_base = dram.place(MemType.INP, pack(a, env.BATCH, env.BLOCK_IN))
    w_base = dram.place(MemType.WGT, pack(w, env.BLOCK_OUT, env.BLOCK_IN))
    c_base = dram.alloc(MemType.OUT, (m // env.BATCH) * (n // env.BLOCK_OUT))
    uop_base = dram.place_uops(p.uops)
    insns = dense(p, a_base, w_base, c_base, uop_base, shift=shift, relu=relu, clip=clip)
    stats = run(insns, dram, env)
    c = dram.read(MemType.OUT, c_base, (m // env.BATCH) * (n // env.BLOCK_OUT))
    return unpack(c, m // env.BATCH, n // env.BLOCK_OUT), stats, insns


__all__ = ["Plan", "Tiling", "dense", "pack", "plan", "run_dense", "split_buffers", "unpack"]
