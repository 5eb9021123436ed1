"""Parallel loops of the LLVM backend (lowering.llvm.parallel): on the runtime's pool a
loop runs as several chunks per thread, claimed one at a time; every iteration runs
exactly once whatever the extent, start, thread count or way of running."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import ir

import lowering
import tensor_expr as te
from lowering.ir import Buffer, BufferStore, For, ForKind, PrimFunc
from lowering.llvm.jit import compile_ir
from lowering.llvm.parallel import CHUNKS_PER_THREAD, MAX_THREADS, pool_chunks
from lowering.llvm.types import I64


def _chunks_function() -> ctypes._CFuncPtr:
    m = ir.Module(name="chunks")
    f = ir.Function(m, ir.FunctionType(I64, [I64, I64]), "chunks")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    b.ret(pool_chunks(b, *f.args))
    jit = compile_ir(str(m))
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)(jit.address("chunks"))
    fn.jit = jit  # keep the code alive with the function
    return fn


def test_pool_chunks_are_several_per_thread_within_the_extent_and_the_records() -> None:
    chunks = _chunks_function()
    k = CHUNKS_PER_THREAD
    assert chunks(2, 112) == 2 * k  # ResNet-18's 64@56 3x3 conv: 2 oc chunks x 56 rows
    assert chunks(2, 3) == 3  # no more chunks than iterations
    assert chunks(2, 2) == 2
    assert chunks(1, 1000) == 1  # alone: one chunk, nothing to balance
    assert chunks(16, 10**6) == MAX_THREADS  # no more than the records on the stack
    assert chunks(64, 64) == 64


def _add_one(extent: int, start: int = 0) -> PrimFunc:
    """B[i] += 1 for i in [start, start + extent), the loop parallel."""
    n = start + extent
    B = Buffer("B", (n,), "int32")
    i = te.var("i")
    body = BufferStore(B, B[i] + 1, (i,))
    return PrimFunc(f"add_one_{extent}_{start}", (B,),
                    For(i, te.const(start), te.const(extent), ForKind.PARALLEL, body))


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("pool", ["1", "0"])
@pytest.mark.parametrize("extent,start", [(1, 0), (2, 0), (3, 0), (7, 0), (10, 0), (65, 0),
                                          (112, 0), (1000, 0), (257, 5)])
def test_every_iteration_runs_exactly_once(monkeypatch: pytest.MonkeyPatch, threads: int,
                                           pool: str, extent: int, start: int) -> None:
    monkeypatch.setenv("TESSEL_NUM_THREADS", str(threads))
    monkeypatch.setenv("TESSEL_THREAD_POOL", pool)
    k = lowering.build(_add_one(extent, start))
    b = np.zeros(start + extent, "int32")
    for _ in range(3):  # back-to-back launches
        k(b)
    want = np.zeros_like(b)
    want[start:] = 3
    np.testing.assert_array_equal(b, want)
