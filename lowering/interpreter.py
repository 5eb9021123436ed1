"""The reference interpreter of the loop IR: slow, exact, the oracle for tests.

Every expression is evaluated per element on numpy scalars of its dtype (so float32
stays float32, int8 wraps), with the semantics the backends must match:
  - `//` and `%` are floor division and modulo (Python's); a zero integer divisor gives 0,
    as in numpy; float floordiv is floor(a / b);
  - `min(a, b)` is `a if a < b else b`, `max` likewise (so NaN handling is defined);
  - `if_then_else` evaluates only the taken side, `Select` both;
  - casts follow numpy's `astype`;
  - loops of every kind run serially; `Allocate` makes a fresh buffer (floats filled with
    NaN, so reads of never-written memory show); every access is bounds-checked and an
    out-of-bounds one raises LoweringError naming the buffer and index.
The program is compiled once into Python closures, then run.

    >>> import numpy as np, tensor_expr as te
    >>> from lowering.ir import Buffer, BufferStore, For, ForKind, PrimFunc
    >>> A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    >>> i = te.var("i")
    >>> f = PrimFunc("inc", (A, B), For(i, te.const(0), te.const(4), ForKind.SERIAL,
    ...              BufferStore(B, A[i] + 1.0, (i,))))
    >>> a, b = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    >>> run(f, a, b); b.tolist()
    [1.0, 2.0, 3.0, 4.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from lowering import ir as lir
from lowering.kernel import check_arguments
from lowering.prefetch import PREFETCH
from schedule.templates.x86_int8_dot import DOT4, dot4_reference
from tensor_expr import expr as E
from tensor_expr.dtype import is_float
from tessel_errors import KernelArgumentError, LoweringError

Env = dict[int, Any]
Fn = Callable[[Env], Any]

# Implementations of extra intrinsics (e.g. tensorize intrinsics of a backend):
# name -> fn(args: list of numpy scalars, dtype) -> value
INTRINSIC_IMPLS: dict[str, Callable[[list[Any], str], Any]] = {}
# Tensor intrinsics on memory regions (a tensorized nest's Call, whose arguments are its
# regions' first elements): name -> fn(args), each region argument a numpy view of its
# buffer from that element on, other arguments their values; it updates the views in place
REGION_IMPLS: dict[str, Callable[[list[Any]], None]] = {}


def run(func: lir.PrimFunc, *arrays: np.ndarray) -> None:
    """Interpret `func` on `arrays` (one per parameter); outputs are written in place."""
    _dims, shape_vars = check_arguments(func, arrays)
    env: Env = {}
    for p in func.params:
        for d in p.shape:
            if isinstance(d, E.Var):
                env[id(d)] = _scalar(shape_vars[id(d)], d.dtype)
    for p, a in zip(func.params, arrays):
        env[id(p)] = _BufState(p, a.reshape(-1), env)
    body = _Compiler(func.name).stmt(func.body)
    with np.errstate(all="ignore"):
        body(env)


def _dot4(args: list[Any]) -> None:
    acc, a, words, lanes = args
    n = int(lanes)
    if len(acc) < n or len(a) < 4 or len(words) < n:
        raise LoweringError(f"{DOT4}: a region runs past the end of its buffer")
    dot4_reference(acc[:n], a[:4], words[:n])


REGION_IMPLS[DOT4] = _dot4
# a prefetch changes no value; its address is bounds-checked like a region's first element
REGION_IMPLS[PREFETCH] = lambda args: None


class _BufState:
    """A buffer's flat storage with its shape and strides as ints."""

    __slots__ = ("buf", "flat", "shape", "strides")

    def __init__(self, buf: lir.Buffer, flat: np.ndarray, env: Env) -> None:
        self.buf = buf
        self.flat = flat
        self.shape = [int(_int_expr(d, env)) for d in buf.shape]
        if buf.strides is not None:
            self.strides = [int(_int_expr(s, env)) for s in buf.strides]
        else:
            self.strides = []
            acc = 1
            for n in reversed(self.shape):
                self.strides.append(acc)
                acc *= n
            self.strides.reverse()

    def offset(self, idx: list[int], what: str) -> int:
        off = 0
        for k, (i, n, s) in enumerate(zip(idx, self.shape, self.strides)):
            if not 0 <= i < n:
                raise LoweringError(
                    f"out-of-bounds {what} {self.buf.name}{list(idx)}: index {i} of "
                    f"dimension {k} is outside [0, {n})")
            off += i * s
        return off


