"""Which outputs of a kernel may be written over one of its inputs: the memory plan then
gives a residual conv's output the storage of its residual input (relay_ir.backend.
memory_plan, `share`), as ONNX Runtime's fused Conv+Sum writes over its Sum input.

An output O may take the place of an input R (same shape and dtype) when the kernel's
loop IR shows that every element of R is read only to compute the same element of O:

- O is never read (no accumulation into it: a kernel that stores partial sums into its
  output and adds R later would read a clobbered R);
- R is never written, and every read of R is inside the value stored to O, at the same
  indices as that store.

Each element of a kernel's output is stored once (lowering partitions the output domain
into tiles; it never recomputes a root stage), so the one read of R[i] precedes, as a
data dependence, the one store to O[i]: no reordering of the kernel's loads and stores,
by the schedule or by LLVM (which sees the two as `noalias` and may move other loads
and stores across each other), changes what any element reads.

    >>> import tensor_expr as te
    >>> from lowering.ir import Buffer, BufferStore, For, ForKind, PrimFunc
    >>> X, R, O = (Buffer(n, (8,), "float32") for n in "XRO")
    >>> i = te.var("i")
    >>> f = PrimFunc("f", (X, R, O), For(i, te.const(0), te.const(8), ForKind.SERIAL,
    ...              BufferStore(O, X[7 - i] * 2.0 + R[i], (i,))))
    >>> inplace_pairs(f)   # O over R; not over X, whose element 7 - i is read for O[i]
    [(1, 2)]
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from lowering import ir as lir
from tensor_expr.arith.structural import structural_equal
from tensor_expr.expr import IntImm, PrimExpr
from tensor_expr.visitor import post_order_visit


def inplace_enabled() -> bool:
    """Whether memory plans (the graph executor's, the VM's storage plan) may write an
    output over an input: on unless TESSEL_PLAN_INPLACE=0, the A/B switch of
    benchmarks.memory_plans."""
    return os.environ.get("TESSEL_PLAN_INPLACE", "1") != "0"


def _loads(e: Any) -> list[lir.BufferLoad]:
    found: list[lir.BufferLoad] = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, lir.BufferLoad) else None)
    return found


def _accesses(func: lir.PrimFunc) -> tuple[list[tuple[lir.BufferLoad, Any]],
                                           list[lir.BufferStore]]:
    """Every load of the function with the store whose value holds it (None when it is in
    an index, a bound, a condition or a let), and every store."""
    loads: list[tuple[lir.BufferLoad, Any]] = []
    stores: list[lir.BufferStore] = []

    def visit(s: lir.Stmt) -> None:
        if isinstance(s, lir.BufferStore):
            stores.append(s)
            loads.extend((ld, s) for ld in _loads(s.value))
            loads.extend((ld, None) for i in s.indices for ld in _loads(i))
            return
        for f in dataclasses.fields(s):  # type: ignore[arg-type]
            v = getattr(s, f.name)
            for x in v if isinstance(v, tuple) else (v,):
                if isinstance(x, PrimExpr):
                    loads.extend((ld, None) for ld in _loads(x))
                elif isinstance(x, lir.Buffer):  # an allocation's shape may read memory
                    loads.extend((ld, None) for d in x.shape for ld in _loads(d))

    lir.post_order_visit_stmt(func.body, visit)
    return loads, stores


def _same_layout(a: lir.Buffer, b: lir.Buffer) -> bool:
    return (a.dtype == b.dtype and a.scope == b.scope == "global" and a.strides is None
            and b.strides is None and len(a.shape) == len(b.shape)
            and all(isinstance(x, IntImm) and isinstance(y, IntImm)
                    and x.value == y.value for x, y in zip(a.shape, b.shape)))


def inplace_pairs(func: lir.PrimFunc) -> list[tuple[int, int]]:
    """Every (input position, output position) of `func`'s parameters such that the output
    may share the input's memory (see the module docstring); the caller picks, for each
    output, one input that nothing reads after this kernel."""
    loads, stores = _accesses(func)
    written = {id(s.buffer) for s in stores}
    read_where: dict[int, list[tuple[lir.BufferLoad, Any]]] = {}
    for ld, st in loads:
        read_where.setdefault(id(ld.buffer), []).append((ld, st))
    params = func.params
    pairs: list[tuple[int, int]] = []
    for op, o in enumerate(params):
        if id(o) not in written or id(o) in read_where:
            continue
        for ip, r in enumerate(params):
            if id(r) in written or not _same_layout(r, o):
                continue
            reads = read_where.get(id(r), [])
            if reads and all(st is not None and st.buffer is o
                             and len(st.indices) == len(ld.indices)
                             and all(structural_equal(a, b)
                                     for a, b in zip(st.indices, ld.indices))
                             for ld, st in reads):
                pairs.append((ip, op))
    return pairs


__all__ = ["inplace_pairs"]
