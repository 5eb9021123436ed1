"""The accelerator: runs an instruction stream on DRAM bit-exactly and counts its cycles.

VTA's decoupled access-execute machine. Fetch reads the stream in order and hands every
instruction to one of three modules' command queues: LOADs into the input and weight
buffers to the load module; LOADs of micro-ops and accumulators, GEMM, ALU and FINISH to
the compute module; STOREs to the store module. The modules run at once, each its own
queue in order, synchronised only by dependency tokens on four queues: load -> compute,
compute -> load, compute -> store, store -> compute. An instruction with `pop_*_dep`
waits for a token that its neighbour's instruction with the matching `push_*_dep` pushes
when that finishes. A pop whose token never comes is a deadlock, reported (the hardware
would hang).

The cycle model: an instruction starts when its module is free and the tokens it pops
have been pushed; a LOAD or STORE takes dram_latency + ceil(DRAM bytes /
dram_bytes_per_cycle) cycles, a GEMM or ALU one cycle per micro-op iteration (iter_out *
iter_in * micro-ops), FINISH none. Fetch and the command queues are free and unbounded.
Each instruction takes effect on the memories (lowering.accel.datapath) at once when it
ends, in the order they end: a LOAD's data is there when the LOAD is done, and a GEMM
that a missing token lets start before its LOAD has finished reads the buffer as it was
(an error if nothing wrote it yet), so a missing token shows in the results.

    >>> import numpy as np
    >>> from lowering.accel.env import Env
    >>> from lowering.accel.isa import Finish
    >>> run([Finish()], np.zeros(0, np.uint8), Env()).total_cycles
    0
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lowering.accel.datapath import Fault, Sram, execute
from lowering.accel.dram import Dram
from lowering.accel.env import Env
from lowering.accel.isa import Alu, Compute, Dma, Gemm, Insn, Load, MemType, Store, disasm
from tessel_errors import DeviceError, KernelArgumentError

MODULES = ("load", "compute", "store")
_NEIGHBOURS = {"load": (None, "compute"), "compute": ("load", "store"),
               "store": ("compute", None)}


def module_of(insn: Insn) -> str:
    """The module whose queue fetch gives `insn` (VTA's split)."""
    if isinstance(insn, Load) and insn.mem in (MemType.INP, MemType.WGT):
        return "load"
    if isinstance(insn, Store):
        return "store"
    return "compute"


def cost(insn: Insn, env: Env) -> int:
    """Cycles `insn` keeps its module busy."""
    if isinstance(insn, Dma):
        nbytes = insn.y_size * insn.x_size * env.elem_bytes(insn.mem.name)
        return env.dram_latency + -(-nbytes // env.dram_bytes_per_cycle)
    if isinstance(insn, Compute):
        return insn.iter_out * insn.iter_in * max(0, insn.uop_end - insn.uop_bgn)
    return 0


@dataclass(frozen=True)
class Stats:
    """What a run cost: cycles, per-module busy cycles, DRAM traffic, instruction counts.

    `timeline[n]` is instruction n's (start, end) cycle."""

    total_cycles: int
    busy: dict[str, int]
    gemm_cycles: int
    alu_cycles: int
    dram_bytes_read: int
    dram_bytes_written: int
    counts: dict[str, int]
    timeline: tuple[tuple[int, int], ...]

    @property
    def gemm_utilisation(self) -> float:
        """The fraction of the run's cycles the GEMM core computes."""
        return self.gemm_cycles / self.total_cycles if self.total_cycles else 0.0

    def as_dict(self) -> dict[str, object]:
        """The numbers, for tables and tuning records (the timeline left out)."""
        return {"total_cycles": self.total_cycles, "busy": dict(self.busy),
                "gemm_cycles": self.gemm_cycles, "alu_cycles": self.alu_cycles,
                "gemm_utilisation": self.gemm_utilisation,
                "dram_bytes_read": self.dram_bytes_read,
                "dram_bytes_written": self.dram_bytes_written, "counts": dict(self.counts)}


def _queues(module: str, insn: Insn) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(token queues the instruction pops, queues it pushes), as (from, to) modules."""
    prev, nxt = _NEIGHBOURS[module]
    pops, pushes = [], []
    for flag, other, pop in ((insn.pop_prev_dep, prev, True), (insn.pop_next_dep, nxt, True),
                             (insn.push_prev_dep, prev, False),
                             (insn.push_next_dep, nxt, False)):
        if flag and other is not None:
            (pops if pop else pushes).append((other, module) if pop else (module, other))
    return pops, pushes


def _error(insns: Sequence[Insn], n: int, what: str, fix: str, extra: str = "") -> DeviceError:
    lines = disasm(insns).split("\n")
    window = [("  > " if k == n else "    ") + lines[k]
              for k in range(max(0, n - 2), min(len(lines), n + 3))]
    return DeviceError(f"accel simulator: instruction {n} ({insns[n]}): {what}{extra}\n"
                       + "\n".join(window) + f"\n  fix: {fix}")


def _check_fields(insns: Sequence[Insn], n: int, module: str) -> None:
    """What the encoding would refuse and the datapath cannot index with: negative
    fields, and dependency flags toward a module that is not there."""
    insn = insns[n]
    for f in dataclasses.fields(insn):
        v = getattr(insn, f.name)
        if f.name != "imm" and isinstance(v, int) and v < 0:
            raise _error(insns, n, f"field {f.name}={v} is negative",
                         "sizes, addresses, loop extents and factors count up from 0")
    prev, nxt = _NEIGHBOURS[module]
    for flag, name, other in (("pop_prev_dep", "previous", prev), ("push_prev_dep", "previous",
                              prev), ("pop_next_dep", "next", nxt),
                              ("push_next_dep", "next", nxt)):
        if getattr(insn, flag) and other is None:
            raise _error(insns, n, f"{flag} on the {module} module, which has no {name} "
                         "module", "the chain is load <-> compute <-> store; clear the flag")


def timing(insns: Sequence[Insn], env: Env) -> tuple[tuple[int, int], ...]:
    """Every instruction's (start, end) cycle under the cycle model; no data moves (the
    cycles do not depend on it), so a tuner can count cycles without running the layer.

        >>> from lowering.accel.isa import Gemm
        >>> timing([Gemm(reset=True, uop_bgn=0, uop_end=2, iter_out=3)], Env())
        ((0, 6),)
    """
    queue: dict[str, list[int]] = {m: [] for m in MODULES}
    for n, insn in enumerate(insns):  # fetch
        m = module_of(insn)
        _check_fields(insns, n, m)
        queue[m].append(n)
    tokens: dict[tuple[str, str], list[int]] = {}  # push times per queue
    popped: dict[tuple[str, str], int] = {}
    pc = dict.fromkeys(MODULES, 0)
    free = dict.fromkeys(MODULES, 0)
    timeline: list[tuple[int, int]] = [(0, 0)] * len(insns)
    while True:
        # the module whose next instruction can start first goes next (ties: load first)
        best: tuple[int, str, list[tuple[str, str]]] | None = None
        for m in MODULES:
            if pc[m] == len(queue[m]):
                continue
            pops, _ = _queues(m, insns[queue[m][pc[m]]])
            if any(popped.get(q, 0) >= len(tokens.get(q, ())) for q in pops):
                continue
            start = max([free[m]] + [tokens[q][popped.get(q, 0)] for q in pops])
            if best is None or start < best[0]:
                best = (start, m, pops)
        if best is None:
            break
        start, m, pops = best
        n = queue[m][pc[m]]
        for q in pops:
            popped[q] = popped.get(q, 0) + 1
        end = start + cost(insns[n], env)
        for q in _queues(m, insns[n])[1]:
            tokens.setdefault(q, []).append(end)
        timeline[n] = (start, end)
        pc[m] += 1
        free[m] = end
    blocked = [queue[m][pc[m]] for m in MODULES if pc[m] < len(queue[m])]
    if blocked:
        raise _deadlock(insns, sorted(blocked), tokens, popped)
    return tuple(timeline)


def run(insns: Sequence[Insn], dram: np.ndarray | Dram, env: Env | None = None) -> Stats:
    """Run `insns` on `dram` (a uint8 array or a Dram; STOREs write it in place).

        >>> stats = run(stream, dram, Env())    # doctest: +SKIP
        >>> stats.total_cycles, stats.gemm_utilisation      # doctest: +SKIP
    """
    env = env or (dram.env if isinstance(dram, Dram) else Env())
    data = dram.data if isinstance(dram, Dram) else dram
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1
            and data.flags.c_contiguous):
        raise KernelArgumentError("the accel simulator's DRAM must be a contiguous 1-D uint8 "
                                  "array (or a lowering.accel.Dram)")
    timeline = timing(insns, env)
    sram = Sram(env)
    read = written = 0
    for n in sorted(range(len(insns)), key=lambda n: (timeline[n][1], timeline[n][0], n)):
        try:
            r, w = execute(sram, insns[n], data)
        except Fault as f:
            raise _error(insns, n, f.what, f.fix) from None
        read += r
        written += w
    return _stats(insns, timeline, read, written)


def profile(insns: Sequence[Insn], env: Env) -> Stats:
    """The Stats `run` would report, from the cycle model and the DMA sizes alone (no
    data moves), for layers too large to execute functionally.

        >>> from lowering.accel.isa import Gemm
        >>> profile([Gemm(reset=True, uop_bgn=0, uop_end=2, iter_out=3)], Env()).total_cycles
        6
    """
    read = written = 0
    for insn in insns:
        if isinstance(insn, Dma):
            nbytes = insn.y_size * insn.x_size * env.elem_bytes(insn.mem.name)
            if isinstance(insn, Store):
                written += nbytes
            else:
                read += nbytes
    return _stats(insns, timing(insns, env), read, written)


def _stats(insns: Sequence[Insn], timeline: tuple[tuple[int, int], ...], read: int,
           written: int) -> Stats:
    busy = dict.fromkeys(MODULES, 0)
    counts: dict[str, int] = {}
    gemm = alu = 0
    for insn, (start, end) in zip(insns, timeline):
        busy[module_of(insn)] += end - start
        counts[insn.opcode.name] = counts.get(insn.opcode.name, 0) + 1
        gemm += end - start if isinstance(insn, Gemm) else 0
        alu += end - start if isinstance(insn, Alu) else 0
    total = max((e for _, e in timeline), default=0)
    return Stats(total, busy, gemm, alu, read, written, counts, timeline)


def _deadlock(insns: Sequence[Insn], blocked: list[int], tokens: dict, popped: dict
              ) -> DeviceError:
    def waits(n: int) -> str:
        m = module_of(insns[n])
        pops, _ = _queues(m, insns[n])
        q = next(q for q in pops if popped.get(q, 0) >= len(tokens.get(q, ())))
        return (f"the {m} module waits for a token from {q[0]} that never comes (the "
                f"{q[0]} module pushed {len(tokens.get(q, ()))}, all popped before)")

    others = "".join(f"\n  also blocked: instruction {n} ({insns[n]}): {waits(n)}"
                     for n in blocked[1:])
    return _error(insns, blocked[0], "deadlock: " + waits(blocked[0]),
                  "give every pop a matching push on the other module, earlier in its queue",
                  others)


__all__ = ["MODULES", "Stats", "cost", "module_of", "profile", "run", "timing"]
