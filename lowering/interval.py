"""Interval arithmetic on integer index expressions: the fallback of bound inference for
non-affine accesses, and the prover that drops guards that always hold.

    >>> import tensor_expr as te
    >>> from lowering.interval import const_bounds
    >>> i = te.var("i")
    >>> const_bounds(i * 4 + 3, {id(i): (0, 7)})
    (3, 31)
"""

from __future__ import annotations

from tensor_expr import expr as E


def sym_interval(e: E.PrimExpr, ranges: dict[int, tuple[E.PrimExpr, E.PrimExpr]]
                 ) -> tuple[E.PrimExpr, E.PrimExpr] | None:
    """Symbolic [lo, hi] (inclusive) of an integer expression; vars not in `ranges` are
    points. None when the expression is beyond this small evaluator."""
    if isinstance(e, E.Var):
        return ranges.get(id(e), (e, e))
    if isinstance(e, E.IntImm):
        return e, e
    if isinstance(e, (E.Add, E.Sub)):
        a, b = sym_interval(e.a, ranges), sym_interval(e.b, ranges)
        if a is None or b is None:
            return None
        if isinstance(e, E.Add):
            return a[0] + b[0], a[1] + b[1]
        return a[0] - b[1], a[1] - b[0]
    if isinstance(e, E.Mul):
        x, c = (e.a, e.b) if isinstance(e.b, E.IntImm) else (e.b, e.a)
        if not isinstance(c, E.IntImm):
            return None
        a = sym_interval(x, ranges)
        if a is None:
            return None
        lo, hi = a[0] * c, a[1] * c
        return (lo, hi) if c.value >= 0 else (hi, lo)
    if isinstance(e, E.FloorDiv) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        a = sym_interval(e.a, ranges)
        return None if a is None else (E.floordiv(a[0], e.b), E.floordiv(a[1], e.b))
    if isinstance(e, E.FloorMod) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        return E.const(0, e.dtype), E.const(e.b.value - 1, e.dtype)
    if isinstance(e, (E.Min, E.Max)):
        a, b = sym_interval(e.a, ranges), sym_interval(e.b, ranges)
        if a is None or b is None:
            return None
        f = E.min if isinstance(e, E.Min) else E.max
        return f(a[0], b[0]), f(a[1], b[1])
    return None


def const_bounds(e: E.PrimExpr, ranges: dict[int, tuple[int, int]]) -> tuple[int, int] | None:
    """Integer [lo, hi] of `e` given integer ranges of its vars; None when unknown."""
    if isinstance(e, E.IntImm):
        return e.value, e.value
    if isinstance(e, E.Var):
        return ranges.get(id(e))
    if isinstance(e, (E.Add, E.Sub, E.Mul, E.Min, E.Max)):
        a, b = const_bounds(e.a, ranges), const_bounds(e.b, ranges)
        if a is None or b is None:
            return None
        if isinstance(e, E.Add):
            return a[0] + b[0], a[1] + b[1]
        if isinstance(e, E.Sub):
            return a[0] - b[1], a[1] - b[0]
        if isinstance(e, E.Min):
            return min(a[0], b[0]), min(a[1], b[1])
        if isinstance(e, E.Max):
            return max(a[0], b[0]), max(a[1], b[1])
        ps = [x * y for x in a for y in b]
        return min(ps), max(ps)
    if isinstance(e, (E.FloorDiv, E.FloorMod)) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        a = const_bounds(e.a, ranges)
        c = e.b.value
        if isinstance(e, E.FloorDiv):
            return None if a is None else (a[0] // c, a[1] // c)
        if a is not None and a[0] >= 0 and a[1] < c:
            return a
        return 0, c - 1
    if isinstance(e, E.Cast) and e.dtype.startswith("int"):
        return const_bounds(e.value, ranges)
    return None
