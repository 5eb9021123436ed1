"""lowering.accel.dma: copy loop nests as 2-D DMAs, and zero-padded reads as pad fields."""

import numpy as np

from lowering.accel import Env
from lowering.accel.dma import Dim, PaddedBlock, fold, padded
from lowering.accel.dram import Dram
from lowering.accel.isa import Finish, Load, MemType
from lowering.accel.simulator import run


def test_contiguous_loops_fold_into_one_dma():
    assert fold([Dim(4, 1, 1), Dim(3, 4, 4)]) == [fold([Dim(12, 1, 1)])[0]]


def test_a_window_reads_its_valid_rows_and_columns_and_pads_the_rest():
    # a 4-row x 6-column window of a 8-column image, row 3 and columns 0 and 5 padding
    got = padded([Dim(6, 1, 1, (1, 5)), Dim(4, 6, 8, (0, 3))])
    assert got == [PaddedBlock(0, 1, 3, 4, 8, (0, 1, 1, 1))]


def test_a_window_entirely_in_the_padding_reads_nothing():
    (block,) = padded([Dim(4, 1, 1, (0, 0)), Dim(3, 4, 8)])
    assert (block.y_size, block.pads) == (0, (0, 3, 0, 0))
    env = Env()
    dram = Dram(env)
    dram.place(MemType.INP, np.ones((8, 1, 16), np.int8))
    load = Load(mem=MemType.INP, sram_base=0, dram_base=0, y_size=block.y_size,
                x_size=block.x_size, x_stride=block.x_stride, y_pad_0=block.pads[0],
                y_pad_1=block.pads[1], x_pad_0=block.pads[2], x_pad_1=block.pads[3])
    stats = run([load, Finish()], dram, env)
    assert stats.dram_bytes_read == 0


def test_padding_on_a_loop_that_is_not_rows_or_columns_is_refused():
    why = padded([Dim(4, 1, 1), Dim(3, 4, 8), Dim(2, 12, 64, (1, 2))])
    assert isinstance(why, str) and "neither its rows nor its columns" in why
