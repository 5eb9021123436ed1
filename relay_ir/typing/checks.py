"""Rebuilding the program with its types, and the run-time checks of gradual shapes.

Design. A `?` in a static type is a promise to check later. Inference refines a `?` when
the program relies on it being a number (a dense needs data's last dim to equal the
weight's; a call passes the value where (8, 3) is declared). Every `?` comes from one of
two *sources*: a parameter annotation (`%x: Tensor[(?, ?)]`) or an op/call result whose
dim the relation could not know (`reshape(%x, (-1, 3))`). When a source's `?` is refined,
the value is checked where it enters the program, before any use can compute garbage:

- a parameter gets a prologue `let %x = runtime.check_shape(%x, shape=(-1, 3), ...)` at
  the top of its function (the body uses the checked copy);
- a call result is wrapped: `runtime.check_shape(reshape(...), shape=(8, 3), ...)`.

The check's message names the value, the dim, the number and what required it ("%x: dim 1
must be 3 (required by nn.dense at line 3)"), so the RelayRuntimeError reads like the
type error would have. Dims refined to a symbol (ShapeVar) are not checked (check_shape
takes numbers). Re-running inference adds no new checks: a checked value already has the
number in its type.

    >>> from relay_ir.typing.unify import Origin
    >>> check_message(Origin("param", None, 1, "%x"), [(1, 3, "nn.dense")])
    '%x: dim 1 must be 3 (required by nn.dense)'
"""

from __future__ import annotations

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
)
from relay_ir.op.runtime import check_shape_op
from relay_ir.ty import TensorType, Type
from relay_ir.typing.errors import describe_expr, type_error
from relay_ir.typing.unify import Origin, Refinement, has_incomplete
from relay_ir.visitor import DATAFLOW_NODES, dataflow_below


def check_message(origin: Origin, items: list[tuple[int, int, str]]) -> str:
    """The message of a run-time check: which value, which dims, what required them."""
    parts = [f"dim {axis} must be {value} (required by {cause})" for axis, value, cause in items]
    return f"{origin.what}: " + ", ".join(parts)


def is_checked(r: Refinement) -> bool:
    """Whether a refinement came from a run-time check itself (nothing left to check)."""
    return r.cause.startswith(CHECK_CAUSE)


CHECK_CAUSE = "runtime.check_shape"


def plan_checks(refinements: list[Refinement]) -> dict[Any, tuple[Origin, list]]:
    """Group the refinements that need a run-time check by their source node."""
    plan: dict[Any, tuple[Origin, list]] = {}
    for r in refinements:
        if not isinstance(r.value, int) or is_checked(r):
            continue
        entry = plan.setdefault(r.origin.node, (r.origin, []))
        if all(axis != r.origin.axis for axis, _, _ in entry[1]):
            entry[1].append((r.origin.axis, r.value, r.cause))
    for _, items in plan.values():
        items.sort()
    return plan


