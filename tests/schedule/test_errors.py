"""Every illegal use of a schedule primitive raises ScheduleError naming stage, primitive, why."""

from __future__ import annotations

import re

import pytest

import lowering
import tensor_expr as te
from schedule import apply_json, create_schedule, decl_tensor_intrin
from tessel_errors import LoweringError, ScheduleError
from tests.schedule.test_primitives import packed_gemm


def _matmul(n=64):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C",
                   tag="matmul")
    return A, B, C


def _chain():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((16,), lambda i: B[i] * 2.0, name="C")
    return A, B, C


def _raises(match: str):
    return pytest.raises(ScheduleError, match=re.escape(match))


def test_split_factor_zero_names_stage_and_axis():
    _, _, C = _matmul()
    s = create_schedule(C)
    with _raises("split factor must be a positive integer, got 0\n"
                 "  at stage 'C' (compute matmul), axis 'j' (extent 64)"):
        s[C].split(C.op.axis[1], factor=0)


def test_split_nparts_negative():
    _, _, C = _matmul()
    s = create_schedule(C)
    with _raises("split nparts must be a positive integer, got -2"):
        s[C].split(C.op.axis[0], nparts=-2)


def test_split_needs_exactly_one_of_factor_and_nparts():
    _, _, C = _matmul()
    s = create_schedule(C)
    with _raises("split needs exactly one of factor= or nparts="):
        s[C].split(C.op.axis[0], factor=2, nparts=2)


def test_split_of_an_axis_that_is_no_longer_a_leaf():
    _, _, C = _matmul()
    s = create_schedule(C)
    i = C.op.axis[0]
    s[C].split(i, factor=8)
    with _raises("split: axis 'i' is no longer a leaf (it was already split or fused)"):
        s[C].split(i, factor=4)
    with _raises("leaf axes are: 'i.outer', 'i.inner', 'j', 'k'"):
        s[C].split(i, factor=4)


def test_compute_at_an_axis_that_is_not_the_consumers():
    _, B, C = _chain()
    s = create_schedule(C)
    with _raises("compute_at to an axis that is not a consumer's: 'i' belongs to stage 'B'"):
        s[B].compute_at(s[C], B.op.axis[0])


def test_compute_at_a_stage_that_is_not_a_consumer():
    A, B, C = _chain()
    D = te.compute((16,), lambda i: A[i] - 1.0, name="D")
    E = te.compute((16,), lambda i: C[i] + D[i], name="E")
    s = create_schedule(E)
    with _raises("stage 'D' (compute) is not a consumer of this stage"):
        s[B].compute_at(s[D], D.op.axis[0])
    with _raises("consumers are: 'C', 'E'"):
        s[B].compute_at(s[D], D.op.axis[0])


def test_compute_at_of_an_output():
    _, B, C = _chain()
    D = te.compute((16,), lambda i: C[i] + 1.0, name="D")
    s = create_schedule([C, D])
    with _raises("compute_at: an output stage cannot be computed at another stage"):
        s[C].compute_at(s[D], D.op.axis[0])


def test_reorder_of_axes_from_another_stage():
    _, B, C = _chain()
    s = create_schedule(C)
    with _raises("reorder: axis 'i' belongs to stage 'B' (compute), not to this stage\n"
                 "  at stage 'C' (compute), axis 'i' (extent 16)"):
        s[C].reorder(B.op.axis[0], C.op.axis[0])


def test_reorder_of_the_same_axis_twice():
    _, _, C = _matmul()
    s = create_schedule(C)
    i, j = C.op.axis
    with _raises("reorder got the same axis twice: 'i', 'j', 'i'"):
        s[C].reorder(i, j, i)


def test_vectorize_of_a_reduction_axis():
    _, _, C = _matmul()
    s = create_schedule(C)
    with _raises("vectorize of a reduction axis: iterations of a reduction depend on each "
                 "other\n  at stage 'C' (compute matmul), axis 'k' (extent 64)"):
        s[C].vectorize(C.op.reduce_axis[0])


def test_parallel_of_a_split_reduction_axis():
    _, _, C = _matmul()
    s = create_schedule(C)
    ko, _ = s[C].split(C.op.reduce_axis[0], factor=8)
    with _raises("parallel of a reduction axis"):
        s[C].parallel(ko)


