"""The int8 layers in numpy, independent of the accelerator: what its kernels must equal.

int32 accumulation (wrapping), a per-channel bias, an arithmetic shift right, ReLU, a clip
to int8, then the low 8 bits (what a STORE keeps).

    >>> import numpy as np
    >>> reference_conv2d(np.ones((1, 1, 3, 3), "int8"), np.ones((1, 1, 3, 3), "int8"),
    ...                  padding=1)[0, 0, 0]
    array([4, 6, 4], dtype=int8)
"""

from __future__ import annotations

import numpy as np


def _tail(acc: np.ndarray, bias: np.ndarray | None, shift: int, relu: bool, clip: bool
          ) -> np.ndarray:
    if bias is not None:
        shape = [1] * acc.ndim
        shape[1] = -1
        acc = acc + np.asarray(bias, np.int32).reshape(shape)
    acc = acc >> shift
    if relu:
        acc = np.maximum(acc, 0)
    if clip:
        acc = np.clip(acc, -128, 127)
    return acc.astype(np.int8)


def reference_conv2d(x: np.ndarray, k: np.ndarray, stride: int = 1, padding: int = 0,
                     bias: np.ndarray | None = None, shift: int = 0, relu: bool = False,
                     clip: bool = False) -> np.ndarray:
    """int8 NCHW `x` conv OIHW `k`, square stride and zero padding, then the tail."""
    n, c, h, w = x.shape
    o, _, kh, kw = k.shape
    s, pad = stride, padding
    xp = np.pad(x.astype(np.int32), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // s + 1, (w + 2 * pad - kw) // s + 1
    acc = np.zeros((n, o, oh, ow), np.int32)
    for y in range(kh):
        for z in range(kw):
            win = xp[:, :, y:y + (oh - 1) * s + 1:s, z:z + (ow - 1) * s + 1:s]
            acc += np.einsum("nchw,oc->nohw", win, k[:, :, y, z].astype(np.int32))
    return _tail(acc, bias, shift, relu, clip)


def reference_dense(a: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None,
                    shift: int = 0, relu: bool = False, clip: bool = False) -> np.ndarray:
    """int8 `a` [M, K] . `w` [N, K]^T, then the tail.

        >>> reference_dense(np.ones((1, 20), "int8"), np.ones((2, 20), "int8"), shift=1)
        array([[10, 10]], dtype=int8)
    """
    return _tail(a.astype(np.int32) @ w.T.astype(np.int32), bias, shift, relu, clip)


__all__ = ["reference_conv2d", "reference_dense"]
