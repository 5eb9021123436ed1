"""The accelerator's conv2d and dense templates (schedule.templates.accel_conv2d) built by
lowering.build(target="accel"): bit-exact against numpy for every knob, the zero padding
written by the LOADs' pad fields, and the configs that cannot run refused at build."""

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering.accel import Env
from lowering.accel.isa import Alu, AluOp, Load, MemType, Store
from lowering.accel.reference import reference_conv2d
from schedule.space import ConfigSpace, FallbackConfig
from schedule.templates import config_space, input_packers, instantiate
from schedule.templates.accel_conv2d import packed_layer, schedule_packed, store_wide
from schedule.templates.accel_layout import pack_channels, unpack_data
from tensor_expr.intrin import shift_left, shift_right
from tessel_errors import ScheduleError
from tests.rng import seeded_rng
from tests.unwritten import unwritten

CONV = "conv2d_packed.accel"
DENSE = "dense_packed.accel"


def conv_args(n, c, h, w, o, k):
    return [((n, c, h, w), "int8"), ((o, c, k, k), "int8")]


def run_template(name, args, attrs, target="accel", cfg=None):
    """(the kernel, the int8 logical output) of the template on seeded random operands,
    and the operands."""
    s, tensors = instantiate(name, args, attrs, cfg=cfg, target=target)
    f = lowering.build(s, tensors, target=target)
    rng = seeded_rng()
    x = rng.integers(-128, 128, args[0][0], dtype=np.int8)
    w = rng.integers(-128, 128, args[1][0], dtype=np.int8)
    packers = input_packers(name, args, tensors[:2], attrs)
    y = unwritten(tuple(int(d.value) for d in tensors[2].shape), "int8")
    f(packers[0](x), packers[1](w), y)
    if name == DENSE:
        got = unpack_data(Env(target), y, args[0][0][0], args[1][0][0])[:, :, 0, 0]
    else:
        got = unpack_data(Env(target), y, args[0][0][0], args[1][0][0])
    return f, got, x, w


CASES = [  # target, (N, C, H, W, O, K), stride, padding
    ("accel", (1, 16, 6, 6, 16, 3), 1, 1),
    ("accel", (1, 32, 8, 8, 48, 3), 1, 1),
    ("accel", (1, 20, 7, 7, 40, 3), 1, 1),       # channels off the block: padded
    ("accel", (2, 3, 10, 10, 8, 3), 1, 2),       # 3 channels, as a first layer
    ("accel", (1, 32, 9, 9, 32, 3), 2, 1),
    ("accel", (1, 32, 8, 8, 32, 1), 2, 0),
    ("accel", (1, 16, 11, 11, 16, 7), 2, 3),     # ResNet's first layer, smaller
    ("accel -batch=4", (5, 24, 5, 5, 20, 3), 1, 1),  # 5 images: a padded batch block
]


@pytest.mark.parametrize("target, shape, stride, pad", CASES, ids=str)
def test_the_conv2d_template_s_default_matches_numpy(target, shape, stride, pad):
    *dims, k = shape
    _, got, x, w = run_template(CONV, conv_args(*dims, k), {"strides": stride,
                                                            "padding": pad}, target)
    np.testing.assert_array_equal(got, reference_conv2d(x, w, stride, pad))


def _configs(space: ConfigSpace, **fixed):
    """Every point of the space whose knobs have the `fixed` values."""
    for k in range(space.size):
        cfg = space.get(k)
        if all(cfg[name].to_json() == v for name, v in fixed.items()):
            yield cfg


@pytest.mark.parametrize("knobs", [
    {"order": "spatial", "oc_nthread": 1, "h_nthread": 1},
    {"order": "channel", "oc_nthread": 1, "h_nthread": 1},
    {"order": "spatial", "oc_nthread": 2, "h_nthread": 1},
    {"order": "channel", "oc_nthread": 2, "h_nthread": 2},
    {"order": "spatial", "oc_nthread": 1, "h_nthread": 2, "tile_ci": [-1, 2]},
], ids=str)
def test_every_loop_order_and_virtual_thread_setting_matches_numpy(knobs):
    args = conv_args(1, 32, 8, 8, 64, 3)
    attrs = {"strides": 1, "padding": 1}
    space = config_space(CONV, args, attrs, "accel")
    cfg = next(c for c in _configs(space, tile_h=[-1, 2], tile_co=[-1, 1], **{
        "tile_ci": [-1, 1], **knobs}))
    f, got, x, w = run_template(CONV, args, attrs, cfg=cfg)
    np.testing.assert_array_equal(got, reference_conv2d(x, w, 1, 1))


