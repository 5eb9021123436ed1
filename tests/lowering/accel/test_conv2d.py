"""lowering.accel.conv2d: an int8 conv2d in VTA's packed layouts, bit-exact against numpy."""

import numpy as np
import pytest

from lowering.accel import Env
from lowering.accel.conv2d import (
    Conv2d,
    ConvTiling,
    pack_data,
    pack_kernel,
    plan,
    reference_conv2d,
    run_conv2d,
    unpack_output,
)
from lowering.accel.isa import Gemm, Load, MemType
from tessel_errors import CodegenError
from tests.rng import seeded_rng


def operands(n, c, h, w, o, k):
    rng = seeded_rng()
    return (rng.integers(-128, 128, (n, c, h, w), dtype=np.int8),
            rng.integers(-128, 128, (o, c, k, k), dtype=np.int8),
            rng.integers(-20000, 20000, o).astype(np.int32))


CASES = [  # target, (N, C, H, W, O, K, stride, pad), tiling (None: the chosen one)
    ("accel", (1, 16, 6, 6, 16, 3, 1, 1), None),
    ("accel", (1, 32, 8, 8, 48, 3, 1, 1), ConvTiling(oc=1, ic=1, rows=2, cols=4)),
    ("accel", (1, 32, 9, 9, 32, 3, 2, 1), ConvTiling(oc=2, ic=1, rows=1, cols=5)),
    ("accel", (1, 32, 8, 8, 32, 1, 2, 0), ConvTiling(oc=1, ic=2, rows=2, cols=4)),
    ("accel", (1, 20, 7, 7, 40, 3, 1, 1), ConvTiling(oc=3, ic=2, rows=7, cols=1)),
    ("accel", (2, 3, 10, 10, 8, 3, 1, 2), None),   # 3 channels, as a first layer
    ("accel -batch=4", (4, 32, 6, 6, 32, 3, 1, 1), ConvTiling(oc=1, ic=1, rows=3, cols=6)),
    ("accel -batch=4", (5, 24, 5, 5, 20, 3, 2, 1), None),  # 5 images: a padded batch block
]


@pytest.mark.parametrize("target, shape, tiling", CASES, ids=str)
@pytest.mark.parametrize("double_buffer", [False, True], ids=["single", "double"])
def test_conv2d_matches_numpy_with_bias_shift_relu_and_clip(target, shape, tiling,
                                                            double_buffer):
    n, c, h, w, o, k, stride, pad = shape
    x, kern, bias = operands(n, c, h, w, o, k)
    y, _, _ = run_conv2d(Env(target), x, kern, stride=stride, padding=pad, bias=bias,
                         shift=7, relu=True, clip=True, tiling=tiling,
                         double_buffer=double_buffer)
    np.testing.assert_array_equal(y, reference_conv2d(x, kern, stride, pad, bias, 7, True, True))


def test_without_the_tail_the_store_keeps_the_low_8_bits():
    x, kern, _ = operands(1, 16, 5, 5, 16, 3)
    y, stats, _ = run_conv2d(Env(), x, kern, padding=1)
    np.testing.assert_array_equal(y, reference_conv2d(x, kern, 1, 1))
    assert stats.counts.get("ALU", 0) == 0


def test_padding_is_written_by_the_loads_pad_fields():
    x, kern, _ = operands(1, 16, 6, 6, 16, 3)
    _, _, insns = run_conv2d(Env(), x, kern, padding=1,
                             tiling=ConvTiling(oc=1, ic=1, rows=3, cols=6))
    inp = [i for i in insns if isinstance(i, Load) and i.mem is MemType.INP]
    assert [(i.y_pad_0, i.y_pad_1, i.x_pad_0, i.x_pad_1) for i in inp] == [(1, 0, 1, 1),
                                                                        (0, 1, 1, 1)]
    assert [i.y_size for i in inp] == [4, 4]  # 5-row windows, one row of each is padding


def test_weights_load_once_per_channel_tile_and_kernels_are_reused():
    x, kern, _ = operands(1, 32, 8, 8, 32, 3)
    tiling = ConvTiling(oc=1, ic=1, rows=2, cols=8)  # 2 channel tiles x 4 row tiles x 2 steps
    _, _, insns = run_conv2d(Env(), x, kern, padding=1, tiling=tiling, double_buffer=False)
    assert sum(isinstance(i, Load) and i.mem is MemType.WGT for i in insns) == 2
    gemms = {(i.uop_bgn, i.uop_end) for i in insns if isinstance(i, Gemm) and not i.reset}
    assert len(gemms) == 2  # one kernel per reduction step, for all 8 output tiles
    assert sum(isinstance(i, Load) and i.mem is MemType.UOP for i in insns) == 1


def test_double_buffering_overlaps_loads_with_the_gemm():
    x, kern, _ = operands(1, 64, 8, 8, 64, 3)
    tiling = ConvTiling(oc=2, ic=1, rows=2, cols=8)
    y1, s1, _ = run_conv2d(Env(), x, kern, padding=1, tiling=tiling, double_buffer=False)
    y2, s2, _ = run_conv2d(Env(), x, kern, padding=1, tiling=tiling, double_buffer=True)
    np.testing.assert_array_equal(y1, y2)
    assert s1.gemm_cycles == s2.gemm_cycles
    assert s2.total_cycles < 0.9 * s1.total_cycles


def test_pack_and_unpack_round_trip_with_channel_padding():
    env = Env("accel -batch=2")
    x = seeded_rng().integers(-128, 128, (3, 20, 4, 5), dtype=np.int8)
    packed = pack_data(env, x)
    assert packed.shape == (2, 2, 4, 5, 2, 16)
    assert not packed[1, 1, :, :, 1].any() and not packed[:, 1, :, :, :, 4:].any()
    np.testing.assert_array_equal(unpack_output(env, packed, 3, 20), x)
    k = seeded_rng().integers(-128, 128, (20, 3, 3, 3), dtype=np.int8)
    pk = pack_kernel(env, k)
    assert pk.shape == (2, 1, 3, 3, 16, 16)
    np.testing.assert_array_equal(pk[1, 0, 2, 1, 3, :3], k[19, :, 2, 1])


def test_a_tile_that_does_not_divide_the_layer_is_an_error():
    with pytest.raises(CodegenError, match="tile rows=3 must divide the layer's 8"):
        plan(Env(), Conv2d(1, 16, 8, 8, 16, (3, 3), 1, 1), ConvTiling(1, 1, 3, 8))


def test_a_tile_too_big_for_the_input_buffer_is_an_error():
    with pytest.raises(CodegenError, match="needs 1156 input elements, the input buffer "
                                           "holds 1024 per half"):
        plan(Env(), Conv2d(1, 16, 32, 32, 16, (3, 3), 1, 1), ConvTiling(1, 1, 32, 32))


def test_padding_the_pad_fields_cannot_hold_is_an_error():
    with pytest.raises(CodegenError, match="padding 3 must be below the kernel size"):
        plan(Env(), Conv2d(1, 16, 8, 8, 16, (3, 3), 1, 3))


def test_profile_reports_the_stats_of_a_run_without_moving_data():
    from lowering.accel.simulator import profile

    x, kern, bias = operands(1, 32, 8, 8, 32, 3)
    _, stats, insns = run_conv2d(Env(), x, kern, padding=1, bias=bias, relu=True,
                                 tiling=ConvTiling(oc=1, ic=1, rows=4, cols=8))
    assert profile(insns, Env()).as_dict() == stats.as_dict()
