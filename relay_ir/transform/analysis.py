"""Analyses the passes share: bound variables, purity, use counts, and the
well-formedness check the pass manager runs after each pass. The walks themselves
(`children`, `post_order`, `binders`, `free_vars`) live in relay_ir.visitor, the one
home of traversals, and are re-exported here for the passes.

Every walk is iterative (an explicit stack), so a 10,000-deep let chain or a long
ResNet-style DAG never meets Python's recursion limit; walks memoise by identity, so a
shared sub-expression is visited once.

    >>> from relay_ir.expr import Var, Let, Tuple
    >>> x, y = Var("x"), Var("y")
    >>> [v.name_hint for v in free_vars(Let(y, x, Tuple((y, x))))]
    ['x']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from relay_ir.expr import (
    Call,
    Constructor,
    Expr,
    Function,
    RefWrite,
    Var,
)
from relay_ir.op.registry import Op
from relay_ir.visitor import binders, children, free_vars, post_order
from tessel_errors import RelayError


def op_name(e: Expr) -> str | None:
    """The name of the operator `e` calls, or None when `e` is not a call of an operator
    (a variable, a call of a function or constructor).

        >>> from relay_ir.expr import Var
        >>> from relay_ir.transform.rewrite import op_call
        >>> op_name(op_call("add", [Var("a"), Var("b")])), op_name(Var("a"))
        ('add', None)
    """
    if isinstance(e, Call) and isinstance(e.op, Op):
        return e.op.name
    return None


def bound_vars(expr: Expr) -> list[Var]:
    """Every variable bound anywhere under `expr`, each listed as often as it is bound."""
    return [v for node in post_order(expr) for v in binders(node)]


def is_pure(expr: Expr, pure_call: Callable[[Call], bool] | None = None) -> bool:
    """Whether evaluating `expr` can have no effect: no ref writes and no calls of
    functions that might write refs (op and constructor calls are pure).

    `pure_call` may declare more calls pure (e.g. calls of known-pure globals).
    """
    for node in post_order(expr):
        if isinstance(node, RefWrite):
            return False
        if isinstance(node, Call) and not isinstance(node.op, (Op, Constructor)):
            callee = node.op
            if isinstance(callee, Function) and callee.attr("Primitive"):
                continue
            if pure_call is not None and pure_call(node):
                continue
            return False
    return True


def use_counts(expr: Expr) -> dict[int, int]:
    """How many times each node is referenced as a child (by id), counting DAG sharing."""
    counts: dict[int, int] = {}
    for node in post_order(expr):
        for c in children(node):
            counts[id(c)] = counts.get(id(c), 0) + 1
    return counts


def iter_functions(expr: Expr) -> Iterator[Function]:
    """Every Function literal under `expr` (including `expr` itself)."""
    for node in post_order(expr):
        if isinstance(node, Function):
            yield node


def check_well_formed(expr: Expr, where: str = "") -> None:
    """Raise RelayError unless every variable is bound exactly once and used in scope.

    >>> from relay_ir.expr import Var, Function
    >>> x = Var("x"); check_well_formed(Function((x,), x))
    """
    place = f" in {where}" if where else ""
    seen: dict[int, Var] = {}
    for v in bound_vars(expr):
        if id(v) in seen:
            raise RelayError(
                f"ill-formed IR{place}: variable %{v.name_hint} is bound more than once; "
                f"each Var object must have a single binding site (copy the function "
                f"with fresh variables instead of reusing it)"
            )
        seen[id(v)] = v
    free = free_vars(expr)
    if free:
        names = ", ".join("%" + v.name_hint for v in free)
        raise RelayError(
            f"ill-formed IR{place}: unbound variable(s) {names}; a variable is used "
            f"outside the function, let or match clause that binds it"
        )


__all__ = [
    "binders",
    "bound_vars",
    "check_well_formed",
    "children",
    "free_vars",
    "is_pure",
    "iter_functions",
    "op_name",
    "post_order",
    "use_counts",
]
