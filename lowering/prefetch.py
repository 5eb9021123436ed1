"""Software prefetch (Stage.prefetch) in the loop IR: the statements that touch, at the
start of a loop iteration, the cache lines the iteration reads from a buffer, moved along
one dimension.

The region is found from the loop body itself: each index of each load of the buffer is
linear in the loops inside the body (else the load is left out), so its lowest and
highest value over those loops are the index with each loop variable at its first or
last value. One `prefetch` call goes to each cache line of the innermost dimension's span
(and its last element, for a span that may straddle a line: not when the tensor is known to
start on a line, Prefetch.aligned, and every span's start is a whole number of lines into
it); loops run over the other dimensions' spans. The moved index is clamped into the
buffer, so that every prefetched address is an element of it (the interpreter checks this;
the hardware would not fault).

    >>> # used by lowering.schedule_ops when a stage has prefetches; see Stage.prefetch
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lowering import ir
from schedule.stage import Prefetch
from tensor_expr import expr as E
from tensor_expr.arith import simplify
from tensor_expr.arith.linear import linearize
from tensor_expr.visitor import collect_vars, post_order_visit, substitute
from tessel_errors import LoweringError

PREFETCH = "prefetch"  # Call(name, (first element as a BufferLoad, locality)) -> int32 0
CACHE_LINE = 64  # bytes
_MAX_LINES = 64  # prefetch calls one iteration may issue (a bigger region is a misuse)


def prefetch_stmts(body: ir.Stmt, buf: ir.Buffer, pf: Prefetch, where: str) -> ir.Stmt | None:
    """The prefetch statements for one loop iteration whose body is `body`, or None when
    the body reads nothing of `buf`; `where` names the stage and axis for errors."""
    loops = _inner_loops(body)
    boxes: dict[str, tuple[list[E.PrimExpr], list[E.PrimExpr]]] = {}
    for load in _loads_of(body, buf):
        box = _box(load.indices, loops)
        if box is not None:
            boxes.setdefault(str(box), box)
    if not boxes:
        return None
    out = []
    for lo, hi in boxes.values():
        out.append(_region(buf, lo, hi, pf, where))
    return ir.seq(*out)


def _inner_loops(body: ir.Stmt) -> dict[E.Var, tuple[int, int]]:
    """Loop var -> (first, last) value of every constant-bounded loop in `body`."""
    loops: dict[E.Var, tuple[int, int]] = {}

    def visit(s: ir.Stmt) -> None:
        if isinstance(s, ir.For) and isinstance(s.min, E.IntImm) and \
                isinstance(s.extent, E.IntImm) and s.extent.value > 0:
            loops[s.var] = (s.min.value, s.min.value + s.extent.value - 1)

    ir.post_order_visit_stmt(body, visit)
    return loops


def _loads_of(body: ir.Stmt, buf: ir.Buffer) -> list[ir.BufferLoad]:
    found: list[ir.BufferLoad] = []

    def on_expr(e: E.PrimExpr) -> None:
        if isinstance(e, ir.BufferLoad) and e.buffer is buf:
            found.append(e)

    def visit(s: ir.Stmt) -> None:
        for v in _exprs_of(s):
            post_order_visit(v, on_expr)

    ir.post_order_visit_stmt(body, visit)
    return found


def _exprs_of(s: ir.Stmt) -> list[E.PrimExpr]:
    if isinstance(s, ir.BufferStore):
        return [s.value, *s.indices]
    if isinstance(s, (ir.Evaluate, ir.LetStmt)):
        return [s.value]
    if isinstance(s, ir.IfThenElse):
        return [s.condition]
    return []


def _box(indices: Sequence[E.PrimExpr], loops: dict[E.Var, tuple[int, int]]
         ) -> tuple[list[E.PrimExpr], list[E.PrimExpr]] | None:
    """Per dimension, the lowest and highest index over the inner loops; None when an index
    is not linear in them."""
    lo, hi = [], []
    for idx in indices:
        inner = [v for v in collect_vars(idx) if v in loops]
        if not inner:
            lo.append(idx)
            hi.append(idx)
            continue
        form = linearize(idx)
        coeff = {}
        for v in inner:
            coeff[v] = form.take(v)
        if any(set(collect_vars(a)) & set(inner) for _, a, _ in form.items()):
            return None  # an inner loop inside a non-linear term
        lo.append(simplify(substitute(idx, {v: E.const(loops[v][0] if c >= 0 else
                                                       loops[v][1], v.dtype)
                                            for v, c in coeff.items()})))
        hi.append(simplify(substitute(idx, {v: E.const(loops[v][1] if c >= 0 else
                                                       loops[v][0], v.dtype)
                                            for v, c in coeff.items()})))
    return lo, hi


def _region(buf: ir.Buffer, lo: list[E.PrimExpr], hi: list[E.PrimExpr], pf: Prefetch,
            where: str) -> ir.Stmt:
    """Prefetch calls over the box [lo, hi] of `buf`, dimension pf.dim moved by pf.shift."""
    spans = [simplify(h - lo_ + 1) for lo_, h in zip(lo, hi)]
    if not all(isinstance(s, E.IntImm) for s in spans):
        raise LoweringError(f"prefetch of '{buf.name}' at {where}: the region one iteration "
                            f"reads has no constant extent ({[str(s) for s in spans]})")
    size = [s.value for s in spans]  # type: ignore[attr-defined]
    # the contiguous tail: trailing dimensions the box covers whole, and the one before
    j = len(lo) - 1
    while j > 0 and buf.strides is None and isinstance(lo[j], E.IntImm) and \
            lo[j].value == 0 and isinstance(buf.shape[j], E.IntImm) and \
            size[j] == buf.shape[j].value and j != pf.dim:
        j -= 1
    inner = [s.value for s in buf.shape[j + 1:]]  # type: ignore[attr-defined]
    flat = size[j] * math.prod(inner)
    per_line = max(1, CACHE_LINE // _bytes(buf.dtype))
    outer = [(d, size[d]) for d in range(j) if size[d] > 1]
    offsets = list(range(0, flat, per_line))
    exact = pf.aligned and _spans_start_on_lines(buf, lo, j, {pf.dim, *(d for d, _ in outer)},
                                                 per_line)
    if not exact and (len(offsets) > 1 or flat % per_line):
        offsets.append(flat - 1)  # the span need not start on a line: its last element too
    offsets = sorted(set(offsets))
    lines = len(offsets) * math.prod(n for _, n in outer)
    if lines > _MAX_LINES:
        raise LoweringError(f"prefetch of '{buf.name}' at {where}: one iteration reads "
                            f"{lines} cache lines of it, more than {_MAX_LINES}; prefetch "
                            "at a loop further in")
    loop_vars = {d: E.Var(f"pf.{buf.name}.{d}", "int32") for d, _ in outer}
    base = [lo[d] + loop_vars[d] if d in loop_vars else lo[d] for d in range(len(lo))]
    bound = buf.shape[pf.dim]
    moved = base[pf.dim] + pf.shift
    base[pf.dim] = E.max(E.min(moved, bound - 1), E.const(0, moved.dtype))
    locality = E.const(4 - pf.level, "int32")  # LLVM's 3 keeps the line in L1
    calls = []
    for off in offsets:
        tail, rest = [], off
        for n in reversed(inner):
            tail.append(rest % n)
            rest //= n
        idx = base[:j] + [base[j] + rest] + [E.const(t) for t in reversed(tail)]
        calls.append(ir.Evaluate(E.Call("int32", PREFETCH,
                                        (ir.BufferLoad(buf, tuple(simplify(i) for i in idx)),
                                         locality))))
    stmt = ir.seq(*calls)
    for d, n in reversed(outer):
        stmt = ir.For(loop_vars[d], E.const(0), E.const(n), ir.ForKind.UNROLLED, stmt)
    return stmt


def _spans_start_on_lines(buf: ir.Buffer, lo: list[E.PrimExpr], j: int, moving: set[int],
                          per_line: int) -> bool:
    """Whether each span of the box (dimensions j and after from lo, those before at any
    index the prefetch loops or the clamp give: the `moving` ones) starts a whole number of
    lines into `buf`: every index term times its dimension's stride is a multiple of
    `per_line` elements. A 32 x 32 block slice of packed weights is then 64 lines, not 65."""
    dims = [d.value if isinstance(d, E.IntImm) else None for d in buf.shape]
    if buf.strides is not None:
        strides = [s.value if isinstance(s, E.IntImm) else None for s in buf.strides]
    elif None in dims[1:]:
        return False
    else:
        strides = [math.prod(dims[d + 1:]) for d in range(len(dims))]  # type: ignore[arg-type]
    for d in range(j + 1):
        stride = strides[d]
        if stride is None:
            return False
        if stride % per_line == 0:
            continue  # any index of this dimension lands on a line
        if d in moving:
            return False
        form = linearize(lo[d])
        if any(c * stride % per_line for _, _, c in form.items()) or \
                form.const * stride % per_line:
            return False
    return True


def _bytes(dtype: str) -> int:
    digits = "".join(ch for ch in dtype if ch.isdigit())
    return max(1, int(digits or 8) // 8)
