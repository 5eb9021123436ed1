"""The reference interpreter: evaluates a Relay module's @main on numpy values.

It is the oracle every pass and every compiled executor is checked against, so it is
written to be exact and readable rather than fast. Values:

- tensors are numpy arrays (scalars are 0-d arrays), tuples are Python tuples;
- `Closure(func, env)`: a function with the values of its free variables;
- `ConstructorValue(constructor, fields)`: an ADT value such as `Cons(h, t)`;
- `RefValue(value)`: a mutable cell.

Ops run through their numpy references (`REFERENCES[op](*args, attrs=attrs)`).

How deep programs stay within Python's limits: the evaluator loops (instead of recursing)
through every tail position (let bodies, if branches, match arms, and calls in tail
position), so a tail-recursive loop of any length holds one evaluation step; the rest
(e.g. `map` building `Cons(f(h), map(f, t))`) nests, and its pending steps live on the
trampoline's explicit stack (relay_ir.trampoline): a recursion 10^5 deep runs on the
caller's thread under Python's default recursion limit, which nothing changes.
Within one function activation
each node is evaluated once (a memo by identity), so a shared sub-expression of a DAG is
computed once, as Relay's graph form means.

    >>> import numpy as np
    >>> from relay_ir.expr import Var, Function, Tuple
    >>> x = Var("x")
    >>> interpret(Function((x,), Tuple((x, x))), np.ones(2, "float32"))[1]
    array([1., 1.], dtype=float32)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from relay_ir import trampoline
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
from relay_ir.op.registry import REFERENCES, Op
from relay_ir.ty import TensorType, TupleType, Type
from tessel_errors import RelayRuntimeError, TesselError

# --- values ------------------------------------------------------------------------------


@dataclass(eq=False)
class Closure:
    """A function value: the Function and the values of its free variables.

    Calling a closure from Python evaluates it: `clo(np.ones(3))`.
    """

    func: Function
    env: dict[Var, Any]
    mod: IRModule | None = field(default=None, repr=False)
    name: str = ""  # the global's name, for messages

    def __call__(self, *args: Any) -> Any:
        return Interpreter(self.mod).apply(self, list(args))

    def __repr__(self) -> str:
        what = f"@{self.name}" if self.name else "fn"
        return f"Closure({what}, {len(self.func.params)} params)"


@dataclass(eq=False)
class ConstructorValue:
    """An ADT value: the constructor and its field values."""

    constructor: Constructor
    fields: tuple[Any, ...] = ()

    @property
    def name(self) -> str:
        """The constructor's name, e.g. 'Cons'."""
        return self.constructor.name_hint

    def __repr__(self) -> str:
        return _short(self)


@dataclass(eq=False)
class RefValue:
    """A mutable reference cell."""

    value: Any

    def __repr__(self) -> str:
        return _short(self)


_SHOW_DEPTH = 4  # a value printed in a message shows this many levels of nesting


def _short(v: Any, depth: int = 0) -> str:
    # Bounded: a List of 10^5 Cons cells prints as a few levels and "...", not a
    # recursion as deep as the list.
    if depth >= _SHOW_DEPTH:
        return "..."
    if isinstance(v, np.ndarray):
        if v.size <= 4:
            return np.array2string(v, separator=", ")
        return f"array{list(v.shape)}:{v.dtype}"
    if isinstance(v, tuple):
        return "(" + ", ".join(_short(f, depth + 1) for f in v) + ")"
    if isinstance(v, ConstructorValue):
        if not v.fields:
            return v.name
        return f"{v.name}({', '.join(_short(f, depth + 1) for f in v.fields)})"
    if isinstance(v, RefValue):
        return f"RefValue({_short(v.value, depth + 1)})"
    return repr(v)


def _where(expr: Expr) -> str:
    return f" at {expr.span}" if getattr(expr, "span", None) is not None else ""


# --- the evaluator -----------------------------------------------------------------------

# How many evaluations may wait on a deeper one (a non-tail recursion's depth, times the
# nested sub-expressions of each level) before the program counts as running away.
MAX_PENDING = 1_000_000


class _Frame:
    """One function activation: variable values and the per-activation memo of nodes."""

    __slots__ = ("env", "memo")

    def __init__(self, env: dict[Var, Any]) -> None:
        self.env = env
        self.memo: dict[Expr, Any] = {}