def test_virtual_threads_hide_loads_behind_the_gemm():
    args = conv_args(1, 64, 14, 14, 64, 3)
    attrs = {"strides": 1, "padding": 1}
    space = config_space(CONV, args, attrs, "accel")
    common = dict(tile_h=[-1, 7], tile_w=[-1, 14], tile_co=[-1, 1], tile_ci=[-1, 1],
                  order="spatial", h_nthread=1)
    one = next(_configs(space, oc_nthread=1, **common))
    two = next(_configs(space, oc_nthread=2, **common))
    f1, y1, x1, w1 = run_template(CONV, args, attrs, cfg=one)
    f2, y2, x2, w2 = run_template(CONV, args, attrs, cfg=two)
    np.testing.assert_array_equal(y1, reference_conv2d(x1, w1, 1, 1))
    np.testing.assert_array_equal(y2, reference_conv2d(x2, w2, 1, 1))
    s1, s2 = f1.stats(), f2.stats()
    assert s1.gemm_cycles == s2.gemm_cycles
    assert s2.total_cycles < 0.9 * s1.total_cycles


def test_the_channel_order_loads_each_weight_tile_once():
    args = conv_args(1, 32, 8, 8, 32, 3)
    attrs = {"strides": 1, "padding": 1}
    space = config_space(CONV, args, attrs, "accel")
    common = dict(tile_h=[-1, 2], tile_w=[-1, 8], tile_co=[-1, 1], tile_ci=[-1, 1],
                  oc_nthread=1, h_nthread=1)
    spatial = next(_configs(space, order="spatial", **common))
    channel = next(_configs(space, order="channel", **common))
    f1, _, _, _ = run_template(CONV, args, attrs, cfg=spatial)
    f2, _, _, _ = run_template(CONV, args, attrs, cfg=channel)

    def weight_loads(f):
        return sum(isinstance(i, Load) and i.mem is MemType.WGT for i in f.instructions)

    assert weight_loads(f2) == 2                  # one per channel tile, all input channels
    assert weight_loads(f1) == 2 * 4 * 2          # per channel tile, row tile and step


def test_padding_is_written_by_the_loads_pad_fields():
    args = conv_args(1, 16, 6, 6, 16, 3)
    attrs = {"strides": 1, "padding": 1}
    space = config_space(CONV, args, attrs, "accel")
    cfg = next(_configs(space, tile_h=[-1, 3], tile_w=[-1, 6], oc_nthread=1, h_nthread=1))
    f, _, _, _ = run_template(CONV, args, attrs, cfg=cfg)
    inp = [i for i in f.instructions if isinstance(i, Load) and i.mem is MemType.INP]
    assert [(i.y_pad_0, i.y_pad_1, i.x_pad_0, i.x_pad_1) for i in inp] == [(1, 0, 1, 1),
                                                                        (0, 1, 1, 1)]
    assert [i.y_size for i in inp] == [4, 4]  # 5-row windows, one row of each padding


@pytest.mark.parametrize("target, mnk", [("accel", (1, 64, 48)), ("accel", (3, 40, 20)),
                                         ("accel -batch=4", (6, 32, 64))], ids=str)
def test_the_dense_template_matches_numpy(target, mnk):
    m, n, k = mnk
    _, got, a, w = run_template(DENSE, [((m, k), "int8"), ((n, k), "int8")], {}, target)
    want = (a.astype(np.int32) @ w.T.astype(np.int32)).astype(np.int8)
    np.testing.assert_array_equal(got, want)


