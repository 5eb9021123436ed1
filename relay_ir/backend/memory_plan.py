"""Static memory planning for the graph executor: intermediate buffers share storage when
their lifetimes (from the step that writes them to the last step that reads them) do not
overlap.

    >>> plan = plan_memory([(0, 1, 512), (1, 2, 512), (2, 3, 512)])
    >>> plan.peak_bytes, plan.total_bytes
    (1024, 1536)

Greedy best fit in program order: a value takes the smallest free storage block that
holds it, else the smallest gap that holds it inside a block that other values hold in
part (`gaps`), else grows the largest free block, else opens a new block; blocks are
released after the value's last reader has run, so a kernel never writes into storage
that one of its inputs still occupies, except where the caller shows (`share`) that the
kernel may write its output over an input it reads for the last time (a residual add).

A gap is the unused tail of a block that a smaller value holds now (or the room a larger
one left there): memory that value's larger predecessor in the block read or wrote a
few steps before, still in cache, where a new block is memory no step of this run has
touched yet and its first writer fetches every line from memory (or the last-level
cache) only to overwrite it. ResNet-18's downsample 1x1 convs are the case: the first
(64@56 -> 128 stride 2) writes its 392 KiB while the other two blocks hold its input and
the 3x3 stride-2 conv's output, and with a block of its own it ran 101 us in the model
against 91 us with its output in the freed half of the 784 KiB block the 3x3 conv's
input had just been read from (one Emerald Rapids core, CPU time; the peak 4.2 -> 3.8
MiB). A value placed in a gap is a nested block: its bytes are inside its parent's, its
start skewed as a block of its own index would be (`MemoryPlan.nested`), used once.
TESSEL_PLAN_GAPS=0 (or gaps=False) plans without gaps, to measure what they do.

All blocks live in one arena (one allocation per calling thread, page-aligned): block b
starts at `plan.block_offsets[b]`. Buffers that start at the same address modulo 4 KiB
alias in the L1 cache sets and in the load/store unit's 4 KiB address check (a load
waits for an unrelated store to the same page offset), so a kernel reading one planned
buffer while writing another at the same page offset runs slower, and separately
allocated blocks land on such offsets by chance (large mallocs all start 16 bytes past a
page): the same model built twice ran 20-30% apart. The planner skews each block's start
by a different number of cache lines (SKEW_LINES apart), so up to 64 blocks start at
distinct page offsets; TESSEL_PLAN_SKEW=0 (or skew=False) lays blocks on page boundaries
instead, to measure what the skew does. Timed interleaved (benchmarks.stable_latency:
every build once a round, shuffled, one Emerald Rapids core's CPU time), builds did not
differ beyond noise with the skew on or off: ResNet-18 (5 blocks), 12 builds each in a
process of its own, 30 rounds, spread 1.007-1.009 against a noise of 1.016-1.017 (load
1.7-1.9); ResNet-50 (3 blocks), 8 processes, 1.010 against 1.015 (load 2.2-3.3); skew
on / off 0.981-1.008 in ten runs of 15-30 rounds, in one process and in processes,
AVX-512 and AVX2 (llvm -mcpu=haswell) code. The 20-30% was most likely the machine's drift
between builds timed one after another (one thread's CPU time moved 1.5x for seconds
at a time there); the skew stays, at a few KiB of padding.

    >>> plan = plan_memory([(0, 1, 8192), (1, 2, 8192), (2, 3, 8192)])
    >>> [off % PAGE for off in plan.block_offsets]
    [0, 576]
    >>> print(plan.table())  # doctest: +NORMALIZE_WHITESPACE
    block   offset   offset % 4096   bytes   values
    0            0               0    8192   0 2
    1         8768             576    8192   1
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tessel_errors import ResourceError
from tessel_target import host_memory_bytes

ALIGN = 64  # bytes: vector loads of every buffer start on a cache line
PAGE = 4096  # bytes: addresses equal modulo PAGE alias (cache sets, 4 KiB store check)
SKEW_LINES = 9  # cache lines between block starts: odd, so 64 blocks reach 64 offsets


@dataclass
class MemoryPlan:
    """Where each intermediate lives: `storage_of[v]` (a block index) and block sizes."""

    storage_of: list[int]
    block_bytes: list[int]
    value_bytes: list[int] = field(default_factory=list)
    block_offsets: list[int] = field(default_factory=list)
    # per block, (parent block, byte offset inside it) for a block placed in a gap of
    # another, None for a block of the arena's own
    nested: list[tuple[int, int] | None] = field(default_factory=list)

    @property
    def peak_bytes(self) -> int:
        """Bytes of all storage blocks together (the arena holds them plus skew padding;
        a nested block's bytes are its parent's)."""
        return sum(n for b, n in enumerate(self.block_bytes)
                   if b >= len(self.nested) or self.nested[b] is None)

    @property
    def arena_bytes(self) -> int:
        """Bytes of the arena the executor allocates: the end of the last block."""
        return max((o + n for o, n in zip(self.block_offsets, self.block_bytes)), default=0)

    @property
    def offsets(self) -> list[int]:
        """Each value's byte offset in the arena (that of its block)."""
        return [self.block_offsets[b] for b in self.storage_of]

    def table(self) -> str:
        """Blocks with offset, offset modulo the page, bytes and the values they hold:
        `print(lib.memory_plan.table())` shows whether buffers share a page offset."""
        held: dict[int, list[str]] = {}
        for v, b in enumerate(self.storage_of):
            held.setdefault(b, []).append(str(v))
        lines = ["block   offset   offset % 4096   bytes   values"]
        for b, (off, n) in enumerate(zip(self.block_offsets, self.block_bytes)):
            inside = self.nested[b] if b < len(self.nested) else None
            lines.append(f"{b:<5} {off:>8} {off % PAGE:>15} {n:>7}   "
                         f"{' '.join(held.get(b, []))}"
                         + (f"   (in block {inside[0]})" if inside else ""))
        return "\n".join(lines)

    @property
    def total_bytes(self) -> int:
        """Bytes the intermediates would take without any reuse (each aligned as planned)."""
        return sum(self.value_bytes)

    def __repr__(self) -> str:
        return (f"MemoryPlan(peak_bytes={self.peak_bytes}, total_bytes={self.total_bytes}, "
                f"blocks={len(self.block_bytes)}, values={len(self.storage_of)})")


