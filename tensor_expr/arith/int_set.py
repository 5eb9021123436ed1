"""Interval sets: the symbolic [min, max] an integer expression covers while some of its
vars range over intervals and the others stay fixed (TVM's IntervalSet / EvalSet).

Bound inference needs this for a non-affine access below a compute_at point: its region is
an expression of the fixed outer loops, which constant bounds cannot give. The ends are
read off the expression structurally (monotone pieces only); None means the expression is
beyond interval arithmetic here, e.g. a product of two ranging vars with symbolic ends.

    >>> import tensor_expr as te
    >>> from tensor_expr.arith import Analyzer
    >>> io, ii = te.var("io"), te.var("ii")
    >>> s = Analyzer().int_set(io * 4 + ii, {ii: (0, 4)})
    >>> print(s.min_value, s.max_value)
    (io * 4) ((io * 4) + 3)
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tensor_expr import expr as E
from tensor_expr.visitor import collect_vars
from tessel_errors import TensorExprError


class IntervalSet(NamedTuple):
    """The integers from min_value to max_value, both included; the ends may be symbolic."""

    min_value: E.PrimExpr
    max_value: E.PrimExpr


def as_interval(var: E.Var, rng: Any) -> IntervalSet:
    """An IntervalSet from a Range, a half-open (lo, hi) pair, or an IntervalSet."""
    if isinstance(rng, IntervalSet):
        return rng
    if isinstance(rng, E.Range):
        return IntervalSet(rng.min, rng.min + rng.extent - 1)
    if isinstance(rng, (tuple, list)) and len(rng) == 2:
        return IntervalSet(E.as_expr(rng[0], var.dtype), E.as_expr(rng[1], var.dtype) - 1)
    raise TensorExprError(f"int_set: the domain of {var.name} must be a Range, a half-open "
                          f"(lo, hi) pair or an IntervalSet, got {rng!r}")


class IntSetEvaluator:
    """Evaluates interval sets over one domain, memoised by node identity (DAGs)."""

    def __init__(self, dom: dict[int, IntervalSet]) -> None:
        self.dom = dom
        self.memo: dict[int, tuple[Any, IntervalSet | None]] = {}

    def eval(self, e: E.PrimExpr) -> IntervalSet | None:
        hit = self.memo.get(id(e))
        if hit is None:
            hit = (e, self._eval(e))
            self.memo[id(e)] = hit
        return hit[1]

    def _eval(self, e: E.PrimExpr) -> IntervalSet | None:
        if isinstance(e, E.Var):
            return self.dom.get(id(e), IntervalSet(e, e))
        if isinstance(e, E.IntImm):
            return IntervalSet(e, e)
        if isinstance(e, (E.Add, E.Sub, E.Min, E.Max)):
            a, b = self.eval(e.a), self.eval(e.b)
            if a is None or b is None:
                return None
            if isinstance(e, E.Add):
                return IntervalSet(a[0] + b[0], a[1] + b[1])
            if isinstance(e, E.Sub):
                return IntervalSet(a[0] - b[1], a[1] - b[0])
            f = E.min if isinstance(e, E.Min) else E.max
            return IntervalSet(f(a[0], b[0]), f(a[1], b[1]))
        if isinstance(e, E.Mul):
            return self._mul(e)
        if isinstance(e, (E.FloorDiv, E.FloorMod)) and isinstance(e.b, E.IntImm) \
                and e.b.value > 0:
            return self._divmod(e)
        if isinstance(e, (E.Select, E.Call)) and (
                isinstance(e, E.Select) or e.name == "if_then_else"):
            t, f = (e.true_value, e.false_value) if isinstance(e, E.Select) else e.args[1:]
            a, b = self.eval(t), self.eval(f)
            if a is None or b is None:
                return None
            return IntervalSet(E.min(a[0], b[0]), E.max(a[1], b[1]))
        if isinstance(e, E.Cast) and e.dtype in ("int32", "int64") \
                and e.value.dtype in ("int32", "int64"):
            a = self.eval(e.value)
            return None if a is None else IntervalSet(E.cast(a[0], e.dtype),
                                                       E.cast(a[1], e.dtype))
        if not any(id(v) in self.dom for v in collect_vars(e)):
            return IntervalSet(e, e)  # nothing in it ranges: one value (a load, say)
        return None

    def _mul(self, e: E.Mul) -> IntervalSet | None:
        a, b = self.eval(e.a), self.eval(e.b)
        if a is None or b is None:
            return None
        for x, c in ((a, b), (b, a)):
            k = _point_const(c)
            if k is not None:
                lo, hi = x[0] * k, x[1] * k
                return IntervalSet(lo, hi) if k.value >= 0 else IntervalSet(hi, lo)
        ends = (a[0], a[1], b[0], b[1])
        if all(isinstance(v, E.IntImm) for v in ends):
            p = [x.value * y.value for x in a for y in b]  # type: ignore[attr-defined]
            return IntervalSet(E.const(min(p), e.dtype), E.const(max(p), e.dtype))
        return None

    def _divmod(self, e: E.PrimExpr) -> IntervalSet | None:
        c = e.b.value  # type: ignore[attr-defined]
        a = self.eval(e.a)  # type: ignore[attr-defined]
        if isinstance(e, E.FloorDiv):
            if a is None:
                return None
            return IntervalSet(E.floordiv(a[0], e.b), E.floordiv(a[1], e.b))  # type: ignore
        if a is not None and isinstance(a[0], E.IntImm) and isinstance(a[1], E.IntImm) \
                and a[0].value // c == a[1].value // c:  # one period: the mod is a shift
            s = (a[0].value // c) * c
            return IntervalSet(E.const(a[0].value - s, e.dtype), E.const(a[1].value - s, e.dtype))
        return IntervalSet(E.const(0, e.dtype), E.const(c - 1, e.dtype))


def _point_const(s: IntervalSet) -> E.IntImm | None:
    lo, hi = s
    if isinstance(lo, E.IntImm) and isinstance(hi, E.IntImm) and lo.value == hi.value:
        return lo
    return None
