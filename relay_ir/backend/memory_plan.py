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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tessel_errors import ResourceError
from tessel_target import host_memory_bytes

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
