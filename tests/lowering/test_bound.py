"""Bound inference: footprints of compute_at stages and cache buffers (islpy, exact)."""

from __future__ import annotations

import numpy as np

import lowering
import tensor_expr as te
from lowering import bound, ir
from lowering.bound import Consumer, Loop, footprint
from schedule import create_schedule
from tests.unwritten import unwritten


def _allocs(f):
    out = []
    ir.post_order_visit_stmt(f.body, lambda n: out.append(n) if isinstance(n, ir.Allocate)
                             else None)
    return [(a.buffer.name, [str(d) for d in a.buffer.shape]) for a in out]


def _text(fp):
    return [(str(m), str(e)) for m, e in fp]


def test_conv_window_footprint_is_tile_plus_halo():
    io, ii, r = te.var("io"), te.var("ii"), te.var("r")
    c = Consumer([Loop(ii, te.const(4)), Loop(r, te.const(3))], [], [(io * 4 + ii + r,)])
    assert _text(footprint([Loop(io, te.const(8))], [c], (te.const(34),))) == \
        [("(io * 4)", "6")]


def test_strided_access_footprint_counts_the_stride():
    io, ii = te.var("io"), te.var("ii")
    c = Consumer([Loop(ii, te.const(8))], [], [(io * 16 + ii * 2,)])
    assert _text(footprint([Loop(io, te.const(4))], [c], (te.const(64),))) == \
        [("(io * 16)", "15")]


def test_guarded_consumer_clamps_the_min_at_zero():
    io, ii = te.var("io"), te.var("ii")
    c = Consumer([Loop(ii, te.const(4))], [(te.const(0), io * 4 + ii - 2, te.const(30))],
                 [(io * 4 + ii - 2,)])
    assert _text(footprint([Loop(io, te.const(8))], [c], (te.const(30),))) == \
        [("max(0, ((io * 4) - 2))", "4")]


