"""The blocked depthwise template (depthwise_conv2d_NCHWc.x86) equals numpy in every
layout it takes and gives, at the fallback and at sampled points of its space."""

from __future__ import annotations

import numpy as np
import pytest

from schedule.templates import config_space, input_packers, instantiate, template_for
from tests.rng import seeded_rng
from tests.schedule.templates.refs import close, depthwise_nchw, rand, run

NAME = "depthwise_conv2d_NCHWc.x86"


def _blocked(x: np.ndarray, b: int) -> np.ndarray:
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // b, b, h, w).transpose(0, 1, 3, 4, 2))


def _unblocked(y: np.ndarray) -> np.ndarray:
    n, co, h, w, b = y.shape
    return y.transpose(0, 1, 4, 2, 3).reshape(n, co * b, h, w)


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
    xb = _blocked(x, block)
    args = [(xb.shape, "float32"), (w.shape, "float32")]
    attrs = {"padding": 1, "groups": 64, "data_layout": "NCHWxc", "out_layout": "NCHWc",
             "kernel_layout": "packed"}
    s, ts = instantiate(NAME, args, attrs)
    packers = input_packers(NAME, args, ts[:2], attrs)
    got = run(s, ts, [xb, packers[1](w)])
    assert got.shape[4] == block  # the output keeps the data's block
    close(_unblocked(got), depthwise_nchw(x, w, 1, 1))


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
