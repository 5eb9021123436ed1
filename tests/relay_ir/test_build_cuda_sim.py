"""relay_ir.build(mod, target="cuda -sim"): whole models compiled to CUDA C (each kernel
compiled by NVRTC or nvcc) and run in the GPU simulator, against the Relay interpreter on
seeded random inputs."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from lowering.cuda.compile import compiler
from tests.relay_ir import programs as P
from tests.rng import seeded_rng

pytestmark = pytest.mark.skipif(not compiler(), reason="no CUDA compiler (NVRTC or nvcc)")

SMALL_CNN = """
def @main(%x: Tensor[(1, 2, 8, 8), float32], %w: Tensor[(4, 2, 3, 3), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[1, 1]);
  %1 = nn.max_pool2d(nn.relu(%0), pool_size=[2, 2], strides=[2, 2]);
  %2 = nn.global_avg_pool2d(%1);
  %3 = nn.softmax(reshape(%2, newshape=[1, 4]));
  (%3, sum(%1), mean(%1, axis=[1]))
}"""


@pytest.mark.parametrize("name", ["mlp", "conv_bn_relu", "resnet_block",
                                  "transformer_block"])
def test_a_model_simulated_on_the_gpu_equals_the_interpreter(name: str) -> None:
    mod = getattr(P, name)()
    ins = getattr(P, name + "_inputs")(seeded_rng())
    got = relay_ir.build(mod, target="cuda -sim").run(*ins)
    np.testing.assert_allclose(got, relay_ir.interpret(mod, *ins), rtol=1e-4, atol=1e-5)


def test_a_scalar_constant_a_kernel_takes_keeps_its_shape() -> None:
    # float16 layer_norm: its epsilon, a 0-d constant, is an argument of a GPU kernel,
    # which checks shapes (it was passed as a 1-element array and refused)
    mod = relay_ir.parse("""
def @main(%a: Tensor[(2, 5, 24), float16], %g: Tensor[(24), float16],
          %b: Tensor[(24), float16]) {
  nn.layer_norm(%a, %g, %b)
}""")
    rng = seeded_rng()
    ins = [rng.standard_normal(s).astype("float16") for s in ((2, 5, 24), (24,), (24,))]
    lib = relay_ir.build(mod, target="cuda -sim")
    assert any(v.kind == "const" and v.shape == () for v in lib.plan.values)
    np.testing.assert_allclose(lib.run(*ins).astype(np.float64),
                               relay_ir.interpret(mod, *ins).astype(np.float64),
                               rtol=1e-2, atol=1e-2)


def test_a_small_cnn_with_pooling_softmax_and_reductions_to_a_scalar() -> None:
    mod = relay_ir.parse(SMALL_CNN)
    rng = seeded_rng()
    x = rng.standard_normal((1, 2, 8, 8)).astype("float32")
    w = rng.standard_normal((4, 2, 3, 3)).astype("float32")
    lib = relay_ir.build(mod, target="cuda -sim")
    got, want = lib.run(x=x, w=w), relay_ir.interpret(mod, x, w)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
    assert dict(lib.group_schedules) == {
        "fused_conv2d_relu": "conv2d_nchw_gemm.cuda", "fused_max_pool2d": "pool2d.cuda",
        "fused_global_avg_pool2d": "reduce.cuda", "fused_reshape": "injective.cuda",
        "fused_softmax": "softmax.cuda", "fused_sum": "reduce.cuda",
        "fused_mean": "reduce.cuda"}


def test_cpu_groups_of_the_reduction_family_keep_their_group_schedules() -> None:
    schedules = dict(relay_ir.build(relay_ir.parse(SMALL_CNN), target="llvm").group_schedules)
    assert schedules["fused_max_pool2d"] == "reduce"
    assert schedules["fused_softmax"] == "softmax"


def test_every_kernel_of_a_gpu_model_is_cuda_c() -> None:
    lib = relay_ir.build(P.mlp(), target="cuda -sim")
    sources = [k.kernel.source for k in lib.plan.kernels]
    assert sources and all('extern "C" __global__' in s for s in sources)


def test_dense_and_batch_matmul_groups_take_the_cuda_templates() -> None:
    schedules = dict(relay_ir.build(P.transformer_block(), target="cuda -sim").group_schedules)
    assert schedules["fused_dense"] == "dense.cuda"
    assert schedules["fused_batch_matmul"] == "batch_matmul.cuda"
    assert schedules["fused_softmax"] == "softmax.cuda"


CONV = """
def @main(%x: Tensor[(1, 4, 6, 6), float32], %w: Tensor[(8, 4, 3, 3), float32]) {
  nn.relu(nn.conv2d(%x, %w, padding=[1, 1]))
}"""


def test_a_gpu_conv2d_is_a_task_for_each_of_its_templates() -> None:
    from autotune.extract import extract_tasks

    tasks = [t.template for t, _ in extract_tasks(relay_ir.parse(CONV), "cuda -sim")]
    assert tasks == ["conv2d_nchw_gemm.cuda", "conv2d_nchw.cuda"]


@pytest.mark.parametrize(("fast", "slow"), [("conv2d_nchw.cuda", "conv2d_nchw_gemm.cuda"),
                                            ("conv2d_nchw_gemm.cuda", "conv2d_nchw.cuda")])
def test_build_takes_the_template_whose_record_is_fastest(tmp_path, fast: str,
                                                         slow: str) -> None:
    from autotune.extract import extract_tasks
    from tuning_logs import MeasureRecord, TuningDatabase

    mod = relay_ir.parse(CONV)
    with TuningDatabase(tmp_path / "t.db") as db:
        for task, _ in extract_tasks(mod, "cuda -sim"):
            cost = 1e-5 if task.template == fast else 1e-4
            db.add(MeasureRecord(task.workload_key, task.template, task.target,
                                 task.device_key, task.config_space().get(0).to_json(),
                                 costs=(cost,), tuner="test"))
        lib = relay_ir.build(mod, target="cuda -sim", tuning_db=db)
    assert dict(lib.group_schedules)["fused_conv2d_relu"] == fast
    rng = seeded_rng()
    x, w = rng.standard_normal((1, 4, 6, 6), "float32"), rng.standard_normal((8, 4, 3, 3),
                                                                              "float32")
    np.testing.assert_allclose(lib.run(x=x, w=w), relay_ir.interpret(mod, x, w),
                               rtol=1e-4, atol=1e-5)
