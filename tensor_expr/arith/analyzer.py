"""The Analyzer: variable ranges plus simplify, can_prove, const_int_bound, modular_set.

    >>> import tensor_expr as te
    >>> from tensor_expr.arith import Analyzer
    >>> io, ii = te.var("io"), te.var("ii")
    >>> ana = Analyzer()
    >>> ana.bind(io, (0, 32)); ana.bind(ii, te.Range(0, 32))
    >>> print(ana.simplify((io * 32 + ii) % 32)), ana.can_prove(ii + io * 32 < 1024)
    ii
    (None, True)

`bind(var, (lo, hi))` takes the half-open interval [lo, hi), like `reduce_axis((0, K))`;
`const_int_bound` answers inclusive ends, None where unbounded.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from tensor_expr import expr as E
from tensor_expr.arith.bound import BoundAnalyzer, value_range
from tensor_expr.arith.int_set import IntervalSet, IntSetEvaluator, as_interval
from tensor_expr.arith.interval import Interval, iintersect, to_public
from tensor_expr.arith.modular import ModularAnalyzer, ModularSet
from tensor_expr.arith.rewrite import Simplifier
from tensor_expr.arith.structural import struct_key, structural_equal
from tensor_expr.visitor import uses_var
from tessel_errors import TensorExprError


class ConstIntBound(NamedTuple):
    """Inclusive constant bounds; None for an unbounded end. Unpacks as (lo, hi)."""

    min_value: int | None
    max_value: int | None


@dataclass(frozen=True, slots=True)
class _VarRange:
    var: E.Var
    lo: E.PrimExpr  # inclusive, maybe symbolic
    hi: E.PrimExpr  # inclusive, maybe symbolic
    interval: Interval
    value: E.PrimExpr | None = None  # set when the var is bound to one expression


class Analyzer:
    """Facts about variables and the queries that use them (TVM's arith.Analyzer)."""

    def __init__(self) -> None:
        self._ranges: dict[int, _VarRange] = {}

    # ---- facts -------------------------------------------------------------------------

    def bind(self, var: Any, rng: Any) -> None:
        """Bind `var` to a Range, a half-open (lo, hi) pair, or one value (an expression).

        >>> import tensor_expr as te
        >>> a = Analyzer(); i = te.var("i"); a.bind(i, (0, 8)); a.const_int_bound(i)
        ConstIntBound(min_value=0, max_value=7)
        """
        v = _as_var(var)
        self._ranges[id(v)] = self._make_range(v, rng)

    update = bind

    def unbind(self, var: Any) -> None:
        """Forget what was bound for `var`."""
        self._ranges.pop(id(_as_var(var)), None)

    def _make_range(self, v: E.Var, rng: Any) -> _VarRange:
        if isinstance(rng, E.IterVar):
            rng = rng.dom
        if isinstance(rng, E.Range):
            lo, hi = rng.min, rng.min + rng.extent - 1
        elif isinstance(rng, tuple) and len(rng) == 2 and type(rng[0]) is int \
                and type(rng[1]) is int:
            lo, hi = E.IntImm(rng[0], v.dtype), E.IntImm(rng[1] - 1, v.dtype)
        elif isinstance(rng, (tuple, list)) and len(rng) == 2:
            lo = E.as_expr(rng[0], v.dtype)
            hi = E.as_expr(rng[1], v.dtype) - 1
        else:
            return self._make_point(v, rng)
        if isinstance(lo, E.IntImm) and isinstance(hi, E.IntImm):
            # loop ranges are mostly constant: nothing to simplify (a hot path of lowering)
            return _VarRange(v, lo, hi, iintersect((lo.value, hi.value), value_range(v.dtype)))
        lo, hi = self.simplify(lo), self.simplify(hi)
        ba = BoundAnalyzer(self)
        interval = (ba.bound(lo)[0], ba.bound(hi)[1])
        return _VarRange(v, lo, hi, iintersect(interval, value_range(v.dtype)))

    def _make_point(self, v: E.Var, rng: Any) -> _VarRange:
        if isinstance(rng, (int, E.PrimExpr)) and not isinstance(rng, bool):
            value = self.simplify(E.as_expr(rng, v.dtype))
            b = BoundAnalyzer(self).bound(value)
            return _VarRange(v, value, value, b, value)
        raise TensorExprError(
            f"Analyzer.bind({v.name}, {rng!r}): expected a Range, a (lo, hi) pair "
            "(half-open) or an expression"
        )

    def _push_ranges(self, pairs: list[tuple[E.Var, Any]]) -> list[tuple[int, Any]]:
        saved = []
        for v, rng in pairs:
            saved.append((id(v), self._ranges.get(id(v))))
            self._ranges[id(v)] = self._make_range(v, rng)
        return saved

    def _pop_ranges(self, saved: list[tuple[int, Any]]) -> None:
        for key, old in reversed(saved):
            if old is None:
                self._ranges.pop(key, None)
            else:
                self._ranges[key] = old

    @contextlib.contextmanager
    def constraint_scope(self, cond: Any) -> Iterator[None]:
        """Within the block, assume `cond` (a conjunction of `var OP expr` facts).

        >>> import tensor_expr as te
        >>> a = Analyzer(); i = te.var("i")
        >>> with a.constraint_scope(te.all(i >= 0, i < 4)):
        ...     print(a.simplify(i // 4))
        0
        """
        saved: list[tuple[int, Any]] = []
        for fact in _conjuncts(E.as_expr(cond)):
            tightened = self._tighten(fact)
            if tightened is not None:
                saved.append((id(tightened.var), self._ranges.get(id(tightened.var))))
                self._ranges[id(tightened.var)] = tightened
        try:
            yield
        finally:
            self._pop_ranges(saved)

    def _tighten(self, fact: E.PrimExpr) -> _VarRange | None:
        if not isinstance(fact, (E.LT, E.LE, E.GT, E.GE, E.EQ)):
            return None
        a, b, cls = fact.a, fact.b, type(fact)
        if not isinstance(a, E.Var) and isinstance(b, E.Var):
            a, b = b, a
            cls = {E.LT: E.GT, E.GT: E.LT, E.LE: E.GE, E.GE: E.LE, E.EQ: E.EQ}[cls]
        if not isinstance(a, E.Var) or a.dtype not in ("int32", "int64"):
            return None
        if uses_var(b, a):  # `v <= f(v)` says nothing usable about v's range
            return None
        old = self._ranges.get(id(a))
        lo = old.lo if old is not None else None
        hi = old.hi if old is not None else None
        if cls in (E.LT, E.LE, E.EQ):
            hi = b - 1 if cls is E.LT else b
        if cls in (E.GT, E.GE, E.EQ):
            lo = b + 1 if cls is E.GT else b
        ba = BoundAnalyzer(self)
        lo_i = ba.bound(lo)[0] if lo is not None else value_range(a.dtype)[0]
        hi_i = ba.bound(hi)[1] if hi is not None else value_range(a.dtype)[1]
        interval = (lo_i, hi_i)
        if old is not None:
            interval = iintersect(interval, old.interval)
        big = E.IntImm(1 << 62, a.dtype)
        return _VarRange(a, self.simplify(lo) if lo is not None else -big,
                         self.simplify(hi) if hi is not None else big, interval)

    # ---- what the range tables answer ---------------------------------------------------

    def _var_interval(self, v: E.Var, ba: BoundAnalyzer) -> Interval:
        r = self._ranges.get(id(v))
        if r is None:
            return value_range(v.dtype)
        return r.interval

    def _symbolic_range(self, v: E.Var) -> tuple[E.PrimExpr, E.PrimExpr] | None:
        r = self._ranges.get(id(v))
        if r is None or r.value is not None:
            return None
        if isinstance(r.lo, E.IntImm) and isinstance(r.hi, E.IntImm):
            return None
        return r.lo, r.hi

    def _value_of(self, v: E.Var) -> E.PrimExpr | None:
        r = self._ranges.get(id(v))
        return None if r is None else r.value

    # ---- queries -----------------------------------------------------------------------

    def simplify(self, expr: Any, steps: int = 2) -> E.PrimExpr:
        """A simpler expression with the same value wherever the bound ranges hold.

        >>> import tensor_expr as te
        >>> i, j = te.var("i"), te.var("j")
        >>> print(Analyzer().simplify((i * 4 + j) - i * 4)), print(Analyzer().simplify(i * 2 + i))
        j
        (i * 3)
        (None, None)
        """
        e = E.as_expr(expr)
        kmemo: dict[int, Any] = {}  # structural keys hold across walks
        unchanged: dict[int, Any] | None = None
        for _ in range(max(1, steps)):
            simp = Simplifier(self, kmemo, unchanged)
            out = simp.visit(e)
            if out is e or struct_key(out, kmemo) == struct_key(e, kmemo):
                return out
            # the next walk only needs to look again at what this one rewrote
            e, unchanged = out, simp.unchanged
        return e

    def can_prove(self, cond: Any) -> bool:
        """True when `cond` holds for every value in the bound ranges (False: unknown).

        >>> import tensor_expr as te
        >>> a = Analyzer(); i = te.var("i"); a.bind(i, (0, 32))
        >>> a.can_prove(i < 32), a.can_prove(i < 31)
        (True, False)
        """
        s = self.simplify(cond)
        if isinstance(s, E.IntImm):
            return bool(s.value)
        if isinstance(s, E.And):
            return self.can_prove(s.a) and self.can_prove(s.b)
        if isinstance(s, E.Or):
            return self.can_prove(s.a) or self.can_prove(s.b)
        return False

    def can_prove_equal(self, a: Any, b: Any) -> bool:
        """True when `a == b` everywhere in the bound ranges."""
        x, y = E.as_expr(a), E.as_expr(b)
        if structural_equal(x, y):
            return True
        return self.can_prove(E.EQ(*E._coerce_pair(x, y)))

    def const_int_bound(self, expr: Any) -> ConstIntBound:
        """Inclusive constant bounds of an integer expression (None: unbounded).

        >>> import tensor_expr as te
        >>> a = Analyzer(); i = te.var("i"); a.bind(i, (0, 10))
        >>> a.const_int_bound(i // 3 - 1)
        ConstIntBound(min_value=-1, max_value=2)
        """
        e = E.as_expr(expr)
        raw = BoundAnalyzer(self).bound(e)
        simple = BoundAnalyzer(self).bound(self.simplify(e))
        return ConstIntBound(*to_public(iintersect(raw, simple)))

    def int_set(self, expr: Any, dom_map: dict[Any, Any]) -> IntervalSet | None:
        """The symbolic [min, max] (inclusive, simplified) of `expr` while each var of
        `dom_map` ranges over its Range or half-open (lo, hi) pair and the other vars stay
        fixed; None where the expression is beyond interval arithmetic.

        >>> import tensor_expr as te
        >>> io, ii = te.var("io"), te.var("ii")
        >>> s = Analyzer().int_set((io * 4 + ii) // 2, {ii: (0, 4)})
        >>> print(s.min_value, s.max_value)
        (io * 2) ((io * 2) + 1)
        """
        dom = {}
        for v, rng in dom_map.items():
            var = _as_var(v)
            dom[id(var)] = as_interval(var, rng)
        out = IntSetEvaluator(dom).eval(E.as_expr(expr))
        if out is None:
            return None
        return IntervalSet(self.simplify(out.min_value), self.simplify(out.max_value))

    def modular_set(self, expr: Any) -> ModularSet:
        """The set coeff*k + base containing every value of `expr`.

        >>> import tensor_expr as te
        >>> Analyzer().modular_set(te.var("i") * 16 + 4)
        ModularSet(coeff=16, base=4)
        """
        return ModularAnalyzer(self).visit(self.simplify(expr))


def _as_var(v: Any) -> E.Var:
    if isinstance(v, E.IterVar):
        return v.var
    if isinstance(v, E.Var):
        return v
    raise TensorExprError(f"Analyzer.bind: expected a Var or IterVar, got {v!r}")


def _conjuncts(cond: E.PrimExpr) -> list[E.PrimExpr]:
    if isinstance(cond, E.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def simplify(expr: Any, ranges: dict[Any, Any] | None = None) -> E.PrimExpr:
    """Simplify `expr` with optional var ranges: `te.simplify(e, {i: (0, 32)})`.

    >>> import tensor_expr as te
    >>> i, j = te.var("i"), te.var("j")
    >>> print(te.simplify((i * 8 + j) // 4, {j: (0, 4)}))
    (i * 2)
    """
    ana = Analyzer()
    for v, r in (ranges or {}).items():
        ana.bind(v, r)
    return ana.simplify(expr)
