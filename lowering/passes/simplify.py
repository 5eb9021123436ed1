"""Pass simplify: canonical linear forms of index arithmetic, constant folding, and removal
of if-statements whose condition folds to a constant.

Uses T2's `tensor_expr.arith` when it is installed (range-aware); otherwise a small
canonicaliser of our own: sums of coefficient * atom plus a constant, floordiv/floormod by
constants that divide the coefficients, folded comparisons and logic.

    >>> import tensor_expr as te
    >>> from lowering.passes.simplify import simplify_expr
    >>> i, j = te.var("i"), te.var("j")
    >>> print(simplify_expr((i * 4 + j) - i * 4 + 0))
    j
"""

from __future__ import annotations

import importlib.util
from typing import Any

from lowering import ir
from tensor_expr import expr as E
from tensor_expr.dtype import is_integral
from tensor_expr.visitor import ExprMutator

_HAS_ARITH = importlib.util.find_spec("tensor_expr.arith") is not None

Linear = tuple[dict[Any, tuple[E.PrimExpr, int]], int]


class _Simplifier(ExprMutator):
    def visit(self, e: Any) -> Any:
        out = super().visit(e)
        if isinstance(out, E.PrimExpr) and is_integral(out.dtype) and \
                isinstance(out, (E.Add, E.Sub, E.Mul)):
            lin = _linear(out)
            if lin is not None:
                return _from_linear(lin, out.dtype)
        return out

    def generic_visit(self, e: E.PrimExpr) -> E.PrimExpr:
        out = super().generic_visit(e)
        return _fold(out)


def _key(e: E.PrimExpr) -> Any:
    return id(e) if isinstance(e, E.Var) else ("s", str(e), e.dtype)


def _linear(e: E.PrimExpr) -> Linear | None:
    if isinstance(e, E.IntImm) and e.dtype != "bool":
        return {}, e.value
    if isinstance(e, (E.Add, E.Sub)):
        a, b = _linear(e.a), _linear(e.b)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, E.Add) else -1
        terms = dict(a[0])
        for k, (atom, c) in b[0].items():
            prev = terms.get(k, (atom, 0))[1]
            terms[k] = (atom, prev + sign * c)
        return {k: v for k, v in terms.items() if v[1] != 0}, a[1] + sign * b[1]
    if isinstance(e, E.Mul):
        a, b = _linear(e.a), _linear(e.b)
        if a is None or b is None:
            return None
        if not a[0]:
            a, b = b, a
        if b[0]:
            return {_key(e): (e, 1)}, 0  # product of two non-constants: an atom
        c = b[1]
        return ({k: (atom, co * c) for k, (atom, co) in a[0].items() if co * c != 0}, a[1] * c)
    if isinstance(e, E.PrimExpr) and is_integral(e.dtype):
        return {_key(e): (e, 1)}, 0
    return None


def _from_linear(lin: Linear, dtype: str) -> E.PrimExpr:
    terms, c = lin
    out: E.PrimExpr | None = None
    items = sorted(terms.values(), key=lambda t: t[1] < 0)  # positive terms first
    for atom, co in items:
        mag = atom if abs(co) == 1 else E.Mul(atom, E.IntImm(abs(co), dtype))
        if out is None:
            out = mag if co > 0 else E.Mul(atom, E.IntImm(co, dtype))
        else:
            out = E.Add(out, mag) if co > 0 else E.Sub(out, mag)
    if out is None:
        return E.IntImm(c, dtype)
    if c > 0:
        out = E.Add(out, E.IntImm(c, dtype))
    elif c < 0:
        out = E.Sub(out, E.IntImm(-c, dtype))
    return out


def _const(e: E.PrimExpr) -> int | float | None:
    if isinstance(e, (E.IntImm, E.FloatImm)) and e.dtype != "bool":
        return e.value
    return None


def _bool(e: E.PrimExpr) -> bool | None:
    if isinstance(e, E.IntImm) and e.dtype == "bool":
        return bool(e.value)
    return None


_CMP = {E.LT: lambda x, y: x < y, E.LE: lambda x, y: x <= y, E.GT: lambda x, y: x > y,
        E.GE: lambda x, y: x >= y, E.EQ: lambda x, y: x == y, E.NE: lambda x, y: x != y}


