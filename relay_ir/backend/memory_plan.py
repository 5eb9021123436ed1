"""Static memory planning for the graph executor: intermediate buffers share storage when
their lifetimes (from the step that writes them to the last step that reads them) do not
overlap.

    >>> plan = plan_memory([(0, 1, 512), (1, 2, 512), (2, 3, 512)])
    >>> plan.peak_bytes, plan.total_bytes
    (1024, 1536)

Greedy best fit in program order: a value takes the smallest free storage block that
holds it (or grows the largest free one, or opens a new block); blocks are released after
the value's last reader has run, so a kernel never writes into storage that one of its
inputs still occupies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

ALIGN = 64  # bytes: vector loads of every buffer start on a cache line


@dataclass
class MemoryPlan:
    """Where each intermediate lives: `storage_of[v]` (a block index) and block sizes."""

    storage_of: list[int]
    block_bytes: list[int]
    value_bytes: list[int] = field(default_factory=list)

    @property
    def peak_bytes(self) -> int:
        """Bytes of all storage blocks together (what the executor allocates)."""
        return sum(self.block_bytes)

    @property
    def total_bytes(self) -> int:
        """Bytes the intermediates would take without any reuse (each aligned as planned)."""
        return sum(self.value_bytes)

    def __repr__(self) -> str:
        return (f"MemoryPlan(peak_bytes={self.peak_bytes}, total_bytes={self.total_bytes}, "
                f"blocks={len(self.block_bytes)}, values={len(self.storage_of)})")


def _aligned(n: int) -> int:
    return max(ALIGN, -(-n // ALIGN) * ALIGN)


def plan_memory(values: Sequence[tuple[int, int, int]]) -> MemoryPlan:
    """Plan storage for values given as (defining step, last reading step, bytes).

    `plan_memory([(0, 1, 512), (1, 2, 512)]).peak_bytes == 1024`
    """
    order = sorted(range(len(values)), key=lambda v: (values[v][0], v))
    storage_of = [-1] * len(values)
    blocks: list[int] = []
    free: set[int] = set()
    # (release step, block): a block is free for values defined after its release step
    busy: list[tuple[int, int]] = []
    for v in order:
        start, end, nbytes = values[v]
        size = _aligned(nbytes)
        still = []
        for rel, b in busy:
            (free.add(b) if rel < start else still.append((rel, b)))
        busy = still
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
        busy.append((max(end, start), b))
    return MemoryPlan(storage_of, blocks, [_aligned(int(v[2])) for v in values])
