"""A copy loop nest as the fewest 2-D strided DMAs.

The accel code generator reads a `dma_copy` nest as element loops (the loops left once
the trailing element dims are taken out), each with its step in the on-chip buffer and
in DRAM (`Dim`). `fold` sorts them innermost-first by their on-chip step, merges
neighbours that are contiguous on both sides, and takes the innermost as a DMA row
(x, contiguous in DRAM) and the next as its rows (y, x_stride apart in DRAM, dense on
chip); the loops left over repeat the DMA, each copy with its own bases.

A copy out of a zero-padded tensor (VTA's conv2d loads its input windows so) reads DRAM
only in each loop's `valid` range and leaves the rest to the LOAD's pad fields: `padded`
makes those DMAs, the padding on the row and column loops only.

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
    """One element loop of a copy: its extent and its step on chip and in DRAM, and the
    iterations [lo, hi) that read DRAM (the others are zero padding; None: all)."""

    extent: int
    sram: int
    dram: int
    valid: tuple[int, int] | None = None

    @property
    def full(self) -> bool:
        return self.valid is None or self.valid == (0, self.extent)


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


@dataclass(frozen=True)
class PaddedBlock:
    """One padded DMA: the block's offsets from the copy's first element (on chip) and
    from its first valid element's address (DRAM), its rows and columns read, their
    stride, and the zero rows/columns before and after."""

    sram: int
    dram: int
    y_size: int
    x_size: int
    x_stride: int
    pads: tuple[int, int, int, int]  # y before, y after, x before, x after


def padded(dims: list[Dim]) -> list[PaddedBlock] | str:
    """The DMAs of a copy with padding (some dim not `full`), or why it has none: the
    padded loops must be the DMA's columns (dense on both sides) and its rows (dense on
    chip), the others read whole.

        >>> padded([Dim(6, 1, 1, (1, 5)), Dim(4, 6, 8, (0, 3))])   # a 3x4 block in 4x6
        [PaddedBlock(sram=0, dram=1, y_size=3, x_size=4, x_stride=8, pads=(0, 1, 1, 1))]
    """
    rest = sorted(dims, key=lambda d: (d.sram, d.dram))
    x = rest.pop(0) if rest and rest[0].sram == 1 else Dim(1, 1, 1)
    if x.extent > 1 and x.dram != 1:
        return "its innermost loop on chip is not contiguous in DRAM"
    y = rest.pop(0) if rest and rest[0].sram == x.extent else Dim(1, x.extent, x.extent)
    if not all(d.full for d in rest):
        names = ", ".join(f"steps {d.sram}/{d.dram}" for d in rest if not d.full)
        return f"padding on a loop that is neither its rows nor its columns ({names})"
    (ylo, yhi), (xlo, xhi) = (d.valid or (0, d.extent) for d in (y, x))
    if yhi <= ylo or xhi <= xlo:  # all padding: nothing read, the pads write the block
        ylo = yhi = 0
        xlo, xhi = 0, x.extent
    pads = (ylo, y.extent - yhi, xlo, x.extent - xhi)
    start = ylo * y.dram + xlo * x.dram
    out = []
    for point in itertools.product(*(range(d.extent) for d in rest)):
        sram = sum(p * d.sram for p, d in zip(point, rest))
        dram = sum(p * d.dram for p, d in zip(point, rest))
        out.append(PaddedBlock(sram, dram + start, yhi - ylo, xhi - xlo,
                               y.dram if y.extent > 1 else x.extent, pads))
    return out


__all__ = ["Block", "Dim", "PaddedBlock", "fold", "padded"]
