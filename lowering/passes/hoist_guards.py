"""Pass hoist_guards: each conjunct of a guard moves out to the loop of its innermost
variable, so that a condition on outer loops is tested once per iteration of the loop it
depends on, not once per element inside; and where that loop is serial, its body is all
guard, and the guarded work is large, a conjunct linear in the loop's variable becomes the
loop's bounds (no branch at all).

A conjunct leaves a loop when the loop's body is nothing but the guard (an `if` with no
else, or a chain of them), the conjunct does not use the loop's variable (a loop of one
iteration lets it out with the variable as the loop's min), and it reads no buffer (a load
could see a store of the loop it left). Thread-bound loops keep their guards (a guard
around a loop that synchronises would make threads diverge). TVM's HoistIfThenElse is the
precedent. A conv's padding guard `y >= 0 && y < H && x >= 0 && x < W` (y = h + kh - 1,
x = w + kw - 1) over `for kh { for kw { for ic { for w (unrolled) ... } } }` leaves the
kh row of taps as the bounds of kh, [max(0, 1 - h), min(3, H + 1 - h)), and keeps the
column part per (column, kw), which loop_partition peels off the interior tiles. A
branch around the taps instead made LLVM store the register tile's 28 accumulators to
the stack at each kw step (64@56 3x3 on one Sapphire Rapids core: 1.77 ms against the
padded copy's 1.45).

A loop whose body is software prefetches (lowering.prefetch: they change no value) beside
work under one guard is split in two first, the prefetches' loop before the work's, so
that the guard can leave the work's loop or become its bounds: a conv that prefetches
the next oc chunk's weights at each (kh, kw) step kept its row guard as an `if` per kw
step (and per peeled column part) otherwise.

    >>> import tensor_expr as te
    >>> from lowering import ir
    >>> from lowering.passes.hoist_guards import hoist_guards_stmt
    >>> B = ir.Buffer("B", (te.const(4), te.const(4)), "float32")
    >>> i, j = te.var("i"), te.var("j")
    >>> body = ir.BufferStore(B, te.const(1.0), (i, j))
    >>> inner = ir.For(j, te.const(0), te.const(4), ir.ForKind.UNROLLED,
    ...                ir.IfThenElse(te.all(i >= 1, j >= 1), body))
    >>> print(hoist_guards_stmt(ir.For(i, te.const(0), te.const(4), ir.ForKind.SERIAL,
    ...                                inner)))
    for (i, 0, 4) {
      if ((i >= 1)) {
        for (j, 0, 4) unrolled {
          if ((j >= 1)) {
            B[i, j] = 1.0
          }
        }
      }
    }
"""

from __future__ import annotations

import dataclasses

from lowering import ir
from lowering.prefetch import PREFETCH
from tensor_expr import expr as E
from tensor_expr.arith import simplify
from tensor_expr.arith.linear import linearize
from tensor_expr.arith.structural import structural_equal
from tensor_expr.visitor import collect_vars, post_order_visit, substitute

# split a loop of prefetches beside guarded work (see the module text); False keeps them
# together (an A/B switch: benchmarks.template_switch --switch
# lowering.passes.hoist_guards.SPLIT_PREFETCHES)
SPLIT_PREFETCHES = True
# the most prefetches (cache lines) one statement of a split-off loop may issue: split off,
# a row issues its steps back to back at its start, and steps of 16 lines (tuned 512@7
# planes of 8 channels) ran 0-3% slower so, while steps of 8 (the default's 4 channels)
# ran 11-15% faster (ResNet-18, one Emerald Rapids core, in the model's order)
MAX_SPLIT_STEP_LINES = 8
# a guard around this many statement runs or more is large work: its test is cheap beside
# it, and a copy of it is dear (loop_partition does not peel for it)
SMALL_WORK = 16


def conjuncts(e: E.PrimExpr) -> list[E.PrimExpr]:
    """The operands of a chain of `&&`: `conjuncts(a && (b && c)) == [a, b, c]`."""
    out: list[E.PrimExpr] = []
    stack = [e]
    while stack:
        c = stack.pop()
        if isinstance(c, E.And):
            stack.extend((c.b, c.a))
        else:
            out.append(c)
    return out