def _fold(e: E.PrimExpr) -> E.PrimExpr:
    t = type(e)
    if t in _CMP:
        a, b = e.a, e.b  # type: ignore[attr-defined]
        if is_integral(a.dtype):
            lin = _linear(E.Sub(a, b))
            if lin is not None and not lin[0]:
                return E.IntImm(int(_CMP[t](lin[1], 0)), "bool")
            la, lb = _linear(a), _linear(b)
            if lin is not None and la is not None and lb is not None and \
                    len(lin[0]) < len(la[0]) + len(lb[0]):
                # cancel common terms: (4*io + ii < 4*io + 10) is (ii < 10)
                return t(_from_linear((lin[0], 0), a.dtype), E.IntImm(-lin[1], a.dtype))
        ca, cb = _const(a), _const(b)
        if ca is not None and cb is not None:
            return E.IntImm(int(_CMP[t](ca, cb)), "bool")
        return e
    if t is E.And or t is E.Or:
        a, b = _bool(e.a), _bool(e.b)  # type: ignore[attr-defined]
        absorbing = t is E.Or
        if a is not None:
            return e.a if a is absorbing else e.b  # type: ignore[attr-defined]
        if b is not None:
            return e.b if b is absorbing else e.a  # type: ignore[attr-defined]
        return e
    if t is E.Not:
        a = _bool(e.a)  # type: ignore[attr-defined]
        return E.IntImm(int(not a), "bool") if a is not None else e
    if t is E.Select:
        c = _bool(e.condition)  # type: ignore[attr-defined]
        if c is not None:
            return e.true_value if c else e.false_value  # type: ignore[attr-defined]
        return e
    if t is E.Call and e.name == "if_then_else":  # type: ignore[attr-defined]
        c = _bool(e.args[0])  # type: ignore[attr-defined]
        if c is not None:
            return e.args[1] if c else e.args[2]  # type: ignore[attr-defined]
        return e
    if t in (E.FloorDiv, E.FloorMod) and is_integral(e.dtype):
        return _fold_divmod(e)
    if t in (E.Min, E.Max):
        ca, cb = _const(e.a), _const(e.b)  # type: ignore[attr-defined]
        if ca is not None and cb is not None:
            v = min(ca, cb) if t is E.Min else max(ca, cb)
            return E.IntImm(int(v), e.dtype) if is_integral(e.dtype) else E.FloatImm(v, e.dtype)
        if is_integral(e.dtype):
            lin = _linear(E.Sub(e.a, e.b))  # type: ignore[attr-defined]
            if lin is not None and not lin[0]:
                pick_a = (lin[1] <= 0) == (t is E.Min)
                return e.a if pick_a else e.b  # type: ignore[attr-defined]
        return e
    if t is E.Cast:
        v = _const(e.value)  # type: ignore[attr-defined]
        if v is not None:
            return E.cast(e.value, e.dtype)  # type: ignore[attr-defined]
    return e


def _fold_divmod(e: E.PrimExpr) -> E.PrimExpr:
    cb = _const(e.b)  # type: ignore[attr-defined]
    if not isinstance(cb, int) or cb <= 0:
        return e
    lin = _linear(e.a)  # type: ignore[attr-defined]
    if lin is None:
        return e
    terms, c = lin
    if isinstance(e, E.FloorDiv):
        if cb == 1:
            return e.a  # type: ignore[attr-defined]
        if all(co % cb == 0 for _, co in terms.values()) and c % cb == 0:
            return _from_linear(({k: (a, co // cb) for k, (a, co) in terms.items()}, c // cb),
                                e.dtype)
        if not terms:
            return E.IntImm(c // cb, e.dtype)
        return e
    keep = {k: (a, co % cb) for k, (a, co) in terms.items() if co % cb != 0}
    if not keep:
        return E.IntImm(c % cb, e.dtype)
    if len(keep) < len(terms) or c % cb != c:
        return E.FloorMod(_from_linear((keep, c % cb), e.dtype), e.b)  # type: ignore
    return e


def simplify_expr(e: Any) -> Any:
    """Simplify one expression (range-free): `simplify_expr(i * 4 + j - i * 4)` is `j`."""
    if not isinstance(e, E.PrimExpr):
        return e
    return _Simplifier().visit(e)


class _StmtSimplifier(ir.StmtMutator):
    def visit_IfThenElse(self, s: ir.IfThenElse) -> ir.Stmt | None:
        cond = self.visit_expr(s.condition)
        c = _bool(cond)
        if c is True:
            return self.visit(s.then_case)
        if c is False:
            return self.visit(s.else_case) if s.else_case is not None else ir.SeqStmt(())
        return ir.IfThenElse(cond, self.visit(s.then_case), self.visit(s.else_case))


class _ArithExprs(ExprMutator):
    """Adapter: T2's range-aware Analyzer as the expression mutator of a StmtMutator."""

    def __init__(self, ana: Any) -> None:
        super().__init__()
        self.ana = ana

    def visit(self, e: Any) -> Any:
        if not isinstance(e, E.PrimExpr) or isinstance(e, (E.Var, E.IntImm, E.FloatImm)):
            return e
        return self.ana.simplify(e)


class _RangeSimplifier(_StmtSimplifier):
    """Binds each loop var to its range while simplifying the loop body."""

    def __init__(self) -> None:
        from tensor_expr.arith import Analyzer

        self.ana = Analyzer()
        super().__init__(_ArithExprs(self.ana))

    def visit_For(self, s: ir.For) -> ir.Stmt:
        import dataclasses

        lo, ext = self.visit_expr(s.min), self.visit_expr(s.extent)
        self.ana.bind(s.var, (lo, lo + ext))
        try:
            body = self.visit(s.body)
        finally:
            self.ana.unbind(s.var)
        if lo is s.min and ext is s.extent and body is s.body:
            return s
        return dataclasses.replace(s, min=lo, extent=ext, body=body)


def simplify(func: ir.PrimFunc) -> ir.PrimFunc:
    """Simplify every expression of `func` and drop if-statements with constant conditions."""
    import dataclasses

    body = _StmtSimplifier(_Simplifier()).visit(func.body)
    if _HAS_ARITH:
        body = _RangeSimplifier().visit(body)
    return func if body is func.body else dataclasses.replace(func, body=body)
