"""The accelerator's instruction set: VTA's five instructions and its micro-ops, as
immutable values, their 128-bit / 32-bit encodings, and a disassembler.

Instructions (VTA's hw_spec field order; every one carries the four dependency flags):

- `Load(mem, sram_base, dram_base, y_size, x_size, x_stride, y_pad_0/1, x_pad_0/1)`:
  DRAM -> an on-chip buffer, a 2-D strided copy of y_size rows of x_size elements with
  zero padding around it. UOP and ACC loads run on the compute module, INP and WGT loads
  on the load module.
- `Store(sram_base, dram_base, y_size, x_size, x_stride)`: accumulator -> DRAM, narrowed
  to the int8 output type.
- `Gemm(reset, uop_bgn, uop_end, iter_out, iter_in, {dst,src,wgt}_factor_{out,in})`: for
  every (i, j) of the two loops and every micro-op of the range, acc[dst] += inp[src] .
  wgt[wgt]^T, each index being the micro-op's plus i * factor_out + j * factor_in (or
  acc[dst] = 0 with `reset`).
- `Alu(op, use_imm, imm, uop range, loops, dst/src factors)`: acc[dst] = op(acc[dst],
  imm or acc[src]) elementwise in int32, op one of MIN, MAX, ADD, SHR, MUL.
- `Finish()`: the end of the stream.

The dependency flags tie the three executing modules together: load <-> compute <->
store. A module pops a token from a neighbour ("prev" is the module before it in that
chain, "next" the one after) before it starts the instruction, and pushes one to a
neighbour when it is done.

Each instruction is two 64-bit halves: opcode (3 bits), the four flags, then its fields,
low bits first. SRAM address and micro-op index fields are as wide as their buffer's depth
needs (tessel_target.accel keeps depths powers of two), so the layout follows the
hardware configuration; the others have VTA's fixed widths.

    >>> from lowering.accel.env import Env
    >>> env = Env()
    >>> g = Gemm(uop_bgn=0, uop_end=4, iter_out=2, iter_in=1, dst_factor_out=4,
    ...          push_next_dep=True)
    >>> decode(encode(g, env), env) == g
    True
    >>> print(disasm([Load(mem=MemType.INP, sram_base=0, dram_base=8, y_size=1, x_size=4,
    ...                    x_stride=4), Finish()]))
       0  LOAD   INP sram=0 dram=8 y=1 x=4 stride=4 pad=(0,0,0,0)
       1  FINISH
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from lowering.accel.env import Env
from tessel_errors import CodegenError


class Opcode(IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemType(IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4


class AluOp(IntEnum):
    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3
    MUL = 4


@dataclass(frozen=True, kw_only=True)
class Insn:
    """Base of the instructions: the dependency-queue flags every one carries."""

    pop_prev_dep: bool = False
    pop_next_dep: bool = False
    push_prev_dep: bool = False
    push_next_dep: bool = False

    opcode = Opcode.FINISH  # set by each subclass

    def __str__(self) -> str:
        return _format(self)


@dataclass(frozen=True, kw_only=True)
class Dma(Insn):
    """The fields LOAD and STORE share: a 2-D strided block of y_size rows of x_size
    elements, rows x_stride apart in DRAM, dense in SRAM from sram_base."""

    sram_base: int
    dram_base: int
    y_size: int
    x_size: int
    x_stride: int
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0


@dataclass(frozen=True, kw_only=True)
class Load(Dma):
    """DRAM -> `mem`'s buffer, the pads' zero elements written around the block."""

    mem: MemType

    opcode = Opcode.LOAD


@dataclass(frozen=True, kw_only=True)
class Store(Dma):
    """Accumulator elements -> DRAM as int8 output elements (no padding)."""

    mem: MemType = MemType.OUT

    opcode = Opcode.STORE


@dataclass(frozen=True, kw_only=True)
class Compute(Insn):
    """The fields GEMM and ALU share: micro-ops [uop_bgn, uop_end) inside two loops, each
    index the micro-op's plus i * factor_out + j * factor_in; `reset` zeroes acc[dst]."""

    uop_bgn: int
    uop_end: int
    iter_out: int = 1
    iter_in: int = 1
    reset: bool = False
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0


@dataclass(frozen=True, kw_only=True)
class Gemm(Compute):
    """The GEMM core: acc[dst] += inp[src] . wgt[wgt]^T."""

    wgt_factor_out: int = 0
    wgt_factor_in: int = 0

    opcode = Opcode.GEMM


@dataclass(frozen=True, kw_only=True)
class Alu(Compute):
    """The tensor ALU: acc[dst] = op(acc[dst], imm if use_imm else acc[src])."""

    op: AluOp
    use_imm: bool = False
    imm: int = 0

    opcode = Opcode.ALU