def as_negative(c: E.PrimExpr) -> E.PrimExpr | None:
    """An integer L with `c` equivalent to `L < 0`: `as_negative(i >= 3)` is `3 - i - 1`."""
    if isinstance(c, (E.LT, E.LE, E.GT, E.GE)) and c.a.dtype.startswith("int"):
        if isinstance(c, E.LT):
            return c.a - c.b
        if isinstance(c, E.LE):
            return c.a - c.b - 1
        if isinstance(c, E.GT):
            return c.b - c.a
        return c.b - c.a - 1
    return None


def work(s: ir.Stmt) -> int:
    """Statement runs in `s`, a vector loop one run (a loop of unknown extent counts as one
    iteration): the code a copy of `s` repeats and the work a test before it guards.

        >>> import tensor_expr as te
        >>> from lowering import ir
        >>> B = ir.Buffer("B", (te.const(8),), "float32"); i = te.var("i")
        >>> work(ir.For(i, te.const(0), te.const(8), ir.ForKind.SERIAL,
        ...             ir.BufferStore(B, te.const(1.0), (i,))))
        8
    """
    if isinstance(s, ir.For):
        ext = s.extent.value if isinstance(s.extent, E.IntImm) and \
            s.kind is not ir.ForKind.VECTORIZED else 1
        return max(ext, 1) * work(s.body)
    kids = ir.stmt_children(s)
    return sum(work(k) for k in kids) if kids else 1


def _reads_memory(e: E.PrimExpr) -> bool:
    found = False

    def f(n: object) -> None:
        nonlocal found
        found = found or isinstance(n, (ir.BufferLoad, E.ProducerLoad, E.Call))

    post_order_visit(e, f)
    return found


def _guard_chain(s: ir.Stmt) -> tuple[list[E.PrimExpr], ir.Stmt]:
    """The conjuncts of the else-less ifs that make up all of `s`, and what they guard."""
    conds: list[E.PrimExpr] = []
    while isinstance(s, ir.IfThenElse) and s.else_case is None:
        conds.extend(conjuncts(s.condition))
        s = s.then_case
    return conds, s


def _guarded(conds: list[E.PrimExpr], body: ir.Stmt) -> ir.Stmt:
    return ir.IfThenElse(E.all(*conds), body) if conds else body


def _bound(c: E.PrimExpr, v: E.Var) -> tuple[bool, E.PrimExpr] | None:
    """(True, lo) for `c` equivalent to v >= lo, (False, hi) for v < hi; None when `c` is
    not linear in v."""
    neg = as_negative(c)
    if neg is None:
        return None
    lin = linearize(neg)
    coef = lin.take(v)
    rest = lin.to_expr()
    if coef == 0 or any(u is v for u in collect_vars(rest)):
        return None
    if coef > 0:  # coef * v + rest < 0  <=>  v < ceil(-rest / coef)
        return False, E.floordiv(coef - 1 - rest, coef) if coef > 1 else -rest
    k = -coef  # rest < k * v  <=>  v >= floor(rest / k) + 1
    return True, (E.floordiv(rest, k) if k > 1 else rest) + 1


def _to_bounds(s: ir.For, keep: list[E.PrimExpr]) -> tuple[ir.For, list[E.PrimExpr]]:
    """The loop with the conjuncts of `keep` that are linear in its var as its bounds, and
    the conjuncts left."""
    lo, hi = s.min, s.min + s.extent
    left: list[E.PrimExpr] = []
    changed = False
    for c in keep:
        b = None if _reads_memory(c) else _bound(c, s.var)
        if b is None:
            left.append(c)
            continue
        changed = True
        lo, hi = (E.max(lo, b[1]), hi) if b[0] else (lo, E.min(hi, b[1]))
    if not changed:
        return s, keep
    lo = simplify(lo)
    return dataclasses.replace(s, min=lo, extent=simplify(E.max(hi - lo, 0))), left


def prefetch_only(s: ir.Stmt) -> bool:
    """Whether `s` does nothing but prefetch (calls of lowering.prefetch under ifs, loops
    and lets): it changes no value, so it may run anywhere in the loop around it."""
    if isinstance(s, ir.Evaluate):
        return isinstance(s.value, E.Call) and s.value.name == PREFETCH
    if isinstance(s, (ir.SeqStmt, ir.IfThenElse, ir.For, ir.LetStmt)):
        return all(prefetch_only(k) for k in ir.stmt_children(s))
    return False


def _prefetch_calls(s: ir.Stmt) -> int:
    """Prefetch calls written in `s` (its loops not multiplied out)."""
    if isinstance(s, ir.Evaluate):
        return 1
    return sum(_prefetch_calls(k) for k in ir.stmt_children(s))


