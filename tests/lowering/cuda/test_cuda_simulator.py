"""The GPU simulator ("cuda -sim"): GPU schedules against numpy on seeded random inputs
(every kernel here is also compiled by NVRTC or nvcc, since build does both), barriers as
phase boundaries, and the race detector."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering.cuda import simulator
from lowering.cuda.compile import compiler
from lowering.ir import (
    Allocate,
    Buffer,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    PrimFunc,
    SeqStmt,
    StmtMutator,
    seq,
)
from lowering.passes.storage_sync import barrier, is_barrier
from schedule import create_schedule
from tessel_errors import CodegenError, RaceError
from tests.lowering.cuda.schedules import bind, shared_matmul, two_kernels, vector_scale
from tests.rng import seeded_rng
from tests.unwritten import unwritten

pytestmark = pytest.mark.skipif(not compiler(), reason="no CUDA compiler (NVRTC or nvcc)")


def sim(s, args):
    return lowering.build(s, args, target="cuda -sim")


def test_a_vector_op_with_a_non_divisible_symbolic_length_matches_numpy() -> None:
    f = sim(*vector_scale(factor=32))
    a = seeded_rng().standard_normal(100).astype("float32")
    b = unwritten((100,))
    f(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_a_shared_memory_matmul_matches_numpy() -> None:
    f = sim(*shared_matmul(16, 4))
    rng = seeded_rng()
    a, b = (rng.standard_normal((16, 16)).astype("float32") for _ in range(2))
    c = unwritten((16, 16))
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_two_kernels_with_a_device_temporary_match_numpy() -> None:
    f = sim(*two_kernels(40))
    a = seeded_rng().standard_normal(40).astype("float32")
    c = unwritten((40,))
    f(a, c)
    np.testing.assert_allclose(c, np.exp(a) * 3, rtol=1e-6)


def test_float16_arithmetic_is_rounded_like_numpy() -> None:
    f = sim(*vector_scale(n=64, factor=16, dtype="float16"))
    a = seeded_rng().standard_normal(64).astype("float16")
    b = unwritten((64,), "float16")
    f(a, b)
    np.testing.assert_array_equal(b, a * np.float16(2) + np.float16(1))


def test_int8_wraps_like_numpy() -> None:
    f = sim(*vector_scale(n=64, factor=16, dtype="int8"))
    a = seeded_rng().integers(-128, 128, 64).astype("int8")
    b = np.zeros(64, "int8")
    f(a, b)
    np.testing.assert_array_equal(b, a * np.int8(2) + np.int8(1))


def test_virtual_threads_run_inside_each_thread() -> None:
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] - 1.0, name="B")
    s = create_schedule(B)
    bx, rest = s[B].split(B.op.axis[0], factor=32)
    vx, tx = s[B].split(rest, nparts=2)
    bind(s, B, bx, "blockIdx.x")
    bind(s, B, vx, "vthread")
    bind(s, B, tx, "threadIdx.x")
    f = sim(s, [A, B])
    assert "#pragma unroll" in f.source
    a = seeded_rng().standard_normal(64).astype("float32")
    b = unwritten((64,))
    f(a, b)
    np.testing.assert_allclose(b, a - 1, rtol=1e-6)


def test_timing_a_simulated_kernel_is_refused() -> None:
    from tessel_errors import DeviceError

    f = sim(*vector_scale(n=8, factor=8))
    with pytest.raises(DeviceError, match=r"simulator .* times say nothing about a GPU"):
        f.time(np.ones(8, "float32"), np.empty(8, "float32"))


# --- barriers and races ---------------------------------------------------------------


class _DropBarriers(StmtMutator):
    def visit_SeqStmt(self, s: SeqStmt):
        kept = [self.visit(c) for c in s.stmts if not is_barrier(c)]
        return seq(*kept)


def _without_barriers(f):
    kernels = tuple(dataclasses.replace(k, body=_DropBarriers().visit(k.body))
                    for k in f.program.kernels)
    return dataclasses.replace(f.program, kernels=kernels)


def test_a_missing_barrier_is_a_race_naming_the_buffer_the_element_and_two_threads() -> None:
    f = sim(*shared_matmul(8, 4))
    rng = seeded_rng()
    a, b = (rng.standard_normal((8, 8)).astype("float32") for _ in range(2))
    with pytest.raises(RaceError, match=r"on shared buffer 'A.shared' element \[\d, \d\]: "
                                        r"thread \(\d, \d, 0\) (reads|writes) it and thread "
                                        r"\(\d, \d, 0\) also accessed it since the last "
                                        r"barrier"):
        simulator.run(_without_barriers(f), [a, b, unwritten((8, 8))])


def _kernel(name: str, body, *bufs) -> PrimFunc:
    return PrimFunc(name, bufs, body)


def test_threads_writing_one_global_element_are_a_race() -> None:
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (1,), "float32")
    t, b = te.var("t"), te.var("b")
    body = For(b, te.const(0), te.const(1), ForKind.THREAD_BINDING, For(
        t, te.const(0), te.const(16), ForKind.THREAD_BINDING,
        BufferStore(B, A[t], (te.const(0),)), "threadIdx.x"), "blockIdx.x")
    f = lowering.build(_kernel("racy", body, A, B), target="cuda -sim")
    with pytest.raises(RaceError, match=r"global buffer 'B' element \[0\]: thread \(1, 0, 0\) "
                                        r"writes it and thread \(0, 0, 0\)"):
        f(np.ones(16, "float32"), unwritten((1,)))


def test_blocks_writing_one_global_element_are_a_race() -> None:
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (1,), "float32")
    b = te.var("b")
    body = For(b, te.const(0), te.const(4), ForKind.THREAD_BINDING,
               BufferStore(B, A[b], (te.const(0),)), "blockIdx.x")
    f = lowering.build(_kernel("blocks", body, A, B), target="cuda -sim")
    with pytest.raises(RaceError, match=r"block \(1, 0, 0\) thread \(0, 0, 0\) writes it and "
                                        r"block \(0, 0, 0\) also accesses it"):
        f(np.ones(4, "float32"), unwritten((1,)))


def test_a_barrier_some_threads_skip_is_refused_at_build() -> None:
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    S = Buffer("S", (16,), "float32", scope="shared")
    t, b = te.var("t"), te.var("b")
    guarded = IfThenElse(t < 8, seq(BufferStore(S, A[t], (t,)),
                                    BufferStore(B, S[15 - t], (t,))))
    body = For(b, te.const(0), te.const(1), ForKind.THREAD_BINDING, Allocate(S, For(
        t, te.const(0), te.const(16), ForKind.THREAD_BINDING, guarded, "threadIdx.x")),
        "blockIdx.x")
    with pytest.raises(CodegenError, match=r"shared buffer 'S' needs a barrier .* under a "
                                           r"condition on the thread index"):
        lowering.build(_kernel("diverge", body, A, B), target="cuda -sim")


def test_threads_waiting_at_a_barrier_others_never_reach_are_reported() -> None:
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    t, b = te.var("t"), te.var("b")
    body = For(b, te.const(0), te.const(1), ForKind.THREAD_BINDING, For(
        t, te.const(0), te.const(16), ForKind.THREAD_BINDING,
        seq(BufferStore(B, A[t], (t,)), IfThenElse(t < 4, barrier())), "threadIdx.x"),
        "blockIdx.x")
    f = lowering.build(_kernel("hang", body, A, B), target="cuda -sim")
    with pytest.raises(RaceError, match=r"waits at a barrier that thread .* never reaches"):
        f(np.ones(16, "float32"), unwritten((16,)))


def test_a_shared_tile_reversed_across_threads_needs_and_gets_its_barrier() -> None:
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    S = Buffer("S", (16,), "float32", scope="shared")
    t, u, b = te.var("t"), te.var("u"), te.var("b")
    body = For(b, te.const(0), te.const(1), ForKind.THREAD_BINDING, Allocate(S, seq(
        For(t, te.const(0), te.const(16), ForKind.THREAD_BINDING,
            BufferStore(S, A[t] * 2.0, (t,)), "threadIdx.x"),
        For(u, te.const(0), te.const(16), ForKind.THREAD_BINDING,
            BufferStore(B, S[15 - u], (u,)), "threadIdx.x"))), "blockIdx.x")
    f = lowering.build(_kernel("reverse", body, A, B), target="cuda -sim")
    assert f.source.count("__syncthreads();") == 1
    a = seeded_rng().standard_normal(16).astype("float32")
    out = unwritten((16,))
    f(a, out)
    np.testing.assert_allclose(out, (a * 2)[::-1], rtol=1e-6)
