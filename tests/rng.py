"""Seeded random generators for tests: inputs differ between tests and between calls in
one test, and are the same on every run of that test, so a failure reproduces."""

from __future__ import annotations

import itertools
import os
import zlib

import numpy as np

_calls: dict[str, itertools.count] = {}


def seeded_rng() -> np.random.Generator:
    """A generator seeded by the running test's id and how many it asked for before.

        >>> a, b = seeded_rng(), seeded_rng()
        >>> bool(a.random() != b.random())
        True
    """
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    n = next(_calls.setdefault(test, itertools.count()))
    return np.random.default_rng([zlib.crc32(test.encode()), n])


def int8_values(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform int8 values with a quarter of them pinned to the extremes -128, -127, 126
    and 127, where a kernel that saturates or shifts wrongly shows.

        >>> v = int8_values(np.random.default_rng(0), (64,))
        >>> v.dtype == np.int8 and bool((v == -128).any() or (v == 127).any())
        True
    """
    v = rng.integers(-128, 128, shape)
    edge = rng.random(shape) < 0.25
    v[edge] = rng.choice([-128, 127, -127, 126], size=int(edge.sum()))
    return v.astype("int8")
