"""A blocked conv whose data the model hands it in another channel block than its task is
timed in by default is a task of its own (attr data_block, lower_group.record_attrs):
extraction files it apart, the runner times it in that block, and build applies its
records at that call only."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import relay_ir
from autotune import FakeRunner, Task
from autotune.block_rule import block_rule
from autotune.extract import extract_tasks
from autotune.measure import timed_as
from relay_ir.frontend.onnx import from_onnx
from schedule.space import FallbackConfig
from schedule.templates import partition_of
from tests.e2e.onnx_models import _Graph, resnet18
from tuning_logs import MeasureRecord, TuningDatabase

AVX2 = "llvm -mcpu=haswell"
AVX512 = "llvm -mcpu=skylake-avx512"
CONV = "conv2d_NCHWc.x86"


def _stem_and_two_convs(image: int = 112) -> onnx.ModelProto:
    """ResNet's stem, its max pool and two 64-channel 3x3 convs: on AVX2 at 112x112 the
    stem writes blocks of 16, which the first 3x3 conv reads; the second reads the
    first's 8 (a 64@28 conv's default block)."""
    g = _Graph(0)
    x = g.conv_bn("input", 3, 64, 7, 2)
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = g.conv_bn(g.conv_bn(x, 64, 64, 3, 1), 64, 64, 3, 1)
    graph = helper.make_graph(
        g.nodes, "stem_and_two_convs",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, image, image])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _conv_tasks(tasks: list[tuple[Task, int]], data: tuple[int, ...],
                weight: tuple[int, ...]) -> dict[int | None, tuple[Task, int]]:
    """The conv tasks of those shapes, by their data_block attr (None: none)."""
    return {t.attrs.get("data_block"): (t, n) for t, n in tasks
            if t.template == CONV and t.args[0][0] == data and t.args[1][0] == weight}


@pytest.fixture(scope="module")
def small() -> tuple[object, dict]:
    return from_onnx(_stem_and_two_convs())


@pytest.fixture(scope="module")
def small_tasks(small) -> dict[int | None, tuple[Task, int]]:
    mod, params = small
    return _conv_tasks(extract_tasks(mod, AVX2, params), (1, 64, 28, 28), (64, 64, 3, 3))


def test_extraction_files_avx2_resnet18s_first_3x3_apart_and_keeps_the_others_key() -> None:
    mod, params = from_onnx(resnet18())
    got = _conv_tasks(extract_tasks(mod, AVX2, params), (1, 64, 56, 56), (64, 64, 3, 3))
    assert sorted(got, key=str) == [16, None]
    keyed, first = got[16]
    plain, others = got[None]
    assert (first, others) == (1, 3)
    # the three calls that read the 8 the task is timed in keep the key they always had
    assert plain.attrs == {k: v for k, v in keyed.attrs.items() if k != "data_block"}
    assert "data_block" not in plain.workload_key and keyed.workload_key != plain.workload_key


def test_extraction_adds_no_attr_where_every_call_reads_the_block_it_is_timed_in() -> None:
    mod, params = from_onnx(resnet18())
    assert not [t for t, _ in extract_tasks(mod, AVX512, params) if "data_block" in t.attrs]


def test_the_keyed_task_is_timed_in_its_data_block_and_the_template_never_sees_the_attr(
        small_tasks) -> None:
    keyed, plain = small_tasks[16][0], small_tasks[None][0]
    timed, timed_plain = timed_as(keyed, True), timed_as(plain, True)
    assert timed.args[0][0] == (1, 4, 28, 28, 16) and "data_block" not in timed.attrs
    assert timed_plain.args[0][0] == (1, 8, 28, 28, 8)
    # the task's space is the logical conv's, as the untouched task's
    assert keyed.space.size == plain.space.size and keyed.default_config() is not None


def test_the_block_rule_of_the_keyed_task_keeps_the_block_its_fallback_writes_there(
        small_tasks) -> None:
    keyed = small_tasks[16][0]
    rule = block_rule(keyed, FakeRunner(lambda t, c: 1.0, model_layout=True))
    timed = timed_as(keyed, True)
    _, tensors = timed.instantiate(None)
    assert rule.block == int(tensors[-1].shape[4].value)


def _weight_blocks(task: Task, cfg) -> tuple[int, int]:
    """The (input, output) channel blocks of the packed weight `cfg` builds (OIHWio)."""
    _, tensors = timed_as(task, True).instantiate(cfg)
    return tuple(int(d.value) for d in tensors[1].shape[4:])


def _other_input_block(task: Task):
    """A config of `task` that packs its weight in another input-channel block than the
    default, writes the default's output block (so the layout plan stays) and splits the
    output among threads as the default does (so a build applies it on any thread count:
    lower_group.default_partition)."""
    default = _weight_blocks(task, task.default_config())
    fb = FallbackConfig(task.target)
    timed_as(task, True).instantiate(fb)
    split = partition_of(task.template, fb)
    for i in range(task.space.size):
        cfg = task.config(i)
        if partition_of(task.template, cfg) != split:
            continue
        got = _weight_blocks(task, cfg)
        if got[1] == default[1] and got[0] != default[0]:
            return cfg, got
    raise AssertionError("no such config")


def _build_with(small, tmp_path: Path, tasks: list[Task]):
    """The model built with one record (another input block) for each of `tasks`; the
    packed weight blocks of the two 64@28 convs in the model's order, and the records."""
    mod, params = small
    blocks = {}
    with TuningDatabase(tmp_path / "t.db") as db:
        for task in tasks:
            cfg, blocks[task.workload_key] = _other_input_block(task)
            db.add(MeasureRecord(task.workload_key, task.template, task.target,
                                 task.device_key, cfg.to_json(), costs=(1e-4,), tuner="test"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tasks without a record
        lib = relay_ir.build(mod, target=AVX2, params=params, tuning_db=tmp_path / "t.db")
    convs = [(tuple(k.specs[1][0])[4:], st.workload_key)
             for st in lib.plan.steps for k in [lib.plan.kernels[st.kernel]]
             if len(k.specs[1][0]) == 6 and k.specs[0][0][1:4] in {(8, 28, 28), (4, 28, 28)}]
    return lib, convs, blocks


def _default_blocks(task: Task) -> tuple[int, int]:
    return _weight_blocks(task, task.default_config())


def test_a_record_of_the_keyed_task_is_applied_at_its_call_and_not_at_the_other(
        small, small_tasks, tmp_path: Path) -> None:
    keyed, plain = small_tasks[16][0], small_tasks[None][0]
    _, convs, blocks = _build_with(small, tmp_path, [keyed])
    assert convs == [(blocks[keyed.workload_key], keyed.workload_key),
                     (_default_blocks(plain), plain.workload_key)]


def test_a_record_of_the_untouched_task_is_applied_at_its_call_and_not_at_the_keyed_one(
        small, small_tasks, tmp_path: Path) -> None:
    keyed, plain = small_tasks[16][0], small_tasks[None][0]
    _, convs, blocks = _build_with(small, tmp_path, [plain])
    assert convs == [(_default_blocks(keyed), keyed.workload_key),
                     (blocks[plain.workload_key], plain.workload_key)]


def test_the_model_with_both_records_applied_computes_what_the_interpreter_does(
        small, small_tasks, tmp_path: Path) -> None:
    keyed, plain = small_tasks[16][0], small_tasks[None][0]
    lib, convs, blocks = _build_with(small, tmp_path, [keyed, plain])
    assert [c[0] for c in convs] == [blocks[keyed.workload_key], blocks[plain.workload_key]]
    mod, params = small
    x = np.random.default_rng(7).standard_normal((1, 3, 112, 112)).astype(np.float32)
    want = relay_ir.interpret(mod, input=x, **params)
    np.testing.assert_allclose(lib.run(input=x), want, rtol=1e-4, atol=1e-4)
