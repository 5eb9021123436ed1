"""CUDA schedule templates: the default config and a seeded sample of the space of each,
compiled by NVRTC or nvcc and simulated against numpy; the target picks the template."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
from lowering.cuda.compile import compiler
from schedule.templates import config_space, instantiate, template_for
from tests.rng import seeded_rng
from tests.unwritten import unwritten

pytestmark = pytest.mark.skipif(not compiler(), reason="no CUDA compiler (NVRTC or nvcc)")

def _conv_ref(x: np.ndarray, w: np.ndarray, pad: int = 1, groups: int = 1) -> np.ndarray:
    n, c, h, wd = x.shape
    co, ci, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    out = np.zeros((n, co, oh, ow), np.float64)
    mult = co // groups
    for o in range(co):
        cs = range(c) if groups == 1 else [o // mult]
        for ci_k, cc in enumerate(cs):
            k = w[o, ci_k if groups == 1 else 0]
            for i in range(kh):
                for j in range(kw):
                    out[:, o] += xp[:, cc, i:i + oh, j:j + ow] * k[i, j]
    return out


CASES = {
    "conv2d_nchw.cuda": ([((1, 4, 6, 7), "float32"), ((6, 4, 3, 3), "float32")],
                         {"padding": 1}, _conv_ref),
    "conv2d_nchw_gemm.cuda": ([((1, 4, 6, 7), "float32"), ((6, 4, 3, 3), "float32")],
                              {"padding": 1}, _conv_ref),
    "conv2d_nchw_gemm.cuda strided": ([((2, 3, 9, 7), "float32"), ((5, 3, 3, 3), "float32")],
                                      {"padding": 1, "strides": 2},
                                      lambda x, w: _conv_ref(x, w)[:, :, ::2, ::2]),
    "depthwise_conv2d_nchw.cuda": ([((1, 4, 6, 7), "float32"), ((4, 1, 3, 3), "float32")],
                                   {"padding": 1},
                                   lambda x, w: _conv_ref(x, w, groups=4)),
    "dense.cuda": ([((12, 20), "float32"), ((8, 20), "float32")], {},
                   lambda a, b: a @ b.T),
    "matmul.cuda": ([((12, 20), "float32"), ((20, 8), "float32")], {},
                    lambda a, b: a @ b),
    "batch_matmul.cuda": ([((2, 6, 10), "float32"), ((2, 10, 4), "float32")], {},
                          lambda a, b: a @ b),
}


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _pool(x: np.ndarray, k: int, stride: int, pad: int, op: str) -> np.ndarray:
    """Max pooling (padding -inf) or average pooling counting the padding, by windows."""
    fill = -np.inf if op == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    oh = (x.shape[2] + 2 * pad - k) // stride + 1
    ow = (x.shape[3] + 2 * pad - k) // stride + 1
    win = np.stack([xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                    for i in range(k) for j in range(k)])
    return win.max(axis=0) if op == "max" else win.mean(axis=0)


# one-input templates of the reduction family: (args, attrs, numpy reference)
REDUCTION_CASES = {
    "softmax.cuda": ([((3, 70), "float32")], {"axis": -1}, _softmax),
    "softmax.cuda log": ([((4, 40), "float32")], {"axis": 1, "log": True},
                         lambda x: np.log(_softmax(x))),
    "reduce.cuda": ([((3, 100), "float32")], {"op": "mean", "axis": (1,)},
                    lambda x: x.mean(axis=1)),
    "reduce.cuda max": ([((3, 5, 20), "float32")], {"op": "max", "axis": (0, 2)},
                        lambda x: x.max(axis=(0, 2))),
    "reduce.cuda all": ([((70,), "float32")], {"op": "sum"}, lambda x: x.sum()),
    "pool2d.cuda": ([((1, 3, 9, 9), "float32")],
                    {"op": "max", "pool_size": (3, 3), "strides": (2, 2),
                     "padding": (1, 1)}, lambda x: _pool(x, 3, 2, 1, "max")),
    "pool2d.cuda avg": ([((2, 3, 8, 8), "float32")],
                        {"op": "avg", "pool_size": (2, 2), "strides": (2, 2)},
                        lambda x: _pool(x, 2, 2, 0, "avg")),
}
CASES.update(REDUCTION_CASES)


def _check(case: str, cfg) -> None:
    args, attrs, ref = CASES[case]
    name = case.split()[0]
    s, tensors = instantiate(name, args, attrs, cfg=cfg, target="cuda")
    f = lowering.build(s, tensors, target="cuda -sim")
    rng = seeded_rng()
    ins = [rng.standard_normal(shape).astype(dt) for shape, dt in args]
    out = unwritten(tuple(int(d.value) for d in tensors[-1].shape))
    f(*ins, out)
    np.testing.assert_allclose(out, ref(*ins), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_default_config_computes_the_product(name: str) -> None:
    _check(name, None)


@pytest.mark.parametrize("name", sorted(CASES))
def test_sampled_configs_compute_the_product(name: str) -> None:
    args, attrs, _ = CASES[name]
    space = config_space(name.split()[0], args, attrs, target="cuda")
    rng = seeded_rng()
    for index in rng.choice(len(space), size=min(3, len(space)), replace=False):
        _check(name, space.get(int(index)))


def test_a_softmax_row_is_one_kernel_whose_threads_share_it() -> None:
    args, attrs, _ = CASES["softmax.cuda"]
    s, tensors = instantiate("softmax.cuda", args, attrs, target="cuda")
    f = lowering.build(s, tensors, target="cuda -sim")
    (kernel,) = f.program.kernels
    assert [int(g.value) for g in kernel.grid] == [3, 1, 1]  # a block per row
    assert kernel.block == (128, 1, 1)  # threads for all 70 of a row, up to 256


def test_the_reduction_templates_have_their_knobs() -> None:
    def knobs(case: str) -> set[str]:
        args, attrs, _ = CASES[case]
        return set(config_space(case.split()[0], args, attrs, target="cuda").knobs)

    assert knobs("softmax.cuda") == {"threads"}
    assert knobs("reduce.cuda") == {"mode", "threads"}
    assert knobs("pool2d.cuda") == {"threads", "unroll_window"}


def test_the_space_has_the_tile_knobs() -> None:
    args, attrs, _ = CASES["dense.cuda"]
    space = config_space("dense.cuda", args, attrs, target="cuda")
    assert {"tile_y", "tile_x", "tile_k"} <= set(space.knobs)


def test_the_target_picks_the_template_of_a_family() -> None:
    assert template_for("dense", "llvm") == "dense.x86"
    assert template_for("dense", "cuda") == "dense.cuda"
    assert template_for("batch_matmul", "cuda -sim") == "batch_matmul.cuda"
    assert template_for("conv2d", "llvm") == "conv2d_NCHWc.x86"
    assert template_for("conv2d", "cuda") == "conv2d_nchw_gemm.cuda"
    assert template_for("conv2d_NCHWc", "cuda") is None


def test_a_float16_gemm_accumulates_in_float32_and_rounds_once() -> None:
    args = [((32, 64), "float16"), ((24, 64), "float16")]
    s, tensors = instantiate("dense.cuda", args, target="cuda")
    assert tensors[-1].dtype == "float16"
    f = lowering.build(s, tensors, target="cuda -sim")
    rng = seeded_rng()
    a, w = (rng.standard_normal(shape).astype("float16") for shape, _ in args)
    out = unwritten((32, 24), "float16")
    f(a, w, out)
    want = (a.astype(np.float32) @ w.astype(np.float32).T).astype(np.float16)
    np.testing.assert_array_equal(out, want)
