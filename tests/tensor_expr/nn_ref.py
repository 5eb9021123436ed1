"""Plain numpy references for the nn op tests, written from the definitions (windows and
loops), independently of the TE formulations."""

from __future__ import annotations

import numpy as np


def conv2d_nchw(x: np.ndarray, w: np.ndarray, stride: tuple[int, int],
                pad: tuple[int, int, int, int], dil: tuple[int, int], groups: int
                ) -> np.ndarray:
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    t, left, b, r = pad
    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (t, b), (left, r)))
    oh = (h + t + b - (kh - 1) * dil[0] - 1) // stride[0] + 1
    ow = (wd + left + r - (kw - 1) * dil[1] - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        for ky in range(kh):
            for kx in range(kw):
                y0, x0 = ky * dil[0], kx * dil[1]
                patch = xp[:, g * cg:(g + 1) * cg,
                           y0:y0 + (oh - 1) * stride[0] + 1:stride[0],
                           x0:x0 + (ow - 1) * stride[1] + 1:stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum(
                    "nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, ky, kx])
    return out


def pool_out(n: int, k: int, s: int, p0: int, p1: int, ceil: bool) -> int:
    if not ceil:
        return (n + p0 + p1 - k) // s + 1
    o = -(-(n + p0 + p1 - k) // s) + 1
    return o - 1 if (o - 1) * s >= n + p0 else o


def pool2d_nchw(x: np.ndarray, k: tuple[int, int], s: tuple[int, int],
                pad: tuple[int, int, int, int], ceil: bool, kind: str,
                count_include_pad: bool = True) -> np.ndarray:
    n, c, h, w = x.shape
    t, left, b, r = pad
    oh, ow = pool_out(h, k[0], s[0], t, b, ceil), pool_out(w, k[1], s[1], left, r, ceil)
    out = np.zeros((n, c, oh, ow), x.dtype)
    for oy in range(oh):
        for ox in range(ow):
            hs, ws = oy * s[0] - t, ox * s[1] - left
            he, we = min(hs + k[0], h + b), min(ws + k[1], w + r)
            size = (he - hs) * (we - ws)
            hs0, ws0, he0, we0 = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
            win = x[:, :, hs0:he0, ws0:we0].astype("float64")
            if kind == "max":
                out[:, :, oy, ox] = win.max(axis=(2, 3))
            else:
                div = size if count_include_pad else (he0 - hs0) * (we0 - ws0)
                out[:, :, oy, ox] = win.sum(axis=(2, 3)) / div
    return out


def softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def layer_norm(x: np.ndarray, g: np.ndarray | None, b: np.ndarray | None,
               axes: tuple[int, ...], eps: float) -> np.ndarray:
    xd = x.astype("float64")
    mean = xd.mean(axis=axes, keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=axes, keepdims=True)
    out = (xd - mean) / np.sqrt(var + eps)
    if g is not None:
        out = out * g
    if b is not None:
        out = out + b
    return out
