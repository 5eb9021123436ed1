"""A DRAM image for the accelerator: arrays of whole elements placed at aligned addresses.

Instructions address DRAM in elements of the buffer they move (`dram_base` 3 of an INP
load is byte 3 * INP_ELEM_BYTES), so each array starts at a multiple of its element
size. `Dram` hands out those addresses, packs micro-ops into their 32-bit words, and
reads results back; `.data` is the byte array the simulator runs on.

    >>> import numpy as np
    >>> from lowering.accel.env import Env
    >>> dram = Dram(Env())
    >>> a = dram.place(MemType.INP, np.ones((2, 1, 16), "int8"))
    >>> w = dram.place(MemType.WGT, np.ones((1, 16, 16), "int8"))
    >>> a, w, dram.data.size
    (0, 1, 512)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lowering.accel.env import Env
from lowering.accel.isa import MemType, Uop, encode_uop
from tessel_errors import KernelArgumentError


def elem_shape(env: Env, mem: MemType) -> tuple[tuple[int, ...], str]:
    """(shape, dtype) of one element of `mem` (a micro-op is one uint32 word)."""
    b, i, o = env.BATCH, env.BLOCK_IN, env.BLOCK_OUT
    return {MemType.UOP: ((), "uint32"), MemType.INP: ((b, i), "int8"),
            MemType.WGT: ((o, i), "int8"), MemType.ACC: ((b, o), "int32"),
            MemType.OUT: ((b, o), "int8")}[mem]


def elements(env: Env, data: np.ndarray, mem: MemType) -> np.ndarray:
    """`data` (a uint8 DRAM array) seen as whole elements of `mem`: a writable view."""
    shape, dtype = elem_shape(env, mem)
    size = env.elem_bytes(mem.name)
    n = data.size // size
    return data[:n * size].view(dtype).reshape((n, *shape))


class Dram:
    """A growing DRAM image: `place` arrays, run the simulator on `.data`, `read` back."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.data = np.zeros(0, np.uint8)

    def alloc(self, mem: MemType, n: int) -> int:
        """Room for `n` elements of `mem` (zeroed); returns their base in elements."""
        size = self.env.elem_bytes(mem.name)
        base = -(-self.data.size // size)
        self.data = np.concatenate([self.data, np.zeros(base * size + n * size
                                                        - self.data.size, np.uint8)])
        return base

    def place(self, mem: MemType, array: np.ndarray) -> int:
        """Copy `array` (elements of `mem`, shape (n, *element)) in; returns its base."""
        shape, dtype = elem_shape(self.env, mem)
        array = np.asarray(array)
        if array.dtype != np.dtype(dtype) or array.shape[1:] != shape:
            raise KernelArgumentError(
                f"a {mem.name} array for DRAM must be {dtype} of shape (n, "
                f"{', '.join(map(str, shape))}), got {array.dtype} {array.shape}")
        base = self.alloc(mem, array.shape[0])
        elements(self.env, self.data, mem)[base:base + array.shape[0]] = array
        return base

    def place_uops(self, uops: Sequence[Uop]) -> int:
        """Encode micro-ops into 32-bit words in DRAM; returns their base (in micro-ops)."""
        words = np.array([encode_uop(u, self.env, n) for n, u in enumerate(uops)], np.uint32)
        return self.place(MemType.UOP, words.reshape(-1))

    def read(self, mem: MemType, base: int, n: int) -> np.ndarray:
        """A copy of `n` elements of `mem` from `base`."""
        return elements(self.env, self.data, mem)[base:base + n].copy()


__all__ = ["Dram", "elem_shape", "elements"]
