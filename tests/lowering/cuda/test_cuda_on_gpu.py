"""The same kernels the simulator checks, run on a real GPU (marked `gpu`: skipped where
there is none) against numpy on seeded random inputs; device arrays and event timing."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
import relay_ir
import tensor_expr as te
from lowering.cuda import to_device
from schedule import create_schedule
from schedule.templates import instantiate
from schedule.templates.cuda_generic import schedule_gpu_generic
from tensor_expr import ops
from tests.lowering.cuda.schedules import shared_matmul, two_kernels, vector_scale
from tests.relay_ir import programs as P
from tests.rng import seeded_rng
from tests.unwritten import unwritten

pytestmark = pytest.mark.gpu


def test_a_vector_op_on_the_gpu_matches_numpy() -> None:
    f = lowering.build(*vector_scale(factor=128), target="cuda")
    a = seeded_rng().standard_normal(100_003).astype("float32")
    b = unwritten((100_003,))
    f(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_a_shared_memory_matmul_on_the_gpu_matches_numpy() -> None:
    f = lowering.build(*shared_matmul(128, 16), target="cuda")
    rng = seeded_rng()
    a, b = (rng.standard_normal((128, 128)).astype("float32") for _ in range(2))
    c = unwritten((128, 128))
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_two_kernels_and_a_device_temporary_on_the_gpu() -> None:
    f = lowering.build(*two_kernels(1000), target="cuda")
    a = seeded_rng().standard_normal(1000).astype("float32")
    c = unwritten((1000,))
    f(a, c)
    np.testing.assert_allclose(c, np.exp(a) * 3, rtol=1e-5)


def test_softmax_rows_reduced_across_threads_on_the_gpu() -> None:
    X = te.placeholder((64, 1000), name="X")
    Y = ops.softmax(X, axis=-1)
    f = lowering.build(schedule_gpu_generic(create_schedule(Y), [Y]), [X, Y], target="cuda")
    x = seeded_rng().standard_normal((64, 1000)).astype("float32")
    y = unwritten((64, 1000))
    f(x, y)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_the_dense_template_on_the_gpu_matches_numpy() -> None:
    args = [((256, 512), "float32"), ((384, 512), "float32")]
    s, tensors = instantiate("dense.cuda", args, target="cuda")
    f = lowering.build(s, tensors, target="cuda")
    rng = seeded_rng()
    a, w = (rng.standard_normal(shape).astype("float32") for shape, _ in args)
    out = unwritten((256, 384))
    f(a, w, out)
    np.testing.assert_allclose(out, a @ w.T, rtol=1e-4, atol=1e-3)


def test_device_arrays_avoid_copies_and_time_with_events() -> None:
    f = lowering.build(*vector_scale(factor=256), target="cuda")
    a = seeded_rng().standard_normal(1 << 20).astype("float32")
    da, db = to_device(a), to_device(np.zeros_like(a))
    f(da, db)
    np.testing.assert_allclose(db.numpy(), a * 2 + 1, rtol=1e-6)
    assert f.time(da, db, number=5, repeat=3) > 0


@pytest.mark.parametrize("name", ["mlp", "resnet_block", "transformer_block"])
def test_a_model_on_the_gpu_equals_the_interpreter(name: str) -> None:
    mod = getattr(P, name)()
    ins = getattr(P, name + "_inputs")(seeded_rng())
    got = relay_ir.build(mod, target="cuda").run(*ins)
    np.testing.assert_allclose(got, relay_ir.interpret(mod, *ins), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m, n, k", [(128, 96, 64), (17, 33, 50), (1, 1000, 512)])
def test_a_tensor_core_dense_on_the_gpu_matches_numpy(m: int, n: int, k: int) -> None:
    # multiples of 16, and sizes padded to them (the classifier's 1 x 1000 x 512)
    args = [((m, k), "float16"), ((n, k), "float16")]
    s, tensors = instantiate("dense_tensorcore.cuda", args, target="cuda")
    f = lowering.build(s, tensors, target="cuda")
    rng = seeded_rng()
    a, w = (rng.standard_normal(shape).astype("float16") for shape, _ in args)
    out = unwritten((m, n), "float16")
    f(a, w, out)
    want = a.astype(np.float64) @ w.astype(np.float64).T
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3, atol=3e-2)


def test_a_padded_tensor_core_conv_with_3_channels_on_the_gpu_matches_numpy() -> None:
    from tests.lowering.cuda.test_cuda_tensorcore import _conv_reference

    xs, ws = (1, 3, 30, 30), (20, 3, 3, 3)
    s, tensors = instantiate("conv2d_nchw_tensorcore.cuda", [(xs, "float16"), (ws, "float16")],
                             {"padding": 1, "strides": 2}, target="cuda")
    f = lowering.build(s, tensors, target="cuda")
    rng = seeded_rng()
    x, w = rng.standard_normal(xs).astype("float16"), rng.standard_normal(ws).astype("float16")
    want = _conv_reference(x, w, 1, 2)
    out = unwritten(want.shape, "float16")
    f(x, w, out)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3, atol=4e-2)


def test_an_injective_group_on_the_gpu_matches_numpy() -> None:
    from autotune import Task

    task = Task("injective.cuda", [((3, 1000), "float32"), ((1000,), "float32")],
                {"outputs": [[[3, 1000], "float32"]]}, "cuda")
    space = task.config_space()
    rng = seeded_rng()
    a, b = rng.standard_normal((3, 1000)).astype("float32"), rng.standard_normal(1000)
    b = b.astype("float32")
    for cfg in (None, space.get(len(space) - 1)):
        s, tensors = instantiate("injective.cuda", task.args, task.attrs, cfg=cfg,
                                 target="cuda")
        out = unwritten((3, 1000))
        lowering.build(s, tensors, target="cuda")(a, b, out)
        np.testing.assert_allclose(out, a + b, rtol=1e-6)


def test_a_saved_gpu_model_loads_its_cubins_and_runs_on_the_gpu(tmp_path) -> None:
    mod = P.mlp()
    ins = P.mlp_inputs(seeded_rng())
    lib = relay_ir.build(mod, target="cuda")
    lib.save(str(tmp_path / "m.tessel"))
    loaded = relay_ir.load_compiled(str(tmp_path / "m.tessel"))
    np.testing.assert_array_equal(loaded.run(*ins), lib.run(*ins))
    np.testing.assert_allclose(loaded.run(*ins), relay_ir.interpret(mod, *ins), rtol=1e-4,
                               atol=1e-5)
