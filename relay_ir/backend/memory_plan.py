"""Static memory planning for the graph executor: intermediate buffers share storage when
their lifetimes (from the step that writes them to the last step that reads them) do not
overlap.

    >>> plan = plan_memory([(0, 1, 512), (1, 2, 512), (2, 3, 512)])
    >>> plan.peak_bytes, plan.total_bytes
    (1024, 1536)

Greedy best fit in program order: a value takes the smallest free storage block that
holds it (or grows the largest free one, or opens a new block); blocks are released after
the value's last reader has run, so a kernel never writes into storage that one of its
inputs still occupies, except where the caller shows (`share`) that the kernel may
write its output over an input it reads for the last time (a residual add).

All blocks live in one arena (one allocation per calling thread, page-aligned): block b
starts at `plan.block_offsets[b]`. Buffers that start at the same address modulo 4 KiB
alias in the L1 cache sets and in the load/store unit's 4 KiB address check (a load
waits for an unrelated store to the same page offset), so a kernel reading one planned
buffer while writing another at the same page offset runs slower, and separately
allocated blocks land on such offsets by chance (large mallocs all start 16 bytes past a
page): the same model built twice ran 20-30% apart. The planner skews each block's start
by a different number of cache lines (SKEW_LINES apart), so up to 64 blocks start at
distinct page offsets; TESSEL_PLAN_SKEW=0 (or skew=False) lays blocks on page boundaries
instead, to measure what the skew does.

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

    @property
    def peak_bytes(self) -> int:
        """Bytes of all storage blocks together (the arena holds them plus skew padding)."""
        return sum(self.block_bytes)

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
            lines.append(f"{b:<5} {off:>8} {off % PAGE:>15} {n:>7}   "
                         f"{' '.join(held.get(b, []))}")
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


def block_offsets(block_bytes: Sequence[int], skew: bool | None = None) -> list[int]:
    """Arena offsets of blocks laid out in order: block b starts at the first offset past
    block b-1 that is (b * SKEW_LINES) % 64 cache lines past a page boundary (skew), or at
    the next page boundary (skew=False). skew=None reads TESSEL_PLAN_SKEW (default on).

        >>> block_offsets([100, 100, 100])
        [0, 576, 1152]
        >>> block_offsets([100, 100], skew=False)
        [0, 4096]
    """
    if skew is None:
        skew = os.environ.get("TESSEL_PLAN_SKEW", "1") != "0"
    offsets, end = [], 0
    for b, n in enumerate(block_bytes):
        want = (b * SKEW_LINES * ALIGN) % PAGE if skew else 0
        off = end + (want - end) % PAGE
        offsets.append(off)
        end = off + n
    return offsets


def plan_memory(values: Sequence[tuple[int, int, int]], skew: bool | None = None,
                share: Mapping[int, int] | None = None) -> MemoryPlan:
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

    `plan_memory([(0, 1, 512), (1, 2, 512)]).peak_bytes == 1024`

        >>> plan_memory([(0, 1, 512), (1, 2, 512)], share={1: 0}).storage_of
        [0, 0]
    """
    storage_of, blocks = _best_fit(values, {})
    if share:
        shared = _best_fit(values, share)
        if sum(shared[1]) <= sum(blocks):
            storage_of, blocks = shared
    return MemoryPlan(storage_of, blocks, [_aligned(int(v[2])) for v in values],
                      block_offsets(blocks, skew))


def _best_fit(values: Sequence[tuple[int, int, int]], share: Mapping[int, int]
              ) -> tuple[list[int], list[int]]:
    """Greedy best fit in program order, v in u's block for each share v: u that applies
    (see plan_memory): (block of each value, block sizes)."""
    order = sorted(range(len(values)), key=lambda v: (values[v][0], v))
    storage_of = [-1] * len(values)
    blocks: list[int] = []
    free: set[int] = set()
    # (release step, block, value): a block is free for values defined after its release
    busy: list[tuple[int, int, int]] = []
    for v in order:
        start, end, nbytes = values[v]
        size = _aligned(nbytes)
        still = []
        for rel, b, u in busy:
            (free.add(b) if rel < start else still.append((rel, b, u)))
        busy = still
        u = share.get(v, -1)
        # u written before, and read last, by the step that writes v
        held = [i for i, (rel, _, w) in enumerate(busy)
                if w == u and rel == start and values[u][0] < start]
        if held:  # in place: u is read for the last time by the step that writes v
            b = busy.pop(held[0])[1]
            blocks[b] = max(blocks[b], size)
        else:
            fits = [b for b in free if blocks[b] >= size]
            if fits:
                b = min(fits, key=lambda k: blocks[k])
            elif free:
                b = max(free, key=lambda k: blocks[k])
                blocks[b] = size
            else:
                b = len(blocks)
                blocks.append(size)
            free.discard(b)
        storage_of[v] = b
        busy.append((max(end, start), b, v))
    return storage_of, blocks


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
