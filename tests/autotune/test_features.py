"""knob_tables: the per-knob feature rows of a config space, cached while the space lives."""

from __future__ import annotations

import gc
import weakref

import numpy as np

from autotune import features
from autotune.features import knob_features, knob_features_batch, knob_tables
from schedule.space import ConfigSpace


def _space() -> ConfigSpace:
    cfg = ConfigSpace()
    cfg.define_split("tile", 16, num_outputs=2)
    cfg.define_knob("unroll", [0, 4, 8])
    return cfg


def test_batch_rows_equal_per_point_features():
    cfg = _space()
    got = knob_features_batch(cfg, range(cfg.size))
    want = np.stack([knob_features(cfg, i) for i in range(cfg.size)])
    np.testing.assert_array_equal(got, want)


def test_the_cache_does_not_keep_a_space_alive():
    cfg = _space()
    knob_tables(cfg)
    assert cfg in features._TABLES
    alive = weakref.ref(cfg)
    del cfg
    gc.collect()
    assert alive() is None


def test_a_knob_declared_after_a_lookup_gets_its_table():
    cfg = _space()
    assert len(knob_tables(cfg)) == 2
    cfg.define_knob("vec", [False, True])
    tables = knob_tables(cfg)
    assert len(tables) == 3
    np.testing.assert_array_equal(tables[2], [[0.0], [1.0]])