def _int_expr(e: E.PrimExpr, env: Env) -> int:
    return int(_Compiler("shape").expr(e)(env))


def _scalar(value: Any, dtype: str) -> Any:
    """`value` as a numpy scalar of `dtype` (numpy astype rules: wrap, truncate)."""
    if dtype == "bool":
        return np.bool_(bool(value))
    return np.asarray(value).astype(dtype)[()]


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    E.Add: lambda a, b: a + b,
    E.Sub: lambda a, b: a - b,
    E.Mul: lambda a, b: a * b,
    E.Div: lambda a, b: a / b,
    E.Min: np.minimum,  # NaN-propagating, as the LLVM backend (llvm.minimum)
    E.Max: np.maximum,  # NaN-propagating, as the LLVM backend (llvm.maximum)
    E.LT: lambda a, b: np.bool_(a < b),
    E.LE: lambda a, b: np.bool_(a <= b),
    E.GT: lambda a, b: np.bool_(a > b),
    E.GE: lambda a, b: np.bool_(a >= b),
    E.EQ: lambda a, b: np.bool_(a == b),
    E.NE: lambda a, b: np.bool_(a != b),
    E.And: lambda a, b: np.bool_(bool(a) and bool(b)),
    E.Or: lambda a, b: np.bool_(bool(a) or bool(b)),
}


def _floordiv(a: Any, b: Any) -> Any:
    if isinstance(a, np.floating):
        return np.floor(a / b)
    return np.floor_divide(a, b)


def _popcount(x: Any, dtype: str) -> Any:
    bits = np.dtype(dtype).itemsize * 8
    return _scalar(bin(int(x) & ((1 << bits) - 1)).count("1"), dtype)


def _intrinsic(name: str, dtype: str) -> Callable[[list[Any]], Any]:
    one = np.dtype(dtype).type(1) if is_float(dtype) else None
    table: dict[str, Callable[[list[Any]], Any]] = {
        "exp": lambda a: np.exp(a[0]),
        "exp2": lambda a: np.exp2(a[0]),
        "log": lambda a: np.log(a[0]),
        "log2": lambda a: np.log2(a[0]),
        "log10": lambda a: np.log10(a[0]),
        "sqrt": lambda a: np.sqrt(a[0]),
        "rsqrt": lambda a: one / np.sqrt(a[0]),
        "tanh": lambda a: np.tanh(a[0]),
        "sigmoid": lambda a: one / (one + np.exp(-a[0])),
        "erf": lambda a: _scalar(math.erf(float(a[0])), dtype),
        "sin": lambda a: np.sin(a[0]),
        "cos": lambda a: np.cos(a[0]),
        "pow": lambda a: np.power(a[0], a[1]),
        "fabs": lambda a: np.abs(a[0]),
        "floor": lambda a: np.floor(a[0]),
        "ceil": lambda a: np.ceil(a[0]),
        "round": lambda a: np.rint(a[0]),
        "round_half_away": lambda a: _scalar(
            np.sign(a[0]) * np.floor(np.abs(np.float64(a[0])) + 0.5), dtype),
        "shift_right": lambda a: _scalar(np.right_shift(a[0], a[1]), dtype),
        "shift_left": lambda a: _scalar(np.left_shift(a[0], a[1]), dtype),
        "trunc": lambda a: np.trunc(a[0]),
        "fma": lambda a: _scalar(np.float64(a[0]) * np.float64(a[1]) + np.float64(a[2]),
                                 dtype),
        "isnan": lambda a: np.bool_(np.isnan(a[0])),
        "popcount": lambda a: _popcount(a[0], dtype),
    }
    fn = table.get(name)
    if fn is not None:
        return fn
    ext = INTRINSIC_IMPLS.get(name)
    if ext is not None:
        return lambda a: ext(a, dtype)
    raise LoweringError(f"the interpreter has no implementation of intrinsic '{name}'; "
                        "register one in lowering.interpreter.INTRINSIC_IMPLS")


