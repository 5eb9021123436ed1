"""relay_ir.build: compiled models against relay_ir.interpret, kernel sharing, memory plan,
errors for programs it does not compile, input checks, save/load, profile."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from relay_ir import nn
from tessel_errors import KernelArgumentError, RelayError
from tests.relay_ir import programs as P
from tests.rng import seeded_rng

DATAFLOW = ["mlp", "conv_bn_relu", "resnet_block", "transformer_block"]


def _inputs(name: str, rng: np.random.Generator) -> list[np.ndarray]:
    return getattr(P, name + "_inputs")(rng)


@pytest.fixture(scope="module")
def compiled() -> dict[str, relay_ir.CompiledModel]:
    return {name: relay_ir.build(getattr(P, name)()) for name in DATAFLOW}


@pytest.mark.parametrize("name", DATAFLOW)
def test_compiled_output_equals_interpreter(compiled: dict, name: str) -> None:
    rng = seeded_rng()
    mod, lib = getattr(P, name)(), compiled[name]
    for _ in range(2):
        ins = _inputs(name, rng)
        got = lib.run(**dict(zip(lib.input_names, ins)))
        want = relay_ir.interpret(mod, *ins)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_anchor_groups_use_templates_with_epilogue(compiled: dict) -> None:
    scheds = dict(compiled["resnet_block"].group_schedules)
    assert scheds == {"fused_conv2d_multiply_add_relu": "conv2d_NCHWc.x86",
                      "fused_conv2d_multiply_add_add_relu": "conv2d_NCHWc.x86"}
    assert ("fused_dense_bias_add_relu", "dense.x86") in compiled["mlp"].group_schedules


def test_identical_groups_compile_once(compiled: dict) -> None:
    lib = compiled["transformer_block"]
    groups = [s.group for s in lib.plan.steps]
    assert groups.count("fused_dense") == 3          # q, k, v projections: same shapes
    assert lib.kernels_compiled == len(lib.plan.kernels) == len(groups) - 3
    dense_steps = [s.kernel for s in lib.plan.steps if s.group == "fused_dense"]
    assert len(set(dense_steps)) == 1


def _chain(n: int) -> relay_ir.IRModule:
    x = P.tvar("x", (64, 64))
    e = x
    for k in range(n):
        e = relay_ir.tanh(relay_ir.transpose(e, (1, 0))) if k % 2 else \
            nn.softmax(e, axis=-1)
    return P.main_module([x], e)


def test_memory_plan_reuses_buffers_on_a_chain() -> None:
    lib = relay_ir.build(_chain(6))
    plan = lib.memory_plan
    assert len(lib.plan.steps) == 6
    assert plan.total_bytes == 5 * 64 * 64 * 4
    assert plan.peak_bytes == 2 * 64 * 64 * 4 < plan.total_bytes
    x = seeded_rng().standard_normal((64, 64)).astype("float32")
    np.testing.assert_allclose(lib.run(x=x), relay_ir.interpret(_chain(6), x), rtol=1e-4,
                               atol=1e-6)


@pytest.mark.parametrize("name,what", [
    ("loop_program", "calls of functions"), ("tuples_and_if", "control flow"),
    ("refs", "references"), ("closures", "closures|calls of functions"),
    ("list_map_fold", "closures|calls of functions|algebraic data types"),
])
def test_non_dataflow_programs_are_rejected(name: str, what: str) -> None:
    with pytest.raises(RelayError, match=rf"dataflow-only.*uses ({what}).*relay_ir\.interpret"):
        relay_ir.build(getattr(P, name)())


def test_a_float_model_built_for_the_accelerator_runs_on_the_host_saying_why() -> None:
    with pytest.warns(UserWarning, match="run on the host CPU, not the accelerator"):
        lib = relay_ir.build(P.mlp(), target="accel")
    assert {p.device for p in lib.placement} == {"cpu"}
    assert "float32" in lib.placement[0].why
    ins = P.mlp_inputs(seeded_rng())
    np.testing.assert_array_equal(lib.run(*ins), relay_ir.build(P.mlp()).run(*ins))


def test_params_bound_as_constants() -> None:
    rng = seeded_rng()
    ins = P.mlp_inputs(rng)
    names = ["x", "w1", "b1", "w2", "b2"]
    lib = relay_ir.build(P.mlp(), params=dict(zip(names[1:], ins[1:])))
    assert lib.input_names == ["x"]
    np.testing.assert_allclose(lib.run(x=ins[0]), relay_ir.interpret(P.mlp(), *ins),
                               rtol=1e-4, atol=1e-6)
    with pytest.raises(RelayError, match="'nope' are not parameters of @main"):
        relay_ir.build(P.mlp(), params={"nope": ins[1]})


def test_input_checks_name_shape_dtype(compiled: dict) -> None:
    lib = compiled["resnet_block"]
    x, w1, w2 = P.resnet_block_inputs(seeded_rng())
    with pytest.raises(KernelArgumentError, match=r"missing input\(s\) w2"):
        lib.run(x=x, w1=w1)
    with pytest.raises(KernelArgumentError, match="unknown input 'y'"):
        lib.run(x=x, w1=w1, w2=w2, y=x)
    with pytest.raises(KernelArgumentError, match=r"'x' must have shape \(1, 8, 6, 6\), got "
                                                  r"\(1, 8, 6, 7\)"):
        lib.run(x=np.zeros((1, 8, 6, 7), "float32"), w1=w1, w2=w2)
    with pytest.raises(KernelArgumentError, match="'x' must have dtype float32, got float64"):
        lib.run(x=x.astype("float64"), w1=w1, w2=w2)


def test_dynamic_batch_resolved_at_run_time() -> None:
    rng = seeded_rng()
    lib = relay_ir.build(P.mlp_dynamic())
    for batch in (2, 5, 2):
        x, w = P.rand(rng, batch, 8), P.rand(rng, 16, 8, scale=0.3)
        got = lib.run(x=x, w=w)
        np.testing.assert_allclose(got, relay_ir.interpret(P.mlp_dynamic(), x, w), rtol=1e-4,
                                   atol=1e-6)
    assert len(lib._plans) == 2
    with pytest.raises(KernelArgumentError, match=r"'x' must have shape \(\?, 8\)"):
        lib.run(x=P.rand(rng, 3, 7), w=w)


def test_tuple_outputs() -> None:
    x = P.tvar("x", (8, 16))
    mod = P.main_module([x], relay_ir.Tuple((nn.relu(x), relay_ir.sum(x, axis=(1,)))))
    xv = seeded_rng().standard_normal((8, 16)).astype("float32")
    got = relay_ir.build(mod).run(x=xv)
    P.assert_values_close(got, relay_ir.interpret(mod, xv), rtol=1e-5, atol=1e-5)


def test_save_load_round_trip(compiled: dict, tmp_path) -> None:
    import lowering.build_module as bm

    lib = compiled["resnet_block"]
    path = str(tmp_path / "block.tessel")
    lib.save(path)
    misses = bm.stats["misses"]
    lib2 = relay_ir.load_compiled(path)
    assert bm.stats["misses"] == misses  # nothing recompiled
    ins = P.resnet_block_inputs(seeded_rng())
    feed = dict(zip(lib.input_names, ins))
    np.testing.assert_array_equal(lib2.run(**feed), lib.run(**feed))
    assert lib2.memory_plan.peak_bytes == lib.memory_plan.peak_bytes
    lib2.save(str(tmp_path / "again.tessel"))  # a loaded model saves again
    np.testing.assert_array_equal(relay_ir.load_compiled(str(tmp_path / "again.tessel"))
                                  .run(**feed), lib.run(**feed))


def test_load_rejects_a_folder_without_a_model(tmp_path) -> None:
    with pytest.raises(RelayError, match="is not a saved Tessel model"):
        relay_ir.load_compiled(str(tmp_path))


def test_profile_table_lists_every_kernel(compiled: dict) -> None:
    lib = compiled["mlp"]
    ins = P.mlp_inputs(seeded_rng())
    table = lib.profile(**dict(zip(lib.input_names, ins)), repeat=3)
    assert [r.group for r in table.rows] == [s.group for s in lib.plan.steps]
    assert abs(sum(table.share(r) for r in table.rows) - 1.0) < 1e-9
    text = str(table)
    assert text.splitlines()[0].split() == ["group", "shape", "time", "(us)", "share"]
    assert "fused_softmax" in text and "(4, 10)" in text and text.splitlines()[-1].startswith(
        "total")


def test_constant_conv_weights_are_packed_once_at_build_time(tmp_path) -> None:
    rng = seeded_rng()
    x, w1, w2 = P.resnet_block_inputs(rng)
    lib = relay_ir.build(P.resnet_block(), params={"w1": w1, "w2": w2})
    consts = [v for v in lib.plan.values if v.kind == "const"]
    packed = [v for v in consts if len(v.shape) == 6]
    assert len(packed) == 2 and all(v.shape[2:4] == (3, 3) for v in packed)
    for _ in range(2):
        x = P.rand(rng, 1, 8, 6, 6)
        np.testing.assert_allclose(lib.run(x=x), relay_ir.interpret(P.resnet_block(), x, w1, w2),
                                   rtol=1e-4, atol=1e-5)
    lib.save(str(tmp_path / "m"))  # the packed weights travel in consts.npz
    np.testing.assert_array_equal(relay_ir.load_compiled(str(tmp_path / "m")).run(x=x),
                                  lib.run(x=x))


def test_gradual_dims_refined_by_inference_are_checked_at_run() -> None:
    rng = seeded_rng()
    lib = relay_ir.build(P.gradual_checked())
    x, w = P.gradual_checked_inputs(rng)
    np.testing.assert_allclose(lib.run(x=x, w=w), relay_ir.interpret(P.gradual_checked(), x, w),
                               rtol=1e-4, atol=1e-6)
    with pytest.raises(KernelArgumentError, match=r"'x' must have shape \(\?, 3\), got \(2, 4\)"):
        lib.run(x=P.rand(rng, 2, 4), w=w)