def test_symbolic_shape_is_an_isl_parameter():
    n, io, ii = te.var("n"), te.var("io"), te.var("ii")
    c = Consumer([Loop(ii, te.const(4))], [(te.const(0), io * 4 + ii, n)], [(io * 4 + ii,)])
    assert _text(footprint([Loop(io, (n + 3) // 4)], [c], (n,))) == [("(io * 4)", "4")]


def test_non_affine_access_falls_back_to_interval_sets():
    io, ii = te.var("io"), te.var("ii")
    c = Consumer([Loop(ii, te.const(4))], [], [(io * 4 + ii * ii,)])
    fp = footprint([Loop(io, te.const(8))], [c], (te.const(64),))
    assert _text(fp) == [("(io * 4)", "10")]  # ii * ii within [0, 9]
    c2 = Consumer([Loop(ii, te.const(4))], [], [((io * 4 + ii) % 7,)])
    assert _text(footprint([Loop(io, te.const(8))], [c2], (te.const(7),)))[0][1] in ("7", "4")


def test_product_of_a_fixed_and_a_free_loop_var_reads_the_whole_dimension():
    io, ii = te.var("io"), te.var("ii")
    c = Consumer([Loop(ii, te.const(4))], [], [(io * ii,)])
    assert _text(footprint([Loop(io, te.const(8))], [c], (te.const(32),))) == [("0", "32")]


def test_parsed_maps_are_cached():
    io, ii = te.var("io"), te.var("ii")
    c = Consumer([Loop(ii, te.const(5))], [], [(io * 5 + ii,)])
    bound._CACHE.clear()
    footprint([Loop(io, te.const(3))], [c], (te.const(15),))
    n = len(bound._CACHE)
    footprint([Loop(io, te.const(3))], [c], (te.const(15),))
    assert n == 1 and len(bound._CACHE) == 1


def test_compute_at_conv2d_buffer_is_window_sized():
    N, H, K = 10, 12, 3
    A = te.placeholder((H + K - 1, H + K - 1), name="A")
    B = te.compute((H + K - 1, H + K - 1), lambda y, x: A[y, x] * 2.0, name="B")
    ry, rx = te.reduce_axis((0, K), name="ry"), te.reduce_axis((0, K), name="rx")
    C = te.compute((H, H), lambda y, x: te.sum(B[y + ry, x + rx], axis=[ry, rx]), name="C")
    s = create_schedule(C)
    y, x = s[C].op.axis
    yo, xo, yi, xi = s[C].tile(y, x, 4, 6)
    s[B].compute_at(s[C], xo)
    f = lowering.lower(s, [A, C])
    assert _allocs(f) == [("B", ["6", "8"])] * len(_allocs(f))
    del N
    rng = np.random.default_rng(0)
    a, c = rng.random((14, 14), dtype=np.float32), unwritten((12, 12), "float32")
    lowering.interpret(f, a, c)
    b = a * 2
    ref = sum(b[i:i + 12, j:j + 12] for i in range(3) for j in range(3))
    np.testing.assert_allclose(c, ref, rtol=1e-5)


def test_non_affine_consumer_buffer_is_sized_by_interval_sets():
    # C[o, i] reads B[o*4 + i*i]: per o, the 10 elements from o*4 (i*i in [0, 9])
    A = te.placeholder((40,), name="A")
    B = te.compute((40,), lambda n: A[n] * 2.0 + 1.0, name="B")
    C = te.compute((8, 4), lambda o, i: B[o * 4 + i * i], name="C")
    s = create_schedule(C)
    s[B].compute_at(s[C], s[C].op.axis[0])
    f = lowering.lower(s, [A, C])
    assert _allocs(f) == [("B", ["10"])]
    rng = np.random.default_rng(3)
    a, c = rng.random(40, dtype=np.float32), np.full((8, 4), np.nan, "float32")
    lowering.interpret(f, a, c)
    o, i = np.meshgrid(np.arange(8), np.arange(4), indexing="ij")
    np.testing.assert_allclose(c, (a * 2 + 1)[o * 4 + i * i], rtol=1e-6)
    c_llvm = np.full((8, 4), np.nan, "float32")
    lowering.build(s, [A, C], target="llvm")(a, c_llvm)
    np.testing.assert_allclose(c_llvm, c, rtol=1e-6)


def test_strided_consumer_buffer_covers_only_the_read_rows():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((16,), lambda i: B[i * 4 + 1], name="C")
    s = create_schedule(C)
    io, ii = s[C].split(s[C].op.axis[0], factor=4)
    s[B].compute_at(s[C], io)
    f = lowering.lower(s, [A, C])
    assert _allocs(f) == [("B", ["13"])]
    a, c = np.arange(64, dtype="float32"), unwritten(16, "float32")
    lowering.interpret(f, a, c)
    np.testing.assert_allclose(c, a[1::4] + 1)


def test_cache_read_buffer_is_footprint_of_split_and_fused_indices():
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 3.0, name="B")
    s = create_schedule(B)
    AA = s.cache_read(A, "local", [B])
    i, j = s[B].op.axis
    f_ = s[B].fuse(i, j)
    fo, fi = s[B].split(f_, factor=16)
    s[AA].compute_at(s[B], fo)
    f = lowering.lower(s, [A, B])
    assert _allocs(f) == [("A.local", ["2", "8"])]
    a, b = np.arange(64, dtype="float32").reshape(8, 8), unwritten((8, 8), "float32")
    lowering.interpret(f, a, b)
    np.testing.assert_allclose(b, a * 3)


def test_cache_write_local_is_tile_sized():
    A = te.placeholder((32, 32), name="A")
    B = te.compute((32, 32), lambda i, j: A[i, j] + A[j, i], name="B")
    s = create_schedule(B)
    BL = s.cache_write(B, "local")
    i, j = s[B].op.axis
    io, jo, ii, ji = s[B].tile(i, j, 8, 16)
    s[BL].compute_at(s[B], jo)
    f = lowering.lower(s, [A, B])
    assert _allocs(f) == [("B.local", ["8", "16"])]


def test_region_min_under_a_fused_loop_uses_the_consumers_index_form():
    A = te.placeholder((8, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    C = te.compute((8, 6), lambda i, j: te.sum(A[i, k] * 2.0, axis=k), name="C")
    s = create_schedule(C)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=2)
    jo, ji = s[C].split(j, factor=3)
    s[C].reorder(io, jo, ii, ji)
    s[CC].compute_at(s[C], jo)
    s[C].fuse(io, jo)
    text = str(lowering.lower(s, [A, C]))
    assert "if (" not in text  # isl's 2f - 2*floor((f+1)/2) would leave always-true guards
    assert "A[((floordiv(i.outer.j.outer.fused, 2) * 2) + i), k]" in text
    assert "= C.local[i.inner, j.inner]" in text


def test_shared_buffer_region_is_relaxed_over_thread_loops():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    s = create_schedule(B)
    AS = s.cache_read(A, "shared", [B])
    AL = s.cache_read(AS, "local", [B])
    bx, tx = s[B].split(s[B].op.axis[0], factor=16)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], tx)
    s[AL].compute_at(s[B], tx)
    f = lowering.lower(s, [A, B])
    assert sorted(_allocs(f)) == [("A.shared", ["16"]), ("A.shared.local", ["1"])]
    a, b = np.arange(64, dtype="float32"), unwritten(64, "float32")
    lowering.interpret(f, a, b)
    np.testing.assert_allclose(b, a * 2)
