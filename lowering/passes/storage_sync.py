"""storage_sync: insert the barriers (`__syncthreads()`) that shared memory needs, so the
schedule author never writes one.

Threads of a block communicate through `shared` buffers; between a write by some threads
and a read by others (or a read and a later overwrite) every thread must reach a barrier.
The pass looks at each statement sequence inside a kernel: a statement that touches a
shared buffer in a way that conflicts with what the statements since the last barrier did
(a write then a read, or a read then a write; not two writes: a cooperative copy's
iterations fill other elements) gets a barrier before it. A loop whose body
conflicts with itself across iterations (a tile loaded, used, then overwritten by the next
iteration's load) gets a barrier at the end of its body. It is conservative: a thread
reading back only its own writes still gets a barrier, which costs little and is never
wrong.

A barrier is executed by all threads of a block, so one that would land under a condition
on the thread index (some threads skip it: undefined behaviour on a GPU) is an error
naming the buffer, rather than a kernel that hangs.

    >>> # used by lowering.cuda.codegen before CUDA C is written; see tests/lowering/cuda
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lowering import ir as lir
from tensor_expr import expr as E
from tensor_expr.visitor import collect_vars, post_order_visit
from tessel_errors import CodegenError

BARRIER = "tessel.syncthreads"

# (buffer id, "r" or "w"), plus the buffer's name for messages
Access = tuple[int, str]
# calls that write memory through arguments (the first element of a region, a BufferLoad
# in the call): name -> positions of those arguments (lowering.cuda.wmma's tile store)
REGION_WRITES: dict[str, tuple[int, ...]] = {}


def barrier() -> lir.Stmt:
    """The barrier statement: every thread of the block waits for all others."""
    return lir.Evaluate(E.Call("int32", BARRIER, ()))


def is_barrier(s: lir.Stmt) -> bool:
    """True for the statement `barrier()` makes."""
    return isinstance(s, lir.Evaluate) and isinstance(s.value, E.Call) \
        and s.value.name == BARRIER


def _synchronizes(s: lir.Stmt) -> bool:
    # a cross-thread all-reduce is a collective: every thread passes it together
    from lowering.passes.thread_allreduce import ALLREDUCE

    return is_barrier(s) or (isinstance(s, lir.Evaluate) and isinstance(s.value, E.Call)
                             and s.value.name == ALLREDUCE)


def storage_sync(body: lir.Stmt) -> lir.Stmt:
    """`body` (one kernel, thread-bound loops inside) with the barriers it needs."""
    return _Sync(thread_bound_vars(body)).stmt(body, thread_dependent=False)


def _conflict(before: set[Access], after: set[Access]) -> int | None:
    """A buffer id written on one side and read on the other (read-after-write or
    write-after-read), or None. Writes after writes need no barrier: a cooperative copy's
    iterations each fill other elements (two threads writing one element between barriers
    is a race the simulator reports, not an order a barrier would fix)."""
    for buf, kind in after:
        if (kind == "r" and (buf, "w") in before) or (kind == "w" and (buf, "r") in before):
            return buf
    return None


def _exprs(s: lir.Stmt) -> list[E.PrimExpr]:
    out: list[E.PrimExpr] = []
    for f in dataclasses.fields(s):  # type: ignore[arg-type]
        v = getattr(s, f.name)
        if isinstance(v, E.PrimExpr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, E.PrimExpr))
    return out


class _Sync:
    def __init__(self, thread_vars: set[int]) -> None:
        self.thread_vars = thread_vars  # values that differ between threads of a block
        self.names: dict[int, str] = {}
        # by id, with the statement kept alive so that its id cannot be reused meanwhile
        self._memo: dict[int, tuple[lir.Stmt, set[Access]]] = {}

    def accesses(self, s: lir.Stmt) -> set[Access]:
        """Shared-buffer reads and writes anywhere under `s`."""
        hit = self._memo.get(id(s))
        if hit is not None:
            return hit[1]
        out: set[Access] = set()

        def load(e: Any) -> None:
            if isinstance(e, lir.BufferLoad) and e.buffer.scope == "shared":
                out.add((id(e.buffer), "r"))
                self.names[id(e.buffer)] = e.buffer.name

        def visit(st: lir.Stmt) -> None:
            writes = REGION_WRITES.get(st.value.name, ()) if isinstance(st, lir.Evaluate) \
                and isinstance(st.value, E.Call) else ()
            if writes:  # a region call: its written regions are writes, not reads
                for k, a in enumerate(st.value.args):  # type: ignore[union-attr]
                    if k in writes and isinstance(a, lir.BufferLoad):
                        if a.buffer.scope == "shared":
                            out.add((id(a.buffer), "w"))
                            self.names[id(a.buffer)] = a.buffer.name
                        for i in a.indices:
                            post_order_visit(i, load)
                    else:
                        post_order_visit(a, load)
                return
            for e in _exprs(st):
                post_order_visit(e, load)
            if isinstance(st, lir.BufferStore) and st.buffer.scope == "shared":
                out.add((id(st.buffer), "w"))
                self.names[id(st.buffer)] = st.buffer.name

        lir.post_order_visit_stmt(s, visit)
        self._memo[id(s)] = (s, out)
        return out

    def stmt(self, s: lir.Stmt, thread_dependent: bool) -> lir.Stmt:
        if isinstance(s, lir.SeqStmt):
            return self.seq(list(s.stmts), thread_dependent)
        if isinstance(s, lir.For):
            body = self.stmt(s.body, thread_dependent)
            once = isinstance(s.extent, E.IntImm) and s.extent.value <= 1
            cyclic = not once and (s.kind is not lir.ForKind.THREAD_BINDING
                                   or s.thread_tag == "vthread")
            acc = self.accesses(s.body)
            if cyclic and _conflict(acc, acc) is not None and not _ends_with_barrier(body):
                # the next iteration overwrites what this one read (or reads what it wrote)
                buf = _conflict(acc, acc)
                self._check_uniform(thread_dependent, buf, f"loop '{s.var.name}'")
                body = lir.seq(body, barrier())
            return s if body is s.body else dataclasses.replace(s, body=body)
        if isinstance(s, lir.IfThenElse):
            dep = thread_dependent or _on_thread(s.condition, self.thread_vars)
            then = self.stmt(s.then_case, dep)
            other = self.stmt(s.else_case, dep) if s.else_case is not None else None
            if then is s.then_case and other is s.else_case:
                return s
            return dataclasses.replace(s, then_case=then, else_case=other)
        if isinstance(s, lir.LetStmt) and _on_thread(s.value, self.thread_vars):
            self.thread_vars.add(id(s.var))
        if isinstance(s, (lir.Allocate, lir.LetStmt, lir.AssertStmt)):
            body = self.stmt(s.body, thread_dependent)
            return s if body is s.body else dataclasses.replace(s, body=body)
        return s

    def seq(self, stmts: list[lir.Stmt], thread_dependent: bool) -> lir.Stmt:
        out, _ = self._items(stmts, set(), thread_dependent)
        return lir.seq(*out)

    def _items(self, stmts: list[lir.Stmt], pending: set[Access], thread_dependent: bool
               ) -> tuple[list[lir.Stmt], set[Access]]:
        """The statements with barriers where they conflict with what is pending (the
        accesses since the last barrier), and what is pending after them. An allocation's
        body counts as part of the sequence around it, so a barrier lands right before the
        first conflicting statement inside it rather than before the whole allocation."""
        out: list[lir.Stmt] = []
        for child in stmts:
            if isinstance(child, lir.Allocate):
                inner = list(child.body.stmts) if isinstance(child.body, lir.SeqStmt) \
                    else [child.body]
                body, pending = self._items(inner, pending, thread_dependent)
                out.append(dataclasses.replace(child, body=lir.seq(*body)))
                continue
            new = self.stmt(child, thread_dependent)
            acc = self.accesses(child)
            buf = _conflict(pending, acc)
            if buf is not None:
                self._check_uniform(thread_dependent, buf, "a statement sequence")
                out.append(barrier())
                pending = set()
            out.append(new)
            pending = set() if _ends_with_barrier(new) else pending | acc
        return out, pending

    def _check_uniform(self, thread_dependent: bool, buf: int, where: str) -> None:
        if thread_dependent:
            raise CodegenError(
                f"shared buffer '{self.names.get(buf, '?')}' needs a barrier in {where} "
                "under a condition on the thread index, where some threads would skip it; "
                "move the shared-memory stage out of the guarded region (split the axis so "
                "that it divides evenly, or compute_at an outer loop)")


def _ends_with_barrier(s: lir.Stmt) -> bool:
    if isinstance(s, lir.SeqStmt):
        return bool(s.stmts) and _ends_with_barrier(s.stmts[-1])
    return _synchronizes(s)


def _on_thread(cond: E.PrimExpr, thread_vars: set[int]) -> bool:
    return any(id(v) in thread_vars for v in collect_vars(cond))


def thread_bound_vars(body: lir.Stmt) -> set[int]:
    """Ids of the loop vars bound to threadIdx (their values differ within a block)."""
    out: set[int] = set()

    def f(s: lir.Stmt) -> None:
        if isinstance(s, lir.For) and s.thread_tag.startswith("threadIdx"):
            out.add(id(s.var))

    lir.post_order_visit_stmt(body, f)
    return out


__all__ = ["BARRIER", "REGION_WRITES", "barrier", "is_barrier", "storage_sync",
           "thread_bound_vars"]
