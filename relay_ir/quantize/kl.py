"""The KL-divergence threshold of a tensor's values (MXNet's calibration algorithm, which
TVM's calibrate_mode="kl_divergence" uses): clipping at a smaller threshold spends the
int8 levels on the bulk of the distribution instead of on rare outliers.

For each candidate threshold (a symmetric slice of a fine histogram, outliers folded into
its end bins), the slice `p` is merged into `num_quantized_bins` levels and spread back
over its non-empty bins (`q`); the threshold whose q is nearest p in KL divergence wins.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.standard_normal(20000), [40.0, -40.0]])
    >>> bool(kl_threshold(x) < 10.0)   # the two outliers are clipped
    True
"""

from __future__ import annotations

import numpy as np

from tessel_errors import RelayError

NUM_BINS = 8001
NUM_QUANTIZED_BINS = 255


def _smooth(p: np.ndarray, eps: float = 0.0001) -> np.ndarray | None:
    """Move eps of mass into every empty bin (so that log q is defined); None if all empty."""
    zeros = p == 0
    n_zero, n_nonzero = int(zeros.sum()), int(p.size - zeros.sum())
    if n_nonzero == 0:
        return None
    eps1 = eps * n_zero / n_nonzero
    return p + np.where(zeros, eps, -eps1)


def _entropy(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) of the two normalised distributions, over the bins where p > 0."""
    p, q = p / p.sum(), q / q.sum()
    m = p > 0
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def kl_threshold_of_histogram(hist: np.ndarray, edges: np.ndarray,
                              num_quantized_bins: int = NUM_QUANTIZED_BINS) -> float:
    """The threshold (a bin edge) minimising the KL divergence, for a histogram symmetric
    about 0 with an odd number of bins: `kl_threshold_of_histogram(*np.histogram(...))`."""
    hist = np.asarray(hist, np.float64)
    edges = np.asarray(edges, np.float64)
    num_bins = hist.size
    if num_bins % 2 == 0 or edges.size != num_bins + 1 or num_quantized_bins % 2 == 0:
        raise RelayError(f"kl calibration needs an odd number of histogram bins and of "
                         f"quantized bins, got {num_bins} and {num_quantized_bins}")
    if num_bins < num_quantized_bins:
        raise RelayError(f"kl calibration: {num_bins} histogram bins are fewer than the "
                         f"{num_quantized_bins} quantized bins")
    zero = num_bins // 2
    half = num_quantized_bins // 2
    best, best_threshold = np.inf, float(edges[-1])
    for i in range(half, zero + 1):
        start, stop = zero - i, zero + i + 1
        sliced = hist[start:stop]
        p = sliced.copy()
        p[0] += hist[:start].sum()
        p[-1] += hist[stop:].sum()
        nonzero = p != 0
        merged = sliced.size // num_quantized_bins
        starts = np.arange(num_quantized_bins) * merged  # the last level takes the rest
        sums = np.add.reduceat(sliced, starts)
        counts = np.add.reduceat(nonzero.astype(np.int64), starts)
        level = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
        lengths = np.diff(np.append(starts, sliced.size))
        q = np.repeat(level, lengths)
        q[~nonzero] = 0.0
        ps, qs = _smooth(p), _smooth(q)
        divergence = np.inf if ps is None or qs is None else _entropy(ps, qs)
        if divergence < best:
            best, best_threshold = divergence, float(edges[stop])
    return best_threshold


def kl_threshold(values: np.ndarray, num_bins: int = NUM_BINS,
                 num_quantized_bins: int = NUM_QUANTIZED_BINS) -> float:
    """The KL threshold of `values` (a histogram of num_bins over [-max|v|, max|v|]);
    0.0 when every value is 0: `kl_threshold(activations)`."""
    values = np.asarray(values, np.float64).ravel()
    top = float(np.max(np.abs(values))) if values.size else 0.0
    if top == 0.0:
        return 0.0
    hist, edges = np.histogram(values, bins=num_bins, range=(-top, top))
    return kl_threshold_of_histogram(hist, edges, num_quantized_bins)
