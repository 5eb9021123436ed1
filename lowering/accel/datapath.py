"""What each instruction does to the accelerator's memories, bit-exactly.

`Sram(env)` holds the four on-chip buffers as numpy arrays (input and weight int8,
accumulator int32, micro-ops as their three index arrays) and executes one instruction at
a time on them and on a DRAM byte array. Integer semantics are the hardware's: the
accumulator wraps around at 32 bits, SHR is an arithmetic shift (a negative amount shifts
left), MUL keeps the low 32 bits of the product, and a STORE keeps the low 8 bits of each
accumulator (VTA's truncation; requantization is the ALU's job before it).

Every access is checked: an SRAM address past its buffer, a micro-op that no LOAD put in
the micro-op buffer, a DRAM range past the image, and a read of an SRAM element nothing
wrote raise `Fault`, which the simulator turns into an error naming the instruction.

    >>> sram = Sram(Env())
    >>> sram.bufs[MemType.ACC].shape, sram.bufs[MemType.ACC].dtype
    ((2048, 1, 16), dtype('int32'))
    >>> execute(sram, insn, dram)   # (DRAM bytes read, written)   # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from lowering.accel.dram import elements
from lowering.accel.env import Env
from lowering.accel.isa import Alu, AluOp, Compute, Gemm, Insn, Load, MemType, Store, layout

_CHUNK = 4096  # GEMM iterations gathered at once (bounds the temporaries' memory)


class Fault(Exception):
    """A bad access by the executing instruction: what happened and how to fix it."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what, self.fix = what, fix


