"""annotate picks the conv2d / dense calls that run in int8; skip_conv_layers keeps the
listed conv2d (counted from 0 in graph order) in float, in the annotation and in the
realized graph."""

from __future__ import annotations

import pytest

from relay_ir.quantize import annotate, qconfig, quantize
from relay_ir.quantize.prepare import prepare
from tests.relay_ir.quantize.helpers import op_calls
from tests.relay_ir.quantize.models import small_cnn
from tests.rng import seeded_rng


def _weight_shapes(calls: list) -> list[tuple[int, ...]]:
    return [tuple(c.args[1].data.shape) for c in calls]


CONV = [(8, 3, 3, 3), (8, 8, 3, 3), (8, 8, 3, 3)]
DENSE = (10, 128)


@pytest.mark.parametrize("skip", [[], [0], [1, 2], [0, 1, 2]], ids=str)
def test_annotation_holds_every_dense_and_the_conv2d_not_skipped(skip: list[int]) -> None:
    mod, params = small_cnn(seeded_rng())
    fn = prepare(mod, params)["main"]
    a = annotate(fn, qconfig(skip_conv_layers=skip))
    want = [s for k, s in enumerate(CONV) if k not in skip] + [DENSE]
    assert _weight_shapes(list(a.anchors)) == want
    assert a.skipped == tuple(skip)


def test_skipped_conv2d_stays_float_in_the_realized_graph() -> None:
    mod, params = small_cnn(seeded_rng())
    qmod = quantize(mod, params, calibrate=4.0, skip_conv_layers=[1])
    convs = op_calls(qmod, "nn.conv2d")
    assert [c.checked_type.dtype for c in convs] == ["int32", "float32", "int32"]
    assert [c.args[1].data.dtype.name for c in convs] == ["int8", "float32", "int8"]
    assert _weight_shapes(convs) == CONV


def test_dense_with_a_weight_input_is_not_quantized() -> None:
    # a weight that stays an input of @main is not known at quantize time
    mod, params = small_cnn(seeded_rng())
    fc = params.pop("fc")
    qmod = quantize(mod, params, calibrate=4.0, skip_conv_layers=[])
    (dense,) = op_calls(qmod, "nn.dense")
    assert dense.checked_type.dtype == "float32"
    assert [p.name_hint for p in qmod["main"].params] == ["x", "fc"]
    assert fc.shape == DENSE
