"""Pass loop_partition: split a loop into head / main / tail so that the guards of
non-dividing splits (`if (i.outer*4 + i.inner < 10)`) vanish from the main body.

For a loop over `v` with constant bounds, each guard conjunct that is linear in `v`, with
the rest bounded by loops inside it, holds on an interval of `v`; on the intersection of
those intervals (the main part) the conjuncts are dropped. Head and tail keep the guards;
a one-iteration piece gets `v` substituted, which lets the inner loops partition in turn.

    >>> import tensor_expr as te, lowering
    >>> from schedule import create_schedule
    >>> A = te.placeholder((10,), name="A")
    >>> B = te.compute((10,), lambda i: A[i] + 1.0, name="B")
    >>> s = create_schedule(B); io, ii = s[B].split(B.op.axis[0], factor=4)
    >>> print(lowering.lower(s, [A, B]))
    func main(A: float32[10], B: float32[10]) {
      for (i.outer, 0, 2) {
        for (i.inner, 0, 4) {
          B[((i.outer * 4) + i.inner)] = (A[((i.outer * 4) + i.inner)] + 1.0)
        }
      }
      for (i.inner, 0, 2) {
        B[(i.inner + 8)] = (A[(i.inner + 8)] + 1.0)
      }
    }
"""

from __future__ import annotations

import dataclasses

from lowering import ir
from lowering.interval import const_bounds
from lowering.passes.remove_no_op import substitute_stmt
from lowering.passes.simplify import _linear, simplify_expr
from tensor_expr import expr as E

_MAX_PIECES_DEPTH = 4  # partitioned loops nested at most this deep (code size)


def _conjuncts(e: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(e, E.And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def _as_negative(c: E.PrimExpr) -> E.PrimExpr | None:
    """An integer L with `c` equivalent to `L < 0`."""
    if isinstance(c, (E.LT, E.LE, E.GT, E.GE)) and c.a.dtype.startswith("int"):
        if isinstance(c, E.LT):
            return c.a - c.b
        if isinstance(c, E.LE):
            return c.a - c.b - 1
        if isinstance(c, E.GT):
            return c.b - c.a
        return c.b - c.a - 1
    return None


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class _Partition(ir.StmtMutator):
    def __init__(self) -> None:
        super().__init__()
        self.depth = 0

    def visit_For(self, s: ir.For) -> ir.Stmt:
        if not (isinstance(s.min, E.IntImm) and isinstance(s.extent, E.IntImm)) \
                or self.depth >= _MAX_PIECES_DEPTH or s.kind is ir.ForKind.THREAD_BINDING:
            return self.generic_visit(s)
        lo, hi = s.min.value, s.min.value + s.extent.value
        inner = _inner_ranges(s.body)
        conds: list[E.PrimExpr] = []
        ir.post_order_visit_stmt(s.body, lambda n: conds.extend(_conjuncts(n.condition))
                                 if isinstance(n, ir.IfThenElse) else None)
        m_lo, m_hi = lo, hi
        known: list[tuple[E.PrimExpr, tuple[float, float], tuple[float, float]]] = []
        for c in conds:
            iv = _intervals(c, s.var, inner)
            if iv is None:
                continue
            known.append((c, *iv))
            m_lo, m_hi = max(m_lo, iv[0][0]), min(m_hi, iv[0][1])  # type: ignore[assignment]
        m_lo, m_hi = int(min(max(m_lo, lo), hi)), int(max(min(m_hi, hi), lo))
        if not known or m_lo >= m_hi:
            return self.generic_visit(s)
        pieces = []
        self.depth += 1
        for a, b in ((lo, m_lo), (m_lo, m_hi), (m_hi, hi)):
            if b <= a:
                continue
            true_ids = {id(c) for c, al, _ in known if al[0] <= a and b <= al[1]}
            false_ids = {id(c) for c, _, nv in known if nv[0] <= a and b <= nv[1]}
            body = _Rewrite(true_ids, false_ids).visit(s.body)
            if b - a == 1 and s.kind is not ir.ForKind.VECTORIZED:
                pieces.append(self.visit(substitute_stmt(body, s.var, E.const(a, s.var.dtype))))
            else:
                pieces.append(dataclasses.replace(s, min=E.const(a, s.min.dtype),
                                                  extent=E.const(b - a, s.extent.dtype),
                                                  body=self.visit(body)))
        self.depth -= 1
        return ir.seq(*pieces)


def _intervals(c: E.PrimExpr, v: E.Var, inner: dict[int, tuple[int, int]]
               ) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """([lo, hi) where conjunct c holds for all inner iterations, [lo, hi) where it holds
    for none), infinite ends as floats; None when c is not linear in v over inner loops."""
    neg = _as_negative(c)
    lin = _linear(neg) if neg is not None else None
    if lin is None:
        return None
    terms, const = lin
    coef = terms.get(id(v), (None, 0))[1]
    if coef == 0:
        return None
    lo_rest = hi_rest = 0
    for k, (atom, co) in terms.items():
        if k == id(v):
            continue
        b = const_bounds(atom, inner)
        if b is None:
            return None
        lo_rest += min(co * b[0], co * b[1])
        hi_rest += max(co * b[0], co * b[1])
    inf = float("inf")
    always = -1 - hi_rest - const  # holds everywhere iff coef * v <= always
    never = -lo_rest - const  # fails everywhere iff coef * v >= never
    if coef > 0:
        return (-inf, always // coef + 1), (_ceil_div(never, coef), inf)
    return (_ceil_div(always, coef), inf), (-inf, never // coef + 1)


def _inner_ranges(s: ir.Stmt) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}

    def f(n: ir.Stmt) -> None:
        if isinstance(n, ir.For) and isinstance(n.min, E.IntImm) and \
                isinstance(n.extent, E.IntImm) and n.extent.value > 0:
            r = (n.min.value, n.min.value + n.extent.value - 1)
            old = out.get(id(n.var))
            out[id(n.var)] = r if old is None else (min(old[0], r[0]), max(old[1], r[1]))

    ir.post_order_visit_stmt(s, f)
    return out


class _Rewrite(ir.StmtMutator):
    """Drop conjuncts known true; an if with a conjunct known false disappears."""

    def __init__(self, true_ids: set[int], false_ids: set[int]) -> None:
        super().__init__()
        self.true_ids, self.false_ids = true_ids, false_ids

    def visit_IfThenElse(self, s: ir.IfThenElse) -> ir.Stmt:
        cs = _conjuncts(s.condition)
        if any(id(c) in self.false_ids for c in cs):
            return self.visit(s.else_case) if s.else_case is not None else ir.SeqStmt(())
        then = self.visit(s.then_case)
        other = self.visit(s.else_case)
        keep = [c for c in cs if id(c) not in self.true_ids]
        if not keep:
            return then
        return ir.IfThenElse(simplify_expr(E.all(*keep)), then, other)


def loop_partition(func: ir.PrimFunc) -> ir.PrimFunc:
    """Partition the loops of `func` so that main bodies are guard-free."""
    body = _Partition().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