class Sram:
    """The on-chip buffers of one accelerator, with a mask of the elements written."""

    def __init__(self, env: Env) -> None:
        self.env = env
        b, i, o = env.BATCH, env.BLOCK_IN, env.BLOCK_OUT
        self.bufs: dict[MemType, np.ndarray] = {
            MemType.INP: np.zeros((env.INP_BUFF_DEPTH, b, i), np.int8),
            MemType.WGT: np.zeros((env.WGT_BUFF_DEPTH, o, i), np.int8),
            MemType.ACC: np.zeros((env.ACC_BUFF_DEPTH, b, o), np.int32),
            MemType.UOP: np.zeros((env.UOP_BUFF_DEPTH, 3), np.int64),  # dst, src, wgt
        }
        self.written = {m: np.zeros(a.shape[0], bool) for m, a in self.bufs.items()}

    # -- DMA --------------------------------------------------------------------------
    def load(self, insn: Load, dram: np.ndarray) -> int:
        """DRAM -> SRAM with zero padding; returns the DRAM bytes read."""
        mem = insn.mem
        if mem not in self.bufs:
            raise Fault(f"a LOAD cannot write the {mem.name} buffer",
                        "load into UOP, WGT, INP or ACC")
        rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
        cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
        self._sram_range(mem, insn.sram_base, rows * cols)
        src = self._dram_index(insn, dram, mem)
        view = elements(self.env, dram, mem)
        block = np.zeros((rows, cols, *self.bufs[mem].shape[1:]), self.bufs[mem].dtype)
        data = view[src]
        if mem is MemType.UOP:
            data = self._decode_uops(data)
        block[insn.y_pad_0:insn.y_pad_0 + insn.y_size,
              insn.x_pad_0:insn.x_pad_0 + insn.x_size] = data
        lo = insn.sram_base
        self.bufs[mem][lo:lo + rows * cols] = block.reshape(rows * cols, *block.shape[2:])
        self.written[mem][lo:lo + rows * cols] = True
        return src.size * self.env.elem_bytes(mem.name)

    def store(self, insn: Store, dram: np.ndarray) -> int:
        """Accumulator -> DRAM narrowed to int8; returns the DRAM bytes written."""
        if insn.mem is not MemType.OUT:
            raise Fault(f"a STORE reads the output (accumulator) buffer, not {insn.mem.name}",
                        "give STORE memory type OUT")
        if insn.y_pad_0 or insn.y_pad_1 or insn.x_pad_0 or insn.x_pad_1:
            raise Fault("a STORE cannot pad", "set its pads to 0")
        n = insn.y_size * insn.x_size
        self._sram_range(MemType.ACC, insn.sram_base, n)
        acc = np.arange(insn.sram_base, insn.sram_base + n)
        self._check_written(MemType.ACC, acc, "STORE")
        dst = self._dram_index(insn, dram, MemType.OUT)
        elements(self.env, dram, MemType.OUT)[dst.reshape(-1)] = (
            self.bufs[MemType.ACC][acc].astype(np.int8))  # the low 8 bits
        return dst.size * self.env.elem_bytes("OUT")

    def _dram_index(self, insn: Load | Store, dram: np.ndarray, mem: MemType) -> np.ndarray:
        """Element indices (y_size, x_size) the DMA touches in DRAM, bounds-checked."""
        y = np.arange(insn.y_size)[:, None]
        x = np.arange(insn.x_size)[None, :]
        index = insn.dram_base + y * insn.x_stride + x
        have = dram.size // self.env.elem_bytes(mem.name)
        if index.size and int(index.max()) >= have:
            raise Fault(f"DRAM element {int(index.max())} of {mem.name} (byte "
                        f"{int(index.max()) * self.env.elem_bytes(mem.name)}) is past the "
                        f"{dram.size}-byte DRAM image ({have} such elements)",
                        "check dram_base, y_size, x_size and x_stride against the arrays")
        return index

    def _decode_uops(self, words: np.ndarray) -> np.ndarray:
        out = np.empty((*words.shape, 3), np.int64)
        shift = 0
        for n, (_, width) in enumerate(layout(self.env).uop):
            out[..., n] = (words.astype(np.int64) >> shift) & ((1 << width) - 1)
            shift += width
        return out

    # -- compute ----------------------------------------------------------------------
    def gemm(self, insn: Gemm) -> None:
        """acc[dst] += inp[src] . wgt[wgt]^T (or = 0 with reset) for every iteration."""
        indices = self._destinations(insn)
        if indices is None:
            return
        dst, src, wgt = indices
        acc = self.bufs[MemType.ACC]
        self._index_range(MemType.INP, src, "src")
        self._index_range(MemType.WGT, wgt, "wgt")
        self._check_written(MemType.INP, src, "GEMM")
        self._check_written(MemType.WGT, wgt, "GEMM")
        inp, w = self.bufs[MemType.INP], self.bufs[MemType.WGT]
        for lo in range(0, dst.size, _CHUNK):
            s = slice(lo, lo + _CHUNK)
            prod = np.einsum("nbk,nok->nbo", inp[src[s]].astype(np.int32),
                             w[wgt[s]].astype(np.int32))
            np.add.at(acc, dst[s], prod)  # int32 adds: wrap around like the hardware

    def alu(self, insn: Alu) -> None:
        """acc[dst] = op(acc[dst], imm or acc[src]) in int32, iteration by iteration."""
        indices = self._destinations(insn)
        if indices is None:
            return
        dst, src, _ = indices
        acc = self.bufs[MemType.ACC]
        if not insn.use_imm:
            self._index_range(MemType.ACC, src, "src")
            self._check_written(MemType.ACC, src, "ALU")
        unique = np.unique(dst).size == dst.size
        # one vector step equals the sequential loop unless an iteration reads or writes
        # an element another iteration writes
        if unique and (insn.use_imm or not np.any(np.isin(src, dst) & (src != dst))):
            rhs = np.int64(insn.imm) if insn.use_imm else acc[src].astype(np.int64)
            acc[dst] = _alu_op(insn.op, acc[dst].astype(np.int64), rhs)
            return
        for d, s in zip(dst, src):
            rhs = np.int64(insn.imm) if insn.use_imm else acc[s].astype(np.int64)
            acc[d] = _alu_op(insn.op, acc[d].astype(np.int64), rhs)

    def _destinations(self, insn: Compute) -> tuple[np.ndarray, ...] | None:
        """The iterations' indices, the accumulators they update checked; None when the
        instruction is a reset, which this did."""
        dst, src, wgt = self._indices(insn)
        self._index_range(MemType.ACC, dst, "dst")
        if insn.reset:
            self.bufs[MemType.ACC][dst] = 0
            self.written[MemType.ACC][dst] = True
            return None
        self._check_written(MemType.ACC, dst, insn.opcode.name)
        return dst, src, wgt

    def _indices(self, insn: Compute) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """dst, src, wgt indices of every iteration, in the hardware's order."""
        if insn.uop_bgn > insn.uop_end:
            raise Fault(f"the micro-op range [{insn.uop_bgn},{insn.uop_end}) runs backwards",
                        "give uop_bgn <= uop_end")
        if insn.uop_end > self.env.UOP_BUFF_DEPTH:
            raise Fault(f"micro-ops [{insn.uop_bgn},{insn.uop_end}) run past the micro-op "
                        f"buffer ({self.env.UOP_BUFF_DEPTH} micro-ops)",
                        "keep uop_end within the buffer")
        loaded = self.written[MemType.UOP][insn.uop_bgn:insn.uop_end]
        if not loaded.all():
            k = insn.uop_bgn + int(np.argmin(loaded))
            raise Fault(f"micro-op {k} is outside the loaded micro-op range (no LOAD UOP "
                        "wrote it)", "load the micro-op kernel before the instruction uses it")
        uops = self.bufs[MemType.UOP][insn.uop_bgn:insn.uop_end]
        i = np.arange(insn.iter_out)[:, None, None]
        j = np.arange(insn.iter_in)[None, :, None]
        dst = uops[None, None, :, 0] + i * insn.dst_factor_out + j * insn.dst_factor_in
        src = uops[None, None, :, 1] + i * insn.src_factor_out + j * insn.src_factor_in
        if isinstance(insn, Gemm):
            wgt = uops[None, None, :, 2] + i * insn.wgt_factor_out + j * insn.wgt_factor_in
        else:
            wgt = np.zeros_like(dst)
        return dst.reshape(-1), src.reshape(-1), wgt.reshape(-1)

    # -- checks -----------------------------------------------------------------------
    def _sram_range(self, mem: MemType, base: int, n: int) -> None:
        depth = self.bufs[mem].shape[0]
        if base + n > depth:
            raise Fault(f"SRAM elements [{base},{base + n}) run past the {mem.name} buffer "
                        f"({depth} elements)",
                        "move sram_base down or move less, or tile smaller")

    def _index_range(self, mem: MemType, index: np.ndarray, field: str) -> None:
        depth = self.bufs[mem].shape[0]
        if index.size and int(index.max()) >= depth:
            n = int(np.argmax(index >= depth))
            raise Fault(f"iteration {n} addresses {mem.name} buffer element "
                        f"{int(index[n])} ({field} index), past its {depth} elements",
                        "check the micro-ops' indices and the loop factors")

    def _check_written(self, mem: MemType, index: np.ndarray, what: str) -> None:
        ok = self.written[mem][index]
        if not ok.all():
            n = int(np.argmin(ok))
            raise Fault(f"{what} reads {mem.name} buffer element {int(index[n])}, which no "
                        "instruction wrote",
                        "load it (or reset the accumulator) before reading it")