class _Compiler:
    """Compiles loop IR into closures over an environment dict (ids -> values)."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel

    # ------------------------------------------------------------------ expressions
    def expr(self, e: E.PrimExpr) -> Fn:
        method = getattr(self, "_e_" + type(e).__name__, None)
        if method is not None:
            return method(e)
        op = _BINARY.get(type(e))
        if op is not None:
            fa, fb = self.expr(e.a), self.expr(e.b)  # type: ignore[attr-defined]
            return lambda env: op(fa(env), fb(env))
        raise LoweringError(f"the interpreter cannot evaluate '{e}' ({type(e).__name__})")

    def _e_IntImm(self, e: E.IntImm) -> Fn:
        v = _scalar(e.value, e.dtype)
        return lambda env: v

    def _e_FloatImm(self, e: E.FloatImm) -> Fn:
        v = _scalar(e.value, e.dtype)
        return lambda env: v

    def _e_Var(self, e: E.Var) -> Fn:
        key, name = id(e), e.name

        def get(env: Env) -> Any:
            try:
                return env[key]
            except KeyError:
                raise LoweringError(f"variable '{name}' is used but not bound") from None

        return get

    def _e_FloorDiv(self, e: E.FloorDiv) -> Fn:
        fa, fb = self.expr(e.a), self.expr(e.b)
        return lambda env: _floordiv(fa(env), fb(env))

    def _e_FloorMod(self, e: E.FloorMod) -> Fn:
        fa, fb = self.expr(e.a), self.expr(e.b)
        return lambda env: np.remainder(fa(env), fb(env))

    def _e_Not(self, e: E.Not) -> Fn:
        fa = self.expr(e.a)
        return lambda env: np.bool_(not fa(env))

    def _e_Select(self, e: E.Select) -> Fn:
        fc, ft, ff = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)

        def sel(env: Env) -> Any:
            c, t, f = fc(env), ft(env), ff(env)  # both sides, as Select may speculate
            return t if c else f

        return sel

    def _e_Cast(self, e: E.Cast) -> Fn:
        fv, dtype = self.expr(e.value), e.dtype
        return lambda env: _scalar(fv(env), dtype)

    def _e_Let(self, e: E.Let) -> Fn:
        fv, fb, key = self.expr(e.value), self.expr(e.body), id(e.var)

        def let(env: Env) -> Any:
            old = env.get(key, _MISSING)
            env[key] = fv(env)
            try:
                return fb(env)
            finally:
                _restore(env, key, old)

        return let

    def _e_Call(self, e: E.Call) -> Fn:
        if e.name == "if_then_else":
            fc, ft, ff = (self.expr(a) for a in e.args)
            return lambda env: ft(env) if fc(env) else ff(env)
        if e.name in REGION_IMPLS:
            return self._region_call(e)
        impl = _intrinsic(e.name, e.dtype)
        fargs = [self.expr(a) for a in e.args]
        dtype = e.dtype

        def call(env: Env) -> Any:
            out = impl([f(env) for f in fargs])
            return _scalar(out, dtype) if getattr(out, "dtype", None) != dtype else out

        return call

    def _region_call(self, e: E.Call) -> Fn:
        impl = REGION_IMPLS[e.name]

        def view(a: Any) -> Fn:
            if not isinstance(a, lir.BufferLoad):
                return self.expr(a)
            where = self._element(a, "region at")

            def region(env: Env) -> Any:
                st, off = where(env)
                return st.flat[off:]
            return region

        fargs = [view(a) for a in e.args]
        zero = _scalar(0, e.dtype)

        def call(env: Env) -> Any:
            impl([f(env) for f in fargs])
            return zero

        return call

    def _e_BufferLoad(self, e: lir.BufferLoad) -> Fn:
        where = self._element(e, "read of")

        def load(env: Env) -> Any:
            st, off = where(env)
            return st.flat[off]

        return load

    def _element(self, e: lir.BufferLoad, what: str) -> Callable[[Env], tuple[Any, int]]:
        """(buffer state, flat offset) of the element `e` names, bounds-checked."""
        key, buf = id(e.buffer), e.buffer
        fidx = [self.expr(i) for i in e.indices]

        def where(env: Env) -> tuple[Any, int]:
            st = env.get(key)
            if st is None:
                raise LoweringError(f"buffer '{buf.name}' is read outside its allocation")
            return st, st.offset([int(f(env)) for f in fidx], what)

        return where

    # ------------------------------------------------------------------ statements
    def stmt(self, s: lir.Stmt) -> Callable[[Env], None]:
        method = getattr(self, "_s_" + type(s).__name__, None)
        if method is None:
            raise LoweringError(f"the interpreter cannot run statement {type(s).__name__}")
        return method(s)

    def _s_SeqStmt(self, s: lir.SeqStmt) -> Callable[[Env], None]:
        fns = [self.stmt(c) for c in s.stmts]

        def seq(env: Env) -> None:
            for f in fns:
                f(env)

        return seq

    def _s_For(self, s: lir.For) -> Callable[[Env], None]:
        flo, fext, body = self.expr(s.min), self.expr(s.extent), self.stmt(s.body)
        key, ty = id(s.var), np.dtype(s.var.dtype).type

        def loop(env: Env) -> None:
            lo, ext = int(flo(env)), int(fext(env))
            old = env.get(key, _MISSING)
            for k in range(lo, lo + ext):
                env[key] = ty(k)
                body(env)
            _restore(env, key, old)

        return loop

    def _s_BufferStore(self, s: lir.BufferStore) -> Callable[[Env], None]:
        key, buf, dtype = id(s.buffer), s.buffer, s.buffer.dtype
        fv, fidx = self.expr(s.value), [self.expr(i) for i in s.indices]
        same = s.value.dtype == dtype

        def store(env: Env) -> None:
            st = env.get(key)
            if st is None:
                raise LoweringError(f"buffer '{buf.name}' is written outside its allocation")
            v = fv(env)
            st.flat[st.offset([int(f(env)) for f in fidx], "write of")] = (
                v if same else _scalar(v, dtype))

        return store

    def _s_Allocate(self, s: lir.Allocate) -> Callable[[Env], None]:
        buf, key, body = s.buffer, id(s.buffer), self.stmt(s.body)

        def allocate(env: Env) -> None:
            probe = _BufState(buf, np.empty(0, buf.dtype), env)
            size = 1 + sum((n - 1) * st for n, st in zip(probe.shape, probe.strides))
            if any(n <= 0 for n in probe.shape):
                size = 0
            fill = np.nan if is_float(buf.dtype) else 0
            probe.flat = np.full(max(size, 0), fill, dtype=buf.dtype)
            old = env.get(key, _MISSING)
            env[key] = probe
            body(env)
            _restore(env, key, old)

        return allocate

    def _s_IfThenElse(self, s: lir.IfThenElse) -> Callable[[Env], None]:
        fc, ft = self.expr(s.condition), self.stmt(s.then_case)
        fe = self.stmt(s.else_case) if s.else_case is not None else None

        def branch(env: Env) -> None:
            if fc(env):
                ft(env)
            elif fe is not None:
                fe(env)

        return branch

    def _s_LetStmt(self, s: lir.LetStmt) -> Callable[[Env], None]:
        fv, body, key = self.expr(s.value), self.stmt(s.body), id(s.var)

        def let(env: Env) -> None:
            old = env.get(key, _MISSING)
            env[key] = fv(env)
            body(env)
            _restore(env, key, old)

        return let

    def _s_Evaluate(self, s: lir.Evaluate) -> Callable[[Env], None]:
        fv = self.expr(s.value)
        return lambda env: fv(env)

    def _s_AssertStmt(self, s: lir.AssertStmt) -> Callable[[Env], None]:
        fc, body, msg, kernel = self.expr(s.condition), self.stmt(s.body), s.message, \
            self.kernel

        def check(env: Env) -> None:
            if not fc(env):
                raise KernelArgumentError(f"kernel '{kernel}': run-time check failed: {msg}")
            body(env)

        return check


_MISSING = object()


def _restore(env: Env, key: int, old: Any) -> None:
    if old is _MISSING:
        env.pop(key, None)
    else:
        env[key] = old
