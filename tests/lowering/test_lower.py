"""lowering.lower: schedules lowered to loop IR give numpy's results in the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering import ir
from schedule import create_schedule
from tessel_errors import LoweringError
from tests.unwritten import unwritten


def _run(s, args, *arrays):
    f = lowering.lower(s, args)
    lowering.interpret(f, *arrays)
    return f


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


def _matmul(m=20, n=18, k=13):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


def test_matmul_tiled_vectorized_parallel_matches_numpy():
    rng = np.random.default_rng(1)
    A, B, C = _matmul()
    s = create_schedule(C)
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 4)
    (k,) = s[C].op.reduce_axis
    s[C].reorder(io, jo, k, ii, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    a, b, c = _rand(rng, 20, 13), _rand(rng, 13, 18), unwritten((20, 18), "float32")
    _run(s, [A, B, C], a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_cache_write_accumulator_at_tile_matches_numpy():
    rng = np.random.default_rng(2)
    A, B, C = _matmul(16, 24, 10)
    s = create_schedule(C)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 8)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=3)
    s[CC].reorder(ko, ci, ki, cj)
    s[CC].vectorize(cj)
    s[CC].unroll(ki)
    a, b, c = _rand(rng, 16, 10), _rand(rng, 10, 24), unwritten((16, 24), "float32")
    f = _run(s, [A, B, C], a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    allocs = []
    ir.post_order_visit_stmt(f.body, lambda n: allocs.append(n)
                             if isinstance(n, ir.Allocate) else None)
    assert [(a.buffer.scope, [d.value for d in a.buffer.shape]) for a in allocs] == \
        [("local", [4, 8])]


def test_cache_read_at_consumer_loop_matches_numpy():
    rng = np.random.default_rng(3)
    A, B, C = _matmul(12, 12, 8)
    s = create_schedule(C)
    AA = s.cache_read(A, "local", [C])
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=4)
    s[AA].compute_at(s[C], io)
    a, b, c = _rand(rng, 12, 8), _rand(rng, 8, 12), unwritten((12, 12), "float32")
    f = _run(s, [A, B, C], a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert "allocate A.local[float32 * (4, 8)] in local" in str(f)


def test_rfactor_of_split_reduction_matches_numpy():
    rng = np.random.default_rng(4)
    A = te.placeholder((6, 30), name="A")
    k = te.reduce_axis((0, 30), name="k")
    S = te.compute((6,), lambda i: te.sum(A[i, k], axis=k), name="S")
    s = create_schedule(S)
    ko, ki = s[S].split(k, factor=8)
    SF = s.rfactor(S, ki)
    s[SF].vectorize(s[SF].op.axis[0])
    a, out = _rand(rng, 6, 30), unwritten(6, "float32")
    _run(s, [A, S], a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-4, atol=1e-4)
    assert SF.shape[0].value == 8 and SF.op.name == "S.rf"


def test_inline_chain_and_padding_conv_compute_at():
    rng = np.random.default_rng(5)
    H = 9
    X = te.placeholder((H, H), name="X")
    P = te.compute((H + 2, H + 2), lambda y, x: te.if_then_else(
        te.all(y >= 1, y < H + 1, x >= 1, x < H + 1), X[y - 1, x - 1], 0.0), name="P")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    W = te.placeholder((3, 3), name="W")
    C = te.compute((H, H), lambda y, x: te.sum(P[y + ry, x + rx] * W[ry, rx], axis=[ry, rx]),
                   name="C")
    s = create_schedule(C)
    y, x = s[C].op.axis
    yo, yi = s[C].split(y, factor=4)
    s[P].compute_at(s[C], yo)
    xv, w, out = _rand(rng, H, H), _rand(rng, 3, 3), unwritten((H, H), "float32")
    f = _run(s, [X, W, C], xv, w, out)
    pad = np.pad(xv, 1)
    ref = sum(pad[a:a + H, b:b + H] * w[a, b] for a in range(3) for b in range(3))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    assert "allocate P[float32 * (6, 11)] in global" in str(f)


def test_fused_elementwise_inline_matches_numpy():
    rng = np.random.default_rng(6)
    X = te.placeholder((7, 5), name="X")
    Y = te.compute((7, 5), lambda i, j: te.max(X[i, j] * 2.0 + 1.0, 0.0), name="Y")
    Z = te.compute((7, 5), lambda i, j: te.tanh(Y[i, j]), name="Z")
    s = create_schedule(Z)
    s[Y].compute_inline()
    f = s[Z].fuse(*s[Z].op.axis)
    fo, fi = s[Z].split(f, factor=8)
    s[Z].parallel(fo)
    s[Z].vectorize(fi)
    x, z = _rand(rng, 7, 5), unwritten((7, 5), "float32")
    func = _run(s, [X, Z], x, z)
    np.testing.assert_allclose(z, np.tanh(np.maximum(x * 2 + 1, 0)), rtol=1e-5, atol=1e-6)
    assert "allocate" not in str(func)


def test_argmax_tuple_reduction_matches_numpy():
    rng = np.random.default_rng(7)
    A = te.placeholder((5, 9), name="A")
    k = te.reduce_axis((0, 9), name="k")
    M = te.compute((5,), lambda i: te.argmax((k, A[i, k]), axis=k), name="M")
    s = create_schedule(M[0])
    a = _rand(rng, 5, 9)
    oi, ov = unwritten(5, "int32"), unwritten(5, "float32")
    _run(s, [A, M[0], M[1]], a, oi, ov)
    np.testing.assert_array_equal(oi, a.argmax(axis=1))
    np.testing.assert_allclose(ov, a.max(axis=1))


def test_symbolic_shape_split_is_guarded():
    rng = np.random.default_rng(8)
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    s = create_schedule(B)
    io, ii = s[B].split(B.op.axis[0], factor=4)
    f = lowering.lower(s, [A, B])
    assert "if ((((i.outer * 4) + i.inner) < n))" in str(f)
    a, b = _rand(rng, 11), unwritten(11, "float32")
    lowering.interpret(f, a, b)
    np.testing.assert_allclose(b, a * 3)


def test_consumer_outside_attach_loop_is_a_lowering_error():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    D = te.compute((8,), lambda i: B[i] + C[i], name="D")
    s = create_schedule(D)
    s[B].compute_at(s[C], s[C].op.axis[0])
    with pytest.raises(LoweringError, match="consumer 'D' runs outside that loop"):
        lowering.lower(s, [A, D])


def test_placeholder_missing_from_args_is_a_lowering_error():
    A, B, C = _matmul(4, 4, 4)
    with pytest.raises(LoweringError, match="placeholder 'B' is read but is not among"):
        lowering.lower(create_schedule(C), [A, C])


def test_storage_align_sets_padded_strides():
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((8, 8), lambda i, j: B[i, j] * 2.0, name="C")
    s = create_schedule(C)
    s[B].storage_align(s[B].op.axis[0], 16, 1)
    f = lowering.lower(s, [A, C])
    allocs = []
    ir.post_order_visit_stmt(f.body, lambda n: allocs.append(n)
                             if isinstance(n, ir.Allocate) else None)
    assert [d.value for d in allocs[0].buffer.strides] == [17, 1]


def test_nested_compute_at_chain_matches_numpy():
    rng = np.random.default_rng(9)
    A = te.placeholder((20,), name="A")
    B = te.compute((20,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((18,), lambda i: B[i] + B[i + 2], name="C")
    D = te.compute((16,), lambda i: C[i] * C[i + 2], name="D")
    s = create_schedule(D)
    io, ii = s[D].split(D.op.axis[0], factor=5)
    s[C].compute_at(s[D], io)
    co, ci = s[C].split(C.op.axis[0], factor=3)
    s[B].compute_at(s[C], co)
    a, d = _rand(rng, 20), unwritten(16, "float32")
    f = _run(s, [A, D], a, d)
    b = a + 1
    c = b[:18] + b[2:]
    np.testing.assert_allclose(d, c[:16] * c[2:], rtol=1e-5)
    assert "allocate C[float32 * (7)] in global" in str(f)
    assert "allocate B[float32 * (5)] in global" in str(f)


def test_cache_write_of_a_tuple_reduction():
    rng = np.random.default_rng(10)
    X = te.placeholder((6, 9), name="X")
    k = te.reduce_axis((0, 9), name="k")
    M = te.compute((6,), lambda i: te.argmax((k, X[i, k]), axis=k), name="M")
    s = create_schedule(M[0])
    ML = s.cache_write(M[0], "local")
    s[ML[0]].compute_at(s[M[0]], s[M[0]].op.axis[0])
    x = _rand(rng, 6, 9)
    oi, ov = unwritten(6, "int32"), unwritten(6, "float32")
    f = _run(s, [X, M[0], M[1]], x, oi, ov)
    np.testing.assert_array_equal(oi, x.argmax(axis=1))
    np.testing.assert_allclose(ov, x.max(axis=1))
    assert "let M.local.v0.next = select(" in str(f)


def test_scalar_reduction_and_multi_output_compute_at():
    rng = np.random.default_rng(11)
    A = te.placeholder((5,), name="A")
    k = te.reduce_axis((0, 5), name="k")
    S = te.compute((), lambda: te.sum(A[k], axis=k), name="S")
    a, out = _rand(rng, 5), unwritten((), "float32")
    _run(create_schedule(S), [A, S], a, out)
    np.testing.assert_allclose(out, a.sum(), rtol=1e-5)
    P, Q = te.compute((4,), lambda i: (A[i] + 1.0, A[i] * 2.0), name="PQ")
    R = te.compute((4,), lambda i: P[i] + Q[i], name="R")
    s = create_schedule(R)
    s[P].compute_at(s[R], R.op.axis[0])
    r = unwritten(4, "float32")
    f = _run(s, [A, R], a, r)
    np.testing.assert_allclose(r, (a[:4] + 1) + a[:4] * 2, rtol=1e-5)
    assert "allocate PQ.v1[float32 * (1)] in global" in str(f)


def test_symbolic_compute_at_runs_in_llvm():
    rng = np.random.default_rng(12)
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    s = create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], io)
    kernel = lowering.build(s, [A, C], target="llvm")
    a, c = _rand(rng, 11), unwritten(11, "float32")
    kernel(a, c)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)


def test_compute_at_axis_fused_or_split_afterwards_follows_the_new_loop():
    rng = np.random.default_rng(13)
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((8, 8), lambda i, j: B[i, j] * 2.0, name="C")
    s = create_schedule(C)
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 4)
    s[B].compute_at(s[C], jo)
    f_ = s[C].fuse(io, jo)
    s[C].split(f_, factor=2)
    a, c = _rand(rng, 8, 8), unwritten((8, 8), "float32")
    f = _run(s, [A, C], a, c)
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)
    text = str(f)
    first_alloc = text.index("allocate B[float32 * (4, 4)]")
    assert text.index("for (i.outer.j.outer.fused.inner") < first_alloc


def test_multi_output_stage_with_some_outputs_in_args_allocates_the_rest():
    rng = np.random.default_rng(14)
    X = te.placeholder((4, 7), name="X")
    k = te.reduce_axis((0, 7), name="k")
    M = te.compute((4,), lambda i: te.argmax((k, X[i, k]), axis=k), name="M")
    s = create_schedule(M[0])
    f = lowering.lower(s, [X, M[0]])
    assert "allocate M.v1[float32 * (4)] in global" in str(f)
    x, idx = _rand(rng, 4, 7), unwritten(4, "int32")
    lowering.build(s, [X, M[0]], target="llvm")(x, idx)
    np.testing.assert_array_equal(idx, x.argmax(axis=1))


def test_an_input_the_computation_never_reads_is_still_a_kernel_parameter() -> None:
    import numpy as np

    import lowering
    import tensor_expr as te
    from schedule import create_schedule

    a = te.placeholder((4,), name="A")
    unused = te.placeholder((3,), name="U")
    b = te.compute((4,), lambda i: a[i] + 1.0, name="B")
    f = lowering.build(create_schedule(b), [a, unused, b])
    x = np.random.default_rng(0).standard_normal(4).astype("float32")
    out = unwritten(4, "float32")
    f(x, np.zeros(3, "float32"), out)
    np.testing.assert_allclose(out, x + 1.0)
    assert [p.name for p in lowering.lower(create_schedule(b), [a, unused, b]).params] == \
        ["A", "U", "B"]
