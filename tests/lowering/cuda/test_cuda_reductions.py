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


def _row_reduction(kind: str, threads: int, rows: int = 3, length: int = 100,
                   dtype: str = "float32"):
    A = te.placeholder((rows, length), dtype, name="A")
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


def _wide_range_rows(rows: int, length: int) -> np.ndarray:
    """float32 values over eight orders of magnitude: sums in different orders round
    differently, so the order the simulator combines lanes in shows in the result."""
    rng = seeded_rng()
    return (rng.standard_normal((rows, length)) *
            10.0 ** rng.uniform(-4, 4, (rows, length))).astype("float32")


def _lane_partials(a: np.ndarray, threads: int) -> np.ndarray:
    """Each lane's own partial sum in a's dtype: lane t adds a[:, t], a[:, t + threads],
    ... in order, as the split reduce loop makes it."""
    part = np.zeros((a.shape[0], threads), a.dtype)
    for start in range(0, a.shape[1], threads):
        chunk = a[:, start:start + threads]
        part[:, :chunk.shape[1]] += chunk
    return part


def _shuffle_down_sum(lanes: np.ndarray) -> np.float32:
    """CUDA's `for (off = w/2; off > 0; off >>= 1) v += __shfl_down_sync(m, v, off, w)`,
    written out per lane: lane i reads lane i + off, or itself past the width."""
    v = lanes.copy()
    off = len(v) // 2
    while off:
        v = v + np.concatenate([v[off:], v[len(v) - off:]])
        off //= 2
    return v[0]


def _shared_tree_sum(lanes: np.ndarray) -> np.float32:
    """The shared-memory tree: slot i < s takes slot i + s while i + s is in range."""
    v, n = lanes.copy(), len(lanes)
    s = 1
    while s < n:
        s *= 2
    s //= 2
    while s:
        for i in range(min(s, n - s)):
            v[i] = v[i] + v[i + s]
        s //= 2
    return v[0]


@pytest.mark.parametrize(("threads", "order"), [(32, _shuffle_down_sum),
                                                (48, _shared_tree_sum)])
def test_the_simulator_sums_lanes_in_the_order_the_gpu_code_does(threads, order) -> None:
    f = _row_reduction("sum", threads, rows=4, length=200)
    a = _wide_range_rows(4, 200)
    b = unwritten((4,))
    f(a, b)
    parts = _lane_partials(a, threads)
    gpu_order = np.array([order(p) for p in parts], "float32")
    in_lane_order = np.array([np.add.accumulate(p)[-1] for p in parts], "float32")
    assert not np.array_equal(gpu_order, in_lane_order)  # the order shows in these sums
    np.testing.assert_array_equal(b, gpu_order)


@pytest.mark.parametrize(("threads", "order"), [(32, _shuffle_down_sum),
                                                (48, _shared_tree_sum)])
def test_float16_lanes_combine_in_float16_as_the_gpu_code_does(threads, order) -> None:
    # each lane's partial and every combining step rounded to float16 (computed in
    # float32, as numpy's float16 arithmetic does); the bits shuffle as an int
    f = _row_reduction("sum", threads, rows=4, length=200, dtype="float16")
    a = seeded_rng().standard_normal((4, 200)).astype("float16")
    b = unwritten((4,), "float16")
    f(a, b)
    parts = _lane_partials(a, threads)
    np.testing.assert_array_equal(b, np.array([order(p) for p in parts], "float16"))
    if threads == 32:
        assert "(unsigned short)__shfl_down_sync(0xffffffffu, (int)v, off, 32)" in f.source
    else:
        assert "__shared__ unsigned short B_red_tree[48];" in f.source


def test_a_float16_max_across_threads_matches_numpy() -> None:
    f = _row_reduction("max", 64, dtype="float16")
    a = seeded_rng().standard_normal((3, 100)).astype("float16")
    b = unwritten((3,), "float16")
    f(a, b)
    np.testing.assert_array_equal(b, a.max(axis=1))
