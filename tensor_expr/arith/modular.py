"""Modular analysis: every value of an integer expression is `coeff * k + base`.

coeff 0 means the expression is the constant `base`; coeff 1 means nothing is known. The
vectorizer asks it whether an index is a multiple of the vector width.

    >>> import tensor_expr as te
    >>> from tensor_expr.arith import Analyzer
    >>> i, j = te.var("i"), te.var("j")
    >>> Analyzer().modular_set(i * 8 + j * 4 + 2)
    ModularSet(coeff=4, base=2)
"""

from __future__ import annotations

from math import gcd
from typing import TYPE_CHECKING, Any, NamedTuple

from tensor_expr import expr as E

if TYPE_CHECKING:
    from tensor_expr.arith.analyzer import Analyzer


class ModularSet(NamedTuple):
    """The set {coeff * k + base | k integer}; base is reduced modulo coeff when coeff > 0."""

    coeff: int
    base: int


EVERYTHING = ModularSet(1, 0)


def _make(coeff: int, base: int) -> ModularSet:
    coeff = abs(coeff)
    return ModularSet(coeff, base % coeff if coeff else base)


def _union(x: ModularSet, y: ModularSet) -> ModularSet:
    return _make(gcd(gcd(x.coeff, y.coeff), x.base - y.base), x.base)


class ModularAnalyzer:
    """Computes modular sets, memoised by node identity for one query."""

    def __init__(self, ana: Analyzer) -> None:
        self.ana = ana
        self.memo: dict[int, tuple[Any, ModularSet]] = {}

    def visit(self, e: E.PrimExpr) -> ModularSet:
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        out = self._visit(e)
        self.memo[id(e)] = (e, out)
        return out

    def _visit(self, e: E.PrimExpr) -> ModularSet:
        if isinstance(e, E.IntImm):
            return ModularSet(0, e.value)
        if isinstance(e, E.Var):
            lo, hi = self.ana.const_int_bound(e)
            if lo is not None and lo == hi:
                return ModularSet(0, lo)
            return EVERYTHING
        if isinstance(e, (E.Add, E.Sub)):
            x, y = self.visit(e.a), self.visit(e.b)
            sign = 1 if isinstance(e, E.Add) else -1
            return _make(gcd(x.coeff, y.coeff), x.base + sign * y.base)
        if isinstance(e, E.Mul):
            x, y = self.visit(e.a), self.visit(e.b)
            coeff = gcd(gcd(x.coeff * y.coeff, x.coeff * y.base), y.coeff * x.base)
            return _make(coeff, x.base * y.base)
        if isinstance(e, E.FloorDiv) and isinstance(e.b, E.IntImm) and e.b.value > 0:
            x, c = self.visit(e.a), e.b.value
            if x.coeff % c == 0:
                return _make(x.coeff // c, x.base // c)
            return EVERYTHING
        if isinstance(e, E.FloorMod) and isinstance(e.b, E.IntImm) and e.b.value > 0:
            x, c = self.visit(e.a), e.b.value
            if x.coeff % c == 0:  # includes a constant (coeff 0)
                return ModularSet(0, x.base % c)
            return _make(gcd(x.coeff, c), x.base)
        if isinstance(e, (E.Min, E.Max)):
            return _union(self.visit(e.a), self.visit(e.b))
        if isinstance(e, E.Select):
            return _union(self.visit(e.true_value), self.visit(e.false_value))
        if isinstance(e, E.Call) and e.name == "if_then_else":
            return _union(self.visit(e.args[1]), self.visit(e.args[2]))
        if isinstance(e, E.Cast) and e.value.dtype.startswith("int"):
            return self.visit(e.value)
        return EVERYTHING
