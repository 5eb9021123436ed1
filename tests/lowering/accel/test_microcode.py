"""lowering.accel.microcode: an int8 dense layer's microcode, bit-exact against numpy."""

import numpy as np
import pytest

from lowering.accel import Env
from lowering.accel.isa import Load, MemType, encode_stream
from lowering.accel.microcode import Tiling, pack, plan, run_dense, unpack
from tessel_errors import CodegenError
from tests.rng import seeded_rng


def operands(m, n, k):
    rng = seeded_rng()
    return (rng.integers(-128, 128, (m, k), dtype=np.int8),
            rng.integers(-128, 128, (n, k), dtype=np.int8))


def reference(a, w):
    return a.astype(np.int32) @ w.T.astype(np.int32)


@pytest.mark.parametrize("target, mnk, tiling", [
    ("accel", (1, 16, 16), Tiling(1, 16, 16)),
    ("accel", (4, 64, 128), Tiling(2, 32, 64)),
    ("accel", (3, 48, 96), Tiling(1, 48, 32)),
    ("accel", (8, 32, 64), Tiling(8, 32, 64)),   # one tile, one step
    ("accel -batch=2", (4, 32, 48), Tiling(2, 16, 16)),
    ("accel -batch=4 -block=32 -uop_buf_kib=4", (8, 64, 64), Tiling(4, 32, 64)),
], ids=str)
@pytest.mark.parametrize("double_buffer", [False, True], ids=["single", "double"])
def test_dense_matches_numpy(target, mnk, tiling, double_buffer):
    env = Env(target)
    a, w = operands(*mnk)
    c, _, _ = run_dense(env, a, w, tiling, double_buffer=double_buffer)
    np.testing.assert_array_equal(c, reference(a, w).astype(np.int8))


def test_the_alu_tail_shifts_applies_relu_and_clips():
    a, w = operands(2, 32, 64)
    c, stats, _ = run_dense(Env(), a, w, Tiling(1, 16, 32), shift=7, relu=True, clip=True)
    want = np.clip(np.maximum(np.right_shift(reference(a, w), 7), 0), -128, 127)
    np.testing.assert_array_equal(c, want.astype(np.int8))
    assert stats.counts["ALU"] == 2 * 2 * 4  # per output tile: shr, max 0, max -128, min 127


def test_double_buffering_hides_loads_behind_the_gemm():
    a, w = operands(64, 32, 128)   # 64 rows: GEMM time comparable to the loads
    tiling = Tiling(64, 32, 32)
    single, s1, _ = run_dense(Env(), a, w, tiling, double_buffer=False)
    double, s2, _ = run_dense(Env(), a, w, tiling, double_buffer=True)
    np.testing.assert_array_equal(single, double)
    assert s1.gemm_cycles == s2.gemm_cycles
    assert s2.total_cycles < 0.85 * s1.total_cycles
    assert s2.gemm_utilisation > s1.gemm_utilisation


def test_micro_op_kernels_depend_on_the_tiling_only_and_load_once():
    env = Env()
    small = plan(env, 2, 32, 64, Tiling(1, 16, 32))
    large = plan(env, 8, 128, 256, Tiling(1, 16, 32))
    assert small.uops == large.uops
    assert len(large.uops) == 2 + 8 * 2  # acc micro-ops per half + a kernel per half triple
    _, _, insns = run_dense(env, *operands(8, 128, 256), Tiling(1, 16, 32))
    assert sum(isinstance(i, Load) and i.mem is MemType.UOP for i in insns) == 1


def test_tiles_on_chip_are_reused_instead_of_loaded_again():
    # one reduction step and two column tiles, one per weight half: each operand tile
    # is loaded once, though every row tile meets both column tiles
    a, w = operands(8, 64, 32)
    c, stats, insns = run_dense(Env(), a, w, Tiling(1, 32, 32))
    np.testing.assert_array_equal(c, reference(a, w).astype(np.int8))
    assert sum(isinstance(i, Load) and i.mem is MemType.WGT for i in insns) == 2
    assert sum(isinstance(i, Load) and i.mem is MemType.INP for i in insns) == 8
    assert stats.dram_bytes_read == 64 * 32 + 8 * 32 + 4 * len(plan(
        Env(), 8, 64, 32, Tiling(1, 32, 32)).uops)


def test_the_tile_order_keeps_the_larger_operand_on_chip():
    a, w = operands(4, 64, 32)   # 4 row and 4 column tiles: weight tiles are the big ones
    c, _, insns = run_dense(Env(), a, w, Tiling(1, 16, 32))
    np.testing.assert_array_equal(c, reference(a, w).astype(np.int8))
    assert sum(isinstance(i, Load) and i.mem is MemType.WGT for i in insns) == 4
    assert sum(isinstance(i, Load) and i.mem is MemType.INP for i in insns) == 4 * 4


def test_the_stream_encodes_to_instruction_words():
    _, _, insns = run_dense(Env(), *operands(4, 64, 128), Tiling(2, 32, 64))
    words = encode_stream(insns, Env())
    assert len(words) == len(insns) and all(0 <= x < 1 << 128 for x in words)


def test_a_tile_that_does_not_divide_the_size_is_an_error():
    with pytest.raises(CodegenError, match="N=48 and tile_n=32"):
        plan(Env(), 1, 48, 16, Tiling(1, 32, 16))


def test_a_size_off_the_core_is_an_error():
    with pytest.raises(CodegenError, match="K=24 and tile_k=24 must be positive multiples "
                                           "of the core's 16"):
        plan(Env(), 1, 16, 24, Tiling(1, 16, 24))


def test_a_tile_too_big_for_half_a_buffer_is_an_error():
    # the weight buffer holds 1024 elements, 512 a half; 16 x 64 blocks is 1024
    with pytest.raises(CodegenError, match="needs 1024 weight elements, the weight buffer "
                                           "holds 512 per half"):
        plan(Env(), 1, 256, 1024, Tiling(1, 256, 1024))


def test_without_double_buffering_a_tile_may_fill_the_buffer():
    p = plan(Env(), 1, 256, 1024, Tiling(1, 256, 1024), double_buffer=False)
    assert p.halves == 1 and p.half_depth[1] == 1024


def test_pack_and_unpack_are_inverse():
    x = seeded_rng().integers(-128, 128, (4, 48), dtype=np.int8)
    blocks = pack(x, 2, 16)
    assert blocks.shape == (2 * 3, 2, 16)
    np.testing.assert_array_equal(blocks[4], x[2:4, 16:32])
    np.testing.assert_array_equal(unpack(blocks, 2, 3), x)
