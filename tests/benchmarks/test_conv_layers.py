"""benchmarks.conv_layers at a tiny size: each distinct conv of ResNet-18 is built alone,
its output checked against ORT (main stops otherwise) and timed; no timing checked."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from benchmarks.conv_layers import distinct_convs, main  # noqa: E402
from tests.e2e.onnx_models import resnet18  # noqa: E402


def test_resnet18_has_eleven_distinct_convs() -> None:
    # stem 7x7; per stage a 3x3; stages 2-4 add a stride-2 3x3 and a 1x1 shortcut
    assert len(distinct_convs(resnet18(image=32, width=8))) == 11


def test_tiny_run_checks_and_times_every_conv() -> None:
    rows = main(["--image", "32", "--width", "8", "--repeat", "1", "--warmup", "1",
                 "--rounds", "1", "--pause", "0"])
    assert len(rows) == 11
    assert all(set(r["gflops"]) == {"onnxruntime", "tessel"} for r in rows)


def test_tiny_run_for_an_avx2_target_checks_every_conv() -> None:
    # AVX2 code (narrower blocks) on whatever x86 host runs the tests
    rows = main(["--image", "32", "--width", "8", "--repeat", "1", "--warmup", "1",
                 "--rounds", "1", "--pause", "0", "--target", "llvm -mcpu=haswell"])
    assert len(rows) == 11


def test_layers_picks_convs_by_index() -> None:
    rows = main(["--image", "32", "--width", "8", "--repeat", "1", "--warmup", "1",
                 "--rounds", "2", "--pause", "0", "--layers", "1,4"])
    assert [r["weight"][2:] for r in rows] == [(3, 3), (1, 1)]


def test_mobilenet_v2_convs_are_the_stem_depthwise_and_1x1_kinds() -> None:
    from benchmarks.conv_layers import conv_kind
    from tests.e2e.onnx_models import mobilenet_v2

    convs = distinct_convs(mobilenet_v2(image=32, width=8))
    kinds = [conv_kind(c) for c in convs]
    assert kinds[0] == "stem" and set(kinds) == {"stem", "depthwise", "1x1"}
    assert {c["strides"][0] for c in convs if conv_kind(c) == "depthwise"} == {1, 2}


def test_tiny_mobilenet_v2_run_checks_its_depthwise_convs() -> None:
    rows = main(["--model", "mobilenet_v2", "--only", "depthwise", "--image", "32",
                 "--width", "8", "--repeat", "1", "--warmup", "1"])
    assert rows and all(set(r["gflops"]) == {"onnxruntime", "tessel"} for r in rows)
