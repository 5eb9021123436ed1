"""Index expressions as affine forms over the loops the accelerator runs itself.

The accel code generator runs the outer loops of a kernel at build time (every shape is
static), so an index is an integer once those loops are bound; the loops inside a DMA,
GEMM or ALU nest stay free, and an index must be affine in them for the instruction's
strides and loop factors to express it. `affine(e, bound)` gives that form: a constant
and a coefficient per free loop var; anything else is `NotAffine`.

    >>> import tensor_expr as te
    >>> i, j, k = te.var("i"), te.var("j"), te.var("k")
    >>> form = affine((i * 4 + j) * 16 + k, {i: 2})
    >>> form.const, sorted((v.name, c) for v, c in form.coeffs.items())
    (128, [('j', 16), ('k', 1)])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tensor_expr import expr as E


class NotAffine(Exception):
    """The expression is not affine in the free loop vars (names the part that is not)."""


@dataclass
class Affine:
    """const + sum(coeff * var) over the free vars (`coeffs` keyed by the Var itself)."""

    const: int = 0
    coeffs: dict[E.Var, int] = field(default_factory=dict)

    def plus(self, other: Affine, scale: int = 1) -> Affine:
        out = Affine(self.const + scale * other.const, dict(self.coeffs))
        for v, c in other.coeffs.items():
            out.coeffs[v] = out.coeffs.get(v, 0) + scale * c
            if out.coeffs[v] == 0:
                del out.coeffs[v]
        return out

    def scaled(self, s: int) -> Affine:
        return Affine(self.const * s, {v: c * s for v, c in self.coeffs.items() if s})

    def coeff(self, v: E.Var) -> int:
        return self.coeffs.get(v, 0)

    def at(self, values: Mapping[E.Var, int]) -> int:
        """The value with the free vars set (each one must be given)."""
        return self.const + sum(c * values[v] for v, c in self.coeffs.items())


def affine(e: E.PrimExpr, bound: Mapping[E.Var, int]) -> Affine:
    """The affine form of integer index `e`, the vars in `bound` replaced by their values."""
    if isinstance(e, E.IntImm):
        return Affine(int(e.value))
    if isinstance(e, E.Var):
        if e in bound:
            return Affine(int(bound[e]))
        return Affine(0, {e: 1})
    if isinstance(e, E.Cast):
        return affine(e.value, bound)
    if isinstance(e, (E.Add, E.Sub)):
        return affine(e.a, bound).plus(affine(e.b, bound), 1 if isinstance(e, E.Add) else -1)
    if isinstance(e, (E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max)):
        a, b = affine(e.a, bound), affine(e.b, bound)
        if isinstance(e, E.Mul) and (not a.coeffs or not b.coeffs):
            return b.scaled(a.const) if not a.coeffs else a.scaled(b.const)
        if a.coeffs or b.coeffs:
            raise NotAffine(f"'{e}' is not affine in the loops inside the instruction")
        x, y = a.const, b.const
        if isinstance(e, (E.FloorDiv, E.FloorMod)) and y == 0:
            raise NotAffine(f"'{e}' divides by zero")
        value = {E.Mul: lambda: x * y, E.FloorDiv: lambda: x // y, E.FloorMod: lambda: x % y,
                 E.Min: lambda: min(x, y), E.Max: lambda: max(x, y)}[type(e)]()
        return Affine(value)
    raise NotAffine(f"index '{e}' is not an integer affine expression")


def value(e: E.PrimExpr, bound: Mapping[E.Var, int]) -> int:
    """`e` as an integer with every var bound (NotAffine if one is free)."""
    form = affine(e, bound)
    if form.coeffs:
        names = ", ".join(v.name for v in form.coeffs)
        raise NotAffine(f"'{e}' depends on {names}, which no enclosing loop binds")
    return form.const


__all__ = ["Affine", "NotAffine", "affine", "value"]