@dataclass(frozen=True, kw_only=True)
class Finish(Insn):
    """The end of the stream."""

    opcode = Opcode.FINISH


@dataclass(frozen=True)
class Uop:
    """A micro-op: the accumulator (dst), input (src; an accumulator index for the ALU)
    and weight element indices one GEMM or ALU step starts from."""

    dst: int
    src: int = 0
    wgt: int = 0


# -- layouts ---------------------------------------------------------------------------

_DEPS = (("opcode", 3), ("pop_prev_dep", 1), ("pop_next_dep", 1), ("push_prev_dep", 1),
         ("push_next_dep", 1))
_KIND = {Opcode.LOAD: Load, Opcode.STORE: Store, Opcode.GEMM: Gemm, Opcode.ALU: Alu,
         Opcode.FINISH: Finish}
LOOP_ITER_BITS = 14
IMM_BITS = 16  # the ALU immediate, two's complement


def _log2(n: int) -> int:
    return max(1, (n - 1).bit_length())


@dataclass(frozen=True)
class Layout:
    """Field (name, width) lists of each opcode's two 64-bit halves, and of a micro-op."""

    halves: dict[Opcode, tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...]]]
    uop: tuple[tuple[str, int], ...]

    def width(self, opcode: Opcode, name: str) -> int:
        lo, hi = self.halves[opcode]
        return dict(lo + hi)[name]


@functools.lru_cache(maxsize=32)
def layout(env: Env) -> Layout:
    """The field layout of `env`'s configuration (CodegenError if a half overflows)."""
    acc, inp, wgt = (_log2(env.depth(b)) for b in ("ACC", "INP", "WGT"))
    uop = _log2(env.depth("UOP"))
    sram = max(acc, inp, wgt, uop)
    mem = (_DEPS + (("mem", 3), ("sram_base", sram), ("dram_base", 32)),
           (("y_size", 16), ("x_size", 16), ("x_stride", 16), ("y_pad_0", 4),
            ("y_pad_1", 4), ("x_pad_0", 4), ("x_pad_1", 4)))
    loops = _DEPS + (("reset", 1), ("uop_bgn", uop), ("uop_end", uop + 1),
                     ("iter_out", LOOP_ITER_BITS), ("iter_in", LOOP_ITER_BITS))
    gemm = (loops, (("dst_factor_out", acc), ("dst_factor_in", acc), ("src_factor_out", inp),
                    ("src_factor_in", inp), ("wgt_factor_out", wgt), ("wgt_factor_in", wgt)))
    alu = (loops, (("dst_factor_out", acc), ("dst_factor_in", acc), ("src_factor_out", acc),
                   ("src_factor_in", acc), ("op", 3), ("use_imm", 1), ("imm", IMM_BITS)))
    halves = {Opcode.LOAD: mem, Opcode.STORE: mem, Opcode.GEMM: gemm, Opcode.ALU: alu,
              Opcode.FINISH: (_DEPS, ())}
    for op, (lo, hi) in halves.items():
        for n, half in enumerate((lo, hi)):
            bits = sum(w for _, w in half)
            if bits > 64:
                spelled = ", ".join(f"{k}:{w}" for k, w in half)
                raise CodegenError(
                    f"accel target '{env.target}': a {op.name} instruction's "
                    f"{('low', 'high')[n]} half needs {bits} bits ({spelled}), VTA's halves "
                    "hold 64; make the buffers shallower")
    uop_fields = (("dst", acc), ("src", inp), ("wgt", wgt))
    if acc + inp + wgt > 32:
        raise CodegenError(f"accel target '{env.target}': a micro-op needs {acc + inp + wgt} "
                           "bits (dst, src, wgt indices), micro-ops are 32; make the "
                           "buffers shallower")
    return Layout(halves, uop_fields)


# -- encoding --------------------------------------------------------------------------

def _pack(fields: Iterable[tuple[str, int]], values: dict[str, int], what: str) -> int:
    word, shift = 0, 0
    for name, width in fields:
        v = int(values[name])
        if name == "imm":
            lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
        else:
            lo, hi = 0, (1 << width) - 1
        if not lo <= v <= hi:
            raise CodegenError(f"{what}: field {name}={v} does not fit its {width} bits "
                               f"(range {lo}..{hi})")
        word |= (v & ((1 << width) - 1)) << shift
        shift += width
    return word


def _unpack(fields: Iterable[tuple[str, int]], word: int) -> dict[str, int]:
    out, shift = {}, 0
    for name, width in fields:
        v = (word >> shift) & ((1 << width) - 1)
        if name == "imm" and v >> (width - 1):
            v -= 1 << width
        out[name] = v
        shift += width
    return out


