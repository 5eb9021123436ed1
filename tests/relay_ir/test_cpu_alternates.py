"""A CPU family with an alternate template (the direct conv and a Winograd conv for 3x3
stride-1 convs): extraction tunes both, build runs the one whose record is fastest at
that call, the layout plan plans the blocks of the template the call runs, and the
model's confirmation judges an alternate even at its own default config.

The alternate here is a twin of conv2d_NCHWc.x86 (the same kernels under another name,
for 3x3 kernels only), so these tests pin the plumbing, not a Winograd template."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

import relay_ir
from autotune import FakeRunner, Task
from autotune.extract import extract_model_tasks
from autotune.model_confirm import _applied_records
from autotune.tuning import default_as_run
from relay_ir.backend import layout_plan, lower_group
from relay_ir.frontend.onnx import from_onnx
from schedule.templates import TEMPLATES, is_alternate, registry
from tests.relay_ir.conftest import concurrent_mismatches
from tests.relay_ir.test_data_block_tasks import _stem_and_two_convs
from tuning_logs import MeasureRecord, TuningDatabase

AVX512 = "llvm -mcpu=skylake-avx512"
DIRECT, TWIN = "conv2d_NCHWc.x86", "conv2d_NCHWc_twin.x86"


def _three_by_three(specs, attrs) -> bool:
    return tuple(specs[1][0][2:]) == (3, 3)


@pytest.fixture
def twin(monkeypatch: pytest.MonkeyPatch) -> str:
    """conv2d_NCHWc.x86 registered again as the CPU conv2d's alternate, for 3x3 kernels."""
    monkeypatch.setitem(TEMPLATES, TWIN, dataclasses.replace(
        TEMPLATES[DIRECT], name=TWIN, applies=_three_by_three))
    monkeypatch.setitem(registry._ALTERNATES_BY_KEY, ("conv2d", "cpu"), ("conv2d_NCHWc_twin",))
    monkeypatch.setattr(lower_group, "BLOCKED_TEMPLATES",
                        lower_group.BLOCKED_TEMPLATES | {TWIN})
    monkeypatch.setattr(layout_plan, "_IN_MODEL", layout_plan._IN_MODEL + (TWIN,))
    return TWIN


@pytest.fixture(scope="module")
def small() -> tuple[object, dict]:
    return from_onnx(_stem_and_two_convs(56))


def _tasks(small, template: str) -> list[Task]:
    mod, params = small
    return [t for t, _ in extract_model_tasks(mod, AVX512, params).tasks
            if t.template == template]


def _record(db: TuningDatabase, task: Task, seconds: float) -> None:
    """A record of the task's default as the model runs it (so it splits the output among
    threads as the default does, and a build on any thread count applies it)."""
    cfg = default_as_run(task, FakeRunner(lambda t, c: 1.0, model_layout=True))
    db.add(MeasureRecord(task.workload_key, task.template, task.target, task.device_key,
                         cfg.to_json(), costs=(seconds,), tuner="test"))


def _db(small, path: Path, seconds: dict[str, float]) -> Path:
    """A database with one record (the default as run) of every task of each template in
    `seconds`, at that many seconds."""
    with TuningDatabase(path) as db:
        for template, secs in seconds.items():
            for t in _tasks(small, template):
                _record(db, t, secs)
    return path


def _build(small, db_path: Path | None):
    mod, params = small
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tasks without a record
        return relay_ir.build(mod, target=AVX512, params=params, tuning_db=db_path)


def test_the_alternate_is_a_task_only_of_the_calls_it_applies_to(small, twin) -> None:
    mod, params = small
    found = extract_model_tasks(mod, AVX512, params)
    twins = [t for t, _ in found.tasks if t.template == twin]
    assert twins and all(t.args[1][0][2:] == (3, 3) for t in twins)
    # the 7x7 stem has no twin task; each 3x3 task is in an alternate set with its direct one
    sets = [{found.tasks[k][0].template for k in a} for a in found.alternates]
    assert sets and all(s == {DIRECT, twin} for s in sets)
    assert is_alternate(twin) and not is_alternate(DIRECT)


def test_untuned_the_default_template_runs(small, twin) -> None:
    assert twin not in str([st.workload_key for st in _build(small, None).plan.steps])


def test_the_alternate_runs_where_its_record_is_faster_than_the_default_templates(
        small, twin, tmp_path: Path) -> None:
    _db(small, tmp_path / "t.db", {DIRECT: 2e-4, twin: 1e-4})
    keys = [st.workload_key for st in _build(small, tmp_path / "t.db").plan.steps]
    assert sum(twin in k for k in keys) == 2  # both 3x3 convs


def test_the_default_template_runs_where_its_record_is_faster(small, twin,
                                                              tmp_path: Path) -> None:
    _db(small, tmp_path / "t.db", {DIRECT: 1e-4, twin: 2e-4})
    keys = [st.workload_key for st in _build(small, tmp_path / "t.db").plan.steps]
    assert not any(twin in k for k in keys)


