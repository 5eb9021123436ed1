"""The blocked depthwise template (depthwise_conv2d_NCHWc.x86) equals numpy in every
layout it takes and gives, at the fallback and at sampled points of its space."""

from __future__ import annotations

import numpy as np
import pytest

from schedule.templates import config_space, input_packers, instantiate, template_for
from tests.rng import seeded_rng
from tests.schedule.templates.refs import blocked, close, depthwise_nchw, rand, run, unblocked

NAME = "depthwise_conv2d_NCHWc.x86"


def test_the_cpu_depthwise_family_is_the_blocked_template() -> None:
    assert template_for("depthwise_conv2d_nchw", "llvm") == NAME


@pytest.mark.parametrize("c, hw, stride, pad", [(32, 9, 1, 1), (48, 10, 2, 1), (16, 7, 1, 0),
                                                (24, 8, 2, 1)])
def test_nchw_in_and_out_equals_numpy(c: int, hw: int, stride: int, pad: int) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, c, hw, hw)), rand(rng, (c, 1, 3, 3))
    args = [(x.shape, "float32"), (w.shape, "float32")]
    attrs = {"strides": stride, "padding": pad, "groups": c}
    s, ts = instantiate(NAME, args, attrs)
    close(run(s, ts, [x, w]), depthwise_nchw(x, w, stride, pad))


@pytest.mark.parametrize("block", [8, 16, 32])
def test_blocked_in_and_out_with_a_packed_constant_kernel_equals_numpy(block: int) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 64, 9, 9)), rand(rng, (64, 1, 3, 3))
    xb = blocked(x, block)
    args = [(xb.shape, "float32"), (w.shape, "float32")]
    attrs = {"padding": 1, "groups": 64, "data_layout": "NCHWxc", "out_layout": "NCHWc",
             "kernel_layout": "packed"}
    s, ts = instantiate(NAME, args, attrs)
    packers = input_packers(NAME, args, ts[:2], attrs)
    got = run(s, ts, [xb, packers[1](w)])
    assert got.shape[4] == block  # the output keeps the data's block
    close(unblocked(got), depthwise_nchw(x, w, 1, 1))


def test_random_points_of_the_space_equal_numpy() -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 32, 12, 12), ), rand(rng, (32, 1, 3, 3))
    args = [(x.shape, "float32"), (w.shape, "float32")]
    attrs = {"padding": 1, "groups": 32}
    space = config_space(NAME, args, attrs)
    for index in space.sample(rng, 3) + [0, space.size - 1]:
        s, ts = instantiate(NAME, args, attrs, cfg=space.get(index))
        close(run(s, ts, [x, w]), depthwise_nchw(x, w, 1, 1))


def test_the_space_is_the_same_for_blocked_and_nchw_data() -> None:
    logical = config_space(NAME, [((1, 32, 12, 12), "float32"), ((32, 1, 3, 3), "float32")],
                           {"padding": 1, "groups": 32})
    blocked = config_space(NAME, [((1, 2, 12, 12, 16), "float32"),
                                  ((32, 1, 3, 3), "float32")],
                           {"padding": 1, "groups": 32, "data_layout": "NCHWxc"})
    assert logical.size == blocked.size and list(logical.knobs) == list(blocked.knobs)


def _padding_free(attrs: dict, x: np.ndarray, w: np.ndarray, block: int, cfg=None,
                  target: str = "llvm") -> tuple[str, np.ndarray | None]:
    """The blocked kernel's loop IR and, where the host runs code for `target`, its output
    (unblocked) on x and w."""
    import lowering
    from tessel_target import Target

    xb = blocked(x, block)
    args = [(xb.shape, "float32"), (w.shape, "float32")]
    attrs = {**attrs, "groups": x.shape[1], "data_layout": "NCHWxc", "out_layout": "NCHWc",
             "kernel_layout": "packed"}
    s, ts = instantiate(NAME, args, attrs, cfg=cfg, target=target)
    text = str(lowering.lower(s, ts))
    k = lowering.build(s, ts, target=target)
    if not Target.parse(target).features <= Target.parse("llvm").features:
        return text, None  # code for a CPU this host is not: built, not run
    out = np.full([int(d.value) for d in ts[-1].shape], np.nan, "float32")
    k(xb, input_packers(NAME, args, ts[:2], attrs)[1](w), out)
    return text, unblocked(out)