def _aligned(n: int) -> int:
    return max(ALIGN, -(-n // ALIGN) * ALIGN)


def _skew_on(skew: bool | None) -> bool:
    return os.environ.get("TESSEL_PLAN_SKEW", "1") != "0" if skew is None else skew


def page_offset(b: int, skew: bool | None = None) -> int:
    """Where block b starts modulo the page: (b * SKEW_LINES) % 64 cache lines (skew), or
    on a page boundary (skew=False): `page_offset(2) == 1152`."""
    return (b * SKEW_LINES * ALIGN) % PAGE if _skew_on(skew) else 0


def block_offsets(block_bytes: Sequence[int], skew: bool | None = None,
                  nested: Sequence[tuple[int, int] | None] = ()) -> list[int]:
    """Arena offsets of blocks laid out in order: block b starts at the first offset past
    block b-1 that is page_offset(b) past a page boundary; skew=None reads
    TESSEL_PLAN_SKEW (default on). A block nested in another, (parent, offset) in
    `nested`, starts at that offset into its parent and takes no room of its own.

        >>> block_offsets([100, 100, 100])
        [0, 576, 1152]
        >>> block_offsets([100, 100], skew=False)
        [0, 4096]
        >>> block_offsets([8192, 100, 64], nested=[None, None, (0, 4672)])
        [0, 8768, 4672]
    """
    offsets, end = [], 0
    for b, n in enumerate(block_bytes):
        inside = nested[b] if b < len(nested) else None
        if inside is not None:
            offsets.append(offsets[inside[0]] + inside[1])
            continue
        want = page_offset(b, skew)
        off = end + (want - end) % PAGE
        offsets.append(off)
        end = off + n
    return offsets


def gaps_enabled() -> bool:
    """Whether plans may place a value in a gap of a block others hold in part: on unless
    TESSEL_PLAN_GAPS=0, the A/B switch of benchmarks.memory_plans."""
    return os.environ.get("TESSEL_PLAN_GAPS", "1") != "0"


def plan_memory(values: Sequence[tuple[int, int, int]], skew: bool | None = None,
                share: Mapping[int, int] | None = None,
                gaps: bool | None = None) -> MemoryPlan:
    """Plan storage for values given as (defining step, last reading step, bytes); the
    blocks' arena offsets as block_offsets(skew) lays them out.

    `share` maps a value v to a value u whose storage v may take over in place: u's last
    reader is the step that writes v (the kernel reads each element of u before it writes
    the same element of v, and nothing else; relay_ir.backend.inplace proves that of a
    kernel). v then takes u's block whenever u is still in it, so a residual conv writes
    its output over its residual input, as ONNX Runtime's fused Conv+Sum does: the output
    lines are the ones the kernel has just read, already in the L1 cache, instead of
    other lines fetched only to be overwritten. Greedy either way, sharing can leave a
    larger block taken that a later value needed (random lifetimes: 11% of cases, up to
    1.11x the peak): then the plan without sharing is kept, so the peak is never above
    best fit's.

    `gaps` (None: gaps_enabled()) lets a value that no free block holds take a gap in a
    block held in part (see the module text); a plan with gaps whose peak would be above
    the plan's without is dropped for that one.

    `plan_memory([(0, 1, 512), (1, 2, 512)]).peak_bytes == 1024`

        >>> plan_memory([(0, 1, 512), (1, 2, 512)], share={1: 0}).storage_of
        [0, 0]
        >>> plan = plan_memory([(0, 1, 8192), (1, 3, 2048), (2, 3, 2048), (3, 4, 2048)])
        >>> plan.peak_bytes, plan.nested, plan.offsets
        (10240, [None, None, (0, 5248)], [0, 8768, 0, 5248])
    """
    skew = _skew_on(skew)
    options = [False, True] if (gaps_enabled() if gaps is None else gaps) else [False]
    best: _Fit | None = None
    for use_gaps in options:
        fit = _best_fit(values, {}, skew, use_gaps)
        if share:
            shared = _best_fit(values, share, skew, use_gaps)
            if shared.peak <= fit.peak:
                fit = shared
        if best is None or fit.peak <= best.peak:
            best = fit
    assert best is not None
    return MemoryPlan(best.storage_of, best.blocks, [_aligned(int(v[2])) for v in values],
                      block_offsets(best.blocks, skew, best.nested), best.nested)


@dataclass
class _Fit:
    """A plan in the making: each value's block, block sizes, nested blocks' places."""

    storage_of: list[int]
    blocks: list[int]
    nested: list[tuple[int, int] | None]

    @property
    def peak(self) -> int:
        return sum(n for n, inside in zip(self.blocks, self.nested) if inside is None)


def _best_fit(values: Sequence[tuple[int, int, int]], share: Mapping[int, int],
              skew: bool = True, gaps: bool = False) -> _Fit:
    """Greedy best fit in program order, v in u's block for each share v: u that applies,
    with `gaps` a value that no free block holds in the smallest gap that holds it (see
    plan_memory)."""
    order = sorted(range(len(values)), key=lambda v: (values[v][0], v))
    fit = _Fit([-1] * len(values), [], [])
    blocks, nested = fit.blocks, fit.nested
    free: set[int] = set()  # blocks of the arena's own that no value holds, in part or whole
    # (release step, block, value): a block is free for values defined after its release
    busy: list[tuple[int, int, int]] = []
    for v in order:
        start, end, nbytes = values[v]
        size = _aligned(nbytes)
        released = [b for rel, b, _ in busy if rel < start]
        busy = [e for e in busy if e[0] >= start]
        held_roots = {_root(nested, b) for _, b, _ in busy}
        free.update(r for r in map(lambda b: _root(nested, b), released)
                    if r not in held_roots)
        u = share.get(v, -1)
        # u written before, and read last, by the step that writes v
        held = [i for i, (rel, b, w) in enumerate(busy)
                if w == u and rel == start and values[u][0] < start
                and _may_grow(fit, busy, b, size)]
        if held:  # in place: u is read for the last time by the step that writes v
            b = busy.pop(held[0])[1]
            blocks[b] = max(blocks[b], size)
        else:
            fits = [b for b in free if blocks[b] >= size]
            gap = None if fits or not gaps else _smallest_gap(fit, busy, values, size, skew)
            if fits:
                b = min(fits, key=lambda k: blocks[k])
            elif gap is not None:
                b = len(blocks)
                blocks.append(size)
                nested.append(gap)
            elif free:
                b = max(free, key=lambda k: blocks[k])
                blocks[b] = size
            else:
                b = len(blocks)
                blocks.append(size)
                nested.append(None)
            free.discard(b)
        fit.storage_of[v] = b
        busy.append((max(end, start), b, v))
    return fit


def _root(nested: Sequence[tuple[int, int] | None], b: int) -> int:
    """The block of the arena's own that block b lies in (b itself, or its parent)."""
    return b if nested[b] is None else nested[b][0]


def _may_grow(fit: _Fit, busy: Sequence[tuple[int, int, int]], b: int, size: int) -> bool:
    """Whether a value of `size` bytes may take block b in place of its value: a nested
    block only within its gap, a block of its own only below the blocks nested in it."""
    if fit.nested[b] is not None:
        return size <= fit.blocks[b]
    inside = [fit.nested[c][1] for _, c, _ in busy if fit.nested[c] is not None
              and fit.nested[c][0] == b]
    return all(size <= at for at in inside)


def _smallest_gap(fit: _Fit, busy: Sequence[tuple[int, int, int]],
                  values: Sequence[tuple[int, int, int]], size: int, skew: bool
                  ) -> tuple[int, int] | None:
    """(parent block, offset) of the smallest gap that holds `size` bytes inside a block
    that values hold in part now, the offset skewed as a new block's start would be (a
    block of the next index), or None."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for _, b, w in busy:
        inside = fit.nested[b]
        if inside is None:
            spans.setdefault(b, []).append((0, _aligned(values[w][2])))
        else:
            spans.setdefault(inside[0], []).append((inside[1], inside[1] + fit.blocks[b]))
    want = page_offset(len(fit.blocks), skew)
    best: tuple[int, int, int] | None = None  # (gap bytes, parent, offset)
    for p, taken in spans.items():
        edge = 0
        for lo, hi in sorted(taken) + [(fit.blocks[p], fit.blocks[p])]:
            at = edge + (want - page_offset(p, skew) - edge) % PAGE
            if at + size <= lo and (best is None or lo - edge < best[0]):
                best = (lo - edge, p, at)
            edge = max(edge, hi)
    return None if best is None else (best[1], best[2])


def format_bytes(n: int) -> str:
    """`format_bytes(3 * 2**30) == '3.0 GiB'`"""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n} B" if unit == "B" else f"{n:.{'1f' if n < 1e6 else '3g'}} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_fits_in_memory(needed: Mapping[str, int], largest: str,
                         available: int | None = None) -> None:
    """Refuse (ResourceError) a run whose arrays together need more than the machine has,
    before anything is allocated: `needed` maps a kind of array (inputs, outputs, ...) to
    its bytes; `largest` names the biggest array, for the message."""
    total = sum(needed.values())
    available = host_memory_bytes() if available is None else available
    if total <= available:
        return
    parts = ", ".join(f"{kind} {format_bytes(n)}" for kind, n in needed.items())
    raise ResourceError(
        f"the model needs {format_bytes(total)} of memory to run ({parts}); this machine "
        f"has {format_bytes(available)}. The largest array is {largest}: build with "
        "smaller shapes (a smaller batch) or on a machine with more memory")
