"""Structural equality and hashing of expressions, types and modules.

Two programs are equal when they have the same shape up to the renaming of bound
variables (alpha-equivalence) and type parameters, with constants compared by dtype,
shape and exact bytes. Sharing counts: a node used twice on one side must be one node
used twice on the other (graph equality, as in Relay), so that `add(%0, %0)` with a
shared `%0` differs from the same call on two separate copies. Leaves (constants,
globals, constructors, ops) are compared by value and are exempt from the sharing rule.

Both functions reduce a program to a canonical token sequence (iteratively, so deep let
chains are fine); equal programs have equal sequences, hence equal hashes.

    >>> from relay_ir.expr import Var, Function
    >>> x, y = Var("x"), Var("y")
    >>> structural_equal(Function((x,), x), Function((y,), y))
    True
"""

from __future__ import annotations

from typing import Any

from relay_ir.expr import (
    Call,
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
)
from relay_ir.module import IRModule
from relay_ir.ty import (
    AnyDim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    ShapeVar,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    TypeVar,
)
from tessel_errors import RelayError


class _Bind:
    """A stack item: bind this var (or pattern) here."""

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item


class _Canon:
    """Turns one expression into canonical tokens; state is per top-level expression."""

    def __init__(self, map_free_vars: bool) -> None:
        self.map_free_vars = map_free_vars
        self.var_index: dict[int, int] = {}
        self.free_index: dict[int, int] = {}
        self.node_index: dict[int, int] = {}
        self.tv_index: dict[TypeVar, int] = {}
        self.tv_counter = 0
        self.keep: list[Any] = []  # keeps ids stable while we run
        self.tokens: list[Any] = []

    # --- types ---------------------------------------------------------------------------

    def bind_type_vars(self, tvs: tuple[TypeVar, ...]) -> None:
        for tv in tvs:
            self.tv_counter += 1
            self.tv_index[tv] = self.tv_counter

    def type_key(self, t: Type | None) -> Any:
        if t is None:
            return None
        if isinstance(t, TensorType):
            dims = tuple(
                "?" if isinstance(d, AnyDim) else ("sv", d.name) if isinstance(d, ShapeVar)
                else int(d)
                for d in t.shape
            )
            return ("T", dims, t.dtype)
        if isinstance(t, TupleType):
            return ("Tup",) + tuple(self.type_key(f) for f in t.fields)
        if isinstance(t, TypeVar):
            if t in self.tv_index:
                return ("tv", self.tv_index[t], t.kind)
            return ("ftv", t.name, t.kind)
        if isinstance(t, GlobalTypeVar):
            return ("gtv", t.name)
        if isinstance(t, TypeCall):
            return ("call", t.func.name) + tuple(self.type_key(a) for a in t.args)
        if isinstance(t, FuncType):
            saved = dict(self.tv_index)
            self.bind_type_vars(t.type_params)
            key = (
                "fn",
                tuple(self.tv_index[v] for v in t.type_params),
                tuple(self.type_key(a) for a in t.arg_types),
                self.type_key(t.ret_type),
            )
            self.tv_index = saved
            return key
        if isinstance(t, RefType):
            return ("ref", self.type_key(t.value))
        if isinstance(t, IncompleteType):
            return ("inc", t.id)
        if isinstance(t, TypeData):
            saved = dict(self.tv_index)
            self.bind_type_vars(t.type_vars)
            key = (
                "data",
                t.header.name,
                len(t.type_vars),
                tuple(
                    (c.name_hint, c.tag, tuple(self.type_key(i) for i in c.inputs))
                    for c in t.constructors
                ),
            )
            self.tv_index = saved
            return key
        raise RelayError(f"structural comparison: unknown type node {type(t).__name__}")

    # --- expressions ---------------------------------------------------------------------

    def bind_var(self, v: Var) -> None:
        self.var_index[id(v)] = len(self.tokens)
        self.keep.append(v)
        self.tokens.append(("bind", self.type_key(v.type_annotation)))

    def var_use(self, v: Var) -> Any:
        if id(v) in self.var_index:
            return ("use", self.var_index[id(v)])
        if self.map_free_vars:
            if id(v) not in self.free_index:
                self.free_index[id(v)] = len(self.free_index)
                self.keep.append(v)
                return ("free", self.free_index[id(v)], self.type_key(v.type_annotation))
            return ("free", self.free_index[id(v)])
        return ("free-id", id(v))

    def run(self, root: Any) -> list[Any]:
        stack: list[Any] = [root]
        tokens = self.tokens
        while stack:
            item = stack.pop()
            if isinstance(item, _Bind):
                if isinstance(item.item, Var):
                    self.bind_var(item.item)
                else:
                    self.pattern(item.item, stack)
                continue
            if isinstance(item, tuple) and item and item[0] == "tv-restore":
                self.tv_index = item[1]
                continue
            if isinstance(item, Var):
                tokens.append(self.var_use(item))
                continue
            if isinstance(item, Constant):
                data = item.data
                tokens.append(("const", str(data.dtype), data.shape, data.tobytes()))
                continue
            if isinstance(item, GlobalVar):
                tokens.append(("global", item.name_hint))
                continue
            if isinstance(item, Constructor):
                tokens.append(("ctor", item.belong_to.name, item.name_hint, item.tag))
                continue
            if not isinstance(item, Expr):
                name = getattr(item, "name", None)
                if name is None:
                    raise RelayError(
                        f"structural comparison: {type(item).__name__} is not an expression"
                    )
                tokens.append(("op", name))
                continue
            if id(item) in self.node_index:
                tokens.append(("shared", self.node_index[id(item)]))
                continue
            self.node_index[id(item)] = len(tokens)
            self.keep.append(item)
            self.expand(item, stack)
        return tokens

    def expand(self, e: Expr, stack: list[Any]) -> None:
        tokens = self.tokens
        # Children are pushed in reverse so they come out in source order.
        if isinstance(e, Tuple):
            tokens.append(("tuple", len(e.fields)))
            stack.extend(reversed(e.fields))
        elif isinstance(e, TupleGetItem):
            tokens.append(("tgi", e.index))
            stack.append(e.tuple_value)
        elif isinstance(e, Call):
            tokens.append(
                ("call", len(e.args), _attrs_key(e), tuple(self.type_key(t) for t in e.type_args))
            )
            stack.extend(reversed(e.args))
            stack.append(e.op)
        elif isinstance(e, Function):
            saved = dict(self.tv_index)
            self.bind_type_vars(e.type_params)
            tokens.append(
                (
                    "fn",
                    len(e.params),
                    tuple(self.tv_index[v] for v in e.type_params),
                    self.type_key(e.ret_type),
                    _hashable(e.attrs),
                )
            )
            stack.append(("tv-restore", saved))
            stack.append(e.body)
            stack.extend(_Bind(p) for p in reversed(e.params))
        elif isinstance(e, Let):
            tokens.append(("let",))
            stack.append(e.body)
            stack.append(e.value)
            stack.append(_Bind(e.var))
        elif isinstance(e, If):
            tokens.append(("if",))
            stack.extend((e.false_branch, e.true_branch, e.cond))
        elif isinstance(e, Match):
            tokens.append(("match", len(e.clauses), e.complete))
            for c in reversed(e.clauses):
                stack.append(c.rhs)
                stack.append(_Bind(c.lhs))
            stack.append(e.data)
        elif isinstance(e, RefCreate):
            tokens.append(("refnew",))
            stack.append(e.value)
        elif isinstance(e, RefRead):
            tokens.append(("refread",))
            stack.append(e.ref)
        elif isinstance(e, RefWrite):
            tokens.append(("refwrite",))
            stack.extend((e.value, e.ref))
        else:
            raise RelayError(f"structural comparison: unknown expression {type(e).__name__}")

    def pattern(self, p: Pattern, stack: list[Any]) -> None:
        if isinstance(p, PatternWildcard):
            self.tokens.append(("p_",))
        elif isinstance(p, PatternVar):
            self.bind_var(p.var)
        elif isinstance(p, PatternConstructor):
            c = p.constructor
            self.tokens.append(("pc", c.belong_to.name, c.name_hint, c.tag, len(p.patterns)))
            stack.extend(_Bind(q) for q in reversed(p.patterns))
        elif isinstance(p, PatternTuple):
            self.tokens.append(("pt", len(p.patterns)))
            stack.extend(_Bind(q) for q in reversed(p.patterns))
        else:
            raise RelayError(f"structural comparison: unknown pattern {type(p).__name__}")


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def _attrs_key(call: Call) -> Any:
    # None and the op's default attrs mean the same thing.
    attrs = call.attrs
    if attrs is None and hasattr(call.op, "make_attrs") and call.op.attrs_type is not None:
        try:
            attrs = call.op.make_attrs({})
        except (RelayError, TypeError, ValueError):  # required fields: None stays None
            attrs = None
    return (type(attrs).__name__, _hashable(attrs))


