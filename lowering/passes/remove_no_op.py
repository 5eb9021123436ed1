"""Pass remove_no_op: drop zero-trip loops and empty statements; a loop of one iteration
becomes its body with the loop var replaced by the loop's min.

    >>> import tensor_expr as te
    >>> from lowering import ir
    >>> from lowering.passes.remove_no_op import remove_no_op_stmt
    >>> B = ir.Buffer("B", (te.const(4),), "float32"); i = te.var("i")
    >>> print(remove_no_op_stmt(ir.For(i, te.const(2), te.const(1), ir.ForKind.SERIAL,
    ...                                ir.BufferStore(B, te.const(1.0), (i,)))))
    B[2] = 1.0
"""

from __future__ import annotations

import dataclasses

from lowering import ir
from tensor_expr import expr as E
from tensor_expr.arith import simplify
from tensor_expr.visitor import substitute

_EMPTY = ir.SeqStmt(())


def _is_empty(s: ir.Stmt | None) -> bool:
    return s is None or (isinstance(s, ir.SeqStmt) and not s.stmts)


class _Subst(ir.StmtMutator):
    def __init__(self, var: E.Var, value: E.PrimExpr) -> None:
        super().__init__()
        self.vmap = {var: value}

    def visit_expr(self, e: E.PrimExpr) -> E.PrimExpr:
        out = substitute(e, self.vmap)
        return out if out is e else simplify(out)


def substitute_stmt(s: ir.Stmt, var: E.Var, value: E.PrimExpr) -> ir.Stmt:
    """`s` with `var` replaced by `value` in every expression."""
    return _Subst(var, value).visit(s)


class _RemoveNoOp(ir.StmtMutator):
    def visit_For(self, s: ir.For) -> ir.Stmt:
        body = self.visit(s.body)
        if _is_empty(body) or (isinstance(s.extent, E.IntImm) and s.extent.value <= 0):
            return _EMPTY
        if isinstance(s.extent, E.IntImm) and s.extent.value == 1 and \
                s.kind is not ir.ForKind.THREAD_BINDING:
            return self.visit(substitute_stmt(body, s.var, s.min))
        return s if body is s.body else dataclasses.replace(s, body=body)

    def visit_SeqStmt(self, s: ir.SeqStmt) -> ir.Stmt:
        parts = [self.visit(c) for c in s.stmts]
        kept = [p for p in parts if not _is_empty(p)]
        if len(kept) == len(s.stmts) and all(a is b for a, b in zip(kept, s.stmts)):
            return s
        return ir.seq(*kept) if kept else _EMPTY

    def visit_IfThenElse(self, s: ir.IfThenElse) -> ir.Stmt:
        then = self.visit(s.then_case)
        other = self.visit(s.else_case) if s.else_case is not None else None
        if _is_empty(then) and _is_empty(other):
            return _EMPTY
        if _is_empty(other):
            other = None
        if then is s.then_case and other is s.else_case:
            return s
        if _is_empty(then):
            return ir.IfThenElse(E.logical_not(s.condition), other)  # type: ignore[arg-type]
        return ir.IfThenElse(s.condition, then, other)


def remove_no_op_stmt(s: ir.Stmt) -> ir.Stmt:
    """remove_no_op on one statement."""
    return _RemoveNoOp().visit(s)


def remove_no_op(func: ir.PrimFunc) -> ir.PrimFunc:
    """Drop no-op statements and unit loops of `func`."""
    body = remove_no_op_stmt(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
