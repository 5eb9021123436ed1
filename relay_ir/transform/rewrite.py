"""Rebuilding helpers the passes share: replace a node's children, rewrite bottom-up,
substitute variables, and copy a function with fresh variables.

A rebuilt node drops its `checked_type` (it may no longer be right); passes that need
types run InferType again. Rewrites are iterative and memoised by identity, so a DAG
stays a DAG and deep let chains do not recurse.

    >>> from relay_ir.expr import Var, Tuple
    >>> a, b = Var("a"), Var("b")
    >>> t = substitute(Tuple((a, a)), {a: b})
    >>> t.fields[0] is b and t.fields[1] is b
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from relay_ir.expr import (
    Call,
    Clause,
    Constructor,
    Expr,
    Function,
    If,
    Let,
    Match,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from relay_ir.op.registry import Op, get_op
from relay_ir.transform.analysis import children, post_order


def rebuild(node: Expr, kids: list[Expr]) -> Expr:
    """`node` with its children (as listed by `analysis.children`) replaced by `kids`;
    the node itself when nothing changed."""
    old = children(node)
    if len(old) == len(kids) and all(a is b for a, b in zip(old, kids)):
        return node
    if isinstance(node, Call):
        if isinstance(node.op, (Op, Constructor)):
            return replace(node, args=tuple(kids), checked_type=None)
        return replace(node, op=kids[0], args=tuple(kids[1:]), checked_type=None)
    if isinstance(node, Tuple):
        return replace(node, fields=tuple(kids), checked_type=None)
    if isinstance(node, TupleGetItem):
        return replace(node, tuple_value=kids[0], checked_type=None)
    if isinstance(node, Function):
        return replace(node, body=kids[0], checked_type=None)
    if isinstance(node, Let):
        return replace(node, value=kids[0], body=kids[1], checked_type=None)
    if isinstance(node, If):
        return replace(node, cond=kids[0], true_branch=kids[1], false_branch=kids[2],
                       checked_type=None)
    if isinstance(node, Match):
        clauses = tuple(Clause(c.lhs, k) for c, k in zip(node.clauses, kids[1:]))
        return replace(node, data=kids[0], clauses=clauses, checked_type=None)
    if isinstance(node, RefCreate):
        return replace(node, value=kids[0], checked_type=None)
    if isinstance(node, RefRead):
        return replace(node, ref=kids[0], checked_type=None)
    if isinstance(node, RefWrite):
        return replace(node, ref=kids[0], value=kids[1], checked_type=None)
    raise TypeError(f"rebuild: {type(node).__name__} has no children to replace")


def rewrite(
    expr: Expr, visit: Callable[[Expr, Expr], Expr], memo: dict[int, Expr] | None = None
) -> Expr:
    """Rewrite bottom-up: `visit(old, new)` gets each original node and the node rebuilt
    over already-rewritten children, and returns its replacement. `memo` (id of an
    original node -> its replacement) may be passed in to let `visit` look results up:
    a let's value is always rewritten before any use of the let's variable.

    >>> from relay_ir.expr import Var, Tuple
    >>> a, b = Var("a"), Var("b")
    >>> rewrite(Tuple((a,)), lambda old, new: b if old is a else new).fields[0] is b
    True
    """
    memo = {} if memo is None else memo
    for node in post_order(expr):
        kids = [memo[id(k)] for k in children(node)]
        new = rebuild(node, kids) if kids else node
        memo[id(node)] = visit(node, new)
    return memo[id(expr)]


def substitute(expr: Expr, mapping: dict[Var, Expr]) -> Expr:
    """Replace uses of variables (binding sites stay) by the given expressions."""
    if not mapping:
        return expr
    return rewrite(expr, lambda old, new: mapping.get(old, new) if isinstance(old, Var) else new)


def fresh_copy(fn: Function) -> Function:
    """`fn` with every variable it binds (params, lets, pattern vars) replaced by a new
    Var of the same name and annotation, so the copy can be inlined next to the original
    without binding a variable twice.

    >>> from relay_ir.expr import Var, Function
    >>> x = Var("x"); f = Function((x,), x); g = fresh_copy(f)
    >>> g.params[0] is not x and g.body is g.params[0]
    True
    """
    renamed: dict[Var, Var] = {}

    def fresh(v: Var) -> Var:
        if v not in renamed:
            renamed[v] = Var(v.name_hint, v.type_annotation, span=v.span)
        return renamed[v]

    def pat(p: Pattern) -> Pattern:
        if isinstance(p, PatternVar):
            return PatternVar(fresh(p.var))
        if isinstance(p, PatternConstructor):
            return PatternConstructor(p.constructor, tuple(pat(q) for q in p.patterns))
        if isinstance(p, PatternTuple):
            return PatternTuple(tuple(pat(q) for q in p.patterns))
        return p

    # First allocate fresh binders (so uses anywhere map to them), then rebuild.
    for node in post_order(fn):
        if isinstance(node, Function):
            for p in node.params:
                fresh(p)
        elif isinstance(node, Let):
            fresh(node.var)

    def visit(old: Expr, new: Expr) -> Expr:
        if isinstance(old, Var):
            return renamed.get(old, old)
        if isinstance(new, Function):
            return replace(new, params=tuple(renamed[p] for p in new.params), checked_type=None)
        if isinstance(new, Let):
            return replace(new, var=renamed[new.var], checked_type=None)
        if isinstance(new, Match):
            clauses = tuple(Clause(pat(c.lhs), c.rhs) for c in new.clauses)
            return replace(new, clauses=clauses, checked_type=None)
        return new

    # Pattern vars are allocated while rebuilding a Match, but their uses in the clause
    # bodies are rewritten earlier (bottom-up), so allocate them up front too.
    for node in post_order(fn):
        if isinstance(node, Match):
            for c in node.clauses:
                _alloc_pattern(c.lhs, fresh)
    out = rewrite(fn, visit)
    assert isinstance(out, Function)
    return out


def _alloc_pattern(p: Pattern, fresh: Callable[[Var], Var]) -> None:
    if isinstance(p, PatternVar):
        fresh(p.var)
    elif isinstance(p, (PatternConstructor, PatternTuple)):
        for q in p.patterns:
            _alloc_pattern(q, fresh)


def op_call(name: str, args: list[Expr] | tuple[Expr, ...], **attrs: object) -> Call:
    """A call of the op called `name` with attrs built by the op.

    >>> from relay_ir.expr import Var
    >>> op_call("add", [Var("a"), Var("b")]).op.name
    'add'
    """
    op = get_op(name)
    return Call(op, tuple(args), op.make_attrs(attrs) if op.attrs_type is not None else None)


def let_chain(bindings: list[tuple[Var, Expr]], body: Expr) -> Expr:
    """`let v1 = e1; let v2 = e2; ...; body`, built without recursion."""
    for var, value in reversed(bindings):
        body = Let(var, value, body)
    return body


__all__ = ["fresh_copy", "let_chain", "op_call", "rebuild", "rewrite", "substitute"]
