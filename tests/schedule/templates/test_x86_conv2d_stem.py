"""The stem template (conv2d_stem.x86: few input channels, NCHW image read as it is) equals
numpy in every layout it takes and gives, at the fallback and at points of its space, on
AVX2 and AVX-512 targets; the strategy gives it the convs of an image."""

from __future__ import annotations

import re

import numpy as np
import pytest

import lowering
from schedule.templates import config_space, input_packers, instantiate, templates_for
from tessel_target import Target
from tests.rng import seeded_rng
from tests.schedule.templates.refs import close, conv2d_nchw, rand, unblocked

NAME = "conv2d_stem.x86"
AVX2, AVX512 = "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"


def _run(x: np.ndarray, w: np.ndarray, attrs: dict, cfg=None, target: str = "llvm",
         data: np.ndarray | None = None) -> tuple[str, np.ndarray | None]:
    """The kernel's loop IR and, where the host runs code for `target`, its output in the
    logical layout (the kernel packed by the template's packer when attrs ask for it)."""
    data = x if data is None else data
    args = [(data.shape, "float32"), (w.shape, "float32")]
    s, ts = instantiate(NAME, args, attrs, cfg=cfg, target=target)
    text = str(lowering.lower(s, ts))
    k = lowering.build(s, ts, target=target)
    if not Target.parse(target).features <= Target.parse("llvm").features:
        return text, None  # code for a CPU this host is not: built, not run
    wk = input_packers(NAME, args, ts[:2], attrs).get(1, lambda a: a)(w)
    out = np.full([int(d.value) for d in ts[-1].shape], np.nan, "float32")
    k(data, wk, out)
    return text, unblocked(out) if out.ndim == 5 else out


def _padded_ref(x: np.ndarray, w: np.ndarray, stride: int, pad) -> np.ndarray:
    t, left, b, r = (pad,) * 4 if isinstance(pad, int) else pad
    return conv2d_nchw(np.pad(x, ((0, 0), (0, 0), (t, b), (left, r))), w, stride, 0)


def test_an_image_conv_is_the_stem_family() -> None:
    from relay_ir.op.nn import Conv2DAttrs
    from relay_ir.op.registry import get_op
    from relay_ir.strategy import STRATEGIES

    tpl = STRATEGIES[get_op("nn.conv2d")].template
    attrs = Conv2DAttrs(strides=(2, 2), padding=(3, 3, 3, 3))
    assert tpl([((1, 3, 32, 32), "float32"), ((64, 3, 7, 7), "float32")], attrs)[0] == \
        "conv2d_stem"
    assert tpl([((1, 8, 32, 32), "float32"), ((64, 8, 7, 7), "float32")], attrs)[0] == "conv2d"
    assert templates_for("conv2d_stem", "llvm") == (NAME,)
    assert templates_for("conv2d_stem", "cuda") == templates_for("conv2d", "cuda")


@pytest.mark.parametrize("c, co, hw, k, stride, pad, out_layout", [
    (3, 32, 17, 3, 2, 1, "NCHWc"), (3, 64, 20, 7, 2, 3, "NCHWc"), (1, 16, 9, 3, 1, 1, "NCHW"),
    (4, 32, 12, 5, 1, (2, 0, 1, 2), "NCHWc"), (3, 24, 10, 3, 2, 0, "NCHW")])
def test_the_image_read_as_it_is_equals_numpy(c, co, hw, k, stride, pad, out_layout) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, c, hw, hw)), rand(rng, (co, c, k, k))
    attrs = {"strides": stride, "padding": pad, "out_layout": out_layout,
             "kernel_layout": "OIHWo"}
    text, got = _run(x, w, attrs)
    # the kernel allocates its register tile and nothing else: no padded or packed image
    found = set(re.findall(r"allocate (\S+)\[.* in (\w+)", text))
    assert found and found <= {
        ("conv2d_stem.local", "local"), ("conv2d_stem", "local")}
    close(got, _padded_ref(x, w, stride, pad))


def test_an_unpacked_kernel_and_blocked_data_equal_numpy() -> None:
    rng = seeded_rng()
    x, w = rand(rng, (2, 4, 11, 11)), rand(rng, (16, 4, 3, 3))
    blocked = np.ascontiguousarray(x.reshape(2, 2, 2, 11, 11).transpose(0, 1, 3, 4, 2))
    _, got = _run(x, w, {"strides": 1, "padding": 1, "data_layout": "NCHWxc"}, data=blocked)
    close(got, _padded_ref(x, w, 1, 1))


def test_points_of_the_space_equal_numpy() -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 3, 16, 16)), rand(rng, (32, 3, 3, 3))
    args = [(x.shape, "float32"), (w.shape, "float32")]
    attrs = {"strides": 2, "padding": 1, "kernel_layout": "OIHWo", "out_layout": "NCHWc"}
    space = config_space(NAME, args, attrs)
    assert set(space.knobs) == {"tile_oc", "tile_ow", "tile_oh", "parallel", "unroll_kw"}
    for index in [0, space.size - 1, *space.sample(rng, 4)]:
        _, got = _run(x, w, attrs, cfg=space.get(index))
        close(got, _padded_ref(x, w, 2, 1))


@pytest.mark.parametrize("target, vec_reg, blocks", [(AVX2, "ymm", (16, 4)),
                                                     (AVX512, "zmm", (32, 8))])
def test_the_target_sizes_the_block_and_the_register_tile(target, vec_reg, blocks) -> None:
    from schedule.space import FallbackConfig

    rng = seeded_rng()
    x, w = rand(rng, (1, 3, 32, 32)), rand(rng, (64, 3, 7, 7))
    cfg = FallbackConfig(target)
    attrs = {"strides": 2, "padding": 3, "kernel_layout": "OIHWo", "out_layout": "NCHWc"}
    _, got = _run(x, w, attrs, cfg=cfg, target=target)
    assert (cfg["tile_oc"].size[-1], cfg["tile_ow"].size[-1]) == blocks
    if got is not None:
        close(got, _padded_ref(x, w, 2, 3))
    s, ts = instantiate(NAME, [(x.shape, "float32"), (w.shape, "float32")], attrs,
                        target=target)
    asm = lowering.build(s, ts, target=target).source("asm")
    assert vec_reg in asm and (vec_reg == "zmm" or "zmm" not in asm)


def test_bad_layouts_and_channels_are_named() -> None:
    from tessel_errors import ScheduleError

    args = [((1, 3, 8, 8), "float32"), ((16, 4, 3, 3), "float32")]
    with pytest.raises(ScheduleError, match="input channels equal to the data's 3"):
        instantiate(NAME, args, {})
    with pytest.raises(ScheduleError, match="data_layout must be one of"):
        instantiate(NAME, [((1, 3, 8, 8), "float32"), ((16, 3, 3, 3), "float32")],
                    {"data_layout": "NHWC"})


def test_tuning_times_the_stem_as_the_model_runs_it() -> None:
    # blocked output for the next conv, the image as it is: no unpacking timed
    from relay_ir.backend.layout_plan import as_in_model

    specs = [((1, 3, 32, 32), "float32"), ((32, 3, 3, 3), "float32")]
    got = as_in_model(NAME, specs, {"padding": 1}, AVX512)
    assert got == (specs, {"padding": 1, "out_layout": "NCHWc"})
