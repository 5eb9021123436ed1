"""thread_allreduce: a reduction whose reduce axis is bound to threadIdx becomes a
cross-thread reduction.

Lowered as written, `s[B].bind(ki, threadIdx.x)` on a reduce axis gives every thread of
the block the update `B[i] = B[i] + A[i, ko * T + ki]` of one element: a race. The pass
finds such an update (a store `B[idx] = combine(B[idx], value)`, combine one of + * max
min, under a threadIdx loop whose var is not in `idx`) and rewrites the reduction region
(the loops above the update that idx does not depend on):

    allocate red[1] local
    red[0] = identity
    <the region, the update now red[0] = combine(red[0], value)>
    for t in threadIdx (same tag and extent):       # the thread's own index
        tessel.thread_allreduce(op, red, tag, extent)   # every thread gets the total
        if t == 0: B[idx] = combine(init, red[0])

`init` is the reduction's initial store right before the region (taken out of it, so
that one thread writes B, not all). `allreduce_form` decides, from the block's shape, how
the all-reduce runs: warp shuffles (a shuffle-down tree over the lanes, then lane 0's
value broadcast) or a tree in shared memory. CUDA code emits that form, and the simulator
runs the same steps lane by lane (`warp_shuffle_reduce`, `shared_tree_reduce`), so that it
combines the values in the order a GPU does: float results agree to the bit, not only to a
rounding tolerance. float16 values combine in float32 and round back to float16 at every
step (their bits shuffle as an int), as numpy's float16 arithmetic in the simulator does.

    >>> # used by lowering.cuda.codegen; see tests/lowering/cuda/test_cuda_reductions.py
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lowering import ir as lir
from tensor_expr import expr as E
from tensor_expr.visitor import collect_vars
from tessel_errors import CodegenError

ALLREDUCE = "tessel.thread_allreduce"
_COMBINERS = {E.Add: "sum", E.Mul: "prod", E.Max: "max", E.Min: "min"}


def identity(op: str, dtype: str) -> E.PrimExpr:
    """The identity element of combiner `op` ("sum", "prod", "max", "min") in `dtype`."""
    from tensor_expr.dtype import is_float

    if op == "sum":
        return E.const(0, dtype)
    if op == "prod":
        return E.const(1, dtype)
    if is_float(dtype):
        return E.const(float("-inf") if op == "max" else float("inf"), dtype)
    import numpy as np

    info = np.iinfo(dtype)
    return E.const(int(info.min if op == "max" else info.max), dtype)


def combine(op: str, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
    """`a op b` as an expression."""
    cls = {"sum": E.Add, "prod": E.Mul, "max": E.Max, "min": E.Min}[op]
    return cls(a, b)


def allreduce_form(tag: str, extent: int, block: tuple[int, int, int]) -> str:
    """How an all-reduce over `extent` threads along `tag` runs in a block of shape
    `block` (x, y, z): "warp" (shuffles) when the reduced threads are the lanes of whole
    warps (threadIdx.x, a power of two up to 32), else "tree" (shared memory).

    >>> allreduce_form("threadIdx.x", 32, (32, 4, 1)), allreduce_form("threadIdx.x", 48, (48, 1, 1))
    ('warp', 'tree')
    """
    threads = block[0] * block[1] * block[2]
    whole_warps = threads % 32 == 0 or threads == extent
    if tag.endswith(".x") and extent <= 32 and extent & (extent - 1) == 0 and whole_warps:
        return "warp"
    return "tree"


def warp_shuffle_reduce(op: str, lanes: list[Any]) -> Any:
    """What every lane holds after the CUDA code's shuffle reduction of `lanes` (one value
    per lane, width = len(lanes), a power of two): `v = op(v, __shfl_down_sync(v, off))`
    for off = width/2 .. 1 (a lane whose source is past the width reads its own value),
    then lane 0's value broadcast.

    >>> warp_shuffle_reduce("sum", [1, 2, 3, 4])
    10
    """
    width, v = len(lanes), list(lanes)
    off = width // 2
    while off > 0:
        v = [_apply(op, v[i], v[i + off] if i + off < width else v[i]) for i in range(width)]
        off //= 2
    return v[0]


def shared_tree_reduce(op: str, lanes: list[Any]) -> Any:
    """What the CUDA code's shared-memory tree leaves in slot 0 for `lanes` (any count):
    for s = p2/2 .. 1 (p2 the power of two at or above the count), slot i < s with a
    partner i + s inside the count takes `op(slot i, slot i + s)`.

    >>> int(shared_tree_reduce("max", [3, 9, 4]))
    9
    """
    n, v = len(lanes), list(lanes)
    s = (1 << max(0, (n - 1).bit_length())) // 2
    while s > 0:
        for i in range(min(s, n - s)):
            v[i] = _apply(op, v[i], v[i + s])
        s //= 2
    return v[0]


def _apply(op: str, a: Any, b: Any) -> Any:
    import numpy as np

    if op == "sum":
        return a + b
    if op == "prod":
        return a * b
    return np.maximum(a, b) if op == "max" else np.minimum(a, b)


def allreduce_args(call: E.Call) -> tuple[str, lir.Buffer, str, int]:
    """(op, the local buffer holding each thread's value, thread tag, extent) of a call."""
    op, load, tag, ext = call.args
    return op.value, load.buffer, tag.value, int(ext.value)


def _reduction(s: lir.BufferStore) -> tuple[str, E.PrimExpr] | None:
    """(combiner, value) when `s` is `B[idx] = combine(B[idx], value)`."""
    op = _COMBINERS.get(type(s.value))
    if op is None:
        return None
    a, b = s.value.a, s.value.b  # type: ignore[attr-defined]
    for mine, other in ((a, b), (b, a)):
        if isinstance(mine, lir.BufferLoad) and mine.buffer is s.buffer and \
                [str(i) for i in mine.indices] == [str(i) for i in s.indices]:
            return op, other
    return None


def lower_thread_allreduce(body: lir.Stmt) -> lir.Stmt:
    """`body` (one kernel) with its thread-bound reductions made cross-thread."""
    while True:
        found = _find(body, [])
        if found is None:
            return body
        body = _rewrite(body, *found)


def _find(s: lir.Stmt, path: list[lir.Stmt]) -> tuple[list[lir.Stmt], lir.BufferStore] | None:
    if isinstance(s, lir.BufferStore):
        if s.buffer.scope == "local" or _reduction(s) is None:
            return None  # a thread's own accumulator (as the rewrite makes) is no race
        idx_vars = {id(v) for i in s.indices for v in collect_vars(i)}
        single = {id(a.condition.a) for a in path if isinstance(a, lir.IfThenElse)
                  and isinstance(a.condition, E.EQ) and isinstance(a.condition.a, E.Var)
                  and isinstance(a.condition.b, E.IntImm) and a.condition.b.value == 0}
        if any(isinstance(a, lir.For) and a.thread_tag.startswith("threadIdx")
               and id(a.var) not in idx_vars and id(a.var) not in single for a in path):
            return path, s
        return None
    for c in lir.stmt_children(s):
        hit = _find(c, path + [s])
        if hit is not None:
            return hit
    return None


def _rewrite(body: lir.Stmt, path: list[lir.Stmt], store: lir.BufferStore) -> lir.Stmt:
    op, value = _reduction(store)  # type: ignore[misc]
    idx_vars = {id(v) for i in store.indices for v in collect_vars(i)}
    top = None
    for a in reversed(path):
        if isinstance(a, lir.For):
            if id(a.var) in idx_vars or a.thread_tag.startswith("blockIdx"):
                break
            top = a
    assert top is not None  # _find saw a thread loop above the store
    start = path.index(top)
    threads = [a for a in path[start:] if isinstance(a, lir.For)
               and a.thread_tag.startswith("threadIdx")]
    if len({t.thread_tag for t in threads}) != 1:
        raise CodegenError(
            f"the reduction into '{store.buffer.name}' is bound to several thread axes "
            f"({', '.join(sorted({t.thread_tag for t in threads}))}); a cross-thread "
            "reduction over one thread axis is supported: bind one reduce axis")
    thread = threads[0]
    red = lir.Buffer(f"{store.buffer.name}.red", (1,), store.buffer.dtype, scope="local")
    zero = (E.const(0),)
    partial = lir.BufferStore(red, combine(op, red[0], value), zero)
    region = _replace(top, store, partial)
    init = _init_store(path[:start] + [top], store)
    first = init.value if init is not None else lir.BufferLoad(store.buffer, store.indices)
    t = E.Var(f"{thread.var.name}.red", thread.var.dtype)
    call = E.Call("int32", ALLREDUCE, (E.StringImm(op), red[0], E.StringImm(thread.thread_tag),
                                       thread.extent))
    final = lir.For(t, E.const(0, t.dtype), thread.extent, lir.ForKind.THREAD_BINDING, lir.seq(
        lir.Evaluate(call),
        lir.IfThenElse(E.EQ(t, E.const(0, t.dtype)),
                       lir.BufferStore(store.buffer, combine(op, first, red[0]),
                                       store.indices))), thread.thread_tag)
    new = lir.Allocate(red, lir.seq(lir.BufferStore(red, identity(op, red.dtype), zero),
                                    region, final))
    body = _replace(body, top, new)
    if init is not None:
        body = _replace(body, init, lir.seq())
    return body


def _init_store(path: list[lir.Stmt], store: lir.BufferStore) -> lir.BufferStore | None:
    """The store initialising `store`'s element right before the region `path[-1]` (the
    statement run just before it, through nested sequences), if there is one."""
    child = path[-1]
    for parent in reversed(path[:-1]):
        if not isinstance(parent, lir.SeqStmt):
            return None
        k = next(i for i, c in enumerate(parent.stmts) if c is child)
        if k > 0:
            prev = parent.stmts[k - 1]
            if isinstance(prev, lir.BufferStore) and prev.buffer is store.buffer and \
                    [str(i) for i in prev.indices] == [str(i) for i in store.indices]:
                return prev
            return None
        child = parent
    return None


def _replace(s: Any, old: lir.Stmt, new: lir.Stmt) -> Any:
    """`s` with the statement `old` (by identity) replaced by `new`."""
    if s is old:
        return new
    if not isinstance(s, lir.Stmt):
        return s
    changes = {}
    for f in dataclasses.fields(s):  # type: ignore[arg-type]
        v = getattr(s, f.name)
        if isinstance(v, lir.Stmt):
            nv = _replace(v, old, new)
            if nv is not v:
                changes[f.name] = nv
        elif isinstance(v, tuple) and v and isinstance(v[0], lir.Stmt):
            nv = tuple(_replace(x, old, new) for x in v)
            if any(a is not b for a, b in zip(nv, v)):
                changes[f.name] = tuple(x for x in nv if not _empty(x))
    return dataclasses.replace(s, **changes) if changes else s  # type: ignore[type-var]


def _empty(s: lir.Stmt) -> bool:
    return isinstance(s, lir.SeqStmt) and not s.stmts


__all__ = ["ALLREDUCE", "allreduce_args", "allreduce_form", "combine", "identity",
           "lower_thread_allreduce", "shared_tree_reduce", "warp_shuffle_reduce"]
