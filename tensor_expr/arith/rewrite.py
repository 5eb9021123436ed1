"""The simplifier: constant folding, canonical linear forms, floordiv/floormod of affine
forms with known ranges, min/max and comparisons decided by bounds, select folding.

It never changes a value: integer division and remainder round toward minus infinity
(Python's `//` and `%`). Index types (int32, int64) are assumed not to overflow, as in
every loop compiler; narrower integer types only get rewrites that hold modulo 2**bits.

    >>> import tensor_expr as te
    >>> io, ii = te.var("io"), te.var("ii")
    >>> print(te.simplify((io * 32 + ii) // 32, {io: (0, 8), ii: (0, 32)}))
    io
"""

from __future__ import annotations

import math
from math import gcd
from typing import TYPE_CHECKING, Any

import numpy as np

from tensor_expr import expr as E
from tensor_expr.arith.bound import BoundAnalyzer
from tensor_expr.arith.linear import Lin, wrap_int
from tensor_expr.arith.structural import struct_key
from tensor_expr.dtype import is_float, is_integral
from tensor_expr.visitor import ExprMutator, substitute

if TYPE_CHECKING:
    from tensor_expr.arith.analyzer import Analyzer

INDEX_TYPES = ("int32", "int64")
_FLIP = {E.LT: E.GT, E.GT: E.LT, E.LE: E.GE, E.GE: E.LE, E.EQ: E.EQ, E.NE: E.NE}
_NEGATE = {E.LT: E.GE, E.GE: E.LT, E.LE: E.GT, E.GT: E.LE, E.EQ: E.NE, E.NE: E.EQ}
_CMP_FOLD = {
    E.LT: lambda x, y: x < y, E.LE: lambda x, y: x <= y, E.GT: lambda x, y: x > y,
    E.GE: lambda x, y: x >= y, E.EQ: lambda x, y: x == y, E.NE: lambda x, y: x != y,
}
_FLOAT_FOLD = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: np.divide,
    E.Min: np.minimum, E.Max: np.maximum,
}
_UNARY_FOLD = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "fabs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
    "exp2": np.exp2, "log2": np.log2, "log10": np.log10, "sin": np.sin, "cos": np.cos,
}


def _true(v: bool) -> E.IntImm:
    return E.IntImm(int(v), "bool")


def _is_const(e: Any) -> bool:
    return isinstance(e, (E.IntImm, E.FloatImm))


def _float_const(value: Any, dtype: str) -> E.FloatImm:
    return E.FloatImm(float(np.asarray(value).astype(dtype)), dtype)


def _finite(iv: tuple[float, float]) -> bool:
    return not (math.isinf(iv[0]) or math.isinf(iv[1]))


