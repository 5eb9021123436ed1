"""Cross-thread reductions: a reduce axis bound to threadIdx becomes an all-reduce (warp
shuffles for up to a warp's lanes, a shared-memory tree otherwise), checked in the
simulator against numpy and compiled by NVRTC or nvcc."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering.cuda.compile import compiler
from schedule import create_schedule
from schedule.templates.cuda_generic import schedule_gpu_generic
from tensor_expr import ops
from tessel_errors import CodegenError
from tests.lowering.cuda.schedules import bind
from tests.rng import seeded_rng
from tests.unwritten import unwritten

pytestmark = pytest.mark.skipif(not compiler(), reason="no CUDA compiler (NVRTC or nvcc)")

REDUCERS = {"sum": (te.sum, np.sum), "max": (te.max, np.max), "min": (te.min, np.min)}


def _row_reduction(kind: str, threads: int, rows: int = 3, length: int = 100):
    A = te.placeholder((rows, length), name="A")
    k = te.reduce_axis((0, length), name="k")
    B = te.compute((rows,), lambda i: REDUCERS[kind][0](A[i, k], axis=k), name="B")
    s = create_schedule(B)
    _, ki = s[B].split(B.op.reduce_axis[0], factor=threads)
    bind(s, B, B.op.axis[0], "blockIdx.x")
    bind(s, B, ki, "threadIdx.x")
    return lowering.build(s, [A, B], target="cuda -sim")


@pytest.mark.parametrize("kind", sorted(REDUCERS))
@pytest.mark.parametrize("threads", [8, 32, 48, 64])
def test_a_row_reduction_across_threads_matches_numpy(kind: str, threads: int) -> None:
    f = _row_reduction(kind, threads)
    a = seeded_rng().standard_normal((3, 100)).astype("float32")
    b = unwritten((3,))
    f(a, b)
    np.testing.assert_allclose(b, REDUCERS[kind][1](a, axis=1), rtol=1e-5, atol=1e-5)


def test_up_to_a_warp_of_lanes_reduce_with_shuffles() -> None:
    src = _row_reduction("sum", 32).source
    assert "__shfl_down_sync(0xffffffffu, v, off, 32)" in src and "_tree[" not in src


def test_a_partial_warp_shuffles_with_the_mask_of_its_lanes() -> None:
    assert "__shfl_down_sync(0xffu, v, off, 8)" in _row_reduction("sum", 8).source


def test_more_threads_than_a_warp_reduce_through_a_shared_tree() -> None:
    f = _row_reduction("sum", 48)
    assert "__shared__ float B_red_tree[48];" in f.source
    assert f.program.kernels[0].shared_bytes >= 48 * 4


def test_only_one_thread_writes_the_result() -> None:
    src = _row_reduction("max", 32).source
    assert "if ((k_inner_red == 0))" in src
    body = src[src.index("main_kernel0"):]
    assert body.count("B[(long long)(i)] =") == 1  # the init moved into thread 0's write


def test_a_reduction_over_threadidx_y_reduces_along_y() -> None:
    A = te.placeholder((4, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = create_schedule(B)
    _, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    bind(s, B, B.op.axis[0], "threadIdx.x")
    bind(s, B, ki, "threadIdx.y")
    f = lowering.build(s, [A, B], target="cuda -sim")
    assert "stride = blockDim.x" in f.source
    a = seeded_rng().standard_normal((4, 64)).astype("float32")
    b = unwritten((4,))
    f(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_the_generic_gpu_schedule_reduces_softmax_rows_across_threads() -> None:
    X = te.placeholder((5, 200), name="X")
    Y = ops.softmax(X, axis=-1)
    s = schedule_gpu_generic(create_schedule(Y), [Y])
    f = lowering.build(s, [X, Y], target="cuda -sim")
    assert "__shfl_down_sync" in f.source or "_tree[" in f.source
    x = seeded_rng().standard_normal((5, 200)).astype("float32")
    y = unwritten((5, 200))
    f(x, y)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_a_reduction_bound_to_two_thread_axes_is_refused() -> None:
    A = te.placeholder((64, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    m = te.reduce_axis((0, 64), name="m")
    B = te.compute((1,), lambda i: te.sum(A[k, m], axis=[k, m]), name="B")
    s = create_schedule(B)
    _, ki = s[B].split(k, factor=4)
    _, mi = s[B].split(m, factor=4)
    bind(s, B, ki, "threadIdx.y")
    bind(s, B, mi, "threadIdx.x")
    s[B].reorder(ki, mi, *[a for a in s[B].leaf_iter_vars if a not in (ki, mi)])
    with pytest.raises(CodegenError, match=r"bound to several thread axes \(threadIdx.x, "
                                           r"threadIdx.y\)"):
        lowering.build(s, [A, B], target="cuda")
