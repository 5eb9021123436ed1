"""A copy loop nest as the fewest 2-D strided DMAs.

The accel code generator reads a `dma_copy` nest as element loops (the loops left once
the trailing element dims are taken out), each with its step in the on-chip buffer and
in DRAM (`Dim`). `fold` sorts them innermost-first by their on-chip step, merges
neighbours that are contiguous on both sides, and takes the innermost as a DMA row
(x, contiguous in DRAM) and the next as its rows (y, x_stride apart in DRAM, dense on
chip); the loops left over repeat the DMA, each copy with its own bases.

    >>> fold([Dim(4, 1, 1), Dim(2, 4, 64)])            # 2 rows of 4 elements, 64 apart
    [Block(sram=0, dram=0, y_size=2, x_size=4, x_stride=64)]
    >>> len(fold([Dim(4, 1, 1), Dim(2, 8, 64)]))       # rows not dense on chip: 2 DMAs
    2
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass


@dataclass(frozen=True)
class Dim:
    """One element loop of a copy: its extent and its step on chip and in DRAM."""

    extent: int
    sram: int
    dram: int


@dataclass(frozen=True)
class Block:
    """One DMA: offsets from the copy's first element, y_size rows of x_size elements."""

    sram: int
    dram: int
    y_size: int
    x_size: int
    x_stride: int


def fold(dims: list[Dim]) -> list[Block]:
    """The DMAs that move the elements `dims` enumerate (in any order the hardware likes:
    every element goes to its own place)."""
    merged: list[Dim] = []
    for d in sorted((d for d in dims if d.extent > 1), key=lambda d: (d.sram, d.dram)):
        last = merged[-1] if merged else None
        if last and d.sram == last.extent * last.sram and d.dram == last.extent * last.dram:
            merged[-1] = Dim(last.extent * d.extent, last.sram, last.dram)
        else:
            merged.append(d)
    rest = list(merged)
    x = rest.pop(0) if rest and rest[0].sram == 1 and rest[0].dram == 1 else Dim(1, 1, 1)
    y = Dim(1, x.extent, x.extent)
    if rest and rest[0].sram == x.extent:
        y = rest.pop(0)
    blocks = []
    for point in itertools.product(*(range(d.extent) for d in rest)):
        sram = sum(p * d.sram for p, d in zip(point, rest))
        dram = sum(p * d.dram for p, d in zip(point, rest))
        blocks.append(Block(sram, dram, y.extent, x.extent, y.dram if y.extent > 1
                            else x.extent))
    return blocks


__all__ = ["Block", "Dim", "fold"]