def _too_deep() -> RelayRuntimeError:
    return RelayRuntimeError(
        f"the program recursed deeper than the interpreter allows ({MAX_PENDING:,} pending "
        "evaluations); is the recursion unbounded?"
    )


class Interpreter:
    """Evaluates expressions of one module; `interpret` is the convenient entry point.

    Evaluation steps are generators driven by `relay_ir.trampoline.run`: a sub-expression's
    value is `yield self._eval(sub, frame)`, so a recursion as deep as the program's costs
    heap, never Python stack.

    >>> from relay_ir.expr import Constant
    >>> Interpreter(None).eval_expr(Constant(np.float32(2)))
    array(2., dtype=float32)
    """

    def __init__(self, mod: IRModule | None = None) -> None:
        self.mod = mod if mod is not None else IRModule()
        self._globals: dict[GlobalVar, Closure] = {}
        self._free: dict[Function, list[Var]] = {}

    # entry points

    def eval_expr(self, expr: Expr, env: dict[Var, Any] | None = None) -> Any:
        """Evaluate `expr` with the given variable values."""
        return self._run(self._eval(expr, _Frame(dict(env or {}))))

    def apply(self, fn: Any, args: list[Any]) -> Any:
        """Call a function value (Closure or Constructor) on argument values."""
        if isinstance(fn, Closure):
            frame = self._enter(fn, args, None)
            return self._run(self._eval_tail(fn.func.body, frame))
        return self._call_value(fn, args, None)

    @staticmethod
    def _run(step: Any) -> Any:
        return trampoline.run(step, MAX_PENDING, _too_deep)

    # evaluation

    def _eval(self, expr: Expr, frame: _Frame) -> Any:
        """`expr`'s value when it is at hand (a variable, a memo hit, a constant), else a
        generator computing it (to be yielded to the trampoline)."""
        if isinstance(expr, Var):
            return self._lookup(expr, frame)
        memo = frame.memo
        if expr in memo:
            return memo[expr]
        if isinstance(expr, Constant):
            # A read-only view: a caller writing into a result must not change the program.
            view = expr.data.view()
            view.flags.writeable = False
            memo[expr] = view
            return view
        return self._eval_tail(expr, frame)

    def _eval_tail(self, expr: Expr, frame: _Frame) -> Any:
        # Tail positions continue this loop with a new (expr, frame) instead of yielding, so
        # a tail-recursive loop of any length holds one generator.
        start, start_frame = expr, frame
        while True:
            if isinstance(expr, Let):
                while isinstance(expr, Let):
                    if isinstance(expr.value, Function):
                        value = self._make_closure(expr.value, frame, expr.var)
                        frame.memo[expr.value] = value
                    else:
                        value = yield self._eval(expr.value, frame)
                    frame.env[expr.var] = value
                    expr = expr.body
                continue
            if isinstance(expr, If):
                cond = yield self._eval(expr.cond, frame)
                expr = expr.true_branch if self._truth(cond, expr) else expr.false_branch
                continue
            if isinstance(expr, Match):
                data = yield self._eval(expr.data, frame)
                expr = self._select_clause(expr, data, frame)
                continue
            if isinstance(expr, Call) and not isinstance(expr.op, (Op, Constructor)):
                callee = yield self._eval(expr.op, frame)
                args = []
                for a in expr.args:
                    args.append((yield self._eval(a, frame)))
                if isinstance(callee, Closure):
                    frame = self._enter(callee, args, expr)
                    expr = callee.func.body
                    continue
                value = self._call_value(callee, args, expr)
                break
            if isinstance(expr, Var):
                value = self._lookup(expr, frame)
                break
            if expr in frame.memo:
                value = frame.memo[expr]
                break
            value = yield self._eval_simple(expr, frame)
            break
        start_frame.memo[start] = value
        return value

    def _eval_simple(self, expr: Expr, frame: _Frame) -> Any:
        # Nodes with no tail position: a value, or a generator when children need evaluating.
        if isinstance(expr, Constant):
            return self._eval(expr, frame)
        if isinstance(expr, GlobalVar):
            return self._global(expr)
        if isinstance(expr, Function):
            return self._make_closure(expr, frame, None)
        if isinstance(expr, Constructor):
            if not expr.inputs:
                return ConstructorValue(expr, ())
            return expr  # a constructor used as a function value
        return self._eval_children(expr, frame)

    def _eval_children(self, expr: Expr, frame: _Frame) -> Any:
        if isinstance(expr, Call):
            args = []
            for a in expr.args:
                args.append((yield self._eval(a, frame)))
            if isinstance(expr.op, Op):
                return self._call_op(expr, args)
            return self._call_value(expr.op, args, expr)
        if isinstance(expr, Tuple):
            fields = []
            for f in expr.fields:
                fields.append((yield self._eval(f, frame)))
            return tuple(fields)
        if isinstance(expr, TupleGetItem):
            value = yield self._eval(expr.tuple_value, frame)
            if not isinstance(value, tuple):
                raise RelayRuntimeError(
                    f"tuple projection .{expr.index}{_where(expr)} applied to a "
                    f"{_kind(value)}, not a tuple"
                )
            if not 0 <= expr.index < len(value):
                raise RelayRuntimeError(
                    f"tuple index {expr.index}{_where(expr)} out of range for a "
                    f"tuple of {len(value)} fields"
                )
            return value[expr.index]
        if isinstance(expr, RefCreate):
            return RefValue((yield self._eval(expr.value, frame)))
        if isinstance(expr, RefRead):
            cell = self._check_ref((yield self._eval(expr.ref, frame)), expr, "ref_read")
            return cell.value
        if isinstance(expr, RefWrite):
            cell = self._check_ref((yield self._eval(expr.ref, frame)), expr, "ref_write")
            cell.value = yield self._eval(expr.value, frame)
            return ()
        raise RelayRuntimeError(
            f"Interpreter cannot evaluate a {type(expr).__name__} node{_where(expr)}"
        )

    # variables, globals, closures

    def _lookup(self, var: Var, frame: _Frame) -> Any:
        try:
            return frame.env[var]
        except KeyError:
            raise RelayRuntimeError(
                f"unbound variable %{var.name_hint}{_where(var)}: it is used outside the "
                f"function, let or match clause that binds it"
            ) from None

    def _global(self, gv: GlobalVar) -> Closure:
        clo = self._globals.get(gv)
        if clo is None:
            if gv not in self.mod.functions:
                # Tolerate a GlobalVar object that is not the module's own but has its name.
                if not self.mod.has_function(gv.name_hint):
                    raise RelayRuntimeError(
                        f"unknown global function @{gv.name_hint}{_where(gv)}; the module "
                        f"has {sorted('@' + g.name_hint for g in self.mod.functions)}"
                    )
                gv_fn = self.mod[gv.name_hint]
            else:
                gv_fn = self.mod.functions[gv]
            clo = Closure(gv_fn, {}, self.mod, gv.name_hint)
            self._globals[gv] = clo
        return clo

    def _free_vars(self, fn: Function) -> list[Var]:
        fv = self._free.get(fn)
        if fv is None:
            from relay_ir.transform.analysis import free_vars

            fv = free_vars(fn)
            self._free[fn] = fv
        return fv

    def _make_closure(self, fn: Function, frame: _Frame, self_var: Var | None) -> Closure:
        env: dict[Var, Any] = {}
        for v in self._free_vars(fn):
            if v is self_var:
                continue
            env[v] = self._lookup(v, frame)
        clo = Closure(fn, env, self.mod)
        if self_var is not None:
            env[self_var] = clo  # `let %f = fn (...) { ... %f(...) ... }`: local recursion
        return clo

    def _enter(self, clo: Closure, args: list[Any], call: Call | None) -> _Frame:
        params = clo.func.params
        if len(args) != len(params):
            what = f"@{clo.name}" if clo.name else "function"
            where = _where(call) if call is not None else ""
            raise RelayRuntimeError(
                f"{what}{where} expects {len(params)} argument(s) "
                f"({', '.join('%' + p.name_hint for p in params)}), got {len(args)}"
            )
        env = dict(clo.env)
        for p, a in zip(params, args):
            env[p] = a
        return _Frame(env)

    # calls

    def _call_value(self, callee: Any, args: list[Any], call: Call | None) -> Any:
        where = _where(call) if call is not None else ""
        if isinstance(callee, Constructor):
            if len(args) != len(callee.inputs):
                raise RelayRuntimeError(
                    f"constructor {callee.name_hint}{where} takes {len(callee.inputs)} "
                    f"field(s), got {len(args)}"
                )
            return ConstructorValue(callee, tuple(args))
        raise RelayRuntimeError(f"cannot call a {_kind(callee)}{where}: it is not a function")

    def _call_op(self, call: Call, args: list[Any]) -> Any:
        op: Op = call.op
        ref = REFERENCES.get(op)
        if ref is None:
            raise RelayRuntimeError(f"op '{op.name}' has no reference implementation")
        if op.num_inputs >= 0 and len(args) != op.num_inputs:
            raise RelayRuntimeError(
                f"op '{op.name}'{_where(call)} takes {op.num_inputs} input(s), got {len(args)}"
            )
        try:
            out = ref(*args, attrs=call.attrs)
        except TesselError:
            raise
        except Exception as e:  # a numpy failure: say which op and on what
            shapes = ", ".join(_describe(a) for a in args)
            raise RelayRuntimeError(
                f"op '{op.name}'{_where(call)} failed on ({shapes}): {type(e).__name__}: {e}"
            ) from e
        return _normalise(out)

    # control flow helpers

    def _truth(self, cond: Any, expr: If) -> bool:
        arr = np.asarray(cond) if not isinstance(cond, np.ndarray) else cond
        if not isinstance(cond, (np.ndarray, np.generic, bool)) or arr.size != 1:
            raise RelayRuntimeError(
                f"if condition{_where(expr)} must be a bool scalar, got {_describe(cond)}"
            )
        return bool(arr.reshape(()))

    def _select_clause(self, match: Match, value: Any, frame: _Frame) -> Expr:
        for clause in match.clauses:
            binds: dict[Var, Any] = {}
            if _match_pattern(clause.lhs, value, binds):
                frame.env.update(binds)
                return clause.rhs
        raise RelayRuntimeError(
            f"match failure{_where(match)}: no clause matches the value {_short(value)}"
        )

    @staticmethod
    def _check_ref(cell: Any, expr: Expr, what: str) -> RefValue:
        if not isinstance(cell, RefValue):
            raise RelayRuntimeError(f"{what}{_where(expr)} expects a reference, got {_kind(cell)}")
        return cell


