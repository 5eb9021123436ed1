"""The loop passes on hand-built loop IR: simplify, loop_partition, remove_no_op, verify."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering import ir
from lowering.passes import loop_partition, remove_no_op, simplify, verify_loops
from tessel_errors import LoweringError

i, j = te.var("i"), te.var("j")
B = ir.Buffer("B", (te.const(10),), "float32")


def _for(v, lo, ext, body, kind=ir.ForKind.SERIAL):
    return ir.For(v, te.const(lo), te.const(ext), kind, body)


def _func(body):
    return ir.PrimFunc("f", (B,), body)


def test_simplify_drops_an_if_whose_condition_folds_to_true():
    body = _for(i, 0, 4, ir.IfThenElse(i * 2 + 1 < i * 2 + 3, ir.BufferStore(B, te.const(1.0),
                                                                            (i,))))
    assert str(simplify(_func(body)).body) == "for (i, 0, 4) {\n  B[i] = 1.0\n}"


def test_simplify_uses_loop_ranges():
    f = _func(_for(i, 0, 2, _for(j, 0, 4, ir.BufferStore(B, te.const(1.0),
                                                         (((i * 4 + j) // 4) * 4 + j,)))))
    assert "B[((i * 4) + j)]" in str(simplify(f))


def test_loop_partition_splits_off_a_guarded_head_and_tail():
    # 2 <= i + 1 < 9 holds for i in [1, 8): head i=0 and tail i=8, 9 are dropped
    store = ir.BufferStore(B, te.const(1.0), (i,))
    body = _for(i, 0, 10, ir.IfThenElse(te.all(i + 1 >= 2, i + 1 < 9), store))
    out = remove_no_op(simplify(loop_partition(_func(body))))
    assert str(out.body) == "for (i, 1, 7) {\n  B[i] = 1.0\n}"


def test_loop_partition_keeps_a_parallel_loop_whole_with_its_tail_as_a_branch():
    # a tail outside the parallel loop would run on one thread
    store = ir.BufferStore(B, te.const(1.0), (i,))
    body = _for(i, 0, 10, ir.IfThenElse(i < 9, store), kind=ir.ForKind.PARALLEL)
    out = remove_no_op(simplify(loop_partition(_func(body)))).body
    assert isinstance(out, ir.For) and out.kind is ir.ForKind.PARALLEL
    assert (out.min.value, out.extent.value) == (0, 10)
    assert str(out.body) == "if ((i < 9)) {\n  B[i] = 1.0\n}"


def test_a_partitioned_parallel_loop_computes_every_element():
    A = te.placeholder((1000,), name="A")
    C = te.compute((1000,), lambda x: A[x] * 2.0, name="C")
    from schedule import create_schedule

    s = create_schedule(C)
    xo, xi = s[C].split(C.op.axis[0], factor=64)
    s[C].parallel(xo)
    s[C].vectorize(xi)
    a = np.random.default_rng(2).standard_normal(1000).astype("float32")
    out = np.full(1000, np.nan, "float32")
    lowering.build(s, [A, C])(a, out)
    np.testing.assert_array_equal(out, a * 2.0)


def test_loop_partition_keeps_the_guard_in_a_tail_that_it_cannot_decide():
    n = te.var("n")
    store = ir.BufferStore(B, te.const(1.0), (i,))
    body = _for(i, 0, 10, ir.IfThenElse(i < n, store))
    assert loop_partition(_func(body)).body is body


def test_loop_partition_tells_apart_vars_that_print_alike():
    # j*n - j*n' is not 0 when n and n' are different vars that share a name: the guard
    # i + j*n - j*n' < 5 cannot be dropped for i < 5 (the old canonicaliser keyed products
    # by their text, cancelled them, and did)
    n1, n2 = te.var("n"), te.var("n")
    store = ir.BufferStore(B, te.const(1.0), (i,))
    body = _for(i, 0, 10, _for(j, 0, 2, ir.IfThenElse(i + j * n1 - j * n2 < 5, store)))
    assert loop_partition(_func(body)).body is body


def test_loop_partition_reads_an_enclosing_one_iteration_loop_as_a_constant():
    # a compute_at stage's own row is a loop of one iteration around its reduction: the
    # padding guard h + k >= 1 then holds for k in [1, 3) (and never for k = 0)
    h, k = te.var("h"), te.var("k")
    store = ir.BufferStore(B, te.const(1.0), (k,))
    body = _for(h, 0, 1, _for(k, 0, 3, ir.IfThenElse(h + k >= 1, store)))
    out = remove_no_op(simplify(loop_partition(_func(body))))
    assert str(out.body) == "for (k, 1, 2) {\n  B[k] = 1.0\n}"


def test_loop_partition_cuts_a_loop_without_a_guard_free_iteration_where_guards_change():
    # two column tiles, the left guarded on the left, the right on the right: no iteration
    # of the tile loop is free of both guards, yet each tile drops the one that holds on it
    t, c = te.var("t"), te.var("c")
    store = ir.BufferStore(B, te.const(1.0), (t * 5 + c,))
    guard = te.all(t * 5 + c >= 1, t * 5 + c < 9)
    body = _for(t, 0, 2, _for(c, 0, 5, ir.IfThenElse(guard, store)))
    out = str(remove_no_op(simplify(loop_partition(_func(body)))).body)
    # (and then the column loop of each tile sheds its own guard)
    assert out == "for (c, 1, 4) {\n  B[c] = 1.0\n}\nfor (c, 0, 4) {\n  B[(c + 5)] = 1.0\n}"


def test_loop_partition_preserves_results():
    A = te.placeholder((13, 7), name="A")
    C = te.compute((13, 7), lambda y, x: A[y, x] * 2.0, name="C")
    from schedule import create_schedule

    s = create_schedule(C)
    yo, xo, yi, xi = s[C].tile(*C.op.axis, 4, 3)
    a = np.random.default_rng(0).standard_normal((13, 7)).astype("float32")
    outs = []
    for partition in (True, False):
        c = np.full((13, 7), np.nan, "float32")
        f = lowering.lower(s, [A, C], partition=partition)
        lowering.interpret(f, a, c)
        outs.append((c, str(f).count("if (")))
    np.testing.assert_array_equal(outs[0][0], a * 2)
    np.testing.assert_array_equal(outs[1][0], a * 2)
    assert outs[0][1] == 0 and outs[1][1] > 0


def test_lower_and_build_reject_an_unknown_option():
    from schedule import create_schedule

    A = te.placeholder((8,), name="A")
    C = te.compute((8,), lambda i: A[i] + 1.0, name="C")
    s = create_schedule(C)
    with pytest.raises(TypeError, match="partiton"):
        lowering.lower(s, [A, C], partiton=False)
    with pytest.raises(TypeError, match="partiton"):
        lowering.build(s, [A, C], target="llvm", partiton=False)


def test_remove_no_op_drops_empty_and_zero_trip_loops_and_inlines_unit_loops():
    store = ir.BufferStore(B, te.const(2.0), (j,))
    body = ir.seq(_for(i, 0, 0, store), _for(i, 0, 3, ir.SeqStmt(())), _for(j, 5, 1, store))
    assert str(remove_no_op(_func(body)).body) == "B[5] = 2.0"


def test_verify_rejects_nested_vector_loops_and_symbolic_vector_extent():
    store = ir.BufferStore(B, te.const(1.0), (i,))
    vec = ir.ForKind.VECTORIZED
    with pytest.raises(LoweringError, match="vectorized loop 'i' is inside vectorized loop 'j'"):
        verify_loops(_func(_for(j, 0, 2, _for(i, 0, 4, store, vec), vec)))
    n = te.var("n")
    with pytest.raises(LoweringError, match="vectorized loop 'i' has non-constant extent n"):
        verify_loops(_func(ir.For(i, te.const(0), n, vec, store)))