class Rebuilder:
    """Copies of the nodes with checked_type set (sharing kept: one memo by identity)."""

    def __init__(self, inf: Any, insert_checks: bool) -> None:
        self.inf = inf
        self.memo: dict[Any, Any] = {}
        self.plan = plan_checks(inf.u.refinements) if insert_checks else {}
        self.inserted: list[str] = []
        self.globals: dict[str, GlobalVar] = {}

    def type_of(self, node: Any) -> Type:
        """The final type of a node; an error if inference left it unknown."""
        t = self.inf.types.get(node)
        if t is None:
            raise type_error(f"internal: no type was inferred for {describe_expr(node)}", node)
        final = self.inf.u.resolve_final(t)
        if has_incomplete(final):
            raise type_error(f"cannot infer the type of {describe_expr(node)} (it is {final}); "
                             f"add a type annotation", node)
        return final

    def global_var(self, gv: GlobalVar) -> GlobalVar:
        """The one new GlobalVar per name, typed (the module's keys use the same object)."""
        new = self.globals.get(gv.name_hint)
        if new is None:
            t = self.inf.u.resolve_final(self.inf.global_types[gv.name_hint])
            new = replace(gv, checked_type=t)
            self.globals[gv.name_hint] = new
        return new

    def _check(self, value: Any, t: Type, origin: Origin, items: list) -> Call:
        assert isinstance(t, TensorType)
        shape = [-1] * t.ndim
        for axis, v, _ in items:
            shape[axis] = v
        attrs = check_shape_op.make_attrs({"shape": tuple(shape),
                                           "message": check_message(origin, items)})
        self.inserted.append(attrs.message)
        return Call(check_shape_op, (value,), attrs, span=getattr(value, "span", None),
                    checked_type=t)

    # --- the walk --------------------------------------------------------------------------

    def rebuild(self, e: Any) -> Any:
        """The typed copy of `e`."""
        done = self.memo.get(e)
        if done is not None:
            return done
        if isinstance(e, GlobalVar):
            return self.global_var(e)
        if isinstance(e, Constructor):
            return e  # shared with the module's TypeData: identity must stay
        if isinstance(e, Let):
            return self._let(e)
        if isinstance(e, DATAFLOW_NODES):  # operands first, without deep recursion
            for node in dataflow_below(e, lambda n: n in self.memo):
                if node not in self.memo:
                    self.rebuild(node)
        method = _REBUILD.get(type(e))
        if method is None:
            raise type_error(f"cannot rebuild {type(e).__name__} nodes", e)
        new = method(self, e)
        self.memo[e] = new
        return new

    def _let(self, let: Let) -> Any:
        chain: list[Let] = []
        e: Any = let
        while isinstance(e, Let) and e not in self.memo:
            chain.append(e)
            e = e.body
        new_body = self.rebuild(e)
        for link in reversed(chain):
            var = self.rebuild(link.var)
            value = self.rebuild(link.value)
            new_body = replace(link, var=var, value=value, body=new_body,
                               checked_type=new_body.checked_type)
            self.memo[link] = new_body
        return self.memo[let]

    def _var(self, v: Var) -> Var:
        return replace(v, checked_type=self.type_of(v))

    def _constant(self, c: Constant) -> Constant:
        return replace(c, checked_type=self.type_of(c))

    def _tuple(self, t: Tuple) -> Tuple:
        fields = tuple(self.rebuild(f) for f in t.fields)
        return replace(t, fields=fields, checked_type=self.type_of(t))

    def _get_item(self, g: TupleGetItem) -> TupleGetItem:
        return replace(g, tuple_value=self.rebuild(g.tuple_value), checked_type=self.type_of(g))

    def _call(self, c: Call) -> Any:
        op = self.rebuild(c.op) if isinstance(c.op, Expr) else c.op
        args = tuple(self.rebuild(a) for a in c.args)
        t = self.type_of(c)
        new = replace(c, op=op, args=args, checked_type=t)
        planned = self.plan.get(c)
        if planned is not None and isinstance(t, TensorType):
            return self._check(new, t, *planned)
        return new

    def _function(self, fn: Function) -> Function:
        params = []
        prologue = []
        for p in fn.params:
            new_p = self._var(p)
            params.append(new_p)
            planned = self.plan.get(p)
            if planned is not None and isinstance(new_p.checked_type, TensorType):
                checked = Var(p.name_hint, None, span=p.span, checked_type=new_p.checked_type)
                prologue.append((checked, self._check(new_p, new_p.checked_type, *planned)))
                self.memo[p] = checked  # the body uses the checked copy
            else:
                self.memo[p] = new_p
        body = self.rebuild(fn.body)
        for var, check in reversed(prologue):
            body = Let(var, check, body, span=fn.body.span, checked_type=body.checked_type)
        return replace(fn, params=tuple(params), body=body, checked_type=self.type_of(fn))

    def _if(self, e: If) -> If:
        return replace(e, cond=self.rebuild(e.cond), true_branch=self.rebuild(e.true_branch),
                       false_branch=self.rebuild(e.false_branch), checked_type=self.type_of(e))

    def _pattern(self, p: Pattern) -> Pattern:
        if isinstance(p, PatternVar):
            return replace(p, var=self.rebuild(p.var))
        if isinstance(p, PatternConstructor | PatternTuple):
            return replace(p, patterns=tuple(self._pattern(q) for q in p.patterns))
        assert isinstance(p, PatternWildcard)
        return p

    def _match(self, m: Match) -> Match:
        clauses = tuple(
            Clause(self._pattern(c.lhs), self.rebuild(c.rhs)) for c in m.clauses
        )
        return replace(m, data=self.rebuild(m.data), clauses=clauses,
                       checked_type=self.type_of(m))

    def _ref_create(self, r: RefCreate) -> RefCreate:
        return replace(r, value=self.rebuild(r.value), checked_type=self.type_of(r))

    def _ref_read(self, r: RefRead) -> RefRead:
        return replace(r, ref=self.rebuild(r.ref), checked_type=self.type_of(r))

    def _ref_write(self, r: RefWrite) -> RefWrite:
        return replace(r, ref=self.rebuild(r.ref), value=self.rebuild(r.value),
                       checked_type=self.type_of(r))


_REBUILD: dict[type, Any] = {
    Var: Rebuilder._var,
    Constant: Rebuilder._constant,
    Tuple: Rebuilder._tuple,
    TupleGetItem: Rebuilder._get_item,
    Call: Rebuilder._call,
    Function: Rebuilder._function,
    If: Rebuilder._if,
    Match: Rebuilder._match,
    RefCreate: Rebuilder._ref_create,
    RefRead: Rebuilder._ref_read,
    RefWrite: Rebuilder._ref_write,
}
