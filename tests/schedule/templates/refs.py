"""numpy references and random inputs for the x86 template tests."""

from __future__ import annotations

from typing import Any

import numpy as np

import lowering


def rand(rng: np.random.Generator, shape: Any) -> np.ndarray:
    """Fresh standard-normal float32 data (never zeros)."""
    return rng.standard_normal(tuple(int(d) for d in shape)).astype(np.float32)


def run(s: Any, tensors: list[Any], inputs: list[np.ndarray]) -> np.ndarray:
    """Build with target llvm and run on `inputs`; returns the output array."""
    k = lowering.build(s, tensors, target="llvm")
    out = np.full([int(d.value) for d in tensors[-1].shape], np.nan, dtype=np.float32)
    k(*inputs, out)
    return out


def conv2d_nchw(x: np.ndarray, w: np.ndarray, stride: int = 1, pad: int = 0) -> np.ndarray:
    """Direct NCHW convolution (groups=1) by im2col."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    cols = np.stack([xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
                     for i in range(kh) for j in range(kw)], axis=2)  # n, c, kh*kw, oh, ow
    return np.einsum("nckhw,ock->nohw", cols, w.reshape(o, c, kh * kw)).astype(np.float32)


def depthwise_nchw(x: np.ndarray, w: np.ndarray, stride: int = 1, pad: int = 0) -> np.ndarray:
    """Depthwise NCHW convolution, kernel [C, 1, KH, KW]."""
    out = [conv2d_nchw(x[:, c:c + 1], w[c:c + 1], stride, pad) for c in range(x.shape[1])]
    return np.concatenate(out, axis=1)


def blocked(x: np.ndarray, b: int) -> np.ndarray:
    """NCHW -> NCHW[b]c (channel blocks of b innermost), contiguous."""
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // b, b, h, w).transpose(0, 1, 3, 4, 2))


def unblocked(y: np.ndarray) -> np.ndarray:
    """NCHW[b]c -> NCHW."""
    n, cb, h, w, b = y.shape
    return y.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w)


def close(got: np.ndarray, want: np.ndarray) -> None:
    """float32 agreement with a tolerance for the reassociated sums."""
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
