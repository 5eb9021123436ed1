"""The dependency-token pass: sets the pop/push flags a stream needs, from the order in
which its instructions read and write the on-chip buffers.

The three modules run their queues concurrently, so an instruction that touches an SRAM
range another module touched before it (in stream order), one of the two writing, must
wait for that one: a LOAD into an input buffer half waits for the GEMM that last read
it, a GEMM for the LOAD that filled its operands, a STORE for the ALU that last wrote
its accumulators, a reset of the accumulators for the STORE that last read them. Each
wait becomes a push on the earlier instruction and a pop on the later one. Tokens are
counted per queue in order, so only the latest conflicting instruction matters and a
wait that an earlier pop on the same queue already covers is dropped. FINISH waits for
everything before it.

The SRAM ranges a GEMM or ALU touches are the spans of its micro-ops' indices over its
loops, from the micro-op table (`uops[k]` is micro-op buffer entry k). Flags already in
the stream are replaced.

    >>> from lowering.accel.isa import Gemm, Load, MemType, Uop
    >>> stream = [Load(mem=MemType.INP, sram_base=0, dram_base=0, y_size=1, x_size=1,
    ...                x_stride=1), Gemm(reset=False, uop_bgn=0, uop_end=1)]
    >>> [str(i).split("[")[-1] for i in insert_dependencies(stream, [Uop(0, 0, 0)])]
    ['push next]', 'pop prev]']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from lowering.accel.isa import Compute, Finish, Gemm, Insn, Load, MemType, Store, Uop
from lowering.accel.simulator import MODULES, module_of
from tessel_errors import CodegenError

Access = tuple[MemType, int, int, bool]  # buffer, first element, end, writes
_ALL = 1 << 62
_FLAGS = {  # (from module, to module) -> (flag the pusher sets, flag the popper sets)
    ("load", "compute"): ("push_next_dep", "pop_prev_dep"),
    ("compute", "load"): ("push_prev_dep", "pop_next_dep"),
    ("compute", "store"): ("push_next_dep", "pop_prev_dep"),
    ("store", "compute"): ("push_prev_dep", "pop_next_dep"),
}


def _span(uops: Sequence[Uop], field: str, insn: Compute, f_out: int, f_in: int
          ) -> tuple[int, int]:
    vals = [getattr(u, field) for u in uops[insn.uop_bgn:insn.uop_end]]
    lo = min(vals) + min(0, (insn.iter_out - 1) * f_out) + min(0, (insn.iter_in - 1) * f_in)
    hi = max(vals) + max(0, (insn.iter_out - 1) * f_out) + max(0, (insn.iter_in - 1) * f_in)
    return lo, hi + 1


def accesses(insn: Insn, uops: Sequence[Uop]) -> list[Access]:
    """The SRAM ranges `insn` reads and writes (a superset where loops skip elements)."""
    if isinstance(insn, Load):
        rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
        cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
        return [(insn.mem, insn.sram_base, insn.sram_base + rows * cols, True)]
    if isinstance(insn, Store):
        return [(MemType.ACC, insn.sram_base, insn.sram_base + insn.y_size * insn.x_size,
                 False)]
    if isinstance(insn, Finish):
        return [(m, 0, _ALL, True) for m in (MemType.UOP, MemType.INP, MemType.WGT,
                                             MemType.ACC)]
    if not isinstance(insn, Compute) or insn.uop_end <= insn.uop_bgn:
        return []
    if insn.uop_end > len(uops):
        raise CodegenError(f"{insn}: micro-ops [{insn.uop_bgn},{insn.uop_end}) are past the "
                           f"{len(uops)} of the micro-op table")
    out: list[Access] = [(MemType.UOP, insn.uop_bgn, insn.uop_end, False)]
    out.append((MemType.ACC, *_span(uops, "dst", insn, insn.dst_factor_out,
                                    insn.dst_factor_in), True))
    if insn.reset:
        return out
    src = _span(uops, "src", insn, insn.src_factor_out, insn.src_factor_in)
    if isinstance(insn, Gemm):
        out.append((MemType.INP, *src, False))
        out.append((MemType.WGT, *_span(uops, "wgt", insn, insn.wgt_factor_out,
                                        insn.wgt_factor_in), False))
    elif not insn.use_imm:
        out.append((MemType.ACC, *src, False))
    return out


def insert_dependencies(insns: Sequence[Insn], uops: Sequence[Uop]) -> list[Insn]:
    """`insns` with the dependency flags that order every cross-module conflict."""
    module = [module_of(i) for i in insns]
    # per (module, buffer): the latest instruction index per (lo, hi, writes) range
    history: dict[tuple[str, MemType], dict[tuple[int, int, bool], int]] = {}
    synced: dict[tuple[str, str], int] = {}
    flags: list[set[str]] = [set() for _ in insns]
    for o, insn in enumerate(insns):
        mine = accesses(insn, uops)
        for other in MODULES:
            if other == module[o]:
                continue
            p = _latest_conflict(history, other, mine)
            if p is None:
                continue
            # the load module writes only INP/WGT, the store module reads only ACC: every
            # conflict involves the compute module, which has a queue to both
            queue = (other, module[o])
            if p <= synced.get(queue, -1):
                continue
            synced[queue] = p
            push, pop = _FLAGS[queue]
            flags[p].add(push)
            flags[o].add(pop)
        for buf, lo, hi, w in mine:
            history.setdefault((module[o], buf), {})[(lo, hi, w)] = o
    cleared = dict.fromkeys(_FLAGS["load", "compute"] + _FLAGS["compute", "load"], False)
    return [dataclasses.replace(insn, **{**cleared, **dict.fromkeys(f, True)})
            for insn, f in zip(insns, flags)]


def _latest_conflict(history: dict, other: str, mine: list[Access]) -> int | None:
    best = None
    for buf, lo, hi, w in mine:
        for (lo2, hi2, w2), p in history.get((other, buf), {}).items():
            if (w or w2) and lo < hi2 and lo2 < hi and (best is None or p > best):
                best = p
    return best


__all__ = ["accesses", "insert_dependencies"]
