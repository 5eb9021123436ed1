"""Output buffers for oracle tests, filled so that a missed write shows.

A buffer of zeros hides a kernel that forgets to write a 0 (and np.empty
may hold anything, zeros included), so outputs start as NaN, or for integer
dtypes as the dtype's minimum (maximum if unsigned), which the tests' references do not produce.
"""

from __future__ import annotations

import numpy as np


def unwritten(shape: int | tuple[int, ...], dtype: str | np.dtype = "float32") -> np.ndarray:
    """A fresh output buffer of `shape` that no correct kernel leaves as is."""
    dt = np.dtype(dtype)
    fill = np.nan if dt.kind in "fc" else np.iinfo(dt).max if dt.kind == "u" else np.iinfo(dt).min
    return np.full(shape, fill, dt)
