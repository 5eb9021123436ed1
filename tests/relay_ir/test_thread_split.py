"""On more than one thread a build applies a conv record only where it splits the output
among threads as the default does (lower_group.default_partition): the kernel before it
left its input in the caches of the cores of the default's split."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from autotune import Task
from autotune.measure import timed_as
from relay_ir.backend.lower_group import (
    AnchorTask,
    applied_config,
    default_partition,
    splits_otherwise,
    timed_data_block,
)
from relay_ir.backend.tuned import TuningScope
from schedule.space import FallbackConfig
from schedule.templates import partition_of
from tessel_target import legacy_device_key
from tuning_logs import MeasureRecord, TuningDatabase

AVX512 = "llvm -mcpu=skylake-avx512"
CONV = "conv2d_NCHWc.x86"
# ResNet-50's 128@28 3x3 conv as a model hands it over (constant weights: packed once)
SPECS = [((1, 128, 28, 28), "float32"), ((128, 128, 3, 3), "float32")]
ATTRS = {"padding": [1, 1, 1, 1], "kernel_layout": "OIHWio"}


def _configs(task: Task) -> tuple[object, object, str]:
    """A config that splits as the default (as the model runs it) does, one that splits
    otherwise, and the default's split."""
    timed = timed_as(task, True)
    fb = FallbackConfig(task.target)
    timed.instantiate(fb)
    split = partition_of(CONV, fb)
    same = other = None
    for i in range(task.space.size):
        cfg = task.config(i)
        if partition_of(CONV, cfg) == split:
            same = same or cfg
        else:
            other = other or cfg
        if same is not None and other is not None:
            return same, other, split
    raise AssertionError("the space has one split only")


def _scope_with(tmp_path: Path, task: Task, *cfgs: object) -> TuningScope:
    """A database holding a record of `task` per config, the first fastest, filed without
    a thread count (as before the count was part of the device key), which builds apply
    at any count."""
    db = TuningDatabase(tmp_path / "t.db")
    for k, cfg in enumerate(cfgs):
        db.add(MeasureRecord(task.workload_key, task.template, task.target,
                             legacy_device_key(task.device_key), cfg.to_json(),
                             costs=(1e-4 * (k + 1),), tuner="test"))
    return TuningScope(db)


@pytest.fixture
def conv() -> tuple[Task, AnchorTask, int]:
    task = Task(CONV, SPECS, ATTRS, AVX512)
    anchor = AnchorTask(None, CONV, tuple(SPECS), dict(ATTRS), (0, 1))
    return task, anchor, timed_data_block(CONV, SPECS, ATTRS, AVX512)


def test_the_default_of_resnet50s_28x28_3x3_conv_splits_by_rows(conv) -> None:
    _, anchor, block = conv
    assert default_partition(anchor, AVX512, block) == "rows"


def test_a_record_that_splits_otherwise_applies_on_one_thread_and_not_on_two(
        conv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task, anchor, block = conv
    _, other, _ = _configs(task)
    scope = _scope_with(tmp_path, task, other)
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    assert applied_config(anchor, AVX512, scope, block).to_json() == other.to_json()
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    assert applied_config(anchor, AVX512, scope, block) is None
    assert scope.other_split == [task.workload_key]


def test_a_record_that_splits_as_the_default_applies_on_two_threads(
        conv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task, anchor, block = conv
    same, _, _ = _configs(task)
    scope = _scope_with(tmp_path, task, same)
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    assert applied_config(anchor, AVX512, scope, block).to_json() == same.to_json()
    assert scope.other_split == []


def test_the_build_warns_which_tasks_keep_their_default_on_two_threads(
        conv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task, anchor, block = conv
    _, other, _ = _configs(task)
    scope = _scope_with(tmp_path, task, other)
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    applied_config(anchor, AVX512, scope, block)
    applied_config(anchor, AVX512, scope, block)  # the plan and the lowering both ask
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        scope.warn()
    text = " ".join(str(w.message) for w in got)
    assert "1 tuned task(s) run their default on 2 threads" in text
    assert task.workload_key in text and "still apply on one thread" in text


def test_on_two_threads_only_a_config_that_splits_as_the_default_runs(
        conv, monkeypatch: pytest.MonkeyPatch) -> None:
    task, _, _ = conv
    same, other, split = _configs(task)
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    assert not splits_otherwise(CONV, same, split)
    assert splits_otherwise(CONV, other, split)
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    assert not splits_otherwise(CONV, other, split)


# the other templates whose configs choose how threads split the output: ResNet-18's
# dense layer, a MobileNetV2 depthwise conv, ResNet's stem, a ResNeXt grouped conv (as
# models hand them over: constant weights packed once)
OTHERS = {
    "dense.x86": ([((1, 512), "float32"), ((1000, 512), "float32")],
                  {"weight_layout": "packed"}),
    "depthwise_conv2d_NCHWc.x86": ([((1, 96, 56, 56), "float32"), ((96, 1, 3, 3), "float32")],
                                   {"padding": [1, 1, 1, 1], "groups": 96,
                                    "kernel_layout": "packed"}),
    "conv2d_stem.x86": ([((1, 3, 224, 224), "float32"), ((64, 3, 7, 7), "float32")],
                        {"padding": [3, 3, 3, 3], "strides": [2, 2], "kernel_layout": "OIHWo"}),
    "group_conv2d_NCHWc.x86": ([((1, 128, 28, 28), "float32"), ((128, 4, 3, 3), "float32")],
                               {"padding": [1, 1, 1, 1], "groups": 32,
                                "kernel_layout": "OIHWio"}),
}


@pytest.mark.parametrize("template", sorted(OTHERS))
def test_a_record_of_another_template_that_splits_otherwise_is_not_applied_on_two_threads(
        template: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    specs, attrs = OTHERS[template]
    task = Task(template, specs, attrs, AVX512)
    anchor = AnchorTask(None, template, tuple(specs), dict(attrs), (0, 1))
    block = timed_data_block(template, specs, attrs, AVX512)
    split = default_partition(anchor, AVX512, block)
    other = next(task.config(i) for i in range(task.space.size)
                 if partition_of(template, task.config(i)) != split)
    scope = _scope_with(tmp_path, task, other)
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    assert applied_config(anchor, AVX512, scope, block).to_json() == other.to_json()
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    assert applied_config(anchor, AVX512, scope, block) is None


def test_on_two_threads_the_fastest_record_that_splits_as_the_default_applies(
        conv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task, anchor, block = conv
    same, other, _ = _configs(task)
    scope = _scope_with(tmp_path, task, other, same)  # the one that splits otherwise fastest
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    assert applied_config(anchor, AVX512, scope, block).to_json() == other.to_json()
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    assert applied_config(anchor, AVX512, scope, block).to_json() == same.to_json()
    assert scope.other_split == []
