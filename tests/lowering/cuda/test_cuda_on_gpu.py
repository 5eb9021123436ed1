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
