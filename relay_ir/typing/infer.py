"""Constraint generation and solving: the heart of type inference.

One walk over each function gives every node a type, possibly with unknowns
(IncompleteType, DimHole). Structural rules (calls of functions, if, let, match, tuples,
refs, constructors) unify on the spot; op calls become relation constraints that the
solver runs to a fixpoint: a relation runs once its argument types are known, and again
whenever some binding changed, until nothing changes.

Globals are inferred one strongly connected component of the call graph at a time,
callees first. Inside a component the functions are monomorphic (so mutual recursion
works); afterwards their types are generalised: leftover `?` holes become `?` again, and
every later use instantiates them afresh. A global whose parameters and result are all
annotated has a declared signature: every call instantiates it (type parameters too), so
polymorphic recursion such as `@map` calling itself works.

    >>> from relay_ir.expr import Var
    >>> from relay_ir.ty import TensorType
    >>> inf = Inferencer(None)
    >>> print(inf.u.resolve_final(inf.visit(Var("x", TensorType((2, None))))))
    Tensor[(2, ?), float32]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from relay_ir.expr import (
    Call,
    Constant,
    Constructor,
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
from relay_ir.op._common import NotReady, Refined, RelationError, arg_name
from relay_ir.op.registry import TYPE_RELATIONS, Op
from relay_ir.ty import (
    FuncType,
    IncompleteType,
    RefType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
)
from relay_ir.typing.errors import describe_expr, line_of, type_error
from relay_ir.typing.unify import Origin, Unifier, UnifyError, has_incomplete, substitute
from relay_ir.visitor import DATAFLOW_NODES, dataflow_below

BOOL_SCALAR = TensorType((), "bool")


@dataclass(slots=True, eq=False)
class OpConstraint:
    """One op call waiting for its relation: argument types, result type, the call node."""

    op: Op
    call: Call
    arg_types: list[Type]
    out: Type
    ran: bool = False


class Inferencer:
    """Types of every node of a module (or of loose expressions when mod is None)."""

    def __init__(self, mod: IRModule | None) -> None:
        self.mod = mod
        self.u = Unifier()
        self.types: dict[Any, Type] = {}  # node -> type, by identity (nodes hash by id)
        self.var_types: dict[Var, Type] = {}
        self.constraints: list[OpConstraint] = []
        self.deferred: list[Callable[[bool], bool]] = []
        self.funcs: dict[str, Function] = {}
        self.global_types: dict[str, Type] = {}
        self.generic: set[str] = set()  # declared or finished: instantiate at each use
        if mod is not None:
            self.funcs = {gv.name_hint: fn for gv, fn in mod.functions.items()}

    # --- module level --------------------------------------------------------------------

    def infer_module(self) -> None:
        """Infer every global function, one call-graph component at a time."""
        for name, fn in self.funcs.items():
            sig = declared_signature(fn)
            if sig is not None:
                self.global_types[name] = sig
                self.generic.add(name)
        for scc in self._components():
            for name in scc:
                if name not in self.generic:
                    fn = self.funcs[name]
                    self.global_types[name] = FuncType(
                        tuple(self.u.fresh_type() for _ in fn.params), self.u.fresh_type(),
                        fn.type_params,
                    )
            for name in scc:
                fn = self.funcs[name]
                t = self.visit(fn)
                want = self.global_types[name]
                if name in self.generic:
                    want = self.instantiate_rigid(want)
                self._unify(t, want, fn, lambda d, n=name: f"@{n}: its body does not match "
                            f"its signature: {d}")
            self.solve()
            for name in scc:
                if name in self.generic:
                    continue
                final = self.u.resolve_final(self.global_types[name])
                if has_incomplete(final):
                    raise type_error(
                        f"@{name}: cannot infer its type completely (got {final}); "
                        f"annotate its parameters", self.funcs[name])
                self.global_types[name] = final
                self.generic.add(name)

    def _components(self) -> list[list[str]]:
        """Strongly connected components of the call graph, callees first (Tarjan)."""
        from relay_ir.visitor import post_order

        deps = {
            name: [n.name_hint for n in post_order(fn) if isinstance(n, GlobalVar)
                   and n.name_hint in self.funcs and n.name_hint not in self.generic]
            for name, fn in self.funcs.items()
        }
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        out: list[list[str]] = []

        def strong(v: str) -> None:
            index[v] = low[v] = len(index)
            stack.append(v)
            on_stack.add(v)
            for w in deps[v]:
                if w not in index:
                    strong(w)
                    low[v] = min(low[v], low[w])
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)

        for v in self.funcs:
            if v not in index:
                strong(v)
        return out

    # --- solving ---------------------------------------------------------------------------

    def solve(self) -> None:
        """Run relations and deferred rules until no binding changes; then report leftovers."""
        while True:
            before = self.u.version
            for c in self.constraints:
                self._run_relation(c)
            self.deferred = [d for d in self.deferred if not d(False)]
            if self.u.version == before:
                break
        for c in self.constraints:
            if not c.ran:
                unknown = [i for i, t in enumerate(c.arg_types)
                           if has_incomplete(self.u.resolve(t))]
                i = unknown[0] if unknown else 0
                raise type_error(
                    f"{c.op.name}: cannot infer the type of argument {i} "
                    f"({arg_name(c.op, i)}, {describe_expr(c.call.args[i])}); "
                    f"annotate it", c.call, got=self._show(c.arg_types[i]))
        for rule in self.deferred:
            rule(True)  # raises its own message about the unknown tuple
        self.constraints = []

    def _run_relation(self, c: OpConstraint) -> None:
        rel = TYPE_RELATIONS.get(c.op)
        if rel is None:
            raise type_error(f"{c.op.name}: the op has no type relation", c.call)
        args = [self.u.resolve(t) for t in c.arg_types]
        try:
            res = rel(args, c.call.attrs)
        except NotReady:
            return
        except RelationError as e:
            raise self._relation_error(c, e, args) from None
        ret, refined = (res.ret, res.args) if isinstance(res, Refined) else (res, ())
        cause = f"{c.op.name}{line_of(c.call)}"
        for i, r in enumerate(refined):
            if r is not None:
                self._unify(c.arg_types[i], r, c.call, lambda d, i=i: (
                    f"{c.op.name}: argument {i} ({arg_name(c.op, i)}, "
                    f"{describe_expr(c.call.args[i])}) does not fit: {d}"), cause=cause)
        if not c.ran:
            call = c.call
            ret = self.u.holeify(ret, lambda axis: Origin(
                "call", call, axis, f"the result of {call.op.name}{line_of(call)}"))
            c.ran = True
        self._unify(c.out, ret, c.call, lambda d: (
            f"{c.op.name}: its result {self._show(ret)} does not match its use: {d}"),
            cause=cause)

    def _relation_error(self, c: OpConstraint, e: RelationError, args: list[Type]) -> Exception:
        if e.arg is None:
            shown = ", ".join(self._show(t) for t in args)
            return type_error(f"{c.op.name}: {e.message}\n  argument types: ({shown})", c.call)
        i = e.arg
        head = (f"{c.op.name}: argument {i} ({arg_name(c.op, i)}, "
                f"{describe_expr(c.call.args[i])}): {e.message}")
        got = e.got if isinstance(e.got, Type) else args[i]
        expected = e.expected if e.expected is not None else None
        return type_error(head, c.call,
                          expected=self._show(expected) if isinstance(expected, Type)
                          else expected, got=self._show(got))

    # --- helpers -------------------------------------------------------------------------------

    def _show(self, t: Type) -> str:
        return str(self.u.resolve_final(t))

    def _unify(self, a: Type, b: Type, node: Any, message: Callable[[str], str],
               cause: str | None = None) -> Type:
        try:
            return self.u.unify(a, b, cause or f"{_construct(node)}{line_of(node)}")
        except UnifyError as e:
            raise type_error(message(e.detail), node, expected=self._show(b),
                             got=self._show(a)) from None

    def instantiate(self, t: Type, ret_origin: Callable[[int], Origin] | None = None,
                    type_args: tuple[Type, ...] = ()) -> Type:
        """A fresh copy of a generic type: type parameters (unless given explicitly in
        `type_args`, as in `@id[int32](%x)`) and `?` dims become unknowns."""
        if not isinstance(t, FuncType):
            return self.u.holeify(t)
        given = [self.u.holeify(a) for a in type_args]
        given += [self.u.fresh_type() for _ in t.type_params[len(given):]]
        sub = dict(zip(t.type_params, given))
        args = tuple(self.u.holeify(substitute(a, sub)) for a in t.arg_types)
        ret = self.u.holeify(substitute(t.ret_type, sub), ret_origin)
        return FuncType(args, ret)

    def instantiate_rigid(self, t: Type) -> Type:
        """A declared signature with its `?` as holes but its type parameters kept."""
        return self.u.holeify(t)

    def type_data(self, ctor: Constructor, node: Any) -> TypeData:
        """The ADT definition a constructor belongs to."""
        if self.mod is not None:
            td = self.mod.type_definitions.get(ctor.belong_to)
            if td is not None:
                return td
        raise type_error(f"constructor {ctor.name_hint} belongs to {ctor.belong_to.name}, "
                         f"which the module does not define", node)

    def constructor_type(self, ctor: Constructor, node: Any) -> tuple[list[Type], Type]:
        """Fresh instance of a constructor: its input types and its result type."""
        td = self.type_data(ctor, node)
        sub = {tv: self.u.fresh_type() for tv in td.type_vars}
        inputs = [self.u.holeify(substitute(t, sub)) for t in ctor.inputs]
        return inputs, TypeCall(td.header, tuple(sub[tv] for tv in td.type_vars))

    # --- expressions ---------------------------------------------------------------------

    def visit(self, e: Any) -> Type:
        """The (possibly incomplete) type of `e`; uses of generic names are instantiated."""
        if isinstance(e, Var):
            return self.visit_var(e)
        if isinstance(e, GlobalVar):
            return self.visit_global(e)
        if isinstance(e, Constructor):
            return self.visit_constructor(e)
        t = self.types.get(e)
        if t is not None:
            return t
        if isinstance(e, Let):
            return self.visit_let(e)
        if isinstance(e, DATAFLOW_NODES):  # operands first, without deep recursion
            for node in dataflow_below(e, lambda n: n in self.types):
                if node not in self.types:
                    self.visit(node)
        method = _VISIT.get(type(e))
        if method is None:
            raise type_error(f"type inference does not handle {type(e).__name__} nodes", e)
        t = method(self, e)
        self.types[e] = t
        return t

    def visit_var(self, v: Var) -> Type:
        t = self.var_types.get(v)
        if t is None:  # a free variable: its annotation (or an unknown) is its type
            t = self.bind_var(v)
        if isinstance(t, FuncType) and t.type_params:
            return self.instantiate(t)
        return t

    def bind_var(self, v: Var, origin: bool = True) -> Type:
        """Give a binding occurrence its type: the annotation with `?` as holes, or unknown."""
        if v.type_annotation is None:
            t: Type = self.u.fresh_type()
        elif origin:
            t = self.u.holeify(v.type_annotation,
                               lambda axis: Origin("param", v, axis, f"%{v.name_hint}"))
        else:
            t = self.u.holeify(v.type_annotation)
        self.var_types[v] = t
        self.types[v] = t
        return t

    def visit_global(self, gv: GlobalVar) -> Type:
        name = gv.name_hint
        if name not in self.global_types:
            known = sorted("@" + n for n in self.funcs)
            raise type_error(f"unknown global function @{name}; the module has {known}", gv)
        t = self.global_types[name]
        self.types.setdefault(gv, t)
        return self.instantiate(t) if name in self.generic else t

    def visit_constructor(self, c: Constructor) -> Type:
        inputs, result = self.constructor_type(c, c)
        t = result if not inputs else FuncType(tuple(inputs), result)
        self.types.setdefault(c, t)
        return t

    def visit_constant(self, c: Constant) -> Type:
        return c.tensor_type

    def visit_tuple(self, t: Tuple) -> Type:
        return TupleType(tuple(self.visit(f) for f in t.fields))

    def visit_tuple_get_item(self, g: TupleGetItem) -> Type:
        tt = self.visit(g.tuple_value)
        out = self.u.fresh_type()

        def rule(final: bool) -> bool:
            r = self.u.shallow(tt)
            if isinstance(r, IncompleteType):
                if not final:
                    return False
                raise type_error(f"cannot infer the type of {describe_expr(g.tuple_value)}, "
                                 f"whose field {g.index} is taken; annotate it", g)
            if not isinstance(r, TupleType):
                raise type_error(f"field {g.index} taken of a value that is not a tuple",
                                 g, got=self._show(r))
            if not 0 <= g.index < len(r.fields):
                raise type_error(f"tuple index {g.index} is out of range for a tuple of "
                                 f"{len(r.fields)} fields", g, got=self._show(r))
            self._unify(out, r.fields[g.index], g, lambda d: f"tuple field {g.index}: {d}")
            return True

        if not rule(False):
            self.deferred.append(rule)
        return out

    def visit_call(self, call: Call) -> Type:
        if isinstance(call.op, Op):
            args = [self.visit(a) for a in call.args]
            if call.op.num_inputs >= 0 and len(args) != call.op.num_inputs:
                raise type_error(f"{call.op.name}: takes {_count(call.op.num_inputs)}, "
                                 f"got {len(args)}", call)
            out = self.u.fresh_type()
            c = OpConstraint(call.op, call, args, out)
            self.constraints.append(c)
            self._run_relation(c)  # often solvable at once; the fixpoint finishes the rest
            return out
        if isinstance(call.op, Constructor):
            return self.visit_constructor_call(call)
        callee = call.op
        if isinstance(callee, GlobalVar) and callee.name_hint in self.generic:
            self.visit(callee)  # records the generic type on the node
            generic = self.global_types[callee.name_hint]
            n_params = len(generic.type_params) if isinstance(generic, FuncType) else 0
            if len(call.type_args) > n_params:
                raise type_error(f"the call of @{callee.name_hint}: {len(call.type_args)} "
                                 f"type arguments given, the function has {n_params} type "
                                 f"parameters", call)
            ft = self.instantiate(generic, lambda axis: Origin(
                "call", call, axis, f"the result of @{callee.name_hint}{line_of(call)}"),
                call.type_args)
        else:
            ft = self.u.shallow(self.visit(callee))
        if isinstance(ft, IncompleteType):
            fresh = FuncType(tuple(self.u.fresh_type() for _ in call.args), self.u.fresh_type())
            self.u.unify(ft, fresh, "a call")
            ft = fresh
        if not isinstance(ft, FuncType):
            raise type_error(f"{describe_expr(callee)} is called but is not a function",
                             call, got=self._show(ft))
        if ft.type_params:
            ft = self.instantiate(ft, type_args=call.type_args)  # type: ignore[assignment]
        assert isinstance(ft, FuncType)
        what = f"the call of {_construct(callee)}"
        if len(ft.arg_types) != len(call.args):
            raise type_error(f"{what}: expects {_count(len(ft.arg_types))}, got "
                             f"{len(call.args)}", call)
        names = _param_names(callee, self.funcs)
        for i, (a, pt) in enumerate(zip(call.args, ft.arg_types)):
            at = self.visit(a)
            pname = f"{names[i]}, " if i < len(names) else ""
            self._unify(at, pt, call, lambda d, i=i, pname=pname, a=a: (
                f"{what}: argument {i} ({pname}{describe_expr(a)}) has the wrong type: {d}"),
                cause=f"{what}{line_of(call)}")
        return ft.ret_type

    def visit_constructor_call(self, call: Call) -> Type:
        ctor = call.op
        inputs, result = self.constructor_type(ctor, call)
        if len(inputs) != len(call.args):
            raise type_error(f"constructor {ctor.name_hint} takes {_count(len(inputs))}, "
                             f"got {len(call.args)}", call)
        for i, (a, it) in enumerate(zip(call.args, inputs)):
            at = self.visit(a)
            self._unify(at, it, call, lambda d, i=i, a=a: (
                f"constructor {ctor.name_hint}: argument {i} ({describe_expr(a)}) has the "
                f"wrong type: {d}"), cause=f"{ctor.name_hint}{line_of(call)}")
        return result

    def visit_function(self, fn: Function) -> Type:
        params = tuple(self.bind_var(p) for p in fn.params)
        body = self.visit(fn.body)
        ret = body
        if fn.ret_type is not None:
            ret = self.u.holeify(fn.ret_type)
            self._unify(body, ret, fn, lambda d: (
                f"the function body has type {self._show(body)}, but the function is "
                f"annotated to return {self._show(ret)}: {d}"))
        return FuncType(params, ret, fn.type_params)

    def visit_let(self, let: Let) -> Type:
        chain: list[Let] = []
        e: Any = let
        while isinstance(e, Let) and e not in self.types:  # long chains without recursion
            vt = self.bind_var(e.var, origin=False)
            val = self.visit(e.value)
            self._unify(val, vt, e, lambda d, v=e.var, val=val, vt=vt: (
                f"let %{v.name_hint}: the value has type {self._show(val)}, the annotation "
                f"says {self._show(vt)}: {d}"))
            chain.append(e)
            e = e.body
        body = self.visit(e)
        for link in chain:
            self.types[link] = body
        return body

    def visit_if(self, e: If) -> Type:
        ct = self.visit(e.cond)
        self._unify(ct, BOOL_SCALAR, e, lambda d: (
            f"the condition of if must be a bool scalar, got {self._show(ct)}"))
        a, b = self.visit(e.true_branch), self.visit(e.false_branch)
        return self._unify(a, b, e.false_branch, lambda d: (
            f"the branches of if have different types: {d}"))

    def visit_match(self, m: Match) -> Type:
        dt = self.visit(m.data)
        out: Type = self.u.fresh_type()
        for k, clause in enumerate(m.clauses):
            self.bind_pattern(clause.lhs, dt, m)
            rt = self.visit(clause.rhs)
            self._unify(rt, out, clause.rhs, lambda d, k=k: (
                f"match: clause {k} has a different type than the earlier clauses: {d}"))
        return out

    def bind_pattern(self, p: Pattern, t: Type, m: Match) -> None:
        """Type a pattern against the matched value's type, binding its variables."""
        if isinstance(p, PatternWildcard):
            return
        if isinstance(p, PatternVar):
            vt = self.bind_var(p.var, origin=False)
            self._unify(t, vt, m, lambda d: f"match: pattern %{p.var.name_hint}: {d}")
            return
        if isinstance(p, PatternConstructor):
            ctor = p.constructor
            inputs, result = self.constructor_type(ctor, m)
            self._unify(t, result, m, lambda d: (
                f"match: pattern {ctor.name_hint}(...) needs a value of type "
                f"{self._show(result)}, the matched value has type {self._show(t)}: {d}"))
            if len(p.patterns) != len(inputs):
                raise type_error(f"match: constructor {ctor.name_hint} has {len(inputs)} "
                                 f"fields, the pattern gives {len(p.patterns)}", m)
            for sub, it in zip(p.patterns, inputs):
                self.bind_pattern(sub, it, m)
            return
        if isinstance(p, PatternTuple):
            fields = tuple(self.u.fresh_type() for _ in p.patterns)
            self._unify(t, TupleType(fields), m, lambda d: f"match: tuple pattern: {d}")
            for sub, ft in zip(p.patterns, fields):
                self.bind_pattern(sub, ft, m)
            return
        raise type_error(f"type inference does not handle pattern {type(p).__name__}", m)

    def visit_ref_create(self, r: RefCreate) -> Type:
        return RefType(self.visit(r.value))

    def visit_ref_read(self, r: RefRead) -> Type:
        rt = self.visit(r.ref)
        inner = self.u.fresh_type()
        self._unify(rt, RefType(inner), r, lambda d: f"ref_read of a non-reference: {d}")
        return inner

    def visit_ref_write(self, r: RefWrite) -> Type:
        rt, vt = self.visit(r.ref), self.visit(r.value)
        self._unify(rt, RefType(vt), r, lambda d: (
            f"ref_write: the value does not fit the reference: {d}"))
        return TupleType(())


