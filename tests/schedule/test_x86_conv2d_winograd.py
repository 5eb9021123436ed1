"""conv2d_NCHWc_winograd.x86: Winograd F(m x m, 3 x 3) against a float64 numpy reference on
fresh random inputs, in every layout a model hands it (logical and NCHWxc data, NCHW and
NCHWc output, a constant kernel transformed by its packer or a kernel transformed by a
stage), both tile sizes, on AVX2 and AVX-512 code (the host runs both).

Tolerance: the Winograd transforms reassociate each output's sum and scale its terms (the
data transform of F(4, 3) multiplies by up to 5 and 25, the kernel's by 1/24), so the
float32 result departs from the exact one by more than the direct conv's rounding.
Measured against float64 numpy (max error / max |output|, random normal inputs, 14x14):
F(4, 3) 3.0e-6 at 16 channels, 7.0e-6 at 64, 9.0e-6 at 256; F(2, 3) 1.3e-7 to 7.8e-7.
The tests (16-48 channels) allow 2e-5 of that scale: twice the worst seen at 256
channels, and about 1000x below the error of one lost term (a product of two unit
normals, against an output scale of about 4 sqrt(9 C))"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest

import lowering
import tensor_expr as te
from autotune.task import Task
from schedule.templates import (
    config_space,
    constant_weight_attrs,
    input_packers,
    instantiate,
    output_block_of,
)
from schedule.templates.registry import partition_of, template_applies
from schedule.templates.winograd_matrices import transform_matrices
from tessel_errors import ScheduleError
from tests.rng import seeded_rng
from tests.schedule.templates.refs import blocked, rand, unblocked

NAME, DIRECT = "conv2d_NCHWc_winograd.x86", "conv2d_NCHWc.x86"
AVX2, AVX512 = "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"
RTOL_OF_SCALE = 2e-5


def reference(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """A 3x3 stride-1 conv in float64 (NCHW, OIHW)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
    cols = np.stack([xp[:, :, i:i + oh, j:j + ow] for i in range(3) for j in range(3)], 2)
    return np.einsum("nckhw,ock->nohw", cols, w.astype(np.float64).reshape(*w.shape[:2], 9))


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    scale = float(np.max(np.abs(want)))
    err = float(np.max(np.abs(got - want)))
    assert err <= RTOL_OF_SCALE * scale, f"max error {err:.3g} of scale {scale:.3g}"


def run(target: str, args: list, attrs: dict, x: np.ndarray, w: np.ndarray,
        cfg: Any = None, epilogue: Any = None, extra: tuple = ()) -> np.ndarray:
    """Build for `target`, run on x (in the data layout of args) and w (OIHW, transformed
    by the template's packer where it asks), return the output in NCHW."""
    s, ts = instantiate(NAME, args, attrs, cfg=cfg, target=target, epilogue=epilogue)
    k = lowering.build(s, ts, target=target)
    packers = input_packers(NAME, args, ts[:2], attrs)
    wk = packers[1](w) if 1 in packers else w
    out = np.full([int(d.value) for d in ts[-1].shape], np.nan, "float32")
    k(x, wk, *extra, out)
    return unblocked(out) if out.ndim == 5 else out


def with_knobs(target: str, args: list, attrs: dict, **knobs: Any) -> Any:
    """The template's default config with `knobs` replaced."""
    task = Task(NAME, args, attrs, target)
    values = json.loads(task.default_config().to_json())["knobs"]
    values.update(knobs)
    return task.space.from_json({"knobs": values})


@pytest.mark.parametrize("m", [2, 4, 6])
def test_the_matrices_compute_a_one_dimensional_correlation(m: int) -> None:
    rng = seeded_rng()
    at, g, bt = transform_matrices(m)
    d, w = rng.standard_normal(m + 2), rng.standard_normal(3)
    want = np.array([d[i:i + 3] @ w for i in range(m)])
    np.testing.assert_allclose(at @ ((g @ w) * (bt @ d)), want, rtol=1e-12, atol=1e-12)
    assert np.array_equal(bt, np.round(bt)), "the data transform multiplies by integers"