def _tokens(x: Any, map_free_vars: bool) -> Any:
    if isinstance(x, IRModule):
        canon_types = {}
        for gtv, td in x.type_definitions.items():
            canon_types[gtv.name] = _Canon(map_free_vars).type_key(td)
        fns = {}
        for gv, fn in x.functions.items():
            fns[gv.name_hint] = tuple(_Canon(map_free_vars).run(fn))
        return ("module", tuple(sorted(canon_types.items())), tuple(sorted(fns.items())))
    if isinstance(x, Type):
        return ("type", _Canon(map_free_vars).type_key(x))
    return ("expr", tuple(_Canon(map_free_vars).run(x)))


def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """Whether `a` and `b` (exprs, types or modules) are equal up to bound-var renaming.

    Free variables must be the same objects unless `map_free_vars` is set.

    >>> from relay_ir.expr import Constant
    >>> import numpy as np
    >>> structural_equal(Constant(np.array([1.0])), Constant(np.array([1.0])))
    True
    """
    kinds = (IRModule, Type, Expr)
    if any(isinstance(a, k) != isinstance(b, k) for k in kinds):
        return False
    return _tokens(a, map_free_vars) == _tokens(b, map_free_vars)


def structural_hash(x: Any, map_free_vars: bool = False) -> int:
    """A hash consistent with structural_equal (alpha-renamed programs hash alike).

    >>> from relay_ir.expr import Var, Function
    >>> a, b = Var("a"), Var("b")
    >>> structural_hash(Function((a,), a)) == structural_hash(Function((b,), b))
    True
    """
    return hash(_tokens(x, map_free_vars))


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> None:
    """Raise AssertionError showing both programs' text when they differ structurally."""
    if not structural_equal(a, b, map_free_vars):
        from relay_ir.printer import astext

        def show(x: Any) -> str:
            try:
                return astext(x)
            except Exception as e:  # noqa: BLE001 - printing is only a diagnostic here
                return f"<unprintable: {e}>"

        raise AssertionError(
            f"not structurally equal:\n--- left ---\n{show(a)}\n--- right ---\n{show(b)}"
        )


__all__ = ["assert_structural_equal", "structural_equal", "structural_hash"]
