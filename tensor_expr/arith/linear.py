"""Linear forms over integer atoms: `sum(coeff * atom) + const`, the canonical index shape.

Atoms are the non-linear parts (vars, floordiv/floormod, min/max, loads, products of two
non-constant factors); like atoms are merged through their structural keys, so
`(i*4 + j) - i*4` becomes the form `{j: 1}` and prints as `j`.

    >>> import tensor_expr as te
    >>> from tensor_expr.arith.linear import Lin
    >>> i, j = te.var("i"), te.var("j")
    >>> f = Lin.atom(i, "int32").scaled(4).plus(Lin.atom(j, "int32")).plus(Lin.constant(3, "int32"))
    >>> print(f.to_expr())
    (((i * 4) + j) + 3)
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from math import gcd
from typing import Any

from tensor_expr.arith.structural import struct_key
from tensor_expr.expr import Add, IntImm, Mul, PrimExpr, Sub

# A process-wide key memo would pin every expression ever keyed; each Lin user passes one.
_Memo = dict[int, tuple[Any, Hashable]]


_WIDTH: dict[str, int] = {}


def wrap_int(value: int, dtype: str) -> int:
    """`value` wrapped into the range of the integer `dtype` (two's complement)."""
    if dtype == "bool":
        return int(bool(value))
    width = _WIDTH.get(dtype)
    if width is None:
        width = _WIDTH[dtype] = int("".join(ch for ch in dtype if ch.isdigit()))
    if -(1 << (width - 1)) <= value < (1 << (width - 1)) and dtype.startswith("int"):
        return value  # the usual case: already in range
    mask = (1 << width) - 1
    value &= mask
    if dtype.startswith("int") and value >= 1 << (width - 1):
        value -= 1 << width
    return value


class Lin:
    """An integer linear form; `terms` maps a structural key to [atom, coefficient]."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, dtype: str) -> None:
        self.terms: dict[Hashable, list[Any]] = {}
        self.const = 0
        self.dtype = dtype

    @staticmethod
    def constant(value: int, dtype: str) -> Lin:
        """The form of a constant."""
        out = Lin(dtype)
        out.const = value
        return out

    @staticmethod
    def atom(e: PrimExpr, dtype: str, memo: _Memo | None = None) -> Lin:
        """The form `1 * e`."""
        out = Lin(dtype)
        out.add_term(e, 1, memo)
        return out

    def copy(self) -> Lin:
        out = Lin(self.dtype)
        out.terms = {k: [a, c] for k, (a, c) in self.terms.items()}
        out.const = self.const
        return out

    def add_term(self, atom: PrimExpr, coeff: int, memo: _Memo | None = None,
                 key: Hashable | None = None) -> None:
        """Add `coeff * atom`, merging with an equal atom already present."""
        if coeff == 0:
            return
        k = struct_key(atom, memo) if key is None else key
        slot = self.terms.get(k)
        if slot is None:
            self.terms[k] = [atom, coeff]
        else:
            slot[1] += coeff
            if slot[1] == 0:
                del self.terms[k]

    def take(self, atom: PrimExpr, memo: _Memo | None = None) -> int:
        """Remove the term of `atom` and return its coefficient (0 when it has none)."""
        slot = self.terms.pop(struct_key(atom, memo), None)
        return 0 if slot is None else slot[1]

    def plus(self, other: Lin, scale: int = 1) -> Lin:
        """self + scale * other (a new form)."""
        out = self.copy()
        for k, (a, c) in other.terms.items():
            out.add_term(a, c * scale, key=k)
        out.const += other.const * scale
        return out

    def scaled(self, s: int) -> Lin:
        """s * self (a new form)."""
        out = Lin(self.dtype)
        if s != 0:
            out.terms = {k: [a, c * s] for k, (a, c) in self.terms.items()}
            out.const = self.const * s
        return out

    def items(self) -> Iterator[tuple[Hashable, PrimExpr, int]]:
        for k, (a, c) in self.terms.items():
            yield k, a, c

    @property
    def is_const(self) -> bool:
        return not self.terms

    def coeff_gcd(self) -> int:
        """The gcd of the term coefficients (0 for a constant form)."""
        g = 0
        for _, _, c in self.items():
            g = gcd(g, c)
        return g

    def to_expr(self) -> PrimExpr:
        """The expression: positive terms first, then subtractions, the constant last."""
        dt = self.dtype
        pos = [(a, c) for _, a, c in self.items() if c > 0]
        neg = [(a, -c) for _, a, c in self.items() if c < 0]
        out: PrimExpr | None = None
        for a, c in pos:
            t = a if c == 1 else Mul(a, IntImm(c, dt))
            out = t if out is None else Add(out, t)
        for a, c in neg:
            if out is None:
                out = Mul(a, IntImm(-c, dt))
                continue
            t = a if c == 1 else Mul(a, IntImm(c, dt))
            out = Sub(out, t)
        k = wrap_int(self.const, dt)
        if out is None:
            return IntImm(k, dt)
        if k > 0:
            out = Add(out, IntImm(k, dt))
        elif k < 0:
            out = Sub(out, IntImm(-k, dt))
        return out


def linearize(e: PrimExpr, memo: _Memo | None = None,
              lmemo: dict[int, tuple[Any, Lin]] | None = None) -> Lin:
    """The linear form of `e` read structurally (no simplification of the atoms).

    `lmemo` caches forms by node identity (expressions are DAGs); a fresh copy is returned."""
    if lmemo is None:
        lmemo = {}
    hit = lmemo.get(id(e))
    if hit is None:
        hit = (e, _linearize(e, memo, lmemo))
        lmemo[id(e)] = hit
    return hit[1].copy()


def _linearize(e: PrimExpr, memo: _Memo | None, lmemo: dict[int, tuple[Any, Lin]]) -> Lin:
    dt = e.dtype
    if isinstance(e, IntImm):
        return Lin.constant(e.value, dt)
    if isinstance(e, Add):
        return linearize(e.a, memo, lmemo).plus(linearize(e.b, memo, lmemo))
    if isinstance(e, Sub):
        return linearize(e.a, memo, lmemo).plus(linearize(e.b, memo, lmemo), -1)
    if isinstance(e, Mul):
        if isinstance(e.b, IntImm):
            return linearize(e.a, memo, lmemo).scaled(e.b.value)
        if isinstance(e.a, IntImm):
            return linearize(e.b, memo, lmemo).scaled(e.a.value)
    return Lin.atom(e, dt, memo)
