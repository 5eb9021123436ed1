"""lowering.accel.layers: an int8 conv2d or dense layer with its ALU tail, from numpy
operands through the template and lowering.build, bit-exact against numpy."""

import numpy as np
import pytest

from lowering.accel import Env
from lowering.accel.isa import Alu, AluOp, Load, MemType
from lowering.accel.layers import conv2d_kernel, run_conv2d, run_dense
from lowering.accel.reference import reference_conv2d, reference_dense
from schedule.templates.accel_layout import pack_data, pack_kernel, unpack_data
from tests.rng import seeded_rng


def operands(x_shape, w_shape):
    rng = seeded_rng()
    return (rng.integers(-128, 128, x_shape, dtype=np.int8),
            rng.integers(-128, 128, w_shape, dtype=np.int8),
            rng.integers(-20000, 20000, w_shape[0]).astype(np.int32))


CONV = [  # target, (N, C, H, W, O, K, stride, pad)
    ("accel", (1, 16, 6, 6, 16, 3, 1, 1)),
    ("accel", (1, 20, 7, 7, 40, 3, 1, 1)),
    ("accel", (2, 3, 10, 10, 8, 3, 1, 2)),
    ("accel", (1, 32, 9, 9, 32, 3, 2, 1)),
    ("accel -batch=4", (5, 24, 5, 5, 20, 3, 2, 1)),
    ("accel -batch=2 -block=32", (2, 40, 6, 6, 40, 3, 1, 1)),
]


@pytest.mark.parametrize("target, shape", CONV, ids=str)
def test_conv2d_with_bias_shift_relu_and_clip_matches_numpy(target, shape):
    n, c, h, w, o, k, stride, pad = shape
    x, kern, bias = operands((n, c, h, w), (o, c, k, k))
    y, layer = run_conv2d(target, x, kern, stride=stride, padding=pad, bias=bias, shift=7,
                          relu=True, clip=True)
    np.testing.assert_array_equal(y, reference_conv2d(x, kern, stride, pad, bias, 7, True,
                                                      True))
    ops = {i.op for i in layer.kernel.instructions if isinstance(i, Alu)}
    assert ops == {AluOp.ADD, AluOp.SHR, AluOp.MAX, AluOp.MIN}


@pytest.mark.parametrize("target, mnk", [("accel", (1, 48, 64)), ("accel", (3, 10, 40)),
                                         ("accel -batch=4", (6, 32, 48))], ids=str)
def test_dense_with_bias_shift_and_relu_matches_numpy(target, mnk):
    m, n, k = mnk
    a, w, bias = operands((m, k), (n, k))
    y, _ = run_dense(target, a, w, bias=bias, shift=5, relu=True)
    np.testing.assert_array_equal(y, reference_dense(a, w, bias, 5, True))


def test_without_a_tail_the_store_keeps_the_low_8_bits():
    x, kern, _ = operands((1, 16, 5, 5), (16, 16, 3, 3))
    y, layer = run_conv2d("accel", x, kern, padding=1)
    np.testing.assert_array_equal(y, reference_conv2d(x, kern, 1, 1))
    assert not any(isinstance(i, Alu) for i in layer.kernel.instructions)


def test_a_layer_is_counted_from_the_cycle_model_without_running_it():
    layer = conv2d_kernel("accel", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1)
    stats = layer.stats()
    # a step per (output block, input block, tap), and a reset per output block
    assert stats.gemm_cycles == 56 * 56 * 4 * 4 * 9 + 56 * 56 * 4
    assert 0 < stats.gemm_utilisation <= 1
    assert stats.dram_bytes_written == 56 * 56 * 64
    loads = [i for i in layer.kernel.instructions if isinstance(i, Load)]
    assert {i.mem for i in loads} == {MemType.UOP, MemType.INP, MemType.WGT}


def test_packing_pads_channels_and_batch_with_zeros_and_unpacking_crops():
    env = Env("accel -batch=2")
    x = seeded_rng().integers(-128, 128, (3, 20, 4, 5), dtype=np.int8)
    packed = pack_data(env, x)
    assert packed.shape == (2, 2, 4, 5, 2, 16)
    assert not packed[1, :, :, :, 1].any() and not packed[:, 1, :, :, :, 4:].any()
    np.testing.assert_array_equal(unpack_data(env, packed, 3, 20), x)
    k = seeded_rng().integers(-128, 128, (20, 3, 3, 3), dtype=np.int8)
    pk = pack_kernel(env, k)
    assert pk.shape == (2, 1, 3, 3, 16, 16)
    np.testing.assert_array_equal(pk[1, 0, 2, 1, 3, :3], k[19, :, 2, 1])