def _match_pattern(p: Pattern, value: Any, binds: dict[Var, Any]) -> bool:
    if isinstance(p, PatternWildcard):
        return True
    if isinstance(p, PatternVar):
        binds[p.var] = value
        return True
    if isinstance(p, PatternConstructor):
        if not isinstance(value, ConstructorValue) or not _same_constructor(
            value.constructor, p.constructor
        ):
            return False
        if len(p.patterns) != len(value.fields):
            raise RelayRuntimeError(
                f"pattern {p.constructor.name_hint} has {len(p.patterns)} sub-patterns, "
                f"the value has {len(value.fields)} fields"
            )
        return all(_match_pattern(q, f, binds) for q, f in zip(p.patterns, value.fields))
    if isinstance(p, PatternTuple):
        if not isinstance(value, tuple) or len(value) != len(p.patterns):
            return False
        return all(_match_pattern(q, f, binds) for q, f in zip(p.patterns, value))
    raise RelayRuntimeError(f"unknown pattern kind {type(p).__name__}")


def _same_constructor(a: Constructor, b: Constructor) -> bool:
    # Modules rebuilt by passes may hold equal-but-distinct constructor objects.
    return a is b or (a.name_hint == b.name_hint and a.belong_to == b.belong_to)


def _kind(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"tensor of shape {tuple(v.shape)} {v.dtype}"
    if isinstance(v, tuple):
        return f"tuple of {len(v)} fields"
    return type(v).__name__


def _describe(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"{v.dtype}{list(v.shape)}"
    if isinstance(v, tuple):
        return "(" + ", ".join(_describe(f) for f in v) + ")"
    return type(v).__name__


def _normalise(out: Any) -> Any:
    if isinstance(out, (tuple, list)):
        return tuple(_normalise(o) for o in out)
    if isinstance(out, np.ndarray):
        return out
    return np.asarray(out)


# --- arguments and the entry point -------------------------------------------------------


def _convert_arg(value: Any, param: Var, where: str) -> Any:
    """Check an argument against the parameter's annotation; Python numbers become arrays."""
    ty: Type | None = param.type_annotation
    if isinstance(ty, TupleType) and isinstance(value, (tuple, list)):
        return tuple(value)
    if not isinstance(ty, TensorType):
        # Unannotated: still make numbers arrays, so every tensor value is an ndarray.
        if isinstance(value, (bool, int, float, np.generic)):
            return np.asarray(value)
        return value
    if isinstance(value, (bool, int, float, list, np.generic)):
        value = np.asarray(value, dtype=ty.dtype)
    if not isinstance(value, np.ndarray):
        raise RelayRuntimeError(
            f"argument %{param.name_hint} of {where} must be a numpy array of {ty}, "
            f"got {type(value).__name__}"
        )
    if str(value.dtype) != ty.dtype:
        raise RelayRuntimeError(
            f"argument %{param.name_hint} of {where} has dtype {value.dtype}, expected "
            f"{ty}; convert it with .astype('{ty.dtype}')"
        )
    dims_ok = len(value.shape) == len(ty.shape) and all(
        not isinstance(d, int) or d == n for d, n in zip(ty.shape, value.shape)
    )
    if not dims_ok:
        raise RelayRuntimeError(
            f"argument %{param.name_hint} of {where} has shape {tuple(value.shape)}, "
            f"expected {ty}"
        )
    return value


def interpret(mod_or_expr: IRModule | Expr, *args: Any, **kwargs: Any) -> Any:
    """Evaluate a module's @main (or a function / closed expression) on numpy values.

    Keyword arguments bind parameters by name (`interpret(mod, x=a, w=b)`).

    >>> from relay_ir.expr import Var, Function
    >>> x = Var("x")
    >>> interpret(Function((x,), x), x=np.float32(3))
    array(3., dtype=float32)
    """
    if isinstance(mod_or_expr, IRModule):
        mod, fn, where = mod_or_expr, mod_or_expr["main"], "@main"
    elif isinstance(mod_or_expr, Function):
        mod, fn, where = IRModule(), mod_or_expr, "the function"
    elif isinstance(mod_or_expr, Expr):
        if args or kwargs:
            raise RelayRuntimeError(
                "interpret got arguments but the expression is not a function"
            )
        interp = Interpreter(None)
        return interp.eval_expr(mod_or_expr)
    else:
        raise RelayRuntimeError(
            f"interpret expects an IRModule or an Expr, got {type(mod_or_expr).__name__}"
        )
    values = _bind_args(fn, args, kwargs, where)
    interp = Interpreter(mod)
    clo = Closure(fn, {}, mod, "main" if where == "@main" else "")
    return interp.apply(clo, values)


def _bind_args(fn: Function, args: tuple, kwargs: dict[str, Any], where: str) -> list[Any]:
    params = fn.params
    names = [p.name_hint for p in params]
    if len(args) > len(params):
        raise RelayRuntimeError(
            f"{where} takes {len(params)} argument(s) ({', '.join(names)}), got {len(args)}"
        )
    values: list[Any] = list(args) + [None] * (len(params) - len(args))
    given = [True] * len(args) + [False] * (len(params) - len(args))
    for key, value in kwargs.items():
        if key not in names:
            raise RelayRuntimeError(
                f"{where} has no parameter %{key}; its parameters are {names}"
            )
        i = names.index(key)
        if given[i]:
            raise RelayRuntimeError(f"argument %{key} of {where} is given twice")
        values[i], given[i] = value, True
    missing = [n for n, g in zip(names, given) if not g]
    if missing:
        raise RelayRuntimeError(f"{where} is missing argument(s) {missing}")
    return [_convert_arg(v, p, where) for v, p in zip(values, params)]


def evaluate_op(call: Call, args: list[Any]) -> Any:
    """Evaluate one op call on argument values through its reference (for FoldConstant).

    >>> from relay_ir.op.registry import get_op
    >>> c = Call(get_op("add"), (Constant(np.float32(1)), Constant(np.float32(2))))
    >>> evaluate_op(c, [np.float32(1), np.float32(2)])
    array(3., dtype=float32)
    """
    return Interpreter(None)._call_op(call, args)


__all__ = [
    "Closure",
    "ConstructorValue",
    "Interpreter",
    "RefValue",
    "evaluate_op",
    "interpret",
]