def _apart_from_prefetches(body: ir.Stmt) -> tuple[ir.Stmt, ir.IfThenElse] | None:
    """(the prefetches, the rest as one guard) of a body of prefetches (each statement of
    at most MAX_SPLIT_STEP_LINES calls) beside statements that are all else-less ifs of one
    condition that reads no memory; else None."""
    if not isinstance(body, ir.SeqStmt):
        return None
    pf = [x for x in body.stmts if prefetch_only(x)]
    if any(_prefetch_calls(x) > MAX_SPLIT_STEP_LINES for x in pf):
        return None
    rest = [x for x in body.stmts if not prefetch_only(x)]
    if not pf or not rest or not all(isinstance(x, ir.IfThenElse) and x.else_case is None
                                     for x in rest):
        return None
    cond = rest[0].condition
    if _reads_memory(cond) or not all(structural_equal(x.condition, cond) for x in rest):
        return None
    return ir.seq(*pf), ir.IfThenElse(cond, ir.seq(*[x.then_case for x in rest]))


def _store_vars(s: ir.Stmt) -> set[int]:
    """The ids of the variables in the indices of the stores of `s`."""
    found: set[int] = set()

    def visit(n: ir.Stmt) -> None:
        if isinstance(n, ir.BufferStore):
            for i in n.indices:
                found.update(id(v) for v in collect_vars(i))

    ir.post_order_visit_stmt(s, visit)
    return found


class _Hoist(ir.StmtMutator):
    def __init__(self) -> None:
        super().__init__()
        self._around: list[E.Var | None] = []  # the loops around the one visited

    def visit_For(self, s: ir.For) -> ir.Stmt:
        # (a loop of one iteration, a compute_at stage's own axis, indexes stores that
        # are carried across the loops around all the same)
        one = isinstance(s.extent, E.IntImm) and s.extent.value == 1
        self._around.append(None if one else s.var)
        try:
            body = self.visit(s.body)
        finally:
            self._around.pop()
        if s.kind is ir.ForKind.THREAD_BINDING:
            return s if body is s.body else dataclasses.replace(s, body=body)
        split = _apart_from_prefetches(body) if SPLIT_PREFETCHES and \
            s.kind is not ir.ForKind.VECTORIZED else None
        # only where the work stores per iteration of a loop around (a conv's plane row):
        # its values are not carried in registers across every loop around, so the
        # prefetches' loop can run before they are loaded. A register tile carried across
        # the whole reduction (the tile scope) kept its prefetches inside: split, 256@14
        # 3x3 ran 10% slower and a tuned 256@14 -> 512 stride 2 45% (its tile spilled)
        around = {id(v) for v in self._around if v is not None}
        if split is not None and not _store_vars(split[1]) & around:
            split = None
        if split is not None:  # the prefetches' loop, then the work's, its guard hoisted
            plain = dataclasses.replace(s, body=split[1])
            work_loop = self._hoisted(plain, split[1])
            if work_loop is not plain:  # (a guard that stays gains nothing from the split)
                return ir.seq(dataclasses.replace(s, body=split[0]), work_loop)
        return self._hoisted(s, body)

    def _hoisted(self, s: ir.For, body: ir.Stmt) -> ir.Stmt:
        conds, inner = _guard_chain(body)
        # a loop of one iteration (a compute_at stage's own axes, inlined later by
        # remove_no_op) lets a conjunct out with its var as the loop's min
        unit = isinstance(s.extent, E.IntImm) and s.extent.value == 1
        out, keep = [], []
        for c in conds:
            uses = any(v is s.var for v in collect_vars(c))
            if _reads_memory(c) or (uses and not unit):
                keep.append(c)
            else:
                out.append(simplify(substitute(c, {s.var: s.min})) if uses else c)
        loop = s
        if keep and s.kind is ir.ForKind.SERIAL and work(inner) >= SMALL_WORK:
            loop, keep = _to_bounds(s, keep)
        if not out and loop is s:
            return s if body is s.body else dataclasses.replace(s, body=body)
        loop = dataclasses.replace(loop, body=_guarded(keep, inner))
        return ir.IfThenElse(E.all(*out), loop) if out else loop


def hoist_guards_stmt(s: ir.Stmt) -> ir.Stmt:
    """hoist_guards on one statement."""
    return _Hoist().visit(s)


def hoist_guards(func: ir.PrimFunc) -> ir.PrimFunc:
    """Move each guard conjunct of `func` out to the loop of its innermost variable."""
    body = hoist_guards_stmt(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
