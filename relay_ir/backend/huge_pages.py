"""Memory on 2 MiB pages: a compiled model's arenas, and what a tuning runner times on.

A model's constants lie in one arena and its intermediates in another
(relay_ir.backend.executor: pack_constants, GraphPlan's memory plan). Allocated by numpy,
whether they got transparent huge pages was chance: numpy advises huge pages only for
allocations of 4 MiB or more, and an allocation that glibc serves from memory freed
earlier (its mmap threshold grows up to 32 MiB as large blocks are freed) is already
faulted in on 4 KiB pages. Of three untuned builds of ResNet-50 in one process, two had
their weights and activations on 2 MiB pages (but the first 0.4-1 MiB of the intermediates'
arena) and one on 4 KiB pages throughout, and there AVX2 1024@14 -> 256 ran 1603-1655 us a
step against 1398-1451 (one Emerald Rapids core, CPU time, in turn). The page size ranks
configs too: that conv's default (input blocks of 8: a tile's reduction touches 128 input
blocks 6272 bytes apart, a page each, more than the 64 entries of the first-level data
TLB) ran 1586 us on 4 KiB pages and 1398 on 2 MiB; the tuner's pick (tile_ic 64) 1400 and
1393. A runner that allocated each argument apart, under numpy's threshold, kept configs
like it at 0.90x the default that lost 3-13% in the model.

So the arenas are fresh anonymous mappings advised for huge pages, starting at a 2 MiB
boundary (`huge_page_bytes`), and a model's tasks are timed on arrays placed so
(`huge_page_arrays`; autotune.measure, LocalRunner(huge_pages=True)). Where the kernel
has no transparent huge pages (or `madvise` is missing: not Linux) the memory is the same
mapping on whatever pages the kernel gives.

    >>> import numpy as np
    >>> a, b = huge_page_arrays([np.arange(6.0), np.ones((2, 3), "float32")])
    >>> a.tolist(), b.dtype.name, b.ctypes.data % 64
    ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], 'float32', 0)
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence

import numpy as np

from relay_ir.backend.memory_plan import ALIGN  # bytes between the arrays' starts

HUGE_PAGE = 2 << 20


def huge_page_bytes(n: int) -> np.ndarray:
    """`n` zeroed bytes (uint8) starting at a 2 MiB boundary, in a fresh anonymous mapping
    advised for transparent huge pages that reaches to the end of the last 2 MiB page. It
    lives as long as any view of it does.

        >>> b = huge_page_bytes(100)
        >>> b.size, b.ctypes.data % HUGE_PAGE, int(b.sum())
        (100, 0, 0)
    """
    pages = max(1, -(-n // HUGE_PAGE))
    # one huge page more: the start is moved up to a 2 MiB boundary
    region = mmap.mmap(-1, (pages + 1) * HUGE_PAGE,
                       flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            region.madvise(advice)
        except OSError:  # a kernel built without transparent huge pages
            pass
    raw = np.frombuffer(region, np.uint8)
    start = -raw.ctypes.data % HUGE_PAGE
    return raw[start:start + n]


def huge_page_arrays(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Copies of `arrays` one after another, each at an ALIGN-byte boundary, in one
    `huge_page_bytes` region."""
    arrays = [np.asarray(a) for a in arrays]
    offsets, end = [], 0
    for a in arrays:
        end = -(-end // ALIGN) * ALIGN
        offsets.append(end)
        end += max(a.nbytes, 1)
    raw = huge_page_bytes(end)
    out = []
    for a, off in zip(arrays, offsets):
        view = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
        view[...] = a
        out.append(view)
    return out


def mapping_field(address: int, field: str) -> list[str] | None:
    """The words after `field` (e.g. "VmFlags:", "AnonHugePages:") in /proc/self/smaps
    for the mapping that holds `address`; None where there is no such mapping or field,
    or no smaps (not Linux).

        >>> mapping_field(huge_page_bytes(8).ctypes.data, "Size:")[-1]  # doctest: +SKIP
        'kB'
    """
    inside = False
    try:
        with open("/proc/self/smaps", encoding="ascii", errors="replace") as fh:
            for line in fh:
                words = line.split()
                head = words[0] if words else ""
                if "-" in head and ":" not in head:
                    lo, hi = (int(x, 16) for x in head.split("-"))
                    inside = lo <= address < hi
                elif inside and head == field:
                    return words[1:]
    except OSError:
        pass
    return None


def advised_huge(a: np.ndarray) -> bool:
    """Whether `a`'s first byte lies in a mapping advised for huge pages (its VmFlags in
    /proc/self/smaps hold "hg"); False where that file is missing (not Linux).

        >>> advised_huge(huge_page_arrays([np.zeros(8)])[0])  # doctest: +SKIP
        True
    """
    return "hg" in (mapping_field(a.ctypes.data, "VmFlags:") or [])
