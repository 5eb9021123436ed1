"""Iteration-variable relations (split, fuse, rebase) and the arithmetic on them.

A stage starts with its op's root iter vars; each relation derives new iter vars from
old ones. Lowering runs two directions over the relations: extents flow down (root
extents -> leaf extents) and index values flow up (leaf loop vars -> root indices).

    >>> import tensor_expr as te
    >>> from schedule.relations import Split, pass_down_extents, pass_up_values
    >>> i = te.compute((10,), lambda i: te.const(1.0)).op.axis[0]
    >>> o = te.IterVar(None, te.var("i.outer")); n = te.IterVar(None, te.var("i.inner"))
    >>> rel = Split(i, o, n, te.const(4), None)
    >>> ext = pass_down_extents([rel], {i: te.const(10)})
    >>> ext[o].value, ext[n].value
    (3, 4)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tensor_expr.expr import IntImm, IterVar, PrimExpr, const, floordiv, floormod

_rel = dataclass(frozen=True, slots=True, eq=False)


@_rel
class Split:
    """parent = outer * extent(inner) + inner; exactly one of factor / nparts is set."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: PrimExpr | None
    nparts: PrimExpr | None


@_rel
class Fuse:
    """fused = outer * extent(inner) + inner (outer, inner adjacent leaves, outer first)."""

    outer: IterVar
    inner: IterVar
    fused: IterVar


@_rel
class Rebase:
    """rebased = parent - min(parent): the same loop, starting at 0."""

    parent: IterVar
    rebased: IterVar


Relation = Split | Fuse | Rebase


def ceildiv(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """ceil(a / b) for non-negative integers, folded when both are constants."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return const(-(-a.value // b.value), a.dtype)
    return floordiv(a + (b - 1), b)


def mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """a * b with the trivial cases folded (keeps index text readable)."""
    if isinstance(a, IntImm) and a.value == 1:
        return b
    if isinstance(b, IntImm) and b.value == 1:
        return a
    return a * b


def add(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """a + b with zeros folded."""
    if isinstance(a, IntImm) and a.value == 0:
        return b
    if isinstance(b, IntImm) and b.value == 0:
        return a
    return a + b


def pass_down_extents(relations: Sequence[Relation],
                      root_ext: Mapping[IterVar, PrimExpr]) -> dict[IterVar, PrimExpr]:
    """Extents of every iter var, given the root extents (all loops start at 0)."""
    ext: dict[IterVar, PrimExpr] = dict(root_ext)
    for r in relations:
        if isinstance(r, Split):
            pe = ext[r.parent]
            if r.factor is not None:
                ext[r.outer] = ceildiv(pe, r.factor)
                ext[r.inner] = r.factor
            else:
                assert r.nparts is not None
                ext[r.outer] = r.nparts
                ext[r.inner] = ceildiv(pe, r.nparts)
        elif isinstance(r, Fuse):
            ext[r.fused] = mul(ext[r.outer], ext[r.inner])
        else:
            ext[r.rebased] = ext[r.parent]
    return ext


def pass_up_values(relations: Sequence[Relation], leaf_val: Mapping[IterVar, PrimExpr],
                   ext: Mapping[IterVar, PrimExpr]) -> dict[IterVar, PrimExpr]:
    """Values (relative to each var's min) of every iter var from the leaf loop values."""
    val: dict[IterVar, PrimExpr] = dict(leaf_val)
    for r in reversed(relations):
        if isinstance(r, Split):
            val[r.parent] = add(mul(val[r.outer], ext[r.inner]), val[r.inner])
        elif isinstance(r, Fuse):
            f = val[r.fused]
            inner_ext = ext[r.inner]
            if isinstance(inner_ext, IntImm) and inner_ext.value == 1:
                val[r.outer], val[r.inner] = f, const(0, f.dtype)
            else:
                val[r.outer] = floordiv(f, inner_ext)
                val[r.inner] = floormod(f, inner_ext)
        else:
            val[r.parent] = val[r.rebased]
    return val


def roots_of(relations: Sequence[Relation], iv: IterVar) -> list[IterVar]:
    """The iter vars (transitively) that `iv` derives from, `iv` itself if it is a root."""
    parents: dict[IterVar, list[IterVar]] = {}
    for r in relations:
        if isinstance(r, Split):
            parents[r.outer] = parents[r.inner] = [r.parent]
        elif isinstance(r, Fuse):
            parents[r.fused] = [r.outer, r.inner]
        else:
            parents[r.rebased] = [r.parent]
    out: list[IterVar] = []
    stack = [iv]
    while stack:
        v = stack.pop()
        if v in parents:
            stack.extend(parents[v])
        elif v not in out:
            out.append(v)
    return out