# (target, data block (0: NCHW), NCHWc output, m, batch, size, pad, constant kernel)
CASES = [
    (AVX512, 16, True, 4, 1, 8, 1, True),    # a model's layouts, OH a multiple of 4
    (AVX512, 16, True, 4, 1, 7, 1, True),    # 7 = 4 + 3: the edge tiles
    (AVX512, 0, False, 4, 1, 9, 1, False),   # logical in and out, the kernel a stage
    (AVX512, 8, False, 2, 2, 7, 1, True),    # batch 2, another block, m = 2, odd size
    (AVX512, 32, True, 2, 1, 6, 0, False),   # no padding
    (AVX2, 8, True, 4, 1, 10, 1, True),
    (AVX2, 0, True, 2, 2, 5, 1, False),
    (AVX2, 16, False, 4, 1, 14, 1, True),    # data in a block wider than the vector
    (AVX512, -16, True, 4, 1, 8, 1, True),   # data_layout "NCHWc" (block 16)
]


@pytest.mark.parametrize("target,block,out_blocked,m,batch,size,pad,const", CASES)
def test_equals_numpy(target: str, block: int, out_blocked: bool, m: int, batch: int,
                      size: int, pad: int, const: bool) -> None:
    rng = seeded_rng()
    C, K = 32, 48 if target == AVX512 else 32
    x, w = rand(rng, (batch, C, size, size)), rand(rng, (K, C, 3, 3))
    attrs: dict[str, Any] = {"padding": pad}
    if block:
        attrs["data_layout"] = "NCHWxc" if block > 0 else "NCHWc"
        block = abs(block)
    if out_blocked:
        attrs["out_layout"] = "NCHWc"
    dspec = (batch, C // block, size, size, block) if block else (batch, C, size, size)
    args = [(dspec, "float32"), ((K, C, 3, 3), "float32")]
    if const:
        attrs = constant_weight_attrs(NAME, attrs)
    cfg = with_knobs(target, args, attrs, tile_m=m)
    got = run(target, args, attrs, blocked(x, block) if block else x, w, cfg=cfg)
    assert_close(got, reference(x, w, pad))


def _bias_relu_blocked(c: te.Tensor) -> tuple[list[te.Tensor], te.Tensor]:
    bias = te.placeholder((int(c.shape[1].value) * int(c.shape[4].value),), name="bias")
    kb = int(c.shape[4].value)
    out = te.compute(c.shape, lambda n, k, h, w, b: te.max(c[n, k, h, w, b] + bias[k * kb + b],
                                                           0.0),
                     name="bias_relu", tag="broadcast")
    return [bias], out


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_a_bias_relu_epilogue_is_computed_in_the_output_transform(target: str) -> None:
    rng = seeded_rng()
    x, w, b = rand(rng, (1, 32, 7, 7)), rand(rng, (32, 32, 3, 3)), rand(rng, (32,))
    args = [((1, 2, 7, 7, 16), "float32"), ((32, 32, 3, 3), "float32")]
    attrs = constant_weight_attrs(NAME, {"padding": 1, "data_layout": "NCHWxc",
                                         "out_layout": "NCHWc"})
    s, ts = instantiate(NAME, args, attrs, target=target, epilogue=_bias_relu_blocked)
    text = str(lowering.lower(s, ts))
    # the output transform's second pass is inlined into the epilogue (its first pass,
    # winograd_output_cols, is a per-tile stage)
    assert not re.search(r"winograd_output\b(?!_cols)", text)
    got = run(target, args, attrs, blocked(x, 16), w, epilogue=_bias_relu_blocked,
              extra=(b,))
    assert_close(got, np.maximum(reference(x, w, 1) + b[None, :, None, None], 0))


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_sampled_points_of_the_space_equal_numpy(target: str) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 16, 6, 6)), rand(rng, (32, 16, 3, 3))
    args = [((1, 2, 6, 6, 8), "float32"), ((32, 16, 3, 3), "float32")]
    attrs = constant_weight_attrs(NAME, {"padding": 1, "data_layout": "NCHWxc",
                                         "out_layout": "NCHWc"})
    space = config_space(NAME, args, attrs, target)
    want = reference(x, w, 1)
    for i in rng.choice(space.size, size=3, replace=False):
        got = run(target, args, attrs, blocked(x, 8), w, cfg=space.get(int(i)))
        assert_close(got, want)


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("c,size", [(64, 56), (128, 28), (256, 14), (512, 7), (48, 10)])
def test_the_default_output_block_is_the_direct_templates(target: str, c: int,
                                                          size: int) -> None:
    args = [((1, c, size, size), "float32"), ((c, c, 3, 3), "float32")]
    attrs = {"padding": 1, "out_layout": "NCHWc"}
    blocks = [output_block_of(name, Task(name, args, attrs, target).default_config())
              for name in (NAME, DIRECT)]
    assert blocks[0] == blocks[1]