_VISIT: dict[type, Callable[[Inferencer, Any], Type]] = {
    Constant: Inferencer.visit_constant,
    Tuple: Inferencer.visit_tuple,
    TupleGetItem: Inferencer.visit_tuple_get_item,
    Call: Inferencer.visit_call,
    Function: Inferencer.visit_function,
    If: Inferencer.visit_if,
    Match: Inferencer.visit_match,
    RefCreate: Inferencer.visit_ref_create,
    RefRead: Inferencer.visit_ref_read,
    RefWrite: Inferencer.visit_ref_write,
}


def declared_signature(fn: Function) -> FuncType | None:
    """The function's full type when every parameter and the result are annotated."""
    if fn.ret_type is None or any(p.type_annotation is None for p in fn.params):
        return None
    return FuncType(tuple(p.type_annotation for p in fn.params), fn.ret_type, fn.type_params)


def _param_names(callee: Any, funcs: dict[str, Function]) -> list[str]:
    fn = funcs.get(callee.name_hint) if isinstance(callee, GlobalVar) else callee
    if isinstance(fn, Function):
        return [f"%{p.name_hint}" for p in fn.params]
    return []


def _count(n: int) -> str:
    return f"{n} argument" if n == 1 else f"{n} arguments"


def _construct(node: Any) -> str:
    """A cheap name for what caused a unification (never prints a whole subtree)."""
    if isinstance(node, Let):
        return f"let %{node.var.name_hint}"
    if isinstance(node, Var | GlobalVar | Constant):
        return describe_expr(node)
    if isinstance(node, Call):
        op = node.op
        return getattr(op, "name", None) or f"the call of {_construct(op)}"
    return {If: "if", Match: "match", Function: "a function", Tuple: "a tuple",
            TupleGetItem: "a tuple projection"}.get(type(node), type(node).__name__)