@pytest.mark.parametrize("c, hw, stride, pad, block", [
    (32, 15, 1, 1, 16), (64, 14, 2, 1, 32), (16, 9, 2, (0, 1, 1, 0), 8),
    (32, 11, 1, (2, 0, 1, 2), 16), (48, 7, 1, 0, 16)])
def test_padding_is_a_guard_peeled_off_the_interior_not_a_copy(c, hw, stride, pad, block
                                                               ) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, c, hw, hw)), rand(rng, (c, 1, 3, 3))
    text, got = _padding_free({"strides": stride, "padding": pad}, x, w, block)
    import re

    # the only buffer the kernel allocates is its register tile: no padded copy of the data
    assert set(re.findall(r"allocate (\S+)\[", text)) == {"depthwise_conv2d_NCHWc.local"}
    t, left, b, r = (pad,) * 4 if isinstance(pad, int) else pad
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (left, r)))
    close(got, depthwise_nchw(xp, w, stride, 0))


@pytest.mark.parametrize("parallel", ["rows", "channels"])
@pytest.mark.parametrize("rows, cols", [(1, 1), (4, 6), (3, 12), (12, 4)])
def test_every_parallel_axis_and_tile_equals_numpy(parallel: str, rows: int, cols: int
                                                   ) -> None:
    from schedule.space import ConfigEntity

    rng = seeded_rng()
    x, w = rand(rng, (1, 32, 12, 12)), rand(rng, (32, 1, 3, 3))
    args = [(blocked(x, 16).shape, "float32"), (w.shape, "float32")]
    attrs = {"padding": 1, "groups": 32, "data_layout": "NCHWxc", "out_layout": "NCHWc",
             "kernel_layout": "packed"}
    space = config_space(NAME, args, attrs)
    want = {"parallel": parallel, "tile_oh": [-1, rows], "tile_ow": [-1, cols]}
    picked = [i for i in range(space.size) if all(
        space.get(i)[k].to_json() == v or space.get(i)[k].to_json()[1:] == v[1:]
        for k, v in want.items())]
    assert picked, want
    cfg = space.get(picked[0])
    assert isinstance(cfg, ConfigEntity)
    _, got = _padding_free({"padding": 1}, x, w, 16, cfg=cfg)
    close(got, depthwise_nchw(x, w, 1, 1))


@pytest.mark.parametrize("target, vec_reg, tile", [("llvm -mcpu=haswell", "ymm", 6),
                                                   ("llvm -mcpu=skylake-avx512", "zmm", 7)])
def test_the_target_sizes_the_vectors_and_the_register_tile(target: str, vec_reg: str,
                                                            tile: int) -> None:
    from schedule.space import FallbackConfig

    rng = seeded_rng()
    x, w = rand(rng, (1, 32, 42, 42)), rand(rng, (32, 1, 7, 7))
    cfg = FallbackConfig(target)
    _, got = _padding_free({"padding": 3}, x, w, 16, cfg=cfg, target=target)
    # a 7x7 window: AVX2's 16 registers leave room for 6 accumulators, AVX-512's for 8
    assert cfg["tile_ow"].size[-1] == tile
    if got is not None:
        close(got, depthwise_nchw(np.pad(x, ((0, 0), (0, 0), (3, 3), (3, 3))), w, 1, 0))
    import lowering

    s, ts = instantiate(NAME, [((1, 64, 28, 28), "float32"), ((64, 1, 3, 3), "float32")],
                        {"padding": 1, "groups": 64}, target=target)
    asm = lowering.build(s, ts, target=target).source("asm")
    assert vec_reg in asm and (vec_reg == "zmm" or "zmm" not in asm)
