"""hoist_guards on hand-built loop IR and on a lowered 2-D conv whose padding is a guard,
and loop_partition's rules for guards around much work: results against numpy (loop-IR
interpreter and LLVM) on fresh random inputs."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering import ir
from lowering.passes import loop_partition, remove_no_op, simplify
from lowering.passes.hoist_guards import hoist_guards, hoist_guards_stmt, prefetch_only, work
from lowering.prefetch import PREFETCH
from schedule import create_schedule
from tests.rng import seeded_rng

i, j, k, T = te.var("i"), te.var("j"), te.var("k"), te.var("t")
B = ir.Buffer("B", (te.const(64),), "float32")


def _for(v, lo, ext, body, kind=ir.ForKind.SERIAL):
    return ir.For(v, te.const(lo), te.const(ext), kind, body)


def _store(idx):
    return ir.BufferStore(B, te.const(1.0), (idx,))


def test_a_conjunct_moves_out_to_the_loop_of_its_innermost_var():
    guard = te.all(i >= 1, j >= 2, i + j < 6)
    body = _for(i, 0, 4, _for(j, 0, 4, ir.IfThenElse(guard, _store(i * 4 + j)),
                              ir.ForKind.UNROLLED))
    out = hoist_guards_stmt(body)
    # i >= 1 guards the whole j loop; the others stay inside it
    assert isinstance(out, ir.For) and isinstance(out.body, ir.IfThenElse)
    assert str(out.body.condition) == "(i >= 1)"
    inner = out.body.then_case
    assert isinstance(inner, ir.For) and inner.var is j
    assert str(inner.body.condition) == "((j >= 2) && ((i + j) < 6))"


def test_a_guard_reading_memory_a_guard_with_an_else_and_a_thread_loop_stay():
    A = ir.Buffer("A", (te.const(4),), "int32")
    reads = ir.IfThenElse(ir.BufferLoad(A, (te.const(0),)) > 0, _store(j))
    body = _for(j, 0, 4, reads)
    assert hoist_guards_stmt(body) is body
    with_else = _for(j, 0, 4, ir.IfThenElse(i >= 1, _store(j), _store(j + 4)))
    assert hoist_guards_stmt(with_else) is with_else
    bound = ir.For(j, te.const(0), te.const(4), ir.ForKind.THREAD_BINDING,
                   ir.IfThenElse(i >= 1, _store(j)), thread_tag="threadIdx.x")
    assert hoist_guards_stmt(bound) is bound


def test_a_one_iteration_loop_lets_a_conjunct_out_with_its_min():
    body = _for(j, 3, 1, _for(k, 0, 4, ir.IfThenElse(i + j >= 4, _store(k)),
                              ir.ForKind.UNROLLED))
    out = hoist_guards_stmt(body)
    assert isinstance(out, ir.IfThenElse) and str(out.condition) == "(i >= 1)"


def test_a_linear_conjunct_around_much_work_becomes_the_loop_bounds():
    # k + i in [2, 6): k in [max(0, 2 - i), min(5, 6 - i)); the store loop is the work
    guard = te.all(k + i >= 2, k + i < 6)
    body = _for(k, 0, 5, ir.IfThenElse(guard, _for(j, 0, 16, _store(k * 8 + j))))
    out = hoist_guards_stmt(body)
    assert isinstance(out, ir.For) and "max(0," in str(out.min) and "min(5," in str(out.extent)
    assert isinstance(out.body, ir.For), "no branch left"
    # little work keeps the branch (loop_partition may peel it)
    small = _for(k, 0, 5, ir.IfThenElse(guard, _store(k)))
    assert isinstance(hoist_guards_stmt(small).body, ir.IfThenElse)


@pytest.mark.parametrize("i_value", [0, 1, 3, 7])
def test_bounds_from_a_guard_run_the_same_iterations_in_the_interpreter(i_value):
    n = te.var("n")
    out = ir.Buffer("O", (te.const(64),), "float32")
    guard = te.all(k * 2 + n >= 3, k * 2 + n < 9)
    store = ir.BufferStore(out, ir.BufferLoad(out, (k * 8 + j,)) + 1.0, (k * 8 + j,))
    body = _for(k, 0, 3, ir.IfThenElse(guard, _for(j, 0, 16, store)))
    hoisted = hoist_guards_stmt(body)
    assert hoisted is not body
    start = seeded_rng().standard_normal(64).astype("float32")
    results = []
    for stmt in (body, hoisted):
        f = ir.PrimFunc("f", (out,), ir.LetStmt(n, te.const(i_value), stmt))
        o = start.copy()
        lowering.interpret(f, o)
        results.append(o)
    assert not np.array_equal(results[0], start) or i_value >= 9
    np.testing.assert_array_equal(results[0], results[1])


def _padded_conv(pad: int, order: str):
    """C[y, x] = sum A[y + ry - pad, x + rx - pad] * W[ry, rx], the padding a guard."""
    H, W = 10, 16
    A = te.placeholder((H, W), name="A")
    Wt = te.placeholder((3, 3), name="W")
    ry, rx = te.reduce_axis((0, 3), name="ry"), te.reduce_axis((0, 3), name="rx")

    def body(y, x):
        yy, xx = y + ry - pad, x + rx - pad
        return te.sum(A[yy, xx] * Wt[ry, rx], axis=[ry, rx],
                      where=te.all(yy >= 0, yy < H, xx >= 0, xx < W))

    C = te.compute((H, W), body, name="C")
    s = create_schedule(C)
    y, x = C.op.axis
    xo, xi = s[C].split(x, factor=8)
    if order == "rows":  # ry outside the columns: the row conjunct guards a row of work
        s[C].reorder(y, xo, ry, rx, xi)
    else:
        s[C].reorder(y, xo, rx, ry, xi)
    s[C].unroll(xi)
    return s, [A, Wt, C]


def _numpy_conv(a, w, pad):
    ap = np.pad(a, pad)
    return np.array([[np.sum(ap[y:y + 3, x:x + 3] * w) for x in range(a.shape[1])]
                     for y in range(a.shape[0])], "float32")


@pytest.mark.parametrize("order", ["rows", "cols"])
@pytest.mark.parametrize("pad", [1, 2])
def test_a_guarded_conv_is_unchanged_by_hoisting_in_the_interpreter_and_llvm(pad, order):
    s, args = _padded_conv(pad, order)
    rng = seeded_rng()
    a, w = rng.standard_normal((10, 16)).astype("float32"), \
        rng.standard_normal((3, 3)).astype("float32")
    want = _numpy_conv(a, w, pad)
    func = lowering.lower(s, args)
    if order == "rows":  # the row conjunct is the ry loop's bounds, no branch
        assert "for (ry, max(" in str(func) and "if (((y + ry)" not in str(func), func
    for run in ("interpreter", "llvm"):
        c = np.full((10, 16), np.nan, "float32")
        if run == "interpreter":
            lowering.interpret(func, a, w, c)
        else:
            lowering.build(s, args, target="llvm")(a, w, c)
        np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def test_work_counts_unrolled_runs_and_a_vector_loop_as_one():
    vec = _for(j, 0, 16, _store(j), ir.ForKind.VECTORIZED)
    assert work(_for(i, 0, 4, vec, ir.ForKind.UNROLLED)) == 4
    assert work(ir.SeqStmt((_store(i), _for(i, 0, 3, _store(i))))) == 4


def test_loop_partition_does_not_peel_a_guard_around_much_work():
    # one test per row of 32 stores is cheaper than a copy of the row per border
    body = _for(i, 0, 8, ir.IfThenElse(i >= 1, _for(j, 0, 32, _store(j))))
    f = ir.PrimFunc("f", (B,), body)
    assert loop_partition(f).body is body
    small = _for(i, 0, 8, ir.IfThenElse(i >= 1, _store(i)))
    assert "if" not in str(remove_no_op(simplify(loop_partition(ir.PrimFunc("f", (B,),
                                                                             small)))))


def test_a_border_piece_is_not_partitioned_again_on_its_own_guard_around_much_work():
    # tiles t of 16 unrolled columns c, taps k: the border tiles t = 0 and t = 3 keep the
    # per-(column, k) guard; a further split of k would copy the 16-column body per k
    c = te.var("c")
    store = ir.BufferStore(B, te.const(1.0), (c,))
    x = T * 16 + c + k
    guard = te.all(x >= 1, x < 63)
    body = _for(T, 0, 4, _for(k, 0, 3, _for(c, 0, 16, ir.IfThenElse(guard, store),
                                            ir.ForKind.UNROLLED)))
    out = str(remove_no_op(simplify(loop_partition(ir.PrimFunc("f", (B,), body)))))
    assert out.count("for (k") == 3, out  # head, interior, tail: one k loop each
    assert out.count("if (") == 2, out


def test_hoist_guards_on_a_function_returns_it_unchanged_without_guards():
    f = ir.PrimFunc("f", (B,), _for(i, 0, 4, _store(i)))
    assert hoist_guards(f) is f


def test_a_border_tile_splits_its_unrolled_columns_on_the_taps_range_and_rolls_its_taps():
    # tile t = 0 reaches into the padding only at column 0 (for k = 0): columns 1..15 run
    # guard-free in the same unrolled loop; the unrolled taps around a loop are rolled
    c, q = te.var("c"), te.var("q")
    A = ir.Buffer("A", (te.const(64), te.const(4)), "float32")
    store = ir.BufferStore(A, te.const(1.0), (c, q))
    x = T * 16 + c + k
    guard = te.all(x >= 1, x < 63)
    cols = _for(c, 0, 16, ir.IfThenElse(guard, store), ir.ForKind.UNROLLED)
    body = _for(T, 0, 4, _for(k, 0, 3, _for(q, 0, 4, cols), ir.ForKind.UNROLLED))
    out = str(remove_no_op(simplify(loop_partition(ir.PrimFunc("f", (A,), body)))))
    assert "for (c, 1, 15) unrolled" in out and "if ((k >= 1))" in out, out
    assert out.count("for (k, 0, 3) unrolled") == 1, out  # the interior keeps it unrolled
    assert out.count("for (k, 0, 3) {") == 2, out  # head and tail roll it


W = ir.Buffer("W", (te.const(64),), "float32")


def _prefetch(idx):
    return ir.Evaluate(te.Call("int32", PREFETCH, (ir.BufferLoad(W, (idx,)), te.const(2))))


def _row_with_prefetches(store_uses_row: bool):
    """for h { for k { if (k % 4 == h % 4) prefetch W[k]; if (row guard) work } }: the
    work's stores indexed by the row h (a plane's row) or not (a tile carried across it)."""
    guard = te.all(k + i >= 1, k + i < 8)  # the kh row of taps of output row i
    row = i * 16 if store_uses_row else te.const(0)
    work = ir.IfThenElse(guard, _for(j, 0, 16, ir.BufferStore(
        B, ir.BufferLoad(B, (row + j,)) + ir.BufferLoad(W, (k * 16 + j,)), (row + j,))))
    pf = ir.IfThenElse(te.floormod(k, 4) == te.floormod(i, 4), _prefetch(k + 16))
    return _for(i, 0, 4, _for(k, 0, 3, ir.seq(pf, work)))


def test_prefetches_beside_guarded_work_go_to_a_loop_of_their_own_and_the_guard_to_bounds():
    out = hoist_guards_stmt(_row_with_prefetches(store_uses_row=True))
    pf_loop, work_loop = out.body.stmts
    assert pf_loop.var is k and str(pf_loop.extent) == "3" and prefetch_only(pf_loop)
    assert work_loop.var is k and "max(0," in str(work_loop.min), str(out)
    assert isinstance(work_loop.body, ir.For), "no branch left around the work"


def test_a_register_tile_carried_across_every_loop_keeps_its_prefetches_inside():
    body = _row_with_prefetches(store_uses_row=False)
    out = hoist_guards_stmt(body)
    assert out is body or not isinstance(out.body, ir.SeqStmt), str(out)


def test_the_split_switch_off_keeps_prefetches_and_work_together(monkeypatch):
    # (lowering.passes exports the function under the module's name)
    hoist = importlib.import_module("lowering.passes.hoist_guards")
    monkeypatch.setattr(hoist, "SPLIT_PREFETCHES", False)
    body = _row_with_prefetches(store_uses_row=True)
    assert hoist_guards_stmt(body) is body


@pytest.mark.parametrize("store_uses_row", [True, False])
def test_split_prefetches_compute_the_same_in_the_interpreter(store_uses_row):
    body = _row_with_prefetches(store_uses_row)
    start = seeded_rng().standard_normal(64).astype("float32")
    w = seeded_rng().standard_normal(64).astype("float32")
    results = []
    for stmt in (body, hoist_guards_stmt(body)):
        o = start.copy()
        lowering.interpret(ir.PrimFunc("f", (B, W), stmt), o, w)
        results.append(o)
    assert not np.array_equal(results[0], start)
    np.testing.assert_array_equal(results[0], results[1])


def test_steps_of_more_prefetches_than_the_limit_stay_beside_the_work():
    hoist = importlib.import_module("lowering.passes.hoist_guards")
    n = hoist.MAX_SPLIT_STEP_LINES
    guard = te.all(k + i >= 1, k + i < 8)
    work = ir.IfThenElse(guard, _for(j, 0, 16, ir.BufferStore(B, te.const(1.0), (i * 16 + j,))))
    for calls, split in ((n, True), (n + 1, False)):
        pf = ir.IfThenElse(te.floormod(k, 4) == te.floormod(i, 4),
                           ir.seq(*[_prefetch(k + 16 * c) for c in range(calls)]))
        out = hoist_guards_stmt(_for(i, 0, 4, _for(k, 0, 3, ir.seq(pf, work))))
        assert isinstance(out.body, ir.SeqStmt) == split, str(out)