def test_fuse_of_non_adjacent_axes():
    _, _, C = _matmul()
    s = create_schedule(C)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    with _raises("fuse of non-adjacent axes: 'i' is leaf 0 and 'k' is leaf 2"):
        s[C].fuse(i, k)
    with _raises("fuse of non-adjacent axes: 'j' is leaf 1 and 'i' is leaf 0"):
        s[C].fuse(j, i)


def test_fuse_of_data_and_reduction_axes():
    _, _, C = _matmul()
    s = create_schedule(C)
    with _raises("fuse of a data-parallel axis with a reduction axis ('j', 'k')"):
        s[C].fuse(C.op.axis[1], C.op.reduce_axis[0])


def test_inline_of_an_output():
    _, _, C = _chain()
    s = create_schedule(C)
    with _raises("compute_inline: inline of an output: outputs must be stored; inline the "
                 "stages feeding it instead\n  at stage 'C' (compute)"):
        s[C].compute_inline()


def test_inline_of_a_reduction():
    A, B, C = _matmul(8)
    D = te.compute((8, 8), lambda i, j: C[i, j] + 1.0, name="D")
    s = create_schedule(D)
    with _raises("compute_inline: inline of a reduction is not possible; use compute_at"):
        s[C].compute_inline()


def test_bind_a_thread_tag_twice_in_one_stage():
    _, _, C = _matmul()
    s = create_schedule(C)
    i, j = C.op.axis
    s[C].bind(i, te.thread_axis("threadIdx.x"))
    with _raises("thread tag 'threadIdx.x' is already bound to axis 'i' of this stage"):
        s[C].bind(j, te.thread_axis("threadIdx.x"))


def test_bind_of_a_reduction_axis_and_of_a_non_thread():
    _, _, C = _matmul()
    s = create_schedule(C)
    with _raises("bind of a reduction axis to blockIdx.x: a reduction runs across the threads "
                 "of one block"):
        s[C].bind(C.op.reduce_axis[0], te.thread_axis("blockIdx.x"))
    with _raises("bind needs a thread axis from te.thread_axis(tag)"):
        s[C].bind(C.op.axis[0], C.op.axis[1])


def test_tensorize_of_a_nest_that_does_not_match():
    a = te.placeholder((4,), name="a")
    b = te.placeholder((4,), name="b")
    vadd = decl_tensor_intrin(te.compute((4,), lambda i: a[i] + b[i], name="c"), "vadd4")
    A = te.placeholder((16,), name="A")
    C = te.compute((16,), lambda i: A[i] * 2.0, name="C")
    s = create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=8)
    with _raises("does not match intrinsic 'vadd4': loop extents under the axis are "
                 "data [8], reduce []; the intrinsic declares data [4], reduce []"):
        s[C].tensorize(ii, vadd)
    io2, ii2 = s[C].split(ii, factor=4)
    with _raises("the computation has '(A[i] * 2.0)' where the intrinsic has '(a[i] + b[i])'"):
        s[C].tensorize(ii2, vadd)


def test_tensorize_of_a_leading_dim_iterated_under_the_axis():
    gemm, A, B, C, ko, ki = packed_gemm(j_blocks=4)
    s = create_schedule(C)
    i, j, x, y = C.op.axis
    # j (a leading dim of C and B) has the intrinsic's extent 4 but is not a trailing dim
    s[C].reorder(i, x, ko, j, y, ki)
    with _raises("the output 'C' must match the intrinsic's 2 dims in its last 2 axes; "
                 "axis 'j' is iterated under the tensorized axis"):
        s[C].tensorize(j, gemm)


def _rowsum4x8():
    a = te.placeholder((4, 8), name="a")
    kk = te.reduce_axis((0, 8), name="kk")
    return decl_tensor_intrin(te.compute((4,), lambda x: te.sum(a[x, kk], axis=kk), name="c"),
                              "rowsum4x8")


