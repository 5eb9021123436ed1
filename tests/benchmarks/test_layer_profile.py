"""benchmarks.layer_profile on a tiny ResNet-18: every conv of ORT's profile is matched to
one of Tessel's, keyed by output, weight and input size; no timing checked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

import relay_ir  # noqa: E402
from benchmarks.layer_profile import gap_table, match, ort_convs, tessel_convs  # noqa: E402
from relay_ir.frontend.onnx import from_onnx  # noqa: E402
from tests.e2e.onnx_models import resnet18  # noqa: E402
from tests.rng import seeded_rng  # noqa: E402


def test_every_conv_of_a_tiny_resnet18_is_matched(tmp_path: Path) -> None:
    model = resnet18(image=32, width=16, classes=10)  # 16 channels: no block padding
    x = seeded_rng().standard_normal((1, 3, 32, 32)).astype(np.float32)
    opts = ort.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = str(tmp_path / "ort")
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    for _ in range(2):
        sess.run(None, {"input": x})
    theirs = ort_convs(sess.end_profiling())
    mod, params = from_onnx(model)
    ours = tessel_convs(relay_ir.build(mod, params=params), {"input": x}, repeat=1)
    n_convs = sum(n.op_type == "Conv" for n in model.graph.node)
    assert len(theirs) == len(ours) == n_convs == 20
    pairs = match(ours, theirs)
    assert all(t is not None and o is not None for t, o in pairs)
    assert all((t.out_elems, t.weight_elems) == (o.out_elems, o.weight_elems)
               for t, o in pairs)
    assert gap_table(pairs, top=3).splitlines()[-1] == "20 convs matched, 0 unmatched"


def test_a_winograd_conv_is_keyed_by_its_logical_weight(tmp_path: Path) -> None:
    # a Winograd conv holds its weight transformed (6 x 6 x O x I for F(4, 3)); it is
    # matched to ORT's node by the 3 x 3 x O x I weight of its task
    from autotune.extract import extract_tasks
    from tuning_logs import MeasureRecord, TuningDatabase

    model = resnet18(image=32, width=16, classes=10)
    x = seeded_rng().standard_normal((1, 3, 32, 32)).astype(np.float32)
    mod, params = from_onnx(model)
    with TuningDatabase(tmp_path / "t.db") as db:
        for task, _ in extract_tasks(mod, "llvm", params):
            if task.template == "conv2d_NCHWc_winograd.x86":
                db.add(MeasureRecord(task.workload_key, task.template, task.target,
                                     task.device_key, task.default_config().to_json(),
                                     costs=(1e-9,), tuner="test"))
    lib = relay_ir.build(mod, params=params, tuning_db=tmp_path / "t.db")
    winograd = [s for s in lib.plan.steps if "winograd" in s.workload_key]
    ours = tessel_convs(lib, {"input": x}, repeat=1)
    assert winograd and len(ours) == 20
    assert {c.weight_elems for c in ours} == {16 * 3 * 7 * 7, 16 * 16 * 9, 32 * 16 * 9,
                                              32 * 32 * 9, 64 * 32 * 9, 64 * 64 * 9,
                                              128 * 64 * 9, 128 * 128 * 9, 32 * 16,
                                              64 * 32, 128 * 64}


def test_a_conv_without_partner_is_reported_unmatched() -> None:
    from benchmarks.layer_profile import LayerTime

    pairs = match([LayerTime("a", 8, 9, 1.0)], [LayerTime("b", 8, 18, 1.0)])
    assert pairs == [(LayerTime("a", 8, 9, 1.0), None), (None, LayerTime("b", 8, 18, 1.0))]


def test_convs_whose_output_and_weight_sizes_agree_are_told_apart_by_their_input() -> None:
    # MobileNetV2 at 224: the 144->24 1x1 conv at 56x56 and the 384-channel depthwise at
    # 14x14 both write 75264 elements with a 3456-element weight
    from benchmarks.layer_profile import LayerTime

    ours = [LayerTime("project", 75264, 3456, 160.0, 144 * 56 * 56),
            LayerTime("depthwise", 75264, 3456, 30.0, 384 * 14 * 14)]
    theirs = [LayerTime("dw", 75264, 3456, 28.0, 384 * 14 * 14),
              LayerTime("pw", 75264, 3456, 110.0, 144 * 56 * 56)]
    assert [(t.name, o.name) for t, o in match(ours, theirs)] == [("project", "pw"),
                                                                   ("depthwise", "dw")]


def _tiny_resnet18() -> tuple[object, dict, list]:
    """A compiled 16-channel ResNet-18 at 32x32, its feeds and its convs (tessel_convs)."""
    x = seeded_rng().standard_normal((1, 3, 32, 32)).astype(np.float32)
    mod, params = from_onnx(resnet18(image=32, width=16, classes=10))
    lib = relay_ir.build(mod, params=params)
    return lib, {"input": x}, tessel_convs(lib, {"input": x}, repeat=1)


def test_warm_convs_times_every_conv_of_the_model_alone() -> None:
    from benchmarks.layer_profile import warm_convs

    lib, feeds, ours = _tiny_resnet18()
    warm = warm_convs(lib, feeds, repeat=2)
    assert [(t.name, t.key) for t in warm] == [(t.name, t.key) for t in ours]
    assert all(t.us > 0 for t in warm)


def test_shape_table_sums_each_distinct_conv_and_ranks_by_the_summed_gap() -> None:
    from benchmarks.layer_profile import LayerTime, shape_table

    # two occurrences of one conv 1.2x ORT, one of another 2x but a smaller gap in all
    pairs = [(LayerTime("a1", 8, 9, 120.0, 4), LayerTime("x1", 8, 9, 100.0, 4)),
             (LayerTime("a2", 8, 9, 120.0, 4), LayerTime("x2", 8, 9, 100.0, 4)),
             (LayerTime("b", 2, 3, 20.0, 1), LayerTime("y", 2, 3, 10.0, 1)),
             (LayerTime("c", 5, 5, 1.0), None)]
    warm = [LayerTime("a1", 8, 9, 90.0, 4), LayerTime("a2", 8, 9, 100.0, 4),
            LayerTime("b", 2, 3, 10.0, 1)]
    rows = shape_table(pairs, warm).splitlines()
    assert rows[0].split() == ["conv", "(out,", "weight,", "in)", "n", "tessel", "us", "ort",
                               "us", "gap", "us", "ratio", "alone", "us", "alone/ort"]
    assert rows[1].split() == ["(8,", "9,", "4)", "2", "240.0", "200.0", "40.0", "1.20",
                               "190.0", "0.95"]
    assert rows[2].split() == ["(2,", "3,", "1)", "1", "20.0", "10.0", "10.0", "2.00", "10.0",
                               "1.00"]
    assert rows[3].split() == ["all", "3", "convs", "260.0", "210.0", "50.0", "1.24", "200.0",
                               "0.95"]
    assert len(shape_table(pairs, top=1).splitlines()) == 3


def test_primed_convs_time_every_conv_in_the_model_order_for_each_prime() -> None:
    from benchmarks.layer_profile import PRIMES, primed_convs

    lib, feeds, ours = _tiny_resnet18()
    for prime in PRIMES:
        got = primed_convs(lib, feeds, prime, repeat=1)
        assert [(t.name, t.key) for t in got] == [(t.name, t.key) for t in ours]
        assert all(t.us > 0 for t in got)
    with pytest.raises(ValueError, match="prime must be one of"):
        primed_convs(lib, feeds, "bias")


def test_primed_convs_time_each_conv_by_the_clock_given() -> None:
    from benchmarks.layer_profile import primed_convs

    lib, feeds, ours = _tiny_resnet18()
    ticks = iter(range(10**6))  # a clock that moves one second a reading
    got = primed_convs(lib, feeds, "none", repeat=1, clock=lambda: float(next(ticks)))
    assert len(got) == len(ours) and all(t.us == 1e6 for t in got)


def test_shape_table_sums_extra_columns_per_shape() -> None:
    from benchmarks.layer_profile import LayerTime, shape_table

    pairs = [(LayerTime("a1", 8, 9, 120.0, 4), LayerTime("x1", 8, 9, 100.0, 4)),
             (LayerTime("a2", 8, 9, 120.0, 4), LayerTime("x2", 8, 9, 100.0, 4))]
    cold = [LayerTime("a1", 8, 9, 130.0, 4), LayerTime("a2", 8, 9, 110.0, 4)]
    rows = shape_table(pairs, columns={"cold us": cold}).splitlines()
    assert rows[0].split()[-2:] == ["cold", "us"]
    assert rows[1].split()[-1] == "240.0" and rows[2].split()[-1] == "240.0"
