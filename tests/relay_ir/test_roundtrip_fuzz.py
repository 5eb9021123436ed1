"""Random programs (hypothesis) print and parse back structurally equal: sharing across
scopes, name clashes, every node kind, constants of every dtype."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relay_ir as r
from relay_ir.expr import (
    Call,
    Clause,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
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
from relay_ir.op.registry import get_op
from relay_ir.ty import TensorType, TupleType
from relay_ir.visitor import free_vars

PRELUDE = r.IRModule().import_prelude()
CONS, NIL = PRELUDE.get_constructor("Cons"), PRELUDE.get_constructor("Nil")
NAMES = ["x", "y", "x", "v0", "_t", "0"]  # repeats on purpose: the printer must rename
DTYPES = ["bool", "int8", "int32", "int64", "uint8", "float16", "float32", "float64"]
TYPES = [None, TensorType((3,)), TensorType((None, "n"), "int8"), TupleType(()), TensorType(())]


class Gen:
    def __init__(self, data: st.DataObject, main: GlobalVar) -> None:
        self.data = data
        self.pool: list[tuple[Expr, set[int]]] = []
        self.main = main

    def draw(self, strategy):
        return self.data.draw(strategy)

    def new_var(self) -> Var:
        return Var(self.draw(st.sampled_from(NAMES)), self.draw(st.sampled_from(TYPES)))

    def const(self) -> Constant:
        dtype = self.draw(st.sampled_from(DTYPES))
        shape = self.draw(st.sampled_from([(), (), (2,), (1, 2)]))
        seed = self.draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        raw = rng.standard_normal(shape) * 100
        if self.draw(st.booleans()) and dtype.startswith("float"):
            raw = np.where(rng.random(shape) < 0.3, np.nan, raw)
        with np.errstate(invalid="ignore", over="ignore"):
            return Constant(np.asarray(raw).astype(dtype))

    def expr(self, scope: list[Var], depth: int) -> Expr:
        kinds = ["var", "const"] if depth <= 0 else [
            "var", "const", "tuple", "tgi", "op", "let", "if", "fn", "match", "ref", "share",
            "global", "ctor",
        ]
        kind = self.draw(st.sampled_from(kinds))
        if kind == "var" and not scope:
            kind = "const"
        ids = {id(v) for v in scope}
        if kind == "share":
            usable = [e for e, need in self.pool if need <= ids]
            if not usable:
                kind = "const"
            else:
                return self.draw(st.sampled_from(usable))
        e = self.build(kind, scope, depth)
        self.pool.append((e, {id(v) for v in free_vars(e)}))
        return e

    def build(self, kind: str, scope: list[Var], depth: int) -> Expr:
        sub = lambda s=scope: self.expr(s, depth - 1)  # noqa: E731
        if kind == "var":
            return self.draw(st.sampled_from(scope))
        if kind == "const":
            return self.const()
        if kind == "tuple":
            return Tuple(tuple(sub() for _ in range(self.draw(st.integers(0, 3)))))
        if kind == "tgi":
            return TupleGetItem(sub(), self.draw(st.integers(0, 2)))
        if kind == "op":
            which = self.draw(st.sampled_from(["add", "nn.relu", "nn.conv2d"]))
            op = get_op(which)
            if which == "add":
                return Call(op, (sub(), sub()))
            if which == "nn.relu":
                return Call(op, (sub(),))
            strides = self.draw(st.sampled_from([(1, 1), (2, 2), (1, 3)]))
            return Call(op, (sub(), sub()), op.make_attrs({"strides": strides}))
        if kind == "let":
            v = self.new_var()
            value = sub(scope + [v]) if self.draw(st.booleans()) else sub()
            return Let(v, value, sub(scope + [v]))
        if kind == "if":
            return If(sub(), sub(), sub())
        if kind == "fn":
            params = tuple(self.new_var() for _ in range(self.draw(st.integers(0, 2))))
            attrs = (("Primitive", 1),) if self.draw(st.booleans()) else ()
            fn = Function(params, sub(scope + list(params)), attrs=attrs)
            if self.draw(st.booleans()):
                return Call(fn, tuple(sub() for _ in params))
            return fn
        if kind == "match":
            clauses = []
            for _ in range(self.draw(st.integers(1, 3))):
                which = self.draw(st.sampled_from(["cons", "tuple", "nil", "wild"]))
                if which == "cons":  # fresh vars per clause: each binder binds once
                    h, t = Var("h"), Var("t")
                    lhs = PatternConstructor(CONS, (PatternVar(h), PatternVar(t)))
                    clauses.append(Clause(lhs, sub(scope + [h, t])))
                elif which == "tuple":
                    a = self.new_var()
                    lhs = PatternTuple((PatternVar(a), PatternWildcard()))
                    clauses.append(Clause(lhs, sub(scope + [a])))
                elif which == "nil":
                    clauses.append(Clause(PatternConstructor(NIL), sub()))
                else:
                    clauses.append(Clause(PatternWildcard(), sub()))
            return Match(sub(), tuple(clauses), self.draw(st.booleans()))
        if kind == "ref":
            which = self.draw(st.sampled_from(["new", "read", "write"]))
            if which == "new":
                return RefCreate(sub())
            if which == "read":
                return RefRead(sub())
            return RefWrite(sub(), sub())
        if kind == "global":
            return Call(self.main, (sub(),))
        assert kind == "ctor"
        if self.draw(st.booleans()):
            return Call(NIL, ())
        return Call(CONS, (sub(), sub()))


@settings(max_examples=100, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_programs_round_trip(data):
    main = GlobalVar("main")
    gen = Gen(data, main)
    params = [gen.new_var() for _ in range(data.draw(st.integers(0, 3)))]
    body = gen.expr(params, depth=4)
    mod = r.IRModule({**PRELUDE.functions, main: Function(tuple(params), body)},
                     PRELUDE.type_definitions)
    text = r.astext(mod)
    again = r.parse(text)
    assert r.structural_equal(mod, again), text
    assert r.astext(again) == text
