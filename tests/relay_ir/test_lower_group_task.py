"""One path from a fused group to its task: what autotune.extract_tasks tunes is what
relay_ir.build compiles; a schedule that does not apply is a warning naming the group."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import relay_ir
from autotune.extract import extract_tasks
from relay_ir.backend.pipeline import bind_params
from relay_ir.backend.tuned import TuningScope
from schedule.templates import TEMPLATES, is_alternate, workload_key
from tessel_errors import ScheduleError
from tests.relay_ir.programs import mlp, mlp_inputs, resnet_block, resnet_block_inputs


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The workload keys build asks the tuning scope for, in order."""
    keys: list[str] = []
    real = TuningScope.config

    def spy(self, template, specs, attrs, target):
        keys.append(workload_key(template, specs, attrs))
        return real(self, template, specs, attrs, target)
    monkeypatch.setattr(TuningScope, "config", spy)
    return keys


@pytest.fixture
def empty_db(tmp_path: Path) -> Path:
    from tuning_logs import TuningDatabase

    TuningDatabase(tmp_path / "empty.db").close()
    return tmp_path / "empty.db"


def _params(mod, values: list[np.ndarray]) -> dict[str, np.ndarray]:
    names = [p.name_hint for p in mod["main"].params]
    return dict(zip(names[1:], values[1:]))  # every input but the data is a weight


# an empty database: build warns that every task is untuned, which is not under test here
UNTUNED = pytest.mark.filterwarnings("ignore:.*tunable task.*no tuning record:UserWarning")


@UNTUNED
@pytest.mark.parametrize("program, inputs", [(mlp, mlp_inputs),
                                             (resnet_block, resnet_block_inputs)])
@pytest.mark.parametrize("weights_constant", [False, True])
def test_extract_tasks_gives_the_tasks_build_compiles_with(
        program, inputs, weights_constant: bool, asked: list[str], empty_db: Path) -> None:
    mod = program()
    params = _params(mod, inputs(np.random.default_rng(3))) if weights_constant else None
    tasks = extract_tasks(mod, "llvm", params)
    relay_ir.build(mod, params=params, tuning_db=empty_db)
    # untuned, build asks for each group's default template; extraction lists the
    # alternates too (the Winograd conv), each beside its default
    defaults = [t for t, _ in tasks if not is_alternate(t.template)]
    assert defaults and sorted(set(asked)) == sorted(t.workload_key for t in defaults)
    assert len(tasks) - len(defaults) == sum(t.template == "conv2d_NCHWc.x86" for t in defaults)


@UNTUNED
def test_a_constant_conv_weight_gives_the_packed_task_in_both(asked: list[str],
                                                             empty_db: Path) -> None:
    mod = resnet_block()
    params = _params(mod, resnet_block_inputs(np.random.default_rng(4)))
    # two tasks of one conv: one of the two calls reads its data in another block than
    # the task is timed in by default (lower_group.record_attrs)
    tasks = extract_tasks(mod, "llvm", params)
    relay_ir.build(mod, params=params, tuning_db=empty_db)
    direct = [(t, n) for t, n in tasks if t.template == "conv2d_NCHWc.x86"]
    assert sorted(n for _, n in direct) == [1, 1]
    assert all(t.attrs["kernel_layout"] == "OIHWio" for t, _ in direct)
    assert set(asked) == {t.workload_key for t, _ in direct}
    # the Winograd alternates take the weight transformed once at build
    assert all(t.attrs["kernel_layout"] == "winograd" for t, _ in tasks
               if is_alternate(t.template))


@pytest.mark.parametrize("program, inputs", [(mlp, mlp_inputs),
                                             (resnet_block, resnet_block_inputs)])
def test_each_step_names_the_task_whose_template_compiled_it(program, inputs) -> None:
    mod = program()
    params = _params(mod, inputs(np.random.default_rng(3)))
    tasks = {t.workload_key: n for t, n in extract_tasks(mod, "llvm", params)
             if not is_alternate(t.template)}  # untuned, no alternate runs
    steps = relay_ir.build(mod, params=params).plan.steps
    named = [s.workload_key for s in steps if s.workload_key]
    assert {k: named.count(k) for k in named} == tasks
    assert all(s.group.startswith(("fused_dense", "fused_conv2d")) == bool(s.workload_key)
               for s in steps)


def test_a_step_whose_template_does_not_apply_names_no_task(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(cfg, outs):
        raise ScheduleError("dense.x86: refused for this test")
    monkeypatch.setitem(TEMPLATES, "dense.x86",
                        dataclasses.replace(TEMPLATES["dense.x86"], schedule=refuse))
    with pytest.warns(UserWarning, match="compiled with the dense"):
        lib = relay_ir.build(mlp())
    assert all(s.workload_key == "" for s in lib.plan.steps)


def test_a_template_that_does_not_apply_warns_naming_the_group_and_the_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(cfg, outs):
        raise ScheduleError("dense.x86: refused for this test")
    monkeypatch.setitem(TEMPLATES, "dense.x86",
                        dataclasses.replace(TEMPLATES["dense.x86"], schedule=refuse))
    mod = mlp()
    with pytest.warns(UserWarning, match=r"fused group fused_dense_\w+ compiled with the "
                      r"dense \(ops graph\) schedule.*template dense.x86 schedule does not "
                      r"apply: dense.x86: refused for this test"):
        lib = relay_ir.build(mod)
    assert ("fused_dense_bias_add_relu", "dense (ops graph)") in lib.group_schedules
    xs = mlp_inputs(np.random.default_rng(5))
    np.testing.assert_allclose(lib.run(*xs), relay_ir.interpret(bind_params(mod, None), *xs),
                               rtol=1e-4, atol=1e-5)


def test_a_group_compiled_as_intended_gives_no_warning() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lib = relay_ir.build(mlp())
    assert all(how == "dense.x86" for name, how in lib.group_schedules
               if name.startswith("fused_dense"))
