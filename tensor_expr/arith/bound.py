"""Constant integer bounds of expressions under an analyzer's variable ranges.

Sums are read as linear forms first, so correlated terms cancel (`i - i` is [0, 0]), and a
var whose range is symbolic (`i` in [0, n)) is replaced by its symbolic end, so that
`i - n` is bounded above by -1.

    >>> import tensor_expr as te
    >>> from tensor_expr.arith import Analyzer
    >>> ana = Analyzer(); i = te.var("i"); ana.bind(i, (0, 32))
    >>> ana.const_int_bound(i * 4 + 3)
    ConstIntBound(min_value=3, max_value=127)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tensor_expr import expr as E
from tensor_expr.arith.interval import (
    EVERYTHING,
    INF,
    Interval,
    dtype_range,
    iadd,
    ifloordiv,
    ifloormod,
    iintersect,
    imax,
    imin,
    imul,
    iscale,
    iunion,
)
from tensor_expr.arith.linear import Lin, linearize
from tensor_expr.dtype import is_integral

if TYPE_CHECKING:
    from tensor_expr.arith.analyzer import Analyzer


# Types whose arithmetic may wrap in practice: a bound past their range means "anything".
_WRAPPING = frozenset({"int8", "int16", "uint8", "uint16"})


def value_range(dtype: str) -> Interval:
    """What an unknown value of `dtype` may be: None-like (infinite) ends for wide types."""
    if dtype in ("int32", "int64") or not (is_integral(dtype) or dtype == "bool"):
        return EVERYTHING
    if dtype in ("uint32", "uint64"):
        return (0, INF)
    return dtype_range(dtype)


class BoundAnalyzer:
    """Computes intervals; one instance per query batch (it memoises by node identity)."""

    def __init__(self, ana: Analyzer, memo: dict[int, Any] | None = None) -> None:
        self.ana = ana
        self.memo: dict[int, tuple[Any, Interval]] = {}
        self.kmemo: dict[int, Any] = memo if memo is not None else {}
        self.lmemo: dict[int, tuple[Any, Lin]] = {}
        self.substituting = 0  # nesting of symbolic-range substitutions in progress

    def bound(self, e: E.PrimExpr) -> Interval:
        """The interval of `e`."""
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        out = self._bound(e)
        if e.dtype in _WRAPPING:
            # narrow types wrap: a sum past the type's range may be anything in it
            r = dtype_range(e.dtype)
            if out[0] < r[0] or out[1] > r[1]:
                out = r
        self.memo[id(e)] = (e, out)
        return out

    def _bound(self, e: E.PrimExpr) -> Interval:
        if isinstance(e, E.IntImm):
            return (e.value, e.value)
        if isinstance(e, E.Var):
            return self.ana._var_interval(e, self)
        if isinstance(e, (E.Add, E.Sub, E.Mul)) and is_integral(e.dtype):
            if isinstance(e, E.Mul) and not isinstance(e.a, E.IntImm) and not isinstance(
                    e.b, E.IntImm):
                return imul(self.bound(e.a), self.bound(e.b))
            return self.lin_bound(linearize(e, self.kmemo, self.lmemo))
        if isinstance(e, E.FloorDiv) and is_integral(e.dtype):
            return ifloordiv(self.bound(e.a), self.bound(e.b))
        if isinstance(e, E.FloorMod) and is_integral(e.dtype):
            x, y = self.bound(e.a), self.bound(e.b)
            if y[0] == y[1] and y[0] > 0 and x[0] > -INF and x[1] < INF:
                c = int(y[0])
                if x[0] // c == x[1] // c:  # one period: the mod is a shift
                    s = (x[0] // c) * c
                    return (x[0] - s, x[1] - s)
            return ifloormod(x, y)
        if isinstance(e, E.Min):
            return imin(self.bound(e.a), self.bound(e.b))
        if isinstance(e, E.Max):
            return imax(self.bound(e.a), self.bound(e.b))
        if isinstance(e, E.Select):
            return iunion(self.bound(e.true_value), self.bound(e.false_value))
        if isinstance(e, E.Call) and e.name == "if_then_else":
            return iunion(self.bound(e.args[1]), self.bound(e.args[2]))
        if isinstance(e, E.Cast):
            if is_integral(e.value.dtype) or e.value.dtype == "bool":
                inner, r = self.bound(e.value), value_range(e.dtype)
                if r[0] <= inner[0] and inner[1] <= r[1]:
                    return inner
                return r  # a narrowing cast wraps: values outside r land anywhere in it
            return value_range(e.dtype)
        if isinstance(e, (E.CmpOp, E.Not)):
            return (0, 1)
        if isinstance(e, E.Let):
            return self.bound(e.body)
        return value_range(e.dtype)

    def lin_bound(self, lin: Lin, depth: int = 2) -> Interval:
        """The interval of a linear form; symbolic var ranges are substituted `depth` deep."""
        out: Interval = (lin.const, lin.const)
        for _, atom, c in lin.items():
            out = iadd(out, iscale(self.bound(atom), c))
        if depth <= 0:
            return out
        if self.substituting < 2:  # var ranges may mention other vars: stop the chain
            out = self._symbolic(lin, out, depth)
        alt = self._divmod_form(lin)
        if alt is not None:
            out = iintersect(out, self.lin_bound(alt, depth - 1))
        return out

    def _symbolic(self, lin: Lin, out: Interval, depth: int) -> Interval:
        lo_form, hi_form, used = lin.copy(), lin.copy(), False
        for key, atom, c in lin.items():
            sym = self.ana._symbolic_range(atom) if isinstance(atom, E.Var) else None
            if sym is None:
                continue
            used = True
            lo_e, hi_e = sym
            ends = ((lo_form, lo_e if c > 0 else hi_e), (hi_form, hi_e if c > 0 else lo_e))
            for form, end in ends:
                del form.terms[key]
                sub = linearize(end, self.kmemo, self.lmemo).scaled(c)
                for k2, a2, c2 in sub.items():
                    form.add_term(a2, c2, key=k2)
                form.const += sub.const
        if used:
            self.substituting += 1
            try:
                lo = self.lin_bound(lo_form, depth - 1)[0]
                hi = self.lin_bound(hi_form, depth - 1)[1]
            finally:
                self.substituting -= 1
            out = (max(out[0], lo), min(out[1], hi))
        return out

    def _divmod_form(self, lin: Lin) -> Lin | None:
        """`lin` with every (c*k) * floordiv(X, c) written k*X - k*floormod(X, c), so that X
        can cancel (`32*floordiv(n, 32) - n` is within [-31, 0])."""
        out, changed = lin.copy(), False
        for key, atom, coeff in lin.items():
            if not (isinstance(atom, E.FloorDiv) and isinstance(atom.b, E.IntImm)):
                continue
            c = atom.b.value
            if c <= 0 or coeff % c:
                continue
            k = coeff // c
            del out.terms[key]
            out = out.plus(linearize(atom.a, self.kmemo, self.lmemo), k)
            out.add_term(E.FloorMod(atom.a, atom.b), -k, self.kmemo)
            changed = True
        return out if changed else None

