"""MeasureRecord: validation names the bad field; JSON lines round-trip exactly."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from tessel_errors import TuningLogError
from tuning_logs import ERROR_KINDS, ErrorKind, MeasureRecord, canonical_json


def test_mean_is_the_average_of_costs(make_record, rng):
    costs = tuple(float(c) for c in rng.uniform(1e-4, 1e-2, size=5))
    r = make_record(costs=costs)
    assert r.mean == pytest.approx(sum(costs) / len(costs), rel=1e-15)
    assert r.costs == costs


def test_gflops_from_flops_and_mean(make_record):
    r = make_record(costs=(0.01, 0.03), flops=4e9)
    assert r.gflops == pytest.approx(200.0)


def test_config_is_canonical_whatever_the_key_order(make_record):
    a = make_record(config={"b": [1, 2], "a": {"y": 1, "x": 2}})
    b = make_record(config='{"a": {"x": 2, "y": 1}, "b": [1, 2]}')
    assert a.config_json == b.config_json == '{"a":{"x":2,"y":1},"b":[1,2]}'
    assert a.config == {"a": {"x": 2, "y": 1}, "b": [1, 2]}


def test_tuples_in_config_become_lists():
    assert canonical_json({"tile": (4, 8)}) == '{"tile":[4,8]}'


def test_json_line_round_trip_is_equal(make_record):
    r = make_record(error_msg="", tuner="ga")
    line = r.to_json()
    assert "\n" not in line
    back = MeasureRecord.from_json(line)
    assert back == r
    assert back.digest() == r.digest()
    assert back.mean == r.mean and back.costs == r.costs and back.timestamp == r.timestamp


def test_error_records_need_no_costs(make_record):
    for kind in ERROR_KINDS[1:]:
        r = make_record(costs=(), error_kind=kind, error_msg="boom")
        assert r.error_kind is ErrorKind(kind)
        assert r.mean is None and r.gflops is None and not r.ok


def test_records_are_frozen(make_record):
    r = make_record()
    with pytest.raises(AttributeError):
        r.mean = 1.0  # type: ignore[misc]


def test_record_id_does_not_take_part_in_equality(make_record):
    r = make_record()
    same = MeasureRecord.from_dict({**r.to_dict()})
    assert same == r
    assert dataclasses.replace(r, record_id=7) == r


@pytest.mark.parametrize(("field", "value", "message"), [
    ("workload_key", "", "field 'workload_key' must be a non-empty string"),
    ("template", None, "field 'template' must be a non-empty string"),
    ("device_key", 3, "field 'device_key' must be a non-empty string"),
    ("costs", (), "field 'costs' must be a non-empty list of seconds when error_kind"),
    ("costs", (1e-3, -1.0), "field 'costs' must be a positive number"),
    ("costs", (1e-3, math.nan), "field 'costs' must be a finite number"),
    ("costs", ("fast",), "field 'costs' must be a finite number"),
    ("costs", "0.1", "field 'costs' must be a list of seconds"),
    ("error_kind", "segfault", "field 'error_kind' must be one of none, build_error"),
    ("config_json", "{not json", "field 'config' is not valid JSON"),
    ("config_json", [1, 2], "field 'config' must be a JSON object"),
    ("config_json", {"f": object()}, "field 'config' holds a value JSON cannot store"),
    ("config_json", {"x": math.inf}, "field 'config' holds a value JSON cannot store"),
    ("attrs_json", "[]", "field 'attrs' must be a JSON object"),
    ("timestamp", math.inf, "field 'timestamp' must be a finite number"),
    ("flops", 0, "field 'flops' must be a positive number"),
    ("tuner", 5, "field 'tuner' must be a string"),
])
def test_bad_field_is_named(make_record, field, value, message):
    with pytest.raises(TuningLogError, match=message.replace("(", r"\(")):
        make_record(**{field: value})


def test_error_record_costs_may_not_be_negative(make_record):
    with pytest.raises(TuningLogError, match="field 'costs' must be a list of non-negative"):
        make_record(costs=(-1.0,), error_kind="timeout")


def test_from_json_rejects_unknown_fields(make_record):
    data = make_record().to_dict() | {"speed": 3}
    with pytest.raises(TuningLogError, match="unknown field\\(s\\) speed"):
        MeasureRecord.from_json(json.dumps(data))


def test_from_json_rejects_missing_fields(make_record):
    data = make_record().to_dict()
    del data["costs"], data["target"]
    with pytest.raises(TuningLogError, match="missing field\\(s\\) costs, target"):
        MeasureRecord.from_json(json.dumps(data))


def test_from_json_rejects_broken_json():
    with pytest.raises(TuningLogError, match="not valid JSON"):
        MeasureRecord.from_json('{"workload_key": ')


def test_from_json_rejects_a_non_object():
    with pytest.raises(TuningLogError, match="expected a JSON object, got list"):
        MeasureRecord.from_json("[1, 2]")