def test_tensorize_of_an_input_whose_leading_index_uses_the_nest():
    A = te.placeholder((4, 4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((4,), lambda x: te.sum(A[x, x, k], axis=k), name="C")
    s = create_schedule(C)
    with _raises("dim 0 of 'A' (index 'x') uses 'x', an axis under the tensorized one"):
        s[C].tensorize(C.op.axis[0], _rowsum4x8())


def test_tensorize_of_an_input_with_fewer_dims_than_the_intrinsic():
    A = te.placeholder((8,), name="A")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((4,), lambda x: te.sum(A[k], axis=k), name="C")
    s = create_schedule(C)
    with _raises("'A' has 1 dims, fewer than intrinsic input 'a' with 2"):
        s[C].tensorize(C.op.axis[0], _rowsum4x8())


def test_cache_read_for_a_stage_that_does_not_read_it():
    A, B, C = _chain()
    s = create_schedule(C)
    with _raises("cache_read: stage 'C' (compute) does not read 'A'\n  at stage 'A'"):
        s.cache_read(A, "local", [C])
    with _raises("unknown storage scope 'register'"):
        s.cache_read(A, "register", [B])


def test_cache_write_after_split():
    _, _, C = _matmul()
    s = create_schedule(C)
    s[C].split(C.op.axis[0], factor=4)
    with _raises("cache_write must come before split/fuse/reorder on the stage it caches"):
        s.cache_write(C, "local")


def test_rfactor_of_a_data_axis_and_of_a_non_reduction():
    _, B, C = _matmul()
    s = create_schedule(C)
    with _raises("rfactor axis must be a reduction axis (or a split of one)"):
        s.rfactor(C, C.op.axis[0])
    _, B2, C2 = _chain()
    s2 = create_schedule(C2)
    with _raises("rfactor needs a reduction; this stage has no reduce axis"):
        s2.rfactor(C2, C2.op.axis[0])


def test_storage_align_of_the_innermost_dimension_and_bad_offset():
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((8, 8), lambda i, j: B[i, j] * 2.0, name="C")
    s = create_schedule(C)
    with _raises("storage_align of the innermost dimension has no effect"):
        s[B].storage_align(B.op.axis[1], 16, 1)
    with _raises("storage_align offset must be an integer in [0, 16), got 16"):
        s[B].storage_align(B.op.axis[0], 16, 16)


def test_primitives_on_a_placeholder_stage():
    A, _, C = _chain()
    s = create_schedule(C)
    with _raises("split applies to compute stages, not to a placeholder"):
        s[A].split(A.op, factor=2)


def test_stage_lookup_of_a_foreign_tensor():
    _, _, C = _chain()
    X = te.placeholder((3,), name="X")
    s = create_schedule(C)
    with _raises("is not part of this schedule; its stages are 'A', 'B', 'C'"):
        s[X]


def test_create_schedule_of_a_placeholder():
    with _raises("create_schedule: output 'X' is a placeholder"):
        create_schedule(te.placeholder((3,), name="X"))


def test_vectorize_of_a_symbolic_extent_fails_at_lower():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = create_schedule(B)
    s[B].vectorize(B.op.axis[0])
    with pytest.raises(LoweringError, match="vectorize of axis 'i' of stage 'B' needs a "
                       "constant extent, got n"):
        lowering.lower(s, [A, B])


def test_nested_parallel_loops_fail_at_lower():
    _, _, C = _matmul(8)
    A, B = C.op.input_tensors
    s = create_schedule(C)
    s[C].parallel(C.op.axis[0])
    s[C].parallel(C.op.axis[1])
    with pytest.raises(LoweringError, match="parallel loop 'j' is nested inside parallel "
                       "loop 'i'"):
        lowering.lower(s, [A, B, C])


def test_replay_of_a_record_with_an_unknown_axis():
    _, _, C = _matmul()
    s = create_schedule(C)
    bad = ('{"version": 1, "primitives": [{"prim": "split", "stage": "C", '
           '"args": {"axis": {"iv": ["C", "q"]}, "factor": 4, "nparts": null}}]}')
    with _raises("replay of primitive 0 (split) failed: replay: stage 'C' (compute matmul) "
                 "has no axis 'q'; its axes are 'i', 'j', 'k'"):
        apply_json(s, bad)
    with _raises("not a Tessel schedule record"):
        apply_json(s, '{"version": 99}')
