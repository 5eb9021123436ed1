"""injective.cuda: the tunable schedule of GPU injective groups. Its stand-in compute and
sampled configs on the simulator against numpy; whole injective groups built for
"cuda -sim" against the interpreter, with the group's task tuned and applied; the CPU keeps
its fixed injective schedule and has no such task."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import lowering
import relay_ir
from autotune.extract import extract_tasks
from lowering.cuda.compile import compiler
from schedule.templates import config_space, instantiate, templates_for, workload_key
from tests.rng import seeded_rng
from tests.unwritten import unwritten

pytestmark = pytest.mark.skipif(not compiler(), reason="no CUDA compiler (NVRTC or nvcc)")


def _stand_in(ins: list[np.ndarray], shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """The template's stand-in: every input broadcast, or read at the flat position modulo
    its size, summed in float32 (int32 for integers) and cast to the output dtype."""
    acc = "float32" if dtype.startswith("float") else "int32"
    total = np.zeros(shape, acc)
    flat = np.arange(int(np.prod(shape))).reshape(shape)
    for x in ins:
        try:
            total = total + np.broadcast_to(x, shape).astype(acc)
        except ValueError:
            total = total + x.reshape(-1)[flat % x.size].astype(acc)
    return total.astype(dtype)


# (input specs, outputs)
CASES = {
    "broadcast": ([((4, 64), "float32"), ((64,), "float32"), ((4, 1), "float32")],
                  [((4, 64), "float32")]),
    "odd extents": ([((3, 37), "float32"), ((37,), "float32")], [((3, 37), "float32")]),
    "reshaped input": ([((16, 16), "float32"), ((4, 64), "float32")],
                       [((4, 64), "float32")]),
    "float16": ([((8, 32), "float16"), ((8, 32), "float16")], [((8, 32), "float16")]),
    "int8": ([((2, 128), "int8"), ((128,), "int8")], [((2, 128), "int8")]),
    "two outputs": ([((2, 3, 16), "float32")], [((2, 3, 16), "float32"),
                                                 ((96,), "float32")]),
}


def _knobs(cfg) -> dict:
    return {name: cfg[name].val for name in ("threads", "ept", "vector")}


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "int8":
        return rng.integers(-20, 20, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _check(case: str, cfg) -> lowering.cuda.CudaKernel:
    args, outs = CASES[case]
    attrs = {"outputs": [[list(s), d] for s, d in outs]}
    s, tensors = instantiate("injective.cuda", args, attrs, cfg=cfg, target="cuda")
    f = lowering.build(s, tensors, target="cuda -sim")
    rng = seeded_rng()
    ins = [_random(rng, shape, dt) for shape, dt in args]
    got = [unwritten(shape, dt) for shape, dt in outs]
    f(*ins, *got)
    for g, (shape, dt) in zip(got, outs):
        np.testing.assert_allclose(g.astype("float64"),
                                   _stand_in(ins, shape, dt).astype("float64"), rtol=1e-3)
    return f


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_default_config_computes_the_stand_in(case: str) -> None:
    _check(case, None)


@pytest.mark.parametrize("case", sorted(CASES))
def test_sampled_configs_compute_the_stand_in(case: str) -> None:
    args, outs = CASES[case]
    attrs = {"outputs": [[list(s), d] for s, d in outs]}
    space = config_space("injective.cuda", args, attrs, target="cuda")
    rng = seeded_rng()
    for index in rng.choice(len(space), size=min(4, len(space)), replace=False):
        _check(case, space.get(int(index)))


def test_the_knobs_and_their_choices_follow_the_output() -> None:
    def space(args, outs):
        attrs = {"outputs": [[list(s), d] for s, d in outs]}
        sp = config_space("injective.cuda", args, attrs, target="cuda")
        return {name: [e.val for e in k.entities] for name, k in sp.knobs.items()}

    big = space([((4096,), "float32")], [((4096,), "float32")])
    assert big == {"threads": [32, 64, 128, 256, 512, 1024], "ept": [1, 2, 4, 8],
                   "vector": [1, 2, 4]}
    # 37 elements: one warp, one element each, no vector width divides
    assert space([((37,), "float32")], [((37,), "float32")]) == {
        "threads": [32], "ept": [1], "vector": [1]}
    # float64 has no vector access in the backend
    assert space([((256,), "float64")], [((256,), "float64")])["vector"] == [1]


def test_the_vector_knob_gives_vector_accesses_and_ept_more_elements_per_thread() -> None:
    args, outs = [((4096,), "float32")] * 2, [((4096,), "float32")]
    attrs = {"outputs": [[list(s), d] for s, d in outs]}
    space = config_space("injective.cuda", args, attrs, target="cuda")
    pick = next(k for k in range(len(space)) if _knobs(space.get(k)) ==
                {"threads": 64, "ept": 4, "vector": 4})
    s, tensors = instantiate("injective.cuda", args, attrs, cfg=space.get(pick),
                             target="cuda")
    f = lowering.build(s, tensors, target="cuda -sim")
    assert "float4" in f.source
    (kernel,) = f.program.kernels
    assert kernel.block == (64, 1, 1)
    assert [int(g.value) for g in kernel.grid] == [4096 // (64 * 4 * 4), 1, 1]


def test_the_default_matches_the_generic_schedule() -> None:
    args = [((4096,), "float32")]
    s, tensors = instantiate("injective.cuda", args, {"outputs": [[[4096], "float32"]]},
                             target="cuda")
    (kernel,) = lowering.build(s, tensors, target="cuda -sim").program.kernels
    assert kernel.block == (128, 1, 1)  # 128 threads of four float4 lanes each
    assert [int(g.value) for g in kernel.grid] == [8, 1, 1]


ELEMENTWISE = """
def @main(%x: Tensor[(2, 8, 12), float32], %b: Tensor[(12), float32],
          %y: Tensor[(2, 12, 8), float32]) {
  %0 = nn.relu(add(%x, %b));
  %1 = multiply(%0, transpose(%y, axes=[0, 2, 1]));
  (exp(negative(%1)), %1)
}"""


def _elementwise_inputs() -> list[np.ndarray]:
    rng = seeded_rng()
    return [rng.standard_normal(s).astype("float32") for s in ((2, 8, 12), (12,), (2, 12, 8))]


def test_an_injective_group_on_the_gpu_takes_the_template_and_equals_the_interpreter() -> None:
    mod = relay_ir.parse(ELEMENTWISE)
    ins = _elementwise_inputs()
    lib = relay_ir.build(mod, target="cuda -sim")
    for g, r in zip(lib.run(*ins), relay_ir.interpret(mod, *ins)):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
    assert set(dict(lib.group_schedules).values()) == {"injective.cuda"}


def test_the_cpu_keeps_its_fixed_injective_schedule_and_has_no_injective_task() -> None:
    mod = relay_ir.parse(ELEMENTWISE)
    assert templates_for("injective", "llvm") == ("injective.x86",)
    assert extract_tasks(mod, "llvm") == []
    lib = relay_ir.build(mod, target="llvm")
    assert set(dict(lib.group_schedules).values()) == {"injective"}
    ins = _elementwise_inputs()
    for g, r in zip(lib.run(*ins), relay_ir.interpret(mod, *ins)):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def test_the_gpu_tasks_of_injective_groups_are_tuned_and_their_records_applied(
        tmp_path: Path) -> None:
    from tuning_logs import MeasureRecord, TuningDatabase

    mod = relay_ir.parse(ELEMENTWISE)
    tasks = extract_tasks(mod, "cuda")  # relu(x + b) * y^T, then exp(-that)
    assert [(t.template, n) for t, n in tasks] == [("injective.cuda", 1)] * 2
    assert [t.args for t, _ in tasks] == [
        (((2, 8, 12), "float32"), ((12,), "float32"), ((2, 12, 8), "float32")),
        (((2, 8, 12), "float32"),)]
    assert tasks[0][0].attrs == {"outputs": [[[2, 8, 12], "float32"]]}
    with TuningDatabase(tmp_path / "t.db") as db:
        for task, _ in tasks:
            space = task.config_space()
            pick = next(k for k in range(len(space)) if _knobs(space.get(k)) ==
                        {"threads": 32, "ept": 2, "vector": 2})
            db.add(MeasureRecord(task.workload_key, task.template, task.target,
                                 task.device_key, space.get(pick).to_json(), costs=(1e-6,),
                                 tuner="test"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every task has its record: no warning
        lib = relay_ir.build(mod, target="cuda", tuning_db=tmp_path / "t.db")
    blocks = {k.block for gk in lib.plan.kernels for k in gk.kernel.program.kernels}
    assert blocks == {(32, 1, 1)}  # 192 elements: 96 float2 pairs, 2 per thread of 32
    grids = {tuple(int(g.value) for g in k.grid)
             for gk in lib.plan.kernels for k in gk.kernel.program.kernels}
    assert grids == {(2, 1, 1)}


def test_sampled_configs_of_a_real_group_equal_the_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from relay_ir.backend.tuned import TuningScope
    from tuning_logs import TuningDatabase

    mod = relay_ir.parse(ELEMENTWISE)
    ins = _elementwise_inputs()
    want = relay_ir.interpret(mod, *ins)
    TuningDatabase(tmp_path / "empty.db").close()
    tasks = [t for t, _ in extract_tasks(mod, "cuda")]
    rng = seeded_rng()
    for _ in range(3):
        picks = {t.workload_key: t.config_space().get(int(rng.integers(len(t.config_space()))))
                 for t in tasks}
        given: list[str] = []

        def config(self, tpl, specs, attrs, target, _p=picks, _given=given):
            _given.append(workload_key(tpl, specs, attrs))
            return _p[_given[-1]]
        monkeypatch.setattr(TuningScope, "config", config)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the empty database's untuned-task warning
            lib = relay_ir.build(mod, target="cuda -sim", tuning_db=tmp_path / "empty.db")
        assert sorted(given) == sorted(picks)  # each group built with its picked config
        for g, r in zip(lib.run(*ins), want):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
