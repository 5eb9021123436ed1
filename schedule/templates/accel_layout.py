"""VTA's packed layouts in numpy: what the accelerator's templates take, and their inverse.

Data NCHW -> NCHW{BATCH}n{BLOCK_IN}c, [N/BATCH, C/BLOCK_IN, H, W, BATCH, BLOCK_IN]; a
kernel OIHW -> OIHW{BLOCK_OUT}o{BLOCK_IN}i, [O/BLOCK_OUT, I/BLOCK_IN, KH, KW, BLOCK_OUT,
BLOCK_IN]; outputs come back in the data layout with BLOCK_OUT channels a block. Batch and
channel counts that are not multiples of the block are padded with zeros by the packers
and cropped by `unpack_data`. A dense layer is the 1x1 case: data [M, K] is packed as a
[M, K, 1, 1] image, the weight [N, K] as a [N, K, 1, 1] kernel.

    >>> import numpy as np
    >>> from schedule.templates.accel_env import Env
    >>> x = np.arange(2 * 20 * 3 * 3, dtype="int8").reshape(2, 20, 3, 3)
    >>> p = pack_data(Env(), x)
    >>> p.shape, bool((unpack_data(Env(), p, 2, 20) == x).all())
    ((2, 2, 3, 3, 1, 16), True)
"""

from __future__ import annotations

import numpy as np

from schedule.templates.accel_env import Env


def _pad_to(x: np.ndarray, axis: int, multiple: int) -> np.ndarray:
    extra = -x.shape[axis] % multiple
    if not extra:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return np.pad(x, widths)


def as_image(x: np.ndarray) -> np.ndarray:
    """A dense operand [rows, K] as the [rows, K, 1, 1] image the packers take."""
    return x.reshape(*x.shape, 1, 1) if x.ndim == 2 else x


def pack_data(env: Env, x: np.ndarray) -> np.ndarray:
    """NCHW (or [M, K]) -> [N/BATCH, C/BLOCK_IN, H, W, BATCH, BLOCK_IN], zero-padded."""
    x = _pad_to(_pad_to(as_image(x), 0, env.BATCH), 1, env.BLOCK_IN)
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n // env.BATCH, env.BATCH, c // env.BLOCK_IN,
                                          env.BLOCK_IN, h, w).transpose(0, 2, 4, 5, 1, 3))


def pack_kernel(env: Env, k: np.ndarray) -> np.ndarray:
    """OIHW (or [N, K]) -> [O/BLOCK_OUT, I/BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN]."""
    k = _pad_to(_pad_to(as_image(k), 0, env.BLOCK_OUT), 1, env.BLOCK_IN)
    o, i, kh, kw = k.shape
    return np.ascontiguousarray(k.reshape(o // env.BLOCK_OUT, env.BLOCK_OUT,
                                          i // env.BLOCK_IN, env.BLOCK_IN, kh, kw)
                                .transpose(0, 2, 4, 5, 1, 3))


def pack_channels(env: Env, v: np.ndarray, batch_blocks: int = 1) -> np.ndarray:
    """A per-channel vector [C] as accumulator elements [batch_blocks?, C/BLOCK_OUT, 1, 1,
    BATCH, BLOCK_OUT] (each element repeats the channels over its BATCH rows: the ALU adds
    whole elements), for a bias that broadcasts over the image.

        >>> pack_channels(Env("accel -batch=2"), np.arange(3, dtype="int32")).shape
        (1, 1, 1, 1, 2, 16)
    """
    v = _pad_to(np.asarray(v).reshape(-1), 0, env.BLOCK_OUT)
    blocks = v.reshape(1, -1, 1, 1, 1, env.BLOCK_OUT)
    return np.ascontiguousarray(np.broadcast_to(
        blocks, (batch_blocks, blocks.shape[1], 1, 1, env.BATCH, env.BLOCK_OUT)))


def unpack_data(env: Env, y: np.ndarray, batch: int, channels: int) -> np.ndarray:
    """[N/BATCH, C/BLOCK, H, W, BATCH, BLOCK] -> NCHW, cropped to batch x channels."""
    nb, cb, h, w, b, c = y.shape
    return y.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, cb * c, h, w)[:batch, :channels]


__all__ = ["as_image", "pack_channels", "pack_data", "pack_kernel", "unpack_data"]