def test_applies_to_3x3_stride_1_float32_convs_only() -> None:
    data, k3 = ((1, 64, 28, 28), "float32"), ((64, 64, 3, 3), "float32")
    assert template_applies(NAME, [data, k3], {"padding": 1})
    assert template_applies(NAME, [data, k3], {"padding": 0})
    for layout in ("NCHWxc", "NCHWc"):
        assert template_applies(NAME, [((1, 2, 28, 28, 32), "float32"), k3],
                                {"padding": 1, "data_layout": layout})
    for specs, attrs in [
            ([data, ((64, 64, 5, 5), "float32")], {"padding": 2}),
            ([data, k3], {"padding": 1, "strides": 2}),
            ([data, k3], {"padding": 2, "dilation": 2}),
            ([data, k3], {"padding": 2}),
            ([data, ((64, 32, 3, 3), "float32")], {"padding": 1, "groups": 2}),
            ([((1, 64, 28, 28), "float16"), ((64, 64, 3, 3), "float16")], {"padding": 1}),
            ([((1, 4, 28, 28), "float32"), ((64, 4, 3, 3), "float32")], {"padding": 1})]:
        assert not template_applies(NAME, specs, attrs), (specs, attrs)


@pytest.mark.parametrize("kernel,attrs,says", [
    ((16, 16, 5, 5), {"padding": 2}, "3x3"),
    ((16, 16, 3, 3), {"padding": 1, "strides": 2}, "stride 1"),
])
def test_a_conv_it_does_not_compute_is_a_clear_error(kernel: tuple, attrs: dict,
                                                     says: str) -> None:
    args = [((1, 16, 8, 8), "float32"), (kernel, "float32")]
    with pytest.raises(ScheduleError, match=says) as err:
        instantiate(NAME, args, attrs)
    assert "conv2d_NCHWc.x86" in str(err.value)  # where such convs go


@pytest.mark.parametrize("fuse,split", [("rows", "rows"), ("gemm", "channels"),
                                         ("root", "channels")])
def test_the_partition_follows_where_the_stages_run(fuse: str, split: str) -> None:
    args = [((1, 16, 8, 8), "float32"), ((16, 16, 3, 3), "float32")]
    cfg = with_knobs(AVX512, args, {"padding": 1}, fuse=fuse)
    assert partition_of(NAME, cfg) == split


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("fuse", ["rows", "gemm", "root"])
def test_each_place_of_the_stages_equals_numpy_with_uneven_chunks(target: str,
                                                                  fuse: str) -> None:
    # 10x10 output, m = 4: 3 x 3 tiles, the last row and column partly outside; chunks of
    # at most 2 rows take 1 (3 is prime), a register tile of 4 takes 3 (the chunk's 3 tiles)
    rng = seeded_rng()
    x, w = rand(rng, (1, 16, 10, 10)), rand(rng, (16, 16, 3, 3))
    args = [((1, 2, 10, 10, 8), "float32"), ((16, 16, 3, 3), "float32")]
    attrs = constant_weight_attrs(NAME, {"padding": 1, "data_layout": "NCHWxc",
                                         "out_layout": "NCHWc"})
    cfg = with_knobs(target, args, attrs, fuse=fuse, tile_m=4, tile_rows=2, tile_p=4)
    assert_close(run(target, args, attrs, blocked(x, 8), w, cfg=cfg), reference(x, w, 1))


def test_at_root_the_gemm_prefetches_the_next_block_of_the_kernel() -> None:
    args = [((1, 2, 10, 10, 8), "float32"), ((16, 16, 3, 3), "float32")]
    attrs = constant_weight_attrs(NAME, {"padding": 1, "data_layout": "NCHWxc",
                                         "out_layout": "NCHWc"})
    texts = {}
    for fuse in ("root", "rows"):
        cfg = with_knobs(AVX512, args, attrs, fuse=fuse)
        s, ts = instantiate(NAME, args, attrs, cfg=cfg, target=AVX512)
        texts[fuse] = str(lowering.lower(s, ts))
    assert "prefetch" in texts["root"] and "prefetch" not in texts["rows"]
