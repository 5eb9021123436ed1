"""group_conv2d_NCHWc.x86: a grouped convolution in the blocked layout gives numpy's result
for every point of its space tried, and relay_ir.build gives it the grouped convs whose
groups are wide enough for its vectors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lowering
import relay_ir
from autotune.task import Task
from lowering.kernel import _foreign_cpu
from relay_ir.backend.pipeline import bind_params
from relay_ir.op.nn import conv2d_nchw_ref
from schedule.templates import config_space, instantiate
from tests.rng import seeded_rng
from tests.schedule.templates.refs import rand, run

CASES = [  # (N, C, H, W), (CO, C/G, KH, KW), attrs
    ((1, 32, 8, 8), (64, 8, 3, 3), {"padding": 1, "groups": 4}),
    ((2, 12, 7, 9), (24, 4, 1, 1), {"groups": 3}),
    ((1, 64, 11, 11), (64, 2, 3, 3), {"padding": 1, "groups": 32, "strides": 2}),
    ((1, 16, 10, 10), (8, 8, 3, 3), {"padding": (1, 0, 2, 1), "groups": 2}),
]


def _want(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    p = attrs.get("padding", 0)
    pad = tuple(p) if isinstance(p, tuple) else (p,) * 4
    st = attrs.get("strides", 1)
    return conv2d_nchw_ref(x, w, (st, st), pad, (1, 1), attrs["groups"]).astype("float32")


@pytest.mark.parametrize("dshape, kshape, attrs", CASES)
def test_the_fallback_schedule_computes_the_grouped_convolution(dshape, kshape, attrs) -> None:
    rng = seeded_rng()
    x, w = rand(rng, dshape), rand(rng, kshape)
    s, tensors = instantiate("group_conv2d_NCHWc.x86", [(dshape, "float32"),
                                                        (kshape, "float32")], attrs)
    np.testing.assert_allclose(run(s, tensors, [x, w]), _want(x, w, attrs), rtol=1e-4,
                               atol=1e-4)


def test_points_across_the_space_compute_the_same_convolution() -> None:
    dshape, kshape, attrs = CASES[0]
    args = [(dshape, "float32"), (kshape, "float32")]
    space = config_space("group_conv2d_NCHWc.x86", args, attrs)
    assert space.size > 20 and {"tile_ic", "tile_oc", "tile_ow"} <= set(space.knobs)
    rng = seeded_rng()
    x, w = rand(rng, dshape), rand(rng, kshape)
    for index in rng.choice(space.size, 4, replace=False):
        s, tensors = instantiate("group_conv2d_NCHWc.x86", args, attrs,
                                 cfg=space.get(int(index)))
        np.testing.assert_allclose(run(s, tensors, [x, w]), _want(x, w, attrs), rtol=1e-4,
                                   atol=1e-4)


def test_groups_that_do_not_divide_the_channels_are_a_schedule_error() -> None:
    from tessel_errors import ScheduleError

    with pytest.raises(ScheduleError, match="groups=3 does not fit"):
        instantiate("group_conv2d_NCHWc.x86", [((1, 16, 8, 8), "float32"),
                                               ((12, 4, 3, 3), "float32")], {"groups": 3})


def _model(c: int, co: int, groups: int) -> relay_ir.IRModule:
    return relay_ir.parse(f"""
    def @main(%x: Tensor[(1, {c}, 9, 9), float32],
              %w: Tensor[({co}, {c // groups}, 3, 3), float32]) {{
      nn.relu(nn.conv2d(%x, %w, padding=[1, 1], groups={groups}))
    }}""")


def test_build_gives_a_wide_grouped_conv_the_template_with_its_weight_packed_once() -> None:
    mod = _model(64, 64, 2)
    rng = seeded_rng()
    w, x = rand(rng, (64, 32, 3, 3)), rand(rng, (1, 64, 9, 9))
    lib = relay_ir.build(mod, params={"w": w})
    assert lib.group_schedules == [("fused_conv2d_relu", "group_conv2d_NCHWc.x86")]
    assert [v.shape for v in lib.plan.values if v.kind == "const"][0][-2:] != (3, 3)  # packed
    want = relay_ir.interpret(bind_params(mod, {"w": w}), x)
    np.testing.assert_allclose(lib.run(x), want, rtol=1e-4, atol=1e-4)


def test_build_leaves_narrow_groups_to_the_generic_schedule() -> None:
    mod = _model(64, 64, 16)  # 4 channels per group
    rng = seeded_rng()
    w, x = rand(rng, (64, 4, 3, 3)), rand(rng, (1, 64, 9, 9))
    lib = relay_ir.build(mod, params={"w": w})
    assert "group_conv2d_NCHWc.x86" not in dict(lib.group_schedules).values()
    want = relay_ir.interpret(bind_params(mod, {"w": w}), x)
    np.testing.assert_allclose(lib.run(x), want, rtol=1e-4, atol=1e-4)


AVX2, AVX512 = "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"


@pytest.mark.parametrize("target, rows", [(AVX2, 2), (AVX512, 1)])
@pytest.mark.parametrize("stride", [1, 2])
def test_the_default_tile_takes_two_rows_where_avx2_fits_fewer_than_8_accumulators(
        target: str, rows: int, stride: int, monkeypatch: Any) -> None:
    # ResNeXt-26's 512@14 (and 512@28 stride 2) 3x3, 16 channels a group, scaled down: on
    # AVX2 one row's tile is 7 columns x 1 vector, two rows 14 (GROUP_ROWS_FOR_ACCUMULATORS);
    # AVX-512's one row holds 14 x 1 already
    import schedule.templates.x86_group_conv2d as template

    hw = 14 * stride
    args = [((1, 64, hw, hw), "float32"), ((64, 16, 3, 3), "float32")]
    attrs = {"padding": 1, "groups": 4, "strides": stride}
    cfg = Task("group_conv2d_NCHWc.x86", args, attrs, target).default_config()
    assert cfg is not None and int(cfg["tile_oh"].size[-1]) == rows
    lanes = 8 if target == AVX2 else 16
    assert rows * int(cfg["tile_ow"].size[-1]) * int(cfg["tile_oc"].size[-1]) // lanes >= 8
    monkeypatch.setattr(template, "GROUP_ROWS_FOR_ACCUMULATORS", False)
    off = Task("group_conv2d_NCHWc.x86", args, attrs, target).default_config()
    assert off is not None and int(off["tile_oh"].size[-1]) == 1


def test_an_avx2_two_row_tile_of_a_grouped_conv_equals_numpy() -> None:
    args = [((1, 64, 14, 14), "float32"), ((64, 16, 3, 3), "float32")]
    attrs = {"padding": 1, "groups": 4}
    cfg = Task("group_conv2d_NCHWc.x86", args, attrs, AVX2).default_config()
    assert cfg is not None and int(cfg["tile_oh"].size[-1]) == 2
    s, tensors = instantiate("group_conv2d_NCHWc.x86", args, attrs, cfg=cfg, target=AVX2)
    if _foreign_cpu(AVX2):
        pytest.skip("the host cannot run AVX2 code")
    rng = seeded_rng()
    x, w = rand(rng, args[0][0]), rand(rng, args[1][0])
    got = np.full([int(d.value) for d in tensors[-1].shape], np.nan, "float32")
    lowering.build(s, tensors, target=AVX2)(x, w, got)
    np.testing.assert_allclose(got, _want(x, w, attrs), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target, template", [(AVX2, True), (AVX512, False)])
def test_groups_of_one_vector_take_the_template_where_the_vector_is_8_lanes(
        target: str, template: bool, monkeypatch: Any) -> None:
    # ResNeXt-26's 256@56 stride 2 (32 groups of 8): AVX2's vector is one group's output
    # channels; AVX-512 keeps the generic nest below 16 (GROUP_TEMPLATE_AT_LANES)
    import relay_ir.strategy as strategy
    from relay_ir.op.nn import Conv2DAttrs
    from relay_ir.op.registry import get_op

    conv = strategy.strategy_of(get_op("nn.conv2d"))
    args = [((1, 64, 16, 16), "float32"), ((64, 8, 3, 3), "float32")]
    attrs = Conv2DAttrs(strides=(2, 2), padding=(1, 1, 1, 1), groups=8)
    picked = conv.template(args, attrs, target)
    assert (picked is not None and picked[0] == "group_conv2d") == template
    assert conv.template(args, attrs) is None  # no target: 16 channels as before
    monkeypatch.setattr(strategy, "GROUP_TEMPLATE_AT_LANES", False)
    assert conv.template(args, attrs, target) is None


def test_an_avx2_build_gives_groups_of_8_the_template_and_equals_the_interpreter() -> None:
    if _foreign_cpu(AVX2):
        pytest.skip("the host cannot run AVX2 code")
    mod = relay_ir.parse("""
    def @main(%x: Tensor[(1, 64, 16, 16), float32], %w: Tensor[(64, 8, 3, 3), float32]) {
      nn.relu(nn.conv2d(%x, %w, strides=[2, 2], padding=[1, 1], groups=8))
    }""")
    rng = seeded_rng()
    w, x = rand(rng, (64, 8, 3, 3)), rand(rng, (1, 64, 16, 16))
    lib = relay_ir.build(mod, target=AVX2, params={"w": w})
    assert lib.group_schedules == [("fused_conv2d_relu", "group_conv2d_NCHWc.x86")]
    want = relay_ir.interpret(bind_params(mod, {"w": w}), x)
    np.testing.assert_allclose(lib.run(x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("block", [8, 16, 32])
def test_blocked_data_and_output_give_the_grouped_convolution(block: int) -> None:
    # as a model runs it: data in the 1x1 conv's blocks (re-blocked by the padding stage
    # where they differ from tile_ic), output in the conv's own blocks of tile_oc
    from tests.schedule.templates.refs import blocked, unblocked

    dshape, kshape = (1, 64, 10, 10), (64, 16, 3, 3)
    attrs = {"padding": 1, "groups": 4, "strides": 2}
    args = [((1, 64 // block, 10, 10, block), "float32"), (kshape, "float32")]
    layouts = {**attrs, "data_layout": "NCHWxc", "out_layout": "NCHWc"}
    space = config_space("group_conv2d_NCHWc.x86", args, layouts)
    rng = seeded_rng()
    x, w = rand(rng, dshape), rand(rng, kshape)
    for cfg in [None, *(space.get(int(i)) for i in rng.choice(space.size, 3, replace=False))]:
        s, tensors = instantiate("group_conv2d_NCHWc.x86", args, layouts, cfg=cfg)
        got = run(s, tensors, [blocked(x, block), w])
        assert got.ndim == 5
        np.testing.assert_allclose(unblocked(got), _want(x, w, attrs), rtol=1e-4, atol=1e-4)
