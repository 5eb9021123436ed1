"""Pass simplify: every expression through tensor_expr.arith's Analyzer, with each loop var
bound to its range, and removal of if-statements whose condition folds to a constant.

    >>> import tensor_expr as te
    >>> from lowering import ir
    >>> from lowering.passes.simplify import simplify
    >>> B = ir.Buffer("B", (te.const(8),), "float32"); i = te.var("i")
    >>> body = ir.For(i, te.const(0), te.const(8), ir.ForKind.SERIAL,
    ...               ir.BufferStore(B, te.const(1.0), ((i * 4 + 3) // 4,)))
    >>> print(simplify(ir.PrimFunc("f", (B,), body)).body)
    for (i, 0, 8) {
      B[i] = 1.0
    }
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lowering import ir
from tensor_expr import expr as E
from tensor_expr.arith import Analyzer
from tensor_expr.visitor import ExprMutator


class _AnalyzerExprs(ExprMutator):
    """The Analyzer as the expression mutator of a StmtMutator."""

    def __init__(self, ana: Analyzer) -> None:
        super().__init__()
        self.ana = ana

    def visit(self, e: Any) -> Any:
        if not isinstance(e, E.PrimExpr) or isinstance(e, (E.Var, E.IntImm, E.FloatImm)):
            return e
        return self.ana.simplify(e)


class _Simplifier(ir.StmtMutator):
    """Binds each loop var to its range while simplifying the loop body."""

    def __init__(self) -> None:
        self.ana = Analyzer()
        super().__init__(_AnalyzerExprs(self.ana))

    def visit_For(self, s: ir.For) -> ir.Stmt:
        lo, ext = self.visit_expr(s.min), self.visit_expr(s.extent)
        self.ana.bind(s.var, (lo, lo + ext))
        try:
            body = self.visit(s.body)
        finally:
            self.ana.unbind(s.var)
        if lo is s.min and ext is s.extent and body is s.body:
            return s
        return dataclasses.replace(s, min=lo, extent=ext, body=body)

    def visit_IfThenElse(self, s: ir.IfThenElse) -> ir.Stmt | None:
        cond = self.visit_expr(s.condition)
        if isinstance(cond, E.IntImm) and cond.dtype == "bool":
            if cond.value:
                return self.visit(s.then_case)
            return self.visit(s.else_case) if s.else_case is not None else ir.SeqStmt(())
        then, other = self.visit(s.then_case), self.visit(s.else_case)
        if cond is s.condition and then is s.then_case and other is s.else_case:
            return s
        return ir.IfThenElse(cond, then, other)


def simplify(func: ir.PrimFunc) -> ir.PrimFunc:
    """Simplify every expression of `func` and drop if-statements with constant conditions."""
    body = _Simplifier().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