class Simplifier(ExprMutator):
    """One simplification walk under the analyzer's current variable ranges."""

    def __init__(self, ana: Analyzer, kmemo: dict[int, Any] | None = None,
                 unchanged: dict[int, Any] | None = None) -> None:
        """`kmemo`: structural keys to share; `unchanged`: nodes that an earlier walk under
        the same ranges left as they were (this walk would too: it is deterministic)."""
        super().__init__()
        self.ana = ana
        self.kmemo: dict[int, Any] = {} if kmemo is None else kmemo
        self.lmemo: dict[int, tuple[Any, Lin]] = {}
        self.bounds = BoundAnalyzer(ana, self.kmemo)
        self.unchanged: dict[int, Any] = {}  # what this walk rewrote to itself
        for key, node in (unchanged or {}).items():
            self.memo[key] = (node, node)

    def visit(self, e: Any) -> Any:
        if not isinstance(e, E.PrimExpr) or id(e) in self.memo:
            return super().visit(e)
        out = super().visit(e)
        if out is not e and struct_key(out, self.kmemo) == struct_key(e, self.kmemo):
            # keep the input node: parents then keep theirs, and the caller sees at once
            # that nothing changed
            out = e
            self.memo[id(e)] = (e, e)
        if out is e:
            self.unchanged[id(e)] = e
        else:
            self.memo.setdefault(id(out), (out, out))  # outputs are already simple
        return out

    def _same(self, a: Any, b: Any) -> bool:
        return a is b or struct_key(a, self.kmemo) == struct_key(b, self.kmemo)

    # ---- linear forms ------------------------------------------------------------------

    def lin_of(self, e: E.PrimExpr) -> Lin:
        """The linear form of `e` with its atoms simplified (a fresh copy: callers mutate)."""
        return self._shared_lin(e).copy()

    def _shared_lin(self, e: E.PrimExpr) -> Lin:
        """The memoised form itself: read it, never mutate it."""
        hit = self.lmemo.get(id(e))
        if hit is None:
            hit = (e, self._lin_of(e))
            self.lmemo[id(e)] = hit
        return hit[1]

    def _lin_of(self, e: E.PrimExpr) -> Lin:
        dt = e.dtype
        if isinstance(e, E.Add):
            return self._shared_lin(e.a).plus(self._shared_lin(e.b))
        if isinstance(e, E.Sub):
            return self._shared_lin(e.a).plus(self._shared_lin(e.b), -1)
        if isinstance(e, E.Mul):
            la, lb = self._shared_lin(e.a), self._shared_lin(e.b)
            if la.is_const:
                return lb.scaled(la.const)
            if lb.is_const:
                return la.scaled(lb.const)
            return Lin.atom(E.Mul(la.to_expr(), lb.to_expr()), dt, self.kmemo)
        s = self.visit(e)
        if isinstance(s, E.IntImm):
            return Lin.constant(s.value, dt)
        if isinstance(s, (E.Add, E.Sub, E.Mul)):
            return self._shared_lin(s)
        return Lin.atom(s, dt, self.kmemo)

    def finish(self, lin: Lin) -> E.PrimExpr:
        """The expression of a form after merging split/fuse pairs."""
        return self._merge_divmod(lin).to_expr()

    def _merge_divmod(self, lin: Lin) -> Lin:
        # (x // c) * (m*c) + (x % c) * m  ->  x * m   and   x*m - (x // c)*(m*c) -> (x % c)*m
        changed = True
        while changed:
            changed = False
            for key, atom, coeff in list(lin.items()):
                if not isinstance(atom, (E.FloorDiv, E.FloorMod)):
                    continue
                if not (isinstance(atom.b, E.IntImm) and atom.b.value > 0):
                    continue
                c = atom.b.value
                if isinstance(atom, E.FloorMod):
                    dkey = struct_key(E.FloorDiv(atom.a, atom.b), self.kmemo)
                    slot = lin.terms.get(dkey)
                    if slot is not None and slot[1] == coeff * c:
                        del lin.terms[key], lin.terms[dkey]
                        lin = lin.plus(self.lin_of(atom.a), coeff)
                        changed = True
                        break
                    # (x // c % b) * (m*c) + (x % c) * m -> (x % (c*b)) * m: the digits of
                    # a position split into (n, h, w) and put back together
                    outer = self._outer_digit(lin, key, coeff * c)
                    if outer is not None:
                        okey, x, b = outer
                        del lin.terms[key], lin.terms[okey]
                        lin = lin.plus(self.mod_lin(self.lin_of(x), c * b), coeff)
                        changed = True
                        break
                elif not isinstance(atom.a, (E.Add, E.Sub, E.Mul, E.IntImm)):
                    xkey = struct_key(atom.a, self.kmemo)
                    slot = lin.terms.get(xkey)
                    if slot is not None and slot[1] * c == -coeff:
                        m = slot[1]
                        del lin.terms[key], lin.terms[xkey]
                        lin.add_term(E.FloorMod(atom.a, atom.b), m, self.kmemo)
                        changed = True
                        break
        return lin

    def _outer_digit(self, lin: Lin, mod_key: Any, coeff: int
                     ) -> tuple[Any, E.PrimExpr, int] | None:
        """A term (x // c % b) * coeff of `lin` whose x % c, simplified, is the term keyed
        `mod_key`: (its key, x, b)."""
        for key, atom, co in lin.items():
            if co != coeff or not isinstance(atom, E.FloorMod) or \
                    not isinstance(atom.a, E.FloorDiv):
                continue
            b, div = atom.b, atom.a
            if not (isinstance(b, E.IntImm) and b.value > 0 and isinstance(div.b, E.IntImm)
                    and div.b.value > 0):
                continue
            low = self.mod_lin(self.lin_of(div.a), div.b.value)
            if len(low.terms) == 1 and not low.const and \
                    next(iter(low.terms)) == mod_key and next(iter(low.terms.values()))[1] == 1:
                return key, div.a, b.value
        return None

    def _gcd_split(self, rest: Lin, c: int) -> tuple[Lin, int, int, Lin] | None:
        """Find g | c and rest = g*big + small with small in [g*m, g*m + g): then
        rest // c == (big + m) // (c/g) and rest % c == g*((big + m) % (c/g)) + small - g*m."""
        terms = sorted(rest.items(), key=lambda t: -abs(t[2]))
        g = c
        for s in range(1, len(terms) + 1):
            g = gcd(g, terms[s - 1][2])
            if g == 1:
                return None
            small = Lin.constant(rest.const, rest.dtype)
            for k, a, co in terms[s:]:
                small.add_term(a, co, key=k)
            lo, hi = self.bounds.lin_bound(small)
            if _finite((lo, hi)) and lo // g == hi // g:
                big = Lin(rest.dtype)
                for k, a, co in terms[:s]:
                    big.add_term(a, co // g, key=k)
                return big, g, int(lo // g), small
        return None

    def div_lin(self, lin: Lin, c: int) -> Lin:
        """floor(lin / c) as a form, for a positive constant c."""
        dt = lin.dtype
        q, rest = Lin(dt), Lin(dt)
        q.const, rest.const = divmod(lin.const, c)
        for k, a, co in lin.items():
            if co % c == 0:
                q.add_term(a, co // c, key=k)
            else:
                rest.add_term(a, co, key=k)
        if rest.is_const:
            return q
        lo, hi = self.bounds.lin_bound(rest)
        if _finite((lo, hi)) and lo // c == hi // c:
            q.const += int(lo // c)
            return q
        split = self._gcd_split(rest, c)
        if split is not None:
            big, g, m, _ = split
            big.const += m
            return q.plus(self.div_lin(big, c // g))
        q.add_term(E.FloorDiv(rest.to_expr(), E.IntImm(c, dt)), 1, self.kmemo)
        return q

    def mod_lin(self, lin: Lin, c: int) -> Lin:
        """floormod(lin, c) as a form, for a positive constant c."""
        dt = lin.dtype
        rest = Lin.constant(lin.const % c, dt)
        for k, a, co in lin.items():
            r = co if abs(co) < c else co % c
            if r:
                rest.add_term(a, r, key=k)
        if rest.is_const:
            return rest
        lo, hi = self.bounds.lin_bound(rest)
        if _finite((lo, hi)) and lo // c == hi // c:
            rest.const -= int(lo // c) * c
            return rest
        split = self._gcd_split(rest, c)
        if split is not None:
            big, g, m, small = split
            big.const += m
            return self.mod_lin(big, c // g).scaled(g).plus(small).plus(
                Lin.constant(-g * m, dt))
        return Lin.atom(E.FloorMod(rest.to_expr(), E.IntImm(c, dt)), dt, self.kmemo)

    # ---- arithmetic --------------------------------------------------------------------

    def _arith(self, e: E.BinaryOp) -> E.PrimExpr:
        if is_integral(e.dtype):
            return self.finish(self.lin_of(e))
        return self._float_binop(e)

    visit_Add = visit_Sub = visit_Mul = _arith

    def _float_binop(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        cls, dt = type(e), e.dtype
        if isinstance(a, E.FloatImm) and isinstance(b, E.FloatImm) and cls in _FLOAT_FOLD:
            with np.errstate(all="ignore"):
                x, y = np.asarray(a.value, dt), np.asarray(b.value, dt)
                return _float_const(_FLOAT_FOLD[cls](x, y), dt)
        if isinstance(b, E.FloatImm):
            if b.value == 0 and cls in (E.Add, E.Sub):
                return a
            if b.value == 1 and cls in (E.Mul, E.Div):
                return a
        if isinstance(a, E.FloatImm):
            if a.value == 0 and cls is E.Add:
                return b
            if a.value == 1 and cls is E.Mul:
                return b
        return self._rebuild(e, a, b)

    visit_Div = _float_binop

    @staticmethod
    def _rebuild(e: E.BinaryOp, a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        return e if (a is e.a and b is e.b) else type(e)(a, b)

    def visit_FloorDiv(self, e: E.FloorDiv) -> E.PrimExpr:
        return self._divmod(e, is_div=True)

    def visit_FloorMod(self, e: E.FloorMod) -> E.PrimExpr:
        return self._divmod(e, is_div=False)

    def _divmod(self, e: E.BinaryOp, is_div: bool) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        dt = e.dtype
        if not is_integral(dt):
            if isinstance(a, E.FloatImm) and isinstance(b, E.FloatImm) and b.value != 0:
                x, y = np.asarray(a.value, dt), np.asarray(b.value, dt)
                return _float_const(np.floor_divide(x, y) if is_div else np.mod(x, y), dt)
            return self._rebuild(e, a, b)
        if isinstance(b, E.IntImm) and b.value != 0:
            c = b.value
            if isinstance(a, E.IntImm):
                return E.IntImm(wrap_int(a.value // c if is_div else a.value % c, dt), dt)
            if c == 1:
                return a if is_div else E.IntImm(0, dt)
            if c > 0 and dt in INDEX_TYPES:
                inner = a
                if isinstance(a, type(e)) and isinstance(a.b, E.IntImm) and a.b.value > 0:
                    # (x // c1) // c2 == x // (c1*c2); (x % c1) % c2 == x % c2 when c2 | c1
                    if is_div:
                        inner, c = a.a, a.b.value * c
                    elif a.b.value % c == 0:
                        inner = a.a
                lin = self.lin_of(inner)
                return self.finish(self.div_lin(lin, c) if is_div else self.mod_lin(lin, c))
            return self._rebuild(e, a, b)
        if dt in INDEX_TYPES and self._in_range(a, b):
            return E.IntImm(0, dt) if is_div else a
        return self._rebuild(e, a, b)

    def _in_range(self, a: E.PrimExpr, b: E.PrimExpr) -> bool:
        """0 <= a < b, proved from bounds."""
        la = self.lin_of(a)
        if self.bounds.lin_bound(la)[0] < 0:
            return False
        return self.bounds.lin_bound(la.plus(self.lin_of(b), -1))[1] < 0

    def _minmax(self, e: E.BinaryOp) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        is_min, dt = isinstance(e, E.Min), e.dtype
        if _is_const(a) and _is_const(b) and dt != "bool":
            v = min(a.value, b.value) if is_min else max(a.value, b.value)
            if is_float(dt):
                if math.isnan(a.value) or math.isnan(b.value):
                    return self._rebuild(e, a, b)
                return E.FloatImm(float(v), dt)
            return E.IntImm(v, dt)
        if self._same(a, b):
            return a
        if dt in INDEX_TYPES:
            lo, hi = self.bounds.lin_bound(self.lin_of(a).plus(self.lin_of(b), -1))
            if hi <= 0:
                return a if is_min else b
            if lo >= 0:
                return b if is_min else a
        if _is_const(b) and type(a) is type(e) and _is_const(a.b) and not is_float(dt):
            inner = min(a.b.value, b.value) if is_min else max(a.b.value, b.value)
            return type(e)(a.a, E.IntImm(inner, dt))
        return self._rebuild(e, a, b)

    visit_Min = visit_Max = _minmax

    # ---- comparisons and logic ------------------------------------------------------------

    def _compare(self, e: E.CmpOp) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        cls, dt = type(e), e.a.dtype
        if _is_const(a) and _is_const(b):
            return _true(_CMP_FOLD[cls](a.value, b.value))
        if dt not in INDEX_TYPES:
            if is_integral(dt) and self._same(a, b) and cls in (E.EQ, E.NE):
                return _true(cls is E.EQ)
            return self._rebuild(e, a, b)
        d = self.lin_of(a).plus(self.lin_of(b), -1)
        decided = self._decide(cls, self.bounds.lin_bound(d))
        if decided is not None:
            return _true(decided)
        return self._normalize_cmp(cls, d)

    visit_LT = visit_LE = visit_GT = visit_GE = visit_EQ = visit_NE = _compare

    @staticmethod
    def _decide(cls: type, iv: tuple[float, float]) -> bool | None:
        lo, hi = iv
        rules = {
            E.LT: (hi < 0, lo >= 0), E.LE: (hi <= 0, lo > 0), E.GT: (lo > 0, hi <= 0),
            E.GE: (lo >= 0, hi < 0), E.EQ: (lo == hi == 0, lo > 0 or hi < 0),
            E.NE: (lo > 0 or hi < 0, lo == hi == 0),
        }
        yes, no = rules[cls]
        return True if yes else (False if no else None)

    def _normalize_cmp(self, cls: type, d: Lin) -> E.PrimExpr:
        """`d OP 0` as `positive terms OP rest`, divided by the gcd of the coefficients."""
        if not any(c > 0 for _, _, c in d.items()):
            d, cls = d.scaled(-1), _FLIP[cls]
        g, k = d.coeff_gcd(), -d.const
        if g > 1:
            if cls in (E.EQ, E.NE) and k % g:
                return _true(cls is E.NE)
            ceil_k, floor_k = -((-k) // g), k // g
            k = {E.LT: ceil_k, E.GE: ceil_k, E.LE: floor_k, E.GT: floor_k}.get(cls, k // g)
            d = d.scaled(1)
            d.terms = {key: [a, c // g] for key, (a, c) in d.terms.items()}
        left, right = Lin(d.dtype), Lin.constant(k, d.dtype)
        for key, a, c in d.items():
            if c > 0:
                left.add_term(a, c, key=key)
            else:
                right.add_term(a, -c, key=key)
        return cls(left.to_expr(), right.to_expr())

    def visit_And(self, e: E.And) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        for x, y in ((a, b), (b, a)):
            if isinstance(x, E.IntImm):
                return y if x.value else _true(False)
        return a if self._same(a, b) else self._rebuild(e, a, b)

    def visit_Or(self, e: E.Or) -> E.PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        for x, y in ((a, b), (b, a)):
            if isinstance(x, E.IntImm):
                return _true(True) if x.value else y
        return a if self._same(a, b) else self._rebuild(e, a, b)

    def visit_Not(self, e: E.Not) -> E.PrimExpr:
        a = self.visit(e.a)
        if isinstance(a, E.IntImm):
            return _true(not a.value)
        if isinstance(a, E.Not):
            return a.a
        if isinstance(a, E.CmpOp) and type(a) in _NEGATE and is_integral(a.a.dtype):
            return self.visit(_NEGATE[type(a)](a.a, a.b))
        return e if a is e.a else E.Not(a)

    # ---- selects, casts, calls -----------------------------------------------------------

    def _branches(self, cond: E.PrimExpr, t: E.PrimExpr, f: E.PrimExpr
                  ) -> tuple[E.PrimExpr, E.PrimExpr]:
        """Simplify each side of a select knowing which way the condition went."""
        neg = None
        if isinstance(cond, E.CmpOp) and type(cond) in _NEGATE:
            neg = _NEGATE[type(cond)](cond.a, cond.b)
        return self._under(cond, t), self._under(neg, f)

    def _under(self, fact: E.PrimExpr | None, e: E.PrimExpr) -> E.PrimExpr:
        if fact is None or not _has_var_fact(fact):
            return self.visit(e)
        # a fresh walk: its results hold only where `fact` does, so they must not reach
        # this walk's memo (the same node may also occur outside the branch)
        with self.ana.constraint_scope(fact):
            return Simplifier(self.ana).visit(e)

    def visit_Select(self, e: E.Select) -> E.PrimExpr:
        cond = self.visit(e.condition)
        if isinstance(cond, E.IntImm):
            return self.visit(e.true_value if cond.value else e.false_value)
        t, f = self._branches(cond, e.true_value, e.false_value)
        if self._same(t, f):
            return t
        if cond is e.condition and t is e.true_value and f is e.false_value:
            return e
        return E.Select(cond, t, f)

    def visit_Call(self, e: E.Call) -> E.PrimExpr:
        if e.name == "if_then_else":
            cond = self.visit(e.args[0])
            if isinstance(cond, E.IntImm):
                return self.visit(e.args[1] if cond.value else e.args[2])
            t, f = self._branches(cond, e.args[1], e.args[2])
            if self._same(t, f):
                return t
            args = (cond, t, f)
        else:
            args = tuple(self.visit(a) for a in e.args)
            fold = _UNARY_FOLD.get(e.name)
            if fold is not None and len(args) == 1 and isinstance(args[0], E.FloatImm):
                with np.errstate(all="ignore"):
                    return _float_const(fold(np.asarray(args[0].value, e.dtype)), e.dtype)
        if all(x is y for x, y in zip(args, e.args)):
            return e
        return E.Call(e.dtype, e.name, args)

    def visit_Cast(self, e: E.Cast) -> E.PrimExpr:
        v = self.visit(e.value)
        dt = e.dtype
        if v.dtype == dt:
            return v
        if _is_const(v) and not (isinstance(v, E.FloatImm) and not math.isfinite(v.value)):
            with np.errstate(all="ignore"):
                out = np.asarray(v.value, v.dtype).astype(dt)
            return E.FloatImm(float(out), dt) if is_float(dt) else E.IntImm(int(out), dt)
        if isinstance(v, E.Cast) and v.value.dtype == dt and _widens(dt, v.dtype):
            return v.value  # int32 -> int64 -> int32 loses nothing
        return e if v is e.value else E.Cast(dt, v)

    # ---- scopes ------------------------------------------------------------------------

    def visit_Var(self, e: E.Var) -> E.PrimExpr:
        value = self.ana._value_of(e)
        return e if value is None else value

    def visit_Let(self, e: E.Let) -> E.PrimExpr:
        value = self.visit(e.value)
        if isinstance(value, (E.IntImm, E.FloatImm, E.Var)):
            return self.visit(substitute(e.body, {e.var: value}))
        body = self.visit(e.body)
        return e if (value is e.value and body is e.body) else E.Let(e.var, value, body)

    def visit_Reduce(self, e: E.Reduce) -> E.PrimExpr:
        saved = self.ana._push_ranges([(iv.var, iv.dom) for iv in e.axis if iv.dom is not None])
        self.bounds = BoundAnalyzer(self.ana, self.kmemo)
        try:
            return self.generic_visit(e)
        finally:
            self.ana._pop_ranges(saved)
            self.bounds = BoundAnalyzer(self.ana, self.kmemo)


def _has_var_fact(cond: E.PrimExpr) -> bool:
    """True when a conjunct of `cond` compares an index var (a fact the analyzer can use)."""
    if isinstance(cond, E.And):
        return _has_var_fact(cond.a) or _has_var_fact(cond.b)
    if isinstance(cond, (E.LT, E.LE, E.GT, E.GE, E.EQ)):
        return any(isinstance(x, E.Var) and x.dtype in INDEX_TYPES for x in (cond.a, cond.b))
    return False


def _widens(small: str, big: str) -> bool:
    """Every value of `small` is a value of `big` (for int and float types)."""
    from tensor_expr.arith.interval import dtype_range

    if is_float(small) and is_float(big):
        return int(small[5:]) <= int(big[5:])
    if (is_integral(small) or small == "bool") and is_integral(big):
        s, b = dtype_range(small), dtype_range(big)
        return b[0] <= s[0] and s[1] <= b[1]
    return False
