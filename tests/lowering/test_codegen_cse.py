"""Index arithmetic is emitted once: constant index terms folded (`index_op`, constant
casts), and a pure instruction already in the current block reused (fastir.Builder's local
value numbering). The kernels are checked against numpy on random inputs, and the IR for
what it no longer holds."""

from __future__ import annotations

import re

import numpy as np
from llvmlite import ir

import lowering
import tensor_expr as te
from lowering.ir import Buffer, BufferStore, For, ForKind, PrimFunc, SeqStmt
from lowering.llvm.codegen import generate
from lowering.llvm.fastir import Builder, fast_scope
from tests.rng import seeded_rng

I64 = ir.IntType(64)


def _builder() -> tuple[ir.Function, Builder]:
    fn = ir.Function(ir.Module(), ir.FunctionType(I64, [I64, I64, ir.PointerType()]), "f")
    fast_scope(fn)
    return fn, Builder(fn.append_basic_block("entry"))


def test_builder_reuses_a_pure_instruction_in_its_block() -> None:
    fn, b = _builder()
    x, y, p = fn.args
    s1 = b.add(x, y, flags=["nsw"])
    assert b.add(x, y, flags=["nsw"]) is s1
    assert b.add(x, y) is not s1  # other flags: another instruction
    assert b.add(y, x, flags=["nsw"]) is not s1  # operands in another order: not matched
    g = b.gep(p, [s1], source_etype=I64)
    assert b.gep(p, [s1], source_etype=I64) is g
    assert b.icmp_signed("<", x, y) is b.icmp_signed("<", x, y)
    assert b.icmp_signed("<", x, y) is not b.icmp_signed(">", x, y)
    assert b.add(x, y, flags=["nsw"], name="keep") is not s1  # named values stay apart


def test_builder_does_not_reuse_loads_or_across_blocks() -> None:
    fn, b = _builder()
    x, y, p = fn.args
    assert b.load(p, typ=I64) is not b.load(p, typ=I64)  # a store may come between
    s1 = b.mul(x, y)
    nxt = fn.append_basic_block("next")
    b.branch(nxt)
    b.position_at_end(nxt)
    s2 = b.mul(x, y)
    assert s2 is not s1  # s1's block need not dominate every block that comes later
    b.ret(s2)
    text = str(fn)
    assert text.count("mul i64") == 2


def _unrolled_kernel(start: int, symbolic: bool) -> PrimFunc:
    # B[i, c] = A[i, c] * 2 + A[i, c + 1]; B[i, c] += A[i, c] for c = start + j, j unrolled:
    # the two statements of each iteration share the row offset and the column index.
    # `symbolic`: the start is the variable of an outer one-trip loop, not a constant
    A, B = Buffer("A", (8, 16), "float32"), Buffer("B", (8, 16), "float32")
    i, j, k = te.var("i"), te.var("j"), te.var("k")
    col = (k if symbolic else te.const(start)) + j
    body = SeqStmt([
        BufferStore(B, A[i, col] * 2.0 + A[i, col + 1], (i, col)),
        BufferStore(B, B[i, col] + A[i, col], (i, col)),
    ])
    nest = For(i, te.const(0), te.const(8), ForKind.SERIAL,
               For(j, te.const(0), te.const(4), ForKind.UNROLLED, body))
    if symbolic:
        nest = For(k, te.const(start), te.const(1), ForKind.SERIAL, nest)
    return PrimFunc("unr", (A, B), nest)


def _check(func: PrimFunc, lo: int) -> str:
    rng = seeded_rng()
    a = rng.standard_normal((8, 16)).astype("float32")
    b = rng.standard_normal((8, 16)).astype("float32")
    want = b.copy()
    c = slice(lo, lo + 4)
    want[:, c] = a[:, c] * np.float32(2.0) + a[:, lo + 1:lo + 5]
    want[:, c] += a[:, c]
    lowering.build(func, target="llvm")(a, b)
    np.testing.assert_allclose(b, want, rtol=1e-6, atol=1e-6)
    return generate(func, "llvm").text


def _pure_duplicates(body: str) -> list[str]:
    dups = []
    for block in re.split(r"\n(?=[\w.\"]+:\n)", body):
        seen: set[str] = set()
        for m in re.finditer(r"^\s+%\S+ = ((?:add|sub|mul|trunc|sext|getelementptr) .*)$",
                             block, flags=re.M):
            if m.group(1) in seen:
                dups.append(m.group(1))
            seen.add(m.group(1))
    return dups


def test_unrolled_constant_start_folds_and_shares_index_math() -> None:
    text = _check(_unrolled_kernel(3, symbolic=False), 3)
    body = text.split('@"unr.body"')[1].split("\n}\n")[0]
    assert not _pure_duplicates(body)
    # no `add nsw i64 <const>, <const>` (the dead per-iteration add), no x * 0, x + 0
    assert not re.search(r"= (add|mul) nsw i64 -?\d+, -?\d+\n", body)
    assert not re.search(r"= (add|mul) nsw i64 %\S+, 0\n", body)
    assert not re.search(r"= trunc i64 -?\d+ to", body)


def test_unrolled_symbolic_start_matches_numpy() -> None:
    text = _check(_unrolled_kernel(5, symbolic=True), 5)
    body = text.split('@"unr.body"')[1].split("\n}\n")[0]
    assert not _pure_duplicates(body)
