"""Shared helpers for the tuning_logs tests: a temporary database and random records."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.rng import seeded_rng
from tuning_logs import MeasureRecord, TuningDatabase

RecordFactory = Callable[..., MeasureRecord]


@pytest.fixture
def rng() -> np.random.Generator:
    return seeded_rng()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "logs" / "tuning.db"


@pytest.fixture
def db(db_path: Path):
    with TuningDatabase(db_path) as database:
        yield database


@pytest.fixture
def make_record(rng: np.random.Generator) -> RecordFactory:
    """Build a plausible record with random costs; keyword arguments override fields."""
    clock = iter(range(1, 10**9))

    def make(config: dict[str, Any] | None = None, **overrides: Any) -> MeasureRecord:
        fields: dict[str, Any] = {
            "workload_key": "matmul|1024x1024x1024|float32",
            "template": "matmul_x86",
            "target": "llvm -mcpu=sapphirerapids",
            "device_key": "llvm/sapphirerapids/avx512f",
            "config_json": config if config is not None
            else {"tile_i": [int(rng.integers(1, 64)), 16], "unroll": bool(rng.integers(2))},
            "costs": tuple(float(c) for c in rng.uniform(1e-4, 1e-2, size=3)),
            "timestamp": 1.7e9 + next(clock),
            "tuner": "xgb",
            "flops": 2.0 * 1024**3,
            "attrs_json": {"shapes": [[1024, 1024], [1024, 1024]], "dtype": "float32"},
        }
        fields.update(overrides)
        return MeasureRecord(**fields)

    return make
