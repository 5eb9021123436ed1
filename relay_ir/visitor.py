"""Walking and rebuilding expressions: ExprVisitor, ExprMutator, post_order, free_vars.

Both walkers memoise by identity (models are DAGs: a shared node is visited once) and
never hit Python's recursion limit on long let chains or long dataflow chains: let chains
are walked in a loop, and a run of dataflow nodes (Call, Tuple, TupleGetItem, refs) is
expanded in post order with an explicit stack before any of them is dispatched. Only
nesting through functions, ifs and matches recurses.

    >>> from relay_ir.expr import Var, Let, Tuple
    >>> x = Var("x")
    >>> class Count(ExprVisitor):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.lets = 0
    ...     def visit_let_binding(self, let):
    ...         self.lets += 1
    ...         super().visit_let_binding(let)
    >>> c = Count(); c.visit(Let(x, Tuple(()), x)); c.lets
    1
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from relay_ir.expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
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

# Nodes that bind no variables: safe to expand eagerly in post order.
DATAFLOW_NODES = (Call, Tuple, TupleGetItem, RefCreate, RefRead, RefWrite)

_METHOD_NAMES: dict[type, str | None] = {}


def _method_name(cls: type) -> str | None:
    # Dispatch by class name along the MRO, so that subclasses of nodes and the registry's
    # Op (not an Expr, imported by nobody here) reach visit_op without an import cycle.
    if cls not in _METHOD_NAMES:
        found = None
        for base in cls.__mro__:
            name = _SNAKE.get(base.__name__)
            if name is not None and base.__module__ in (
                "relay_ir.expr",
                "relay_ir.op.registry",
            ):
                found = name
                break
        _METHOD_NAMES[cls] = found
    return _METHOD_NAMES[cls]


_SNAKE = {
    "Var": "visit_var",
    "GlobalVar": "visit_global_var",
    "Constant": "visit_constant",
    "Tuple": "visit_tuple",
    "TupleGetItem": "visit_tuple_get_item",
    "Call": "visit_call",
    "Function": "visit_function",
    "Let": "visit_let",
    "If": "visit_if",
    "Match": "visit_match",
    "Constructor": "visit_constructor",
    "RefCreate": "visit_ref_create",
    "RefRead": "visit_ref_read",
    "RefWrite": "visit_ref_write",
    "Op": "visit_op",
}


def children(e: Any) -> tuple[Expr, ...]:
    """The sub-expressions `e` evaluates, in evaluation order: binders (function params,
    a let's var, pattern vars) and the callee of an op or constructor call are not among
    them. Leaves (vars, globals, constants, constructors, ops) have none.

    >>> from relay_ir.expr import Var, Tuple, Function
    >>> a, b = Var("a"), Var("b")
    >>> len(children(Tuple((a, a)))), children(Function((a,), b)) == (b,)
    (2, True)
    """
    if isinstance(e, (Var, GlobalVar, Constant, Constructor)) or not isinstance(e, Expr):
        return ()
    if isinstance(e, Call):
        callee = () if isinstance(e.op, (Op, Constructor)) or not isinstance(e.op, Expr) \
            else (e.op,)
        return callee + tuple(e.args)
    if isinstance(e, Tuple):
        return tuple(e.fields)
    if isinstance(e, TupleGetItem):
        return (e.tuple_value,)
    if isinstance(e, Function):
        return (e.body,)
    if isinstance(e, Let):
        return (e.value, e.body)
    if isinstance(e, If):
        return (e.cond, e.true_branch, e.false_branch)
    if isinstance(e, Match):
        return (e.data,) + tuple(c.rhs for c in e.clauses)
    if isinstance(e, RefCreate):
        return (e.value,)
    if isinstance(e, RefRead):
        return (e.ref,)
    if isinstance(e, RefWrite):
        return (e.ref, e.value)
    raise RelayError(f"children(): unknown expression node {type(e).__name__}")


def post_order(expr: Expr, skip: Callable[[Expr], bool] | None = None) -> list[Expr]:
    """Every distinct node under `expr` (by identity: a shared node once), children before
    parents, without recursion; the children of a node for which `skip(node)` holds are
    not walked.

    >>> from relay_ir.expr import Var, Tuple
    >>> a = Var("a"); [type(n).__name__ for n in post_order(Tuple((a, a)))]
    ['Var', 'Tuple']
    """
    out: list[Expr] = []
    seen: set[int] = set()
    stack: list[tuple[Any, bool]] = [(expr, False)]
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
        for c in reversed(children(node)):
            if id(c) not in seen:
                stack.append((c, False))
    return out


def dataflow_below(root: Expr, done: Callable[[Expr], bool]) -> list[Expr]:
    """The dataflow nodes (calls, tuples, projections, refs: nodes that bind nothing)
    under `root` that are not `done`, children before parents, `root` itself excluded.

    A recursive functor that handles these first, in this order, finds the operands of
    every node it visits already handled, so a chain of 10^5 ops needs no deep Python
    recursion; only nesting of functions, lets, ifs and matches recurses.

    >>> from relay_ir.expr import Var, Tuple
    >>> a = Var("a"); inner = Tuple((a,))
    >>> dataflow_below(Tuple((inner,)), lambda n: False) == [inner]
    True
    """
    def wanted(n: Expr) -> bool:
        return n is not root and isinstance(n, DATAFLOW_NODES) and not done(n)

    return [n for n in post_order(root, skip=lambda n: n is not root and not wanted(n))
            if wanted(n)]


def binders(expr: Expr) -> tuple[Var, ...]:
    """The variables `expr` itself binds (function params, let var, match pattern vars).

    >>> from relay_ir.expr import Var, Let
    >>> x = Var("x"); binders(Let(x, x, x)) == (x,)
    True
    """
    if isinstance(expr, Function):
        return tuple(expr.params)
    if isinstance(expr, Let):
        return (expr.var,)
    if isinstance(expr, Match):
        return tuple(v for c in expr.clauses for v in pattern_vars(c.lhs))
    return ()


def free_vars(expr: Expr) -> list[Var]:
    """The variables used under `expr` but not bound there, in order of first use.

    Scoping is exact: a let var is in scope in the let body (and in its own value when
    that value is a function, which is how Relay writes local recursion). Each node's
    free variables are computed once, bottom-up, so a sub-expression shared between two
    scopes is right in both: a variable one scope binds is still free where the other
    scope uses the same node.

    >>> from relay_ir.expr import Var, Function, Tuple
    >>> a, b = Var("a"), Var("b")
    >>> [v.name_hint for v in free_vars(Function((a,), Tuple((a, b))))]
    ['b']
    """
    memo: dict[int, tuple[Var, ...]] = {}
    for node in post_order(expr):
        if isinstance(node, Var):
            memo[id(node)] = (node,)
        elif isinstance(node, Match):
            parts: list[Var] = list(memo[id(node.data)])
            for clause in node.clauses:
                bound = set(map(id, pattern_vars(clause.lhs)))
                parts += [v for v in memo[id(clause.rhs)] if id(v) not in bound]
            memo[id(node)] = _dedup(parts)
        elif isinstance(node, Let):
            own = id(node.var)
            value = memo[id(node.value)]
            if isinstance(node.value, Function):
                value = tuple(v for v in value if id(v) != own)
            body = tuple(v for v in memo[id(node.body)] if id(v) != own)
            memo[id(node)] = _dedup(list(value) + list(body))
        else:
            own_ids = set(map(id, binders(node)))
            memo[id(node)] = _dedup([v for c in children(node) for v in memo[id(c)]
                                     if id(v) not in own_ids])
    return list(memo[id(expr)])


def _dedup(vs: list[Var]) -> tuple[Var, ...]:
    seen: set[int] = set()
    out = []
    for v in vs:
        if id(v) not in seen:
            seen.add(id(v))
            out.append(v)
    return tuple(out)


class ExprFunctor:
    """Dispatch on the node type to `visit_<kind>`, memoising the result by identity."""

    def __init__(self) -> None:
        self.memo: dict[Any, Any] = {}

    def visit(self, expr: Any) -> Any:
        """Visit `expr` (once per node) and return the result of its visit_<kind>."""
        try:
            return self.memo[expr]
        except KeyError:
            pass
        except TypeError:
            raise RelayError(
                f"{type(self).__name__}.visit got a {type(expr).__name__}, not an expression"
            ) from None
        if isinstance(expr, DATAFLOW_NODES):
            self._expand_dataflow(expr)
            if expr in self.memo:
                return self.memo[expr]
        result = self._dispatch(expr)
        self.memo[expr] = result
        return result

    def _dispatch(self, expr: Any) -> Any:
        name = _method_name(type(expr))
        method = getattr(self, name, None) if name else None
        if method is None:
            raise RelayError(
                f"{type(self).__name__} has no case for {type(expr).__name__} nodes; "
                f"define {name or 'a visit_... method'} on it"
            )
        return method(expr)

    def _expand_dataflow(self, root: Expr) -> None:
        # Visit the dataflow region under `root` bottom-up so that the recursive calls
        # inside visit_call & co. only ever find memoised children.
        for node in dataflow_below(root, lambda n: n in self.memo):
            if node not in self.memo:
                self.memo[node] = self._dispatch(node)


class ExprVisitor(ExprFunctor):
    """Walk every node once; override visit_<kind> (call super to keep walking)."""

    def visit_var(self, var: Var) -> None:
        """A variable: nothing below it."""

    def visit_global_var(self, gv: GlobalVar) -> None:
        """A global: nothing below it (the module's function is not entered)."""

    def visit_constant(self, const: Constant) -> None:
        """A constant: nothing below it."""

    def visit_constructor(self, con: Constructor) -> None:
        """A constructor: nothing below it."""

    def visit_op(self, op: Any) -> None:
        """A primitive op (the callee of a Call): nothing below it."""

    def visit_tuple(self, tup: Tuple) -> None:
        """Visit each field."""
        for f in tup.fields:
            self.visit(f)

    def visit_tuple_get_item(self, tgi: TupleGetItem) -> None:
        """Visit the tuple."""
        self.visit(tgi.tuple_value)

    def visit_call(self, call: Call) -> None:
        """Visit the callee, then the arguments."""
        self.visit(call.op)
        for a in call.args:
            self.visit(a)

    def visit_function(self, fn: Function) -> None:
        """Visit the parameters, then the body."""
        for p in fn.params:
            self.visit(p)
        self.visit(fn.body)

    def visit_let(self, let: Let) -> None:
        """Walk the whole let chain in a loop (visit_let_binding per link), then its body."""
        e: Expr = let
        while isinstance(e, Let) and (e is let or e not in self.memo):
            self.visit_let_binding(e)
            if e is not let:
                self.memo[e] = None
            e = e.body
        self.visit(e)

    def visit_let_binding(self, let: Let) -> None:
        """One link of a let chain: the bound var, then the value (not the body)."""
        self.visit(let.var)
        self.visit(let.value)

    def visit_if(self, node: If) -> None:
        """Visit condition and both branches."""
        self.visit(node.cond)
        self.visit(node.true_branch)
        self.visit(node.false_branch)

    def visit_match(self, m: Match) -> None:
        """Visit the scrutinee, then each clause's pattern and right-hand side."""
        self.visit(m.data)
        for c in m.clauses:
            self.visit_pattern(c.lhs)
            self.visit(c.rhs)

    def visit_pattern(self, p: Pattern) -> None:
        """Visit the variables a pattern binds."""
        if isinstance(p, PatternVar):
            self.visit(p.var)
        elif isinstance(p, (PatternConstructor, PatternTuple)):
            for q in p.patterns:
                self.visit_pattern(q)

    def visit_ref_create(self, r: RefCreate) -> None:
        """Visit the initial value."""
        self.visit(r.value)

    def visit_ref_read(self, r: RefRead) -> None:
        """Visit the reference."""
        self.visit(r.ref)

    def visit_ref_write(self, r: RefWrite) -> None:
        """Visit the reference, then the value."""
        self.visit(r.ref)
        self.visit(r.value)


def _rebuild(node: Any, **fields: Any) -> Any:
    # Return the node itself when no child changed; a rebuilt node keeps its span but
    # drops checked_type, which may no longer hold.
    if all(getattr(node, k) is v for k, v in fields.items()):
        return node
    if isinstance(node, Expr):
        return replace(node, checked_type=None, **fields)
    return replace(node, **fields)


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


class ExprMutator(ExprFunctor):
    """Rebuild an expression bottom-up; unchanged sub-trees come back as the same nodes."""

    def visit_var(self, var: Var) -> Expr:
        """A variable maps to itself (override to rename or retype)."""
        return var

    def visit_global_var(self, gv: GlobalVar) -> Expr:
        """A global maps to itself."""
        return gv

    def visit_constant(self, const: Constant) -> Expr:
        """A constant maps to itself."""
        return const

    def visit_constructor(self, con: Constructor) -> Expr:
        """A constructor maps to itself."""
        return con

    def visit_op(self, op: Any) -> Any:
        """An op maps to itself."""
        return op

    def _tuple(self, items: tuple) -> tuple:
        new = tuple(self.visit(x) for x in items)
        return items if _same(items, new) else new

    def visit_tuple(self, tup: Tuple) -> Expr:
        """Rebuild from the visited fields."""
        return _rebuild(tup, fields=self._tuple(tup.fields))

    def visit_tuple_get_item(self, tgi: TupleGetItem) -> Expr:
        """Rebuild from the visited tuple."""
        return _rebuild(tgi, tuple_value=self.visit(tgi.tuple_value))

    def visit_call(self, call: Call) -> Expr:
        """Rebuild from the visited callee and arguments (attrs and type_args kept)."""
        return _rebuild(call, op=self.visit(call.op), args=self._tuple(call.args))

    def visit_function(self, fn: Function) -> Expr:
        """Rebuild from the visited parameters and body."""
        return _rebuild(fn, params=self._tuple(fn.params), body=self.visit(fn.body))

    def visit_let(self, let: Let) -> Expr:
        """Walk the let chain in a loop, then rebuild it from the inside out."""
        links: list[tuple[Let, Var, Expr]] = []
        e: Expr = let
        while isinstance(e, Let) and (e is let or e not in self.memo):
            var, value = self.visit_let_binding(e)
            links.append((e, var, value))
            e = e.body
        body = self.visit(e)
        for link, var, value in reversed(links):
            body = self.rebuild_let(link, var, value, body)
            if link is not let:
                self.memo[link] = body
        return body

    def visit_let_binding(self, let: Let) -> tuple[Var, Expr]:
        """One link of a let chain: the new var and value."""
        return self.visit(let.var), self.visit(let.value)

    def rebuild_let(self, let: Let, var: Var, value: Expr, body: Expr) -> Expr:
        """Put one let back together (override to drop or reorder bindings)."""
        return _rebuild(let, var=var, value=value, body=body)

    def visit_if(self, node: If) -> Expr:
        """Rebuild from the visited condition and branches."""
        return _rebuild(
            node,
            cond=self.visit(node.cond),
            true_branch=self.visit(node.true_branch),
            false_branch=self.visit(node.false_branch),
        )

    def visit_match(self, m: Match) -> Expr:
        """Rebuild from the visited scrutinee and clauses."""
        data = self.visit(m.data)
        clauses = tuple(self.visit_clause(c) for c in m.clauses)
        if _same(clauses, m.clauses):
            clauses = m.clauses
        return _rebuild(m, data=data, clauses=clauses)

    def visit_clause(self, c: Clause) -> Clause:
        """Rebuild one clause from its visited pattern and right-hand side."""
        return _rebuild(c, lhs=self.visit_pattern(c.lhs), rhs=self.visit(c.rhs))

    def visit_pattern(self, p: Pattern) -> Pattern:
        """Rebuild a pattern whose bound variables the mutator renamed or retyped."""
        if isinstance(p, PatternVar):
            return _rebuild(p, var=self.visit(p.var))
        if isinstance(p, (PatternConstructor, PatternTuple)):
            new = tuple(self.visit_pattern(q) for q in p.patterns)
            return p if _same(new, p.patterns) else replace(p, patterns=new)
        if isinstance(p, PatternWildcard):
            return p
        raise RelayError(f"{type(self).__name__} has no case for pattern {type(p).__name__}")

    def visit_ref_create(self, r: RefCreate) -> Expr:
        """Rebuild from the visited value."""
        return _rebuild(r, value=self.visit(r.value))

    def visit_ref_read(self, r: RefRead) -> Expr:
        """Rebuild from the visited reference."""
        return _rebuild(r, ref=self.visit(r.ref))

    def visit_ref_write(self, r: RefWrite) -> Expr:
        """Rebuild from the visited reference and value."""
        return _rebuild(r, ref=self.visit(r.ref), value=self.visit(r.value))


__all__ = ["ExprFunctor", "ExprMutator", "ExprVisitor", "children", "free_vars", "post_order"]
