"""Config spaces: knob declaration, indexing, JSON round trip, sampling and moves."""

import json

import numpy as np
import pytest

from schedule.space import ConfigSpace, FallbackConfig, SplitEntity
from tessel_errors import ScheduleError


def _space() -> ConfigSpace:
    cfg = ConfigSpace()
    cfg.define_split("tile_i", 64, num_outputs=2)
    cfg.define_split("tile_j", 12, num_outputs=3)
    cfg.define_reorder("order", ["a", "b", "c"], policy="all")
    cfg.define_annotate("ann", ["x", "y"], policy="try_unroll_vec")
    cfg.define_knob("unroll_k", [0, 4, 8])
    return cfg


def test_split_knob_lists_every_factorization_with_implied_outer() -> None:
    cfg = ConfigSpace()
    cfg.define_split("t", 12, num_outputs=2)
    sizes = [e.size for e in cfg.knobs["t"].entities]
    assert sizes == [[-1, 1], [-1, 2], [-1, 3], [-1, 4], [-1, 6], [-1, 12]]


def test_three_way_split_products_equal_extent() -> None:
    cfg = ConfigSpace()
    cfg.define_split("t", 12, num_outputs=3)
    for e in cfg.knobs["t"].entities:
        assert 12 % (e.size[1] * e.size[2]) == 0
    assert len(cfg.knobs["t"].entities) == 18  # ordered factorizations of 12 into 3 parts


def test_power2_policy_allows_non_dividing_factors() -> None:
    cfg = ConfigSpace()
    cfg.define_split("t", 100, num_outputs=2, policy="power2")
    assert [e.size[1] for e in cfg.knobs["t"].entities] == [1, 2, 4, 8, 16, 32, 64]


def test_size_is_product_of_knob_sizes() -> None:
    cfg = _space()
    assert cfg.size == 7 * 18 * 6 * 9 * 3


def test_index_round_trips_through_knob_indices() -> None:
    cfg = _space()
    for index in [0, 1, 17, cfg.size - 1, 12345 % cfg.size]:
        assert cfg.index_of(cfg.knob_indices(index)) == index


def test_json_round_trip_gives_the_same_point() -> None:
    cfg = _space()
    point = cfg.get(4321)
    again = cfg.from_json(point.to_json())
    assert again.index == 4321
    assert json.loads(point.to_json())["knobs"]["unroll_k"] in (0, 4, 8)


def test_from_json_rejects_a_value_that_is_not_a_choice() -> None:
    cfg = _space()
    obj = json.loads(cfg.get(0).to_json())
    obj["knobs"]["tile_i"] = [-1, 5]
    with pytest.raises(ScheduleError,
                       match=r"config value \[-1, 5\] is not a choice of knob 'tile_i'"):
        cfg.from_json(obj)


def test_from_json_rejects_text_that_is_not_json() -> None:
    with pytest.raises(ScheduleError, match="a config must be JSON"):
        _space().from_json('{"knobs": {"tile_i": [8, 8]')


def test_from_json_rejects_unknown_and_missing_knobs() -> None:
    cfg = _space()
    obj = json.loads(cfg.get(0).to_json())
    del obj["knobs"]["order"]
    with pytest.raises(ScheduleError, match="config lacks knob 'order'"):
        cfg.from_json(obj)


def test_out_of_range_index_is_an_error() -> None:
    cfg = _space()
    with pytest.raises(ScheduleError, match="outside the space"):
        cfg.get(cfg.size)


def test_sample_is_distinct_and_avoids_excluded() -> None:
    cfg = _space()
    rng = np.random.default_rng(0)
    picks = cfg.sample(rng, 50, exclude={0, 1, 2})
    assert len(set(picks)) == 50
    assert not {0, 1, 2} & set(picks)


def test_sample_of_small_space_returns_all_remaining_points() -> None:
    cfg = ConfigSpace()
    cfg.define_knob("k", [1, 2, 3, 4])
    assert sorted(cfg.sample(np.random.default_rng(1), 10, exclude={2})) == [0, 1, 3]


def test_neighbor_changes_exactly_one_knob_by_one_step() -> None:
    cfg = _space()
    rng = np.random.default_rng(2)
    for start in [0, 999, cfg.size - 1]:
        a = cfg.knob_indices(start)
        b = cfg.knob_indices(cfg.neighbor(start, rng))
        diffs = [abs(x - y) for x, y in zip(a, b)]
        assert sorted(diffs)[-1] == 1 and sum(diffs) == 1


def test_declaring_a_knob_twice_is_an_error() -> None:
    cfg = ConfigSpace()
    cfg.define_knob("k", [1])
    with pytest.raises(ScheduleError, match="knob 'k' is declared twice"):
        cfg.define_knob("k", [2])


def test_entity_rejects_a_knob_it_does_not_have() -> None:
    cfg = _space()
    point = cfg.get(0)
    with pytest.raises(ScheduleError, match="config has no knob 'nope'"):
        point["nope"]


def test_fallback_uses_the_chosen_default() -> None:
    cfg = FallbackConfig()
    cfg.define_split("t", 64)
    cfg.fallback("t", SplitEntity([-1, 16]))
    assert cfg["t"].size == [-1, 16]
