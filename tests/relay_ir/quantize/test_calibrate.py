"""Calibration: minmax scales are the hand-computed ones (power of two at or above the
largest magnitude over the dataset, over 128; or that magnitude over 127 with float
requantization), a global scale needs no data, and KL clips a heavy tail."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir as R
from relay_ir import nn
from relay_ir.quantize import annotate, qconfig
from relay_ir.quantize.calibrate import input_scales
from relay_ir.quantize.kl import kl_threshold
from relay_ir.quantize.prepare import prepare
from tests.rng import seeded_rng


def _two_dense(rng: np.random.Generator) -> tuple[R.Function, np.ndarray, np.ndarray]:
    x = R.Var("x", R.TensorType((2, 6), "float32"))
    w1 = rng.standard_normal((5, 6)).astype("float32")
    w2 = rng.standard_normal((3, 5)).astype("float32")
    body = nn.dense(nn.relu(nn.dense(x, R.Constant(w1))), R.Constant(w2))
    return prepare(R.IRModule.from_expr(R.Function((x,), body)), None)["main"], w1, w2


def _scales(fn: R.Function, data: list, **options: object) -> list[float]:
    cfg = qconfig(skip_conv_layers=[], **options)
    a = annotate(fn, cfg)
    by_id = input_scales(fn, a, cfg, data)
    return [by_id[id(c)] for c in a.anchors]


def _data(rng: np.random.Generator) -> list[dict[str, np.ndarray]]:
    return [{"x": rng.uniform(-1, 1, (2, 6)).astype("float32")} for _ in range(3)]


def _hand_maxima(data: list, w1: np.ndarray) -> tuple[float, float]:
    top_x = max(float(np.abs(s["x"]).max()) for s in data)
    top_h = max(float(np.maximum(s["x"] @ w1.T, 0).max()) for s in data)
    return top_x, top_h


def test_minmax_scales_are_powers_of_two_at_or_above_the_maxima() -> None:
    rng = seeded_rng()
    fn, w1, _ = _two_dense(rng)
    data = _data(rng)
    data[1]["x"][1, 2] = -3.0  # the largest magnitude of x over the dataset, in sample 1
    top_x, top_h = _hand_maxima(data, w1)
    want_h = 2.0 ** np.ceil(np.log2(top_h)) / 128
    assert _scales(fn, data, calibrate="minmax") == [4.0 / 128, want_h]


def test_minmax_scales_with_float_requantization_are_maxima_over_127() -> None:
    rng = seeded_rng()
    fn, w1, _ = _two_dense(rng)
    data = _data(rng)
    top_x, top_h = _hand_maxima(data, w1)
    got = _scales(fn, data, calibrate="minmax", requantize="float")
    np.testing.assert_allclose(got, [top_x / 127, top_h / 127], rtol=1e-6)


def test_global_scale_gives_every_input_the_same_scale_without_data() -> None:
    fn, _, _ = _two_dense(seeded_rng())
    assert _scales(fn, None, calibrate=8.0) == [1 / 16, 1 / 16]
    assert _scales(fn, None, calibrate=6.0) == [1 / 16, 1 / 16]  # rounded up to 8
    assert _scales(fn, None, calibrate=8.0, requantize="float") == [8 / 127, 8 / 127]


def test_kl_threshold_clips_a_heavy_tailed_distribution_below_its_max() -> None:
    x = seeded_rng().standard_t(df=2, size=50_000)
    threshold = kl_threshold(x)
    assert 0 < threshold < 0.25 * np.abs(x).max()


def test_kl_threshold_keeps_nearly_all_of_a_uniform_distribution() -> None:
    x = seeded_rng().uniform(-3, 3, 50_000)
    assert kl_threshold(x) > 0.9 * np.abs(x).max()


@pytest.mark.parametrize("requantize", ["float", "shift"])
def test_kl_calibration_gives_a_heavy_tailed_input_a_finer_scale_than_minmax(
        requantize: str) -> None:
    rng = seeded_rng()
    fn, _, _ = _two_dense(rng)
    data = [{"x": rng.standard_normal((2, 6)).astype("float32")} for _ in range(400)]
    data[7]["x"][0, 3], data[300]["x"][1, 1] = 40.0, -40.0  # a tail of two outliers
    kl_x = _scales(fn, data, calibrate="kl", requantize=requantize)[0]
    minmax_x = _scales(fn, data, calibrate="minmax", requantize=requantize)[0]
    assert kl_x < 0.5 * minmax_x


def _mxnet_kl_threshold(hist: np.ndarray, edges: np.ndarray, nq: int) -> float:
    """MXNet's _get_optimal_threshold (which TVM's _find_scale_by_kl ports), written as
    its loops: the independent reference for the vectorised search."""
    def smooth(p: np.ndarray, eps: float = 0.0001) -> np.ndarray:
        zeros = (p == 0).astype(np.float64)
        n_zeros = zeros.sum()
        eps1 = eps * n_zeros / (p.size - n_zeros)
        return p + eps * zeros - eps1 * (1 - zeros)

    zero, half = hist.size // 2, nq // 2
    best, best_t = np.inf, 0.0
    for i in range(half, zero + 1):
        start, stop = zero - i, zero + i + 1
        sliced = hist[start:stop].astype(np.float64)
        p = sliced.copy()
        p[0] += hist[:start].sum()
        p[-1] += hist[stop:].sum()
        nonzero = p != 0
        merged = sliced.size // nq
        q = np.zeros(sliced.size)
        for j in range(nq):
            lo = j * merged
            hi = sliced.size if j == nq - 1 else lo + merged
            total = sliced[lo:hi].sum()
            norm = nonzero[lo:hi].sum()
            if norm:
                q[lo:hi] = total / norm
        q[~nonzero] = 0
        if not q.any():
            continue
        ps, qs = smooth(p), smooth(q)
        ps, qs = ps / ps.sum(), qs / qs.sum()
        d = float(np.sum(ps * np.log(ps / qs)))
        if d < best:
            best, best_t = d, float(edges[stop])
    return best_t


def test_kl_search_equals_the_loop_reference_on_random_histograms() -> None:
    from relay_ir.quantize.kl import kl_threshold_of_histogram

    rng = seeded_rng()
    for _ in range(5):
        x = rng.laplace(size=3000) * rng.uniform(0.5, 2)
        top = float(np.abs(x).max())
        hist, edges = np.histogram(x, bins=201, range=(-top, top))
        assert kl_threshold_of_histogram(hist, edges, 15) == _mxnet_kl_threshold(hist, edges,
                                                                                 15)