def _alu_op(op: AluOp, a: np.ndarray, b: np.ndarray | np.int64) -> np.ndarray:
    """The ALU on int64 copies of int32 lanes, wrapped back to int32."""
    if op is AluOp.MIN:
        r = np.minimum(a, b)
    elif op is AluOp.MAX:
        r = np.maximum(a, b)
    elif op is AluOp.ADD:
        r = a + b
    elif op is AluOp.MUL:
        r = a * b
    else:  # SHR: amounts past the 32-bit lane saturate at 31
        b = np.broadcast_to(b, a.shape)
        right = a >> np.minimum(b, 31).clip(0)
        left = a << np.minimum(-b, 31).clip(0)
        r = np.where(b >= 0, right, left)
    return r.astype(np.int32)  # C's narrowing: the low 32 bits


def execute(sram: Sram, insn: Insn, dram: np.ndarray) -> tuple[int, int]:
    """Run one instruction; returns (DRAM bytes read, DRAM bytes written)."""
    if isinstance(insn, Load):
        return sram.load(insn, dram), 0
    if isinstance(insn, Store):
        return 0, sram.store(insn, dram)
    if isinstance(insn, Gemm):
        sram.gemm(insn)
    elif isinstance(insn, Alu):
        sram.alu(insn)
    return 0, 0


__all__ = ["Fault", "Sram", "execute"]