def _values(insn: Insn) -> dict[str, int]:
    vals = {f.name: int(getattr(insn, f.name)) for f in dataclasses.fields(insn)}
    vals["opcode"] = int(insn.opcode)
    return vals


def encode(insn: Insn, env: Env, index: int | None = None) -> int:
    """The 128-bit word of `insn` (an int; the low half is the low 64 bits)."""
    lo, hi = layout(env).halves[insn.opcode]
    where = "" if index is None else f" {index}"
    what = f"instruction{where} ({insn})"
    vals = _values(insn)
    return _pack(lo, vals, what) | (_pack(hi, vals, what) << 64)


def decode(word: int, env: Env) -> Insn:
    """The instruction a 128-bit word encodes."""
    opcode = word & 0b111
    if opcode not in {int(o) for o in Opcode}:
        raise CodegenError(f"instruction word {word:#034x} has no opcode {opcode} (the "
                           f"opcodes are {', '.join(f'{o.name}={int(o)}' for o in Opcode)})")
    op = Opcode(opcode)
    lo, hi = layout(env).halves[op]
    vals = _unpack(lo, word & ((1 << 64) - 1)) | _unpack(hi, word >> 64)
    del vals["opcode"]
    cls = _KIND[op]
    kinds = {f.name: f.type for f in dataclasses.fields(cls)}
    for name, v in vals.items():
        if name == "mem":
            vals[name] = MemType(v)
        elif name == "op":
            vals[name] = AluOp(v)
        elif kinds[name] in ("bool", bool):
            vals[name] = bool(v)
    return cls(**vals)


def encode_uop(uop: Uop, env: Env, index: int | None = None) -> int:
    """The 32-bit word of a micro-op: dst in the low bits, then src, then wgt."""
    where = "" if index is None else f" {index}"
    return _pack(layout(env).uop, dataclasses.asdict(uop), f"micro-op{where} ({uop})")


def decode_uop(word: int, env: Env) -> Uop:
    """The micro-op a 32-bit word encodes."""
    return Uop(**_unpack(layout(env).uop, word))


def encode_stream(insns: Sequence[Insn], env: Env) -> list[int]:
    """Every instruction's word; errors name the instruction's index."""
    return [encode(insn, env, n) for n, insn in enumerate(insns)]


# -- the disassembler -------------------------------------------------------------------

def _deps(insn: Insn) -> str:
    flags = [("pop prev", insn.pop_prev_dep), ("pop next", insn.pop_next_dep),
             ("push prev", insn.push_prev_dep), ("push next", insn.push_next_dep)]
    on = [name for name, f in flags if f]
    return f"  [{', '.join(on)}]" if on else ""


def _format(insn: Insn) -> str:
    name = f"{insn.opcode.name:<6}"
    if isinstance(insn, Dma):
        mem = "" if isinstance(insn, Store) and insn.mem is MemType.OUT else f" {insn.mem.name}"
        pads = (insn.y_pad_0, insn.y_pad_1, insn.x_pad_0, insn.x_pad_1)
        pad = f" pad=({','.join(map(str, pads))})" if isinstance(insn, Load) or any(pads) else ""
        body = (f"{mem} sram={insn.sram_base} dram={insn.dram_base} y={insn.y_size} "
                f"x={insn.x_size} stride={insn.x_stride}{pad}")
    elif isinstance(insn, Compute):
        head = ""
        if isinstance(insn, Alu):
            head = f" {insn.op.name}" + (f" imm={insn.imm}" if insn.use_imm else "")
        if insn.reset:
            head += " reset"
        body = (f"{head} uop=[{insn.uop_bgn},{insn.uop_end}) "
                f"iter=({insn.iter_out},{insn.iter_in}) "
                f"dst=({insn.dst_factor_out},{insn.dst_factor_in}) "
                f"src=({insn.src_factor_out},{insn.src_factor_in})")
        if isinstance(insn, Gemm):
            body += f" wgt=({insn.wgt_factor_out},{insn.wgt_factor_in})"
    else:
        body = ""
    return (name + body).rstrip() + _deps(insn)


def disasm(insns: Sequence[Insn]) -> str:
    """The stream one instruction a line, each after its index."""
    return "\n".join(f"{n:>4}  {insn}" for n, insn in enumerate(insns))


__all__ = ["Alu", "AluOp", "Compute", "Dma", "Finish", "Gemm", "Insn", "Layout", "Load",
           "MemType", "Opcode", "Store", "Uop", "decode", "decode_uop", "disasm", "encode",
           "encode_stream", "encode_uop", "layout"]