def test_the_epilogue_runs_on_the_alu_with_the_bias_loaded_into_the_accumulators():
    env = Env()
    args = conv_args(1, 32, 6, 6, 32, 3)
    cfg = FallbackConfig("accel")
    ins, conv = packed_layer(CONV, cfg, args, {"padding": 1})
    bias = te.placeholder((1, 2, 1, 1, 1, 16), "int32", name="bias")
    e = te.compute(conv.shape, lambda *i: te.max(shift_right(
        conv[i] + bias[0, i[1], 0, 0, i[4], i[5]] + 64, 7), 0), name="requant")
    e = te.compute(e.shape, lambda *i: te.min(te.max(e[i], -127), 127), name="clip")
    out = te.compute(e.shape, lambda *i: e[i].astype("int8"), name="out")
    s = schedule_packed(cfg, [out])
    f = lowering.build(s, [*ins, bias, out], target="accel")
    rng = seeded_rng()
    x = rng.integers(-128, 128, (1, 32, 6, 6), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 32, 3, 3), dtype=np.int8)
    b = rng.integers(-5000, 5000, 32).astype(np.int32)
    packers = input_packers(CONV, args, ins, {"padding": 1})
    y = unwritten((1, 2, 6, 6, 1, 16), "int8")
    f(packers[0](x), packers[1](w), pack_channels(env, b), y)
    full = _int32_conv(x, w, 1) + b[None, :, None, None]
    want = np.clip(np.maximum((full + 64) >> 7, 0), -127, 127).astype(np.int8)
    np.testing.assert_array_equal(unpack_data(env, y, 1, 32), want)
    ops = [i.op for i in f.instructions if isinstance(i, Alu)]
    assert AluOp.SHR in ops and AluOp.MIN in ops and ops.count(AluOp.ADD) >= 2


def test_an_int32_result_is_stored_as_four_byte_planes():
    cfg = FallbackConfig("accel")
    args = conv_args(1, 16, 5, 5, 32, 3)
    ins, conv = packed_layer(CONV, cfg, args, {"padding": 1})
    shifted = te.compute(conv.shape, lambda *i: shift_left(conv[i], 3), name="shl")
    out = store_wide(shifted)
    f = lowering.build(schedule_packed(cfg, [out]), [*ins, out], target="accel")
    rng = seeded_rng()
    x = rng.integers(-128, 128, (1, 16, 5, 5), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
    packers = input_packers(CONV, args, ins, {"padding": 1})
    y = unwritten((1, 2, 5, 5, 1, 16), "int32")
    f(packers[0](x), packers[1](w), y)
    want = _int32_conv(x, w, 1) << 3
    np.testing.assert_array_equal(unpack_data(Env(), y, 1, 32), want)
    stores = [i for i in f.instructions if isinstance(i, Store)]
    shifts = [i for i in f.instructions if isinstance(i, Alu) and i.op is AluOp.SHR
              and i.imm == 8]
    assert len(stores) == 4 * len(shifts) // 3 > 0


def _int32_conv(x, w, pad):
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1), np.int64)
    for dy in range(kh):
        for dx in range(kw):
            win = xp[:, :, dy:dy + out.shape[2], dx:dx + out.shape[3]]
            out += np.einsum("nchw,oc->nohw", win, w[:, :, dy, dx].astype(np.int64))
    return out.astype(np.int32)


# -- configs that cannot run --------------------------------------------------------------

@pytest.mark.parametrize("tile, message", [
    ({"tile_h": [-1, 56], "tile_w": [-1, 56]}, r"'conv2d_packed' \(scope local.acc_buffer\) "
     r"needs 3136 accumulator elements, the accumulator buffer holds 2048"),
    ({"tile_h": [-1, 28], "tile_w": [-1, 56], "tile_ci": [-1, 4]},
     r"'data_pad' \(scope local.inp_buffer\) needs 6960 input elements"),
], ids=["accumulators", "input"])
def test_a_tile_larger_than_its_sram_scope_is_a_schedule_error_at_build(tile, message):
    args = conv_args(1, 64, 56, 56, 64, 3)
    attrs = {"strides": 1, "padding": 1}
    space = config_space(CONV, args, attrs, "accel")
    cfg = next(_configs(space, tile_co=[-1, 1], oc_nthread=1, h_nthread=1, **tile))
    s, tensors = instantiate(CONV, args, attrs, cfg=cfg, target="accel")
    with pytest.raises(ScheduleError, match=message):
        lowering.build(s, tensors, target="accel")


def test_virtual_threads_over_an_odd_number_of_tiles_are_refused():
    args = conv_args(1, 48, 8, 8, 48, 3)
    space = config_space(CONV, args, {"padding": 1}, "accel")
    cfg = next(_configs(space, tile_co=[-1, 1], oc_nthread=2))
    with pytest.raises(ScheduleError, match="oc_nthread=2 needs a multiple of 2 tiles"):
        instantiate(CONV, args, {"padding": 1}, cfg=cfg, target="accel")


def test_float_operands_are_refused_with_the_way_out():
    with pytest.raises(ScheduleError, match="quantize the model first"):
        instantiate(CONV, [((1, 16, 4, 4), "float32"), ((16, 16, 3, 3), "float32")], {},
                    target="accel")
