"""ToANormalForm: bind every intermediate value to a `let`, in evaluation order.

After the pass every argument of a call, field of a tuple, condition of an `if` and so
on is atomic (a variable, global, constant or constructor), and each compound value is
bound exactly once. A node shared in the input DAG is bound once in the innermost scope
that holds all its uses seen so far: scopes are function bodies, if branches and match
arms; a node first met inside a branch is bound there (and again, if it is also needed
later outside the branch: correct because such nodes are effect-free dataflow).

Primitive (fused) functions are left as they are. Rebuilt nodes drop their checked
types (passes that need types re-run inference). The conversion recurses over nested
expressions as generators on relay_ir.trampoline (a step's nested conversion is
`yield self.atom(...)`), so depth costs heap, not Python stack; let chains are walked
iteratively.

    >>> from relay_ir.expr import Var, Tuple, Let
    >>> x = Var("x")
    >>> isinstance(to_a_normal_form(Tuple((Tuple((x,)),))), Let)
    True
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from relay_ir import trampoline
from relay_ir.expr import (
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Var,
)
from relay_ir.module import IRModule
from relay_ir.transform.analysis import children
from relay_ir.transform.pass_manager import FunctionPass, PassContext
from relay_ir.transform.rewrite import let_chain, rebuild
from tessel_errors import RelayError


class _Scope:
    __slots__ = ("bindings", "memo", "parent")

    def __init__(self, parent: _Scope | None) -> None:
        self.parent = parent
        self.bindings: list[tuple[Var, Expr]] = []
        self.memo: dict[int, Expr] = {}

    def lookup(self, expr: Expr) -> Expr | None:
        scope: _Scope | None = self
        while scope is not None:
            hit = scope.memo.get(id(expr))
            if hit is not None:
                return hit
            scope = scope.parent
        return None


def _atomic(expr: Expr) -> bool:
    return isinstance(expr, (Var, GlobalVar, Constant, Constructor))


class _ANF:
    def __init__(self) -> None:
        self.counter = 0

    def fresh(self, expr: Expr) -> Var:
        self.counter += 1
        return Var(f"t{self.counter}", expr.checked_type)

    # Each step returns its result when at hand, else a generator for the trampoline.

    def block(self, expr: Expr, parent: _Scope | None) -> Any:
        """Convert `expr` in a new scope and wrap the scope's bindings around it."""
        scope = _Scope(parent)
        result = yield self.atom(expr, scope)
        return let_chain(scope.bindings, result)

    def atom(self, expr: Expr, scope: _Scope) -> Any:
        """An atomic expression holding the value of `expr` (binding it if needed)."""
        if _atomic(expr):
            return expr
        hit = scope.lookup(expr)
        if hit is not None:
            return hit
        return self._bind(expr, scope)

    def _bind(self, expr: Expr, scope: _Scope) -> Any:
        while isinstance(expr, Let):  # walk let chains without nesting
            value = yield self.compound(expr.value, scope)
            scope.bindings.append((expr.var, value))
            scope.memo[id(expr.value)] = expr.var
            expr = expr.body
            if _atomic(expr):
                return expr
        hit = scope.lookup(expr)
        if hit is not None:
            return hit
        value = yield self.compound(expr, scope)
        var = self.fresh(expr)
        scope.bindings.append((var, value))
        scope.memo[id(expr)] = var
        return var

    def compound(self, expr: Expr, scope: _Scope) -> Any:
        """`expr` rebuilt with atomic children (not itself bound)."""
        if _atomic(expr):
            return expr
        if isinstance(expr, Let):
            return self.atom(expr, scope)
        if isinstance(expr, Function) and expr.attr("Primitive"):
            return expr  # a fused kernel stays dataflow
        return self._rebuild(expr, scope)

    def _rebuild(self, expr: Expr, scope: _Scope) -> Any:
        if isinstance(expr, Function):
            body = yield self.block(expr.body, scope)
            return replace(expr, body=body, checked_type=None)
        if isinstance(expr, If):
            cond = yield self.atom(expr.cond, scope)
            then = yield self.block(expr.true_branch, scope)
            other = yield self.block(expr.false_branch, scope)
            return replace(expr, cond=cond, true_branch=then, false_branch=other,
                           checked_type=None)
        if isinstance(expr, Match):
            data = yield self.atom(expr.data, scope)
            rhs = []
            for c in expr.clauses:
                rhs.append((yield self.block(c.rhs, scope)))
            return rebuild(expr, [data, *rhs])
        kids = []
        for k in children(expr):
            kids.append((yield self.atom(k, scope)))
        return rebuild(expr, kids)


# Pending conversions allowed at once: nesting this deep is a runaway, not a program.
MAX_PENDING = 1_000_000


def _too_deep() -> RelayError:
    return RelayError(f"ToANormalForm: the expression nests deeper than {MAX_PENDING:,} "
                      "levels")


def to_a_normal_form(expr: Expr) -> Expr:
    """`expr` in A-normal form (a Function keeps its params; its body is converted)."""
    conv = _ANF()
    if isinstance(expr, Function):
        body = trampoline.run(conv.block(expr.body, None), MAX_PENDING, _too_deep)
        return replace(expr, body=body, checked_type=None)
    return trampoline.run(conv.block(expr, None), MAX_PENDING, _too_deep)


class ToANormalForm(FunctionPass):
    """Let-bind every intermediate value of every function."""

    name = "ToANormalForm"
    opt_level = 1

    def transform_function(self, fn: Function, mod: IRModule, ctx: PassContext) -> Function:
        """Convert one function."""
        out = to_a_normal_form(fn)
        assert isinstance(out, Function)
        return out


__all__ = ["ToANormalForm", "to_a_normal_form"]
