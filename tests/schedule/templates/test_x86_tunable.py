"""Tunable x86 templates: the fallback and random points of each space equal numpy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lowering
from schedule.templates import config_space, input_packers, instantiate
from tests.rng import seeded_rng
from tests.schedule.templates.refs import blocked, close, conv2d_nchw, depthwise_nchw, rand, run
from tests.unwritten import unwritten

CASES: list[tuple[str, list[Any], dict[str, Any], Any]] = [
    ("dense.x86", [((12, 20), "float32"), ((32, 20), "float32")], {},
     lambda a, b: a @ b.T),
    ("matmul.x86", [((16, 24), "float32"), ((24, 40), "float32")], {},
     lambda a, b: a @ b),
    ("batch_matmul.x86", [((2, 8, 12), "float32"), ((2, 12, 16), "float32")], {},
     lambda a, b: np.matmul(a, b)),
    ("batch_matmul.x86", [((2, 8, 12), "float32"), ((2, 16, 12), "float32")],
     {"transpose_b": True}, lambda a, b: np.matmul(a, b.transpose(0, 2, 1))),
    ("conv2d_nchw.x86", [((1, 4, 10, 10), "float32"), ((8, 4, 3, 3), "float32")],
     {"padding": 1}, lambda x, w: conv2d_nchw(x, w, 1, 1)),
    ("conv2d_nchw.x86", [((1, 3, 9, 9), "float32"), ((4, 3, 3, 3), "float32")],
     {"strides": 2}, lambda x, w: conv2d_nchw(x, w, 2, 0)),
    ("conv2d_NCHWc.x86", [((1, 16, 8, 8), "float32"), ((16, 16, 3, 3), "float32")],
     {"padding": 1}, lambda x, w: conv2d_nchw(x, w, 1, 1)),
    ("depthwise_conv2d_nchw.x86", [((1, 8, 10, 10), "float32"), ((8, 1, 3, 3), "float32")],
     {"padding": 1}, lambda x, w: depthwise_nchw(x, w, 1, 1)),
]
IDS = [f"{c[0]}-{n}" for n, c in enumerate(CASES)]


@pytest.mark.parametrize("name,args,attrs,ref", CASES, ids=IDS)
def test_fallback_schedule_equals_numpy(name: str, args: list[Any], attrs: dict[str, Any],
                                        ref: Any) -> None:
    rng = seeded_rng()
    s, tensors = instantiate(name, args, attrs)
    inputs = [rand(rng, shape) for shape, _ in args]
    close(run(s, tensors, inputs), ref(*inputs))


@pytest.mark.parametrize("name,args,attrs,ref", CASES[::2] + CASES[5:6], ids=IDS[::2] + IDS[5:6])
def test_random_points_of_the_space_equal_numpy(name: str, args: list[Any],
                                                attrs: dict[str, Any], ref: Any) -> None:
    rng = seeded_rng()
    space = config_space(name, args, attrs)
    inputs = [rand(rng, shape) for shape, _ in args]
    for index in space.sample(rng, 2):
        s, tensors = instantiate(name, args, attrs, cfg=space.get(index))
        close(run(s, tensors, inputs), ref(*inputs))


def test_nchwc_with_packed_layouts_equals_numpy() -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 16, 6, 6)), rand(rng, (16, 16, 3, 3))
    bn = 8
    xc = np.ascontiguousarray(x.reshape(1, 2, bn, 6, 6).transpose(0, 1, 3, 4, 2))
    wc = np.ascontiguousarray(w.reshape(2, bn, 2, bn, 3, 3).transpose(0, 2, 4, 5, 3, 1))
    attrs = {"padding": 1, "data_layout": "NCHWc", "kernel_layout": "OIHWio",
             "out_layout": "NCHWc"}
    s, tensors = instantiate("conv2d_NCHWc.x86", [(xc.shape, "float32"), (wc.shape, "float32")],
                             attrs)
    got = run(s, tensors, [xc, wc])  # [1, 16/bn, 6, 6, bn]
    want = conv2d_nchw(x, w, 1, 1)
    close(got.transpose(0, 1, 4, 2, 3).reshape(want.shape), want)


def test_nchwc_with_a_logical_oihw_weight_takes_it_packed_in_the_configs_blocks() -> None:
    rng = seeded_rng()
    args = [((1, 16, 6, 6), "float32"), ((32, 16, 3, 3), "float32")]
    attrs = {"padding": 1, "kernel_layout": "OIHWio"}
    x, w = rand(rng, (1, 16, 6, 6)), rand(rng, (32, 16, 3, 3))
    space = config_space("conv2d_NCHWc.x86", args, attrs)
    blocks = set()
    for index in space.sample(rng, 4) + [0, space.size - 1]:
        s, tensors = instantiate("conv2d_NCHWc.x86", args, attrs, cfg=space.get(index))
        packers = input_packers("conv2d_NCHWc.x86", args, tensors[:2])
        assert list(packers) == [1]
        blocks.add(tuple(int(d.value) for d in tensors[1].shape[4:]))
        close(run(s, tensors, [x, packers[1](w)]), conv2d_nchw(x, w, 1, 1))
    assert len(blocks) > 1  # the blocks follow the config


@pytest.mark.parametrize("target, lanes", [("llvm -mcpu=haswell", 8),
                                           ("llvm -mcpu=skylake-avx512", 16)])
def test_oc_blocks_past_four_vectors_of_the_target_are_not_in_the_space(target: str,
                                                                         lanes: int) -> None:
    space = config_space("conv2d_NCHWc.x86", [((1, 8, 6, 6), "float32"),
                                               ((1024, 8, 1, 1), "float32")], {}, target)
    blocks = [e.size[-1] for e in space.knobs["tile_oc"].entities]
    assert max(blocks) == 4 * lanes and 1 in blocks


@pytest.mark.parametrize("name,bshape,attrs,ref", [
    ("dense.x86", (40, 48), {}, lambda a, b: a @ b.T),
    ("matmul.x86", (48, 40), {}, lambda a, b: a @ b),
    ("matmul.x86", (40, 48), {"transpose_b": True}, lambda a, b: a @ b.T),
], ids=["dense", "matmul", "matmul_transpose_b"])
def test_a_prepacked_constant_weight_gives_the_same_product(name, bshape, attrs, ref) -> None:
    args = [((8, 48), "float32"), (bshape, "float32")]
    packed = {**attrs, "weight_layout": "packed"}
    s, tensors = instantiate(name, args, packed)
    assert len(tensors[1].shape) == 3  # [N/nr, K, nr]
    f = lowering.build(s, tensors)
    pack = input_packers(name, args, tensors[:2], packed)[1]
    rng = seeded_rng()
    a, b = (rng.standard_normal(shape).astype("float32") for shape, _ in args)
    out = unwritten((8, 40))
    f(a, pack(b), out)
    np.testing.assert_allclose(out, ref(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_block", [4, 8, 16, 32])
def test_nchwxc_data_in_any_block_equals_numpy_at_every_sampled_config(x_block: int) -> None:
    # data blocked as another conv wrote it: the config's own tile_ic re-blocks it (or not)
    rng = seeded_rng()
    x, w = rand(rng, (1, 32, 6, 6)), rand(rng, (16, 32, 3, 3))
    logical = [((1, 32, 6, 6), "float32"), ((16, 32, 3, 3), "float32")]
    space = config_space("conv2d_NCHWc.x86", logical, {"padding": 1})
    args = [(blocked(x, x_block).shape, "float32"), ((16, 32, 3, 3), "float32")]
    attrs = {"padding": 1, "data_layout": "NCHWxc"}
    for index in space.sample(rng, 3) + [0, space.size - 1]:
        s, tensors = instantiate("conv2d_NCHWc.x86", args, attrs, cfg=space.get(index))
        close(run(s, tensors, [blocked(x, x_block), w]), conv2d_nchw(x, w, 1, 1))


def test_nchwxc_keeps_the_nchw_tasks_space() -> None:
    # so a config tuned for the logical task applies to the blocked instantiation
    logical = config_space("conv2d_NCHWc.x86", [((1, 32, 6, 6), "float32"),
                                                 ((16, 32, 3, 3), "float32")], {"padding": 1})
    blocked = config_space("conv2d_NCHWc.x86", [((1, 2, 6, 6, 16), "float32"),
                                                 ((16, 32, 3, 3), "float32")],
                           {"padding": 1, "data_layout": "NCHWxc"})
    assert logical.size == blocked.size
    assert list(logical.knobs) == list(blocked.knobs)


@pytest.mark.parametrize("block", [16, 32])
def test_a_blocked_1x1_convs_default_reads_its_data_in_the_blocks_it_arrives_in(
        block: int) -> None:
    # no pad / re-blocking stage: the conv loads the data placeholder itself
    target = "llvm -mcpu=skylake-avx512"
    args = [((1, 64 // block, 14, 14, block), "float32"), ((48, 64, 1, 1), "float32")]
    attrs = {"data_layout": "NCHWxc", "out_layout": "NCHWc", "strides": [2, 2]}
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, target=target)
    assert ts[0] in ts[-1].op.input_tensors, [t.name for t in ts[-1].op.input_tensors]
    rng = seeded_rng()
    x, w = rand(rng, (1, 64, 14, 14)), rand(rng, (48, 64, 1, 1))
    xb = np.ascontiguousarray(x.reshape(1, 64 // block, block, 14, 14).transpose(0, 1, 3, 4, 2))
    out = np.full([int(d.value) for d in ts[-1].shape], np.nan, "float32")
    lowering.build(s, ts, target=target)(xb, w, out)
    want = conv2d_nchw(x, w, stride=2)
    close(out.transpose(0, 1, 4, 2, 3).reshape(want.shape), want)
