"""Arrays on 2 MiB pages, as a compiled model holds its weights and intermediates.

A model's constants lie in one arena and its intermediates in another
(relay_ir.backend.executor: pack_constants, the memory plan), each one numpy allocation
of many MiB, which numpy advises the kernel to back with transparent huge pages (it does so
for allocations of 4 MiB and more, NUMPY_HUGEPAGE_BYTES). A tuning runner that allocates
each argument apart times a conv on 4 KiB pages instead: its weights (1 MiB for a
1024 -> 256 1x1 conv) and its data stay under numpy's threshold. The page size ranks
configs differently: an AVX2 1024@14 -> 256 conv's default (input blocks of 8: a tile's
reduction touches 128 input blocks 6272 bytes apart, a page each, more than the 64
entries of the first-level data TLB) ran 1586 us on 4 KiB pages and 1398 us on 2 MiB
pages, while the tuner's pick (tile_ic 64) ran 1400 and 1393: 0.90x the default as tuned,
1.00x in the model, where records like it lost 3-13% (in turn, one Emerald Rapids core,
CPU time, weights and output evicted before each call). So a model's tasks are timed on
arrays placed here (autotune.measure, LocalRunner(huge_pages=True)).

Where the host has no transparent huge pages (or `madvise` is missing: not Linux) the
arrays are placed all the same, on whatever pages the kernel gives.

    >>> import numpy as np
    >>> a, b = huge_page_arrays([np.arange(6.0), np.ones((2, 3), "float32")])
    >>> a.tolist(), b.dtype.name, b.ctypes.data % 64
    ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], 'float32', 0)
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence

import numpy as np

ALIGN = 64  # bytes between the arrays' starts, as the model's arenas (executor.ALIGN)
HUGE_PAGE = 2 << 20
NUMPY_HUGEPAGE_BYTES = 4 << 20  # numpy advises huge pages for allocations of this or more


def huge_page_arrays(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Copies of `arrays` one after another (each at an ALIGN-byte boundary) in one
    anonymous mapping advised for transparent huge pages, starting at a 2 MiB boundary.
    The mapping lives as long as any of the copies does."""
    arrays = [np.asarray(a) for a in arrays]
    offsets, end = [], 0
    for a in arrays:
        end = -(-end // ALIGN) * ALIGN
        offsets.append(end)
        end += max(a.nbytes, 1)
    # one huge page extra: the start is moved up to a 2 MiB boundary
    size = -(-(end + HUGE_PAGE) // HUGE_PAGE) * HUGE_PAGE
    region = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            region.madvise(advice)
        except OSError:  # a kernel built without transparent huge pages
            pass
    raw = np.frombuffer(region, np.uint8)
    start = -raw.ctypes.data % HUGE_PAGE
    out = []
    for a, off in zip(arrays, offsets):
        view = raw[start + off:start + off + a.nbytes].view(a.dtype).reshape(a.shape)
        view[...] = a
        out.append(view)
    return out


def advised_huge(a: np.ndarray) -> bool:
    """Whether `a`'s first byte lies in a mapping advised for huge pages (its VmFlags in
    /proc/self/smaps hold "hg"); False where that file is missing (not Linux).

        >>> advised_huge(huge_page_arrays([np.zeros(8)])[0])  # doctest: +SKIP
        True
    """
    addr = a.ctypes.data
    inside = False
    try:
        with open("/proc/self/smaps", encoding="ascii", errors="replace") as fh:
            for line in fh:
                head = line.split(maxsplit=1)[0] if line.strip() else ""
                if "-" in head and ":" not in head:
                    lo, hi = (int(x, 16) for x in head.split("-"))
                    inside = lo <= addr < hi
                elif inside and head == "VmFlags:":
                    return "hg" in line.split()[1:]
    except OSError:
        return False
    return False
