"""Fixtures of the ONNX frontend tests."""

from __future__ import annotations

import numpy as np
import pytest

from tests.rng import seeded_rng


@pytest.fixture
def rng() -> np.random.Generator:
    return seeded_rng()