def test_a_model_running_the_alternate_keeps_its_blocked_layouts_and_results(
        small, twin, tmp_path: Path) -> None:
    _db(small, tmp_path / "t.db", {twin: 1e-4})
    lib, plain = _build(small, tmp_path / "t.db"), _build(small, None)
    assert [k.specs for k in lib.plan.kernels] == [k.specs for k in plain.plan.kernels]
    mod, params = small
    x = np.random.default_rng(3).standard_normal((1, 3, 56, 56)).astype(np.float32)
    want = relay_ir.interpret(mod, input=x, **params)
    np.testing.assert_allclose(lib.run(input=x), want, rtol=1e-4, atol=1e-4)


def test_the_models_confirmation_judges_an_alternate_even_at_its_own_default(
        small, twin, tmp_path: Path) -> None:
    # the direct conv's records are its own default: nothing to judge there
    lib = _build(small, _db(small, tmp_path / "t.db", {twin: 1e-4, DIRECT: 2e-4}))
    with TuningDatabase(tmp_path / "t.db") as db:
        judged = _applied_records(lib.plan, db, AVX512)
    assert {a.task.template for a in judged.values()} == {twin}
    assert all(a.config_json == a.default_json for a in judged.values())


def test_the_choice_reads_the_record_of_the_task_keyed_for_the_calls_data_block(
        twin, tmp_path: Path) -> None:
    # on AVX2 at 112x112 the first 3x3 conv reads the stem's blocks of 16 (a task keyed
    # data_block=16), the second its own 8: a faster twin record of the keyed task is
    # chosen at the first call only
    mod, params = from_onnx(_stem_and_two_convs(112))
    avx2 = "llvm -mcpu=haswell"
    tasks = [t for t, _ in extract_model_tasks(mod, avx2, params).tasks]
    keyed = {(t.template, t.attrs.get("data_block")): t for t in tasks
             if t.args[1][0] == (64, 64, 3, 3)}
    assert set(keyed) == {(DIRECT, 16), (DIRECT, None), (twin, 16), (twin, None)}
    with TuningDatabase(tmp_path / "t.db") as db:
        for (template, block), t in keyed.items():
            _record(db, t, 1e-4 if (template, block) == (twin, 16) else 2e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = relay_ir.build(mod, target=avx2, params=params, tuning_db=tmp_path / "t.db")
    convs = [st.workload_key for st in lib.plan.steps if "(64, 64, 3, 3)" in st.workload_key
             or "[64,64,3,3]" in st.workload_key]
    assert [(twin in k, "data_block" in k) for k in convs] == [(True, True), (False, False)]


WINOGRAD = "conv2d_NCHWc_winograd.x86"


def _winograd_build(small, tmp_path: Path, target: str):
    """The small model built for `target` with records that make its 3x3 convs run the
    Winograd template (faster than the direct conv's), checked to do so."""
    mod, params = small
    tasks = [t for t, _ in extract_model_tasks(mod, target, params).tasks]
    assert {t.template for t in tasks if t.args[1][0][2:] == (3, 3)} == {DIRECT, WINOGRAD}
    with TuningDatabase(tmp_path / "t.db") as db:
        for t in tasks:
            _record(db, t, 1e-4 if t.template == WINOGRAD else 2e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = relay_ir.build(mod, target=target, params=params, tuning_db=tmp_path / "t.db")
    assert any(WINOGRAD in st.workload_key for st in lib.plan.steps)
    return lib


@pytest.mark.parametrize("target", [AVX512, "llvm -mcpu=haswell"])
def test_a_model_whose_3x3_convs_run_winograd_computes_what_the_interpreter_does(
        small, target: str, tmp_path: Path) -> None:
    lib = _winograd_build(small, tmp_path, target)
    assert sum(WINOGRAD in st.workload_key for st in lib.plan.steps) == 2
    mod, params = small
    x = np.random.default_rng(11).standard_normal((1, 3, 56, 56)).astype(np.float32)
    want = relay_ir.interpret(mod, input=x, **params)
    # F(4, 3) in float32: about 1e-5 of the output's scale (winograd_matrices)
    np.testing.assert_allclose(lib.run(input=x), want, rtol=1e-4, atol=1e-4)


def test_a_saved_model_that_runs_winograd_loads_and_computes_the_same(
        small, tmp_path: Path) -> None:
    lib = _winograd_build(small, tmp_path, AVX512)
    lib.save(str(tmp_path / "m.tessel"))
    loaded = relay_ir.load_compiled(str(tmp_path / "m.tessel"))
    x = np.random.default_rng(12).standard_normal((1, 3, 56, 56)).astype(np.float32)
    np.testing.assert_array_equal(loaded.run(input=x), lib.run(input=x))


def test_two_threads_running_a_model_that_runs_winograd_get_the_serial_results(
        small, tmp_path: Path) -> None:
    # the transforms' intermediates (V, M) are the kernel's own per call, not shared
    lib = _winograd_build(small, tmp_path, AVX512)
    rng = np.random.default_rng(13)
    inputs = [rng.standard_normal((1, 3, 56, 56)).astype(np.float32) for _ in range(4)]
    assert concurrent_mismatches(lambda x: lib.run(input=x), inputs, rounds=10) == []
