"""Analyses the passes share: children of a node, post-order walks, free and bound
variables, purity, and the well-formedness check the pass manager runs after each pass.

Every walk here is iterative (an explicit stack), so a 10,000-deep let chain or a long
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
    If,
    Let,
    Match,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
    pattern_vars,
)
from relay_ir.op.registry import Op
from tessel_errors import RelayError


def children(expr: Expr) -> list[Expr]:
    """The direct sub-expressions of `expr`, in evaluation order.

    >>> from relay_ir.expr import Var, Tuple
    >>> a = Var("a"); len(children(Tuple((a, a))))
    2
    """
    if isinstance(expr, Call):
        op = [] if isinstance(expr.op, (Op, Constructor)) else [expr.op]
        return op + list(expr.args)
    if isinstance(expr, Tuple):
        return list(expr.fields)
    if isinstance(expr, TupleGetItem):
        return [expr.tuple_value]
    if isinstance(expr, Function):
        return [expr.body]
    if isinstance(expr, Let):
        return [expr.value, expr.body]
    if isinstance(expr, If):
        return [expr.cond, expr.true_branch, expr.false_branch]
    if isinstance(expr, Match):
        return [expr.data] + [c.rhs for c in expr.clauses]
    if isinstance(expr, RefCreate):
        return [expr.value]
    if isinstance(expr, RefRead):
        return [expr.ref]
    if isinstance(expr, RefWrite):
        return [expr.ref, expr.value]
    return []  # Var, GlobalVar, Constant, Constructor


def post_order(expr: Expr, skip: Callable[[Expr], bool] | None = None) -> list[Expr]:
    """Every distinct node under `expr`, children before parents (identity dedup);
    the children of a node for which `skip(node)` holds are not walked.

    >>> from relay_ir.expr import Var, Tuple
    >>> a = Var("a"); t = Tuple((a, a)); post_order(t) == [a, t]
    True
    """
    out: list[Expr] = []
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            out.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if skip is not None and skip(node):
            continue
        for child in reversed(children(node)):
            if id(child) not in seen:
                stack.append((child, False))
    return out


def binders(expr: Expr) -> list[Var]:
    """The variables `expr` itself binds (function params, let var, match pattern vars)."""
    if isinstance(expr, Function):
        return list(expr.params)
    if isinstance(expr, Let):
        return [expr.var]
    if isinstance(expr, Match):
        return [v for c in expr.clauses for v in pattern_vars(c.lhs)]
    return []


def bound_vars(expr: Expr) -> list[Var]:
    """Every variable bound anywhere under `expr`, each listed as often as it is bound."""
    return [v for node in post_order(expr) for v in binders(node)]


def free_vars(expr: Expr) -> list[Var]:
    """The variables used under `expr` but not bound there, in order of first use.

    Scoping is exact: a let var is in scope only in the let body (and in its own value
    when that value is a function, which is how Relay writes local recursion).
    """
    # Walk with the set of variables in scope; a DAG node may be reached under different
    # scopes, so memoise on (node, scope) only for closed sub-results: we keep it simple
    # and memoise the free-variable set of each node bottom-up instead.
    memo: dict[int, tuple[Var, ...]] = {}
    for node in post_order(expr):
        if isinstance(node, Var):
            memo[id(node)] = (node,)
            continue
        if isinstance(node, Match):
            parts: list[Var] = list(memo[id(node.data)])
            for clause in node.clauses:
                bound = set(map(id, pattern_vars(clause.lhs)))
                parts += [v for v in memo[id(clause.rhs)] if id(v) not in bound]
            memo[id(node)] = _dedup(parts)
            continue
        if isinstance(node, Let):
            own = {id(node.var)}
            value = memo[id(node.value)]
            if isinstance(node.value, Function):
                value = tuple(v for v in value if id(v) not in own)
            body = tuple(v for v in memo[id(node.body)] if id(v) not in own)
            memo[id(node)] = _dedup(list(value) + list(body))
            continue
        own = set(map(id, binders(node)))
        parts = [v for c in children(node) for v in memo[id(c)] if id(v) not in own]
        memo[id(node)] = _dedup(parts)
    return list(memo[id(expr)])


def _dedup(vs: list[Var]) -> tuple[Var, ...]:
    seen: set[int] = set()
    out = []
    for v in vs:
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return tuple(out)


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
    "post_order",
    "use_counts",
]
