"""Bound inference: the region of a producer that its consumers need at a compute_at point.

Exact for affine accesses with islpy: the consumers' iterations below the attach point
(loop ranges plus their guards) are a Presburger set over the loops outside it (fixed, the
set's input dims) and the symbolic shape vars (isl parameters); the region of each producer
dimension is its lexmin (a piecewise affine function of the fixed loops: turned back into a
PrimExpr, with max/min for clamped pieces) and the largest extent over all fixed points (a
constant, or an expression of the shape vars), so buffers are exactly as big as the
footprint. conv2d windows, strided access and split/fused indices are affine.

Non-affine accesses (data-dependent indices, products of loop vars) fall back to interval
sets over the loop ranges (`Analyzer.int_set`: bounds as expressions of the fixed loop
vars), and when even that fails, to the producer's whole dimension.

    >>> import tensor_expr as te
    >>> from lowering.bound import Consumer, Loop, footprint
    >>> io, ii, r = te.var("io"), te.var("ii"), te.var("r")
    >>> c = Consumer([Loop(ii, te.const(4)), Loop(r, te.const(3))], [], [(io * 4 + ii + r,)])
    >>> [(str(m), str(e)) for m, e in footprint([Loop(io, te.const(8))], [c], (te.const(34),))]
    [('(io * 4)', '6')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import islpy as isl

from tensor_expr import expr as E
from tensor_expr.arith import Analyzer, simplify
from tensor_expr.visitor import collect_vars, substitute


@dataclass(frozen=True)
class Loop:
    """A loop `for var in [0, extent)`."""

    var: E.Var
    extent: E.PrimExpr


@dataclass(frozen=True)
class Consumer:
    """One consumer's iterations under the attach point and the producer indices it reads.

    `constraints` are (lo, expr, hi) with lo <= expr < hi (the consumer's guards)."""

    free: Sequence[Loop]
    constraints: Sequence[tuple[E.PrimExpr, E.PrimExpr, E.PrimExpr]]
    accesses: Sequence[tuple[E.PrimExpr, ...]]


class NonAffine(Exception):
    """An expression outside Presburger arithmetic."""


class _Names:
    """isl identifiers for our Vars: f* fixed (input dims), v* free, p* parameters."""

    def __init__(self, fixed: Sequence[Loop]) -> None:
        self.names: dict[int, str] = {id(lp.var): f"f{n}" for n, lp in enumerate(fixed)}
        self.vars: dict[str, E.Var] = {f"f{n}": lp.var for n, lp in enumerate(fixed)}
        self.params: list[str] = []

    def local(self, loops: Sequence[Loop], prefix: str) -> list[str]:
        out = []
        for n, lp in enumerate(loops):
            name = f"{prefix}{n}"
            self.names[id(lp.var)] = name
            self.vars[name] = lp.var
            out.append(name)
        return out

    def name(self, v: E.Var) -> str:
        n = self.names.get(id(v))
        if n is None:
            n = f"p{len(self.params)}"
            self.names[id(v)] = n
            self.vars[n] = v
            self.params.append(n)
        return n


def to_isl(e: E.PrimExpr, names: _Names) -> str:
    """isl text of an affine integer expression; raises NonAffine otherwise."""
    if isinstance(e, E.Var):
        return names.name(e)
    if isinstance(e, E.IntImm) and e.dtype != "bool":
        return f"({e.value})"
    if isinstance(e, E.Add):
        return f"({to_isl(e.a, names)} + {to_isl(e.b, names)})"
    if isinstance(e, E.Sub):
        return f"({to_isl(e.a, names)} - {to_isl(e.b, names)})"
    if isinstance(e, E.Mul):
        if isinstance(e.b, E.IntImm):
            return f"({e.b.value}*{to_isl(e.a, names)})"
        if isinstance(e.a, E.IntImm):
            return f"({e.a.value}*{to_isl(e.b, names)})"
        raise NonAffine(str(e))
    if isinstance(e, (E.FloorDiv, E.FloorMod)) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        a = to_isl(e.a, names)
        if isinstance(e, E.FloorDiv):
            return f"floor({a}/{e.b.value})"
        return f"({a} mod {e.b.value})"
    if isinstance(e, (E.Min, E.Max)):
        fn = "min" if isinstance(e, E.Min) else "max"
        return f"{fn}({to_isl(e.a, names)}, {to_isl(e.b, names)})"
    if isinstance(e, E.Cast) and e.dtype.startswith("int") and e.value.dtype.startswith("int"):
        return to_isl(e.value, names)
    raise NonAffine(str(e))


# parsed maps and their per-dim results, keyed by the isl text (parsing dominates the cost)
_CACHE: dict[str, list[tuple[Any, Any] | None]] = {}
_CACHE_LIMIT = 4096
_NICE: dict[tuple[str, int, str], bool] = {}  # (map text, dim, candidate) -> is the min


def footprint(fixed: Sequence[Loop], consumers: Sequence[Consumer],
              shape: Sequence[E.PrimExpr]) -> list[tuple[E.PrimExpr, E.PrimExpr]]:
    """(min, extent) per producer dimension of the region the consumers read.

    `min` is an expression of the fixed loop vars; `extent` of the shape vars only."""
    ndim = len(shape)
    names = _Names(fixed)
    affine_dims = [d for d in range(ndim)
                   if all(_is_affine(acc[d], names) for c in consumers for acc in c.accesses)]
    result: list[tuple[E.PrimExpr, E.PrimExpr] | None] = [None] * ndim
    if affine_dims and any(c.accesses for c in consumers):
        text = _map_text(fixed, consumers, affine_dims, names)
        per_dim = _CACHE.get(text)
        if per_dim is None:
            per_dim = _solve(text, len(affine_dims))
            if len(_CACHE) > _CACHE_LIMIT:
                _CACHE.clear()
            _CACHE[text] = per_dim
        for k, d in enumerate(affine_dims):
            got = per_dim[k]
            if got is None:
                continue
            mn = _nice_min(got[0], d, consumers, fixed, names, text, k)
            if mn is None:
                mn = pwaff_to_expr(got[0], names)
            ext = pwaff_to_expr(got[1], names)
            if mn is not None and ext is not None:
                result[d] = (mn, ext)
    fixed_ids = {id(lp.var) for lp in fixed}
    out = []
    for d in range(ndim):
        r = result[d] or _interval_dim(d, fixed, consumers, fixed_ids)
        out.append(r if r is not None else (E.const(0, shape[d].dtype), shape[d]))
    return out


def _nice_min(mn: Any, d: int, consumers: Sequence[Consumer], fixed: Sequence[Loop],
              names: _Names, text: str, k: int) -> E.PrimExpr | None:
    """A consumer's own index with its inner loops at 0, when isl proves it is the min.

    isl may write 2*floor(f/2) as 2f - 2*floor((f+1)/2); the consumer's form is the one the
    loop indices use, so differences such as `index - min` then cancel and guards fold."""
    seen: set[str] = set()
    fnames = ", ".join(names.names[id(lp.var)] for lp in fixed)
    for c in consumers:
        zero = {lp.var: E.const(0, lp.var.dtype) for lp in c.free}
        for acc in c.accesses:
            cand = simplify(substitute(acc[d], zero))
            key = str(cand)
            if key in seen:
                continue
            seen.add(key)
            try:
                body = to_isl(cand, names)
            except NonAffine:
                continue
            ckey = (text, k, body)
            ok = _NICE.get(ckey)
            if ok is None:
                try:
                    ctext = f"[{', '.join(names.params)}] -> {{ [{fnames}] -> [({body})] }}"
                    ok = isl.PwAff(ctext).intersect_domain(mn.domain()).is_equal(mn)
                except isl.Error:
                    ok = False
                if len(_NICE) > _CACHE_LIMIT:
                    _NICE.clear()
                _NICE[ckey] = ok
            if ok:
                return cand
    return None


def _is_affine(e: E.PrimExpr, names: _Names) -> bool:
    try:
        to_isl(e, names)
        return True
    except NonAffine:
        return False


def _map_text(fixed: Sequence[Loop], consumers: Sequence[Consumer], dims: Sequence[int],
              names: _Names) -> str:
    fnames = [names.names[id(lp.var)] for lp in fixed]
    xs = [f"x{k}" for k in range(len(dims))]
    fixed_cons = [f"0 <= {f} < {to_isl(lp.extent, names)}" for f, lp in zip(fnames, fixed)]
    parts = []
    for ci, c in enumerate(consumers):
        vnames = names.local(c.free, f"v{ci}_")
        cons = [f"0 <= {v} < {to_isl(lp.extent, names)}" for v, lp in zip(vnames, c.free)]
        for lo, e, hi in c.constraints:
            try:
                cons.append(f"{to_isl(lo, names)} <= {to_isl(e, names)} < {to_isl(hi, names)}")
            except NonAffine:
                pass  # dropping a guard only enlarges the region: still correct
        for acc in c.accesses:
            eqs = [f"{x} = {to_isl(acc[d], names)}" for x, d in zip(xs, dims)]
            body = " and ".join(fixed_cons + cons + eqs) or "true"
            if vnames:
                body = " and ".join(fixed_cons) + (" and " if fixed_cons else "") + \
                    f"exists ({', '.join(vnames)} : {' and '.join(cons + eqs)})"
            parts.append(f"[{', '.join(fnames)}] -> [{', '.join(xs)}] : {body}")
    return f"[{', '.join(names.params)}] -> {{ {'; '.join(parts)} }}"


def _solve(text: str, n: int) -> list[tuple[Any, Any] | None]:
    m = isl.Map(text)
    if m.is_empty():
        return [None] * n
    out: list[tuple[Any, Any] | None] = []
    for k in range(n):
        try:
            mn = m.dim_min(k).coalesce()
            mx = m.dim_max(k).coalesce()
            ext = (mx - mn).add_constant_val(isl.Val.one(mx.get_ctx())).coalesce()
            bound = isl.Map.from_pw_aff(ext).range().dim_max(0).coalesce()
            out.append((mn, bound))
        except isl.Error:
            out.append(None)
    return out


def _val(v: Any) -> Fraction:
    return Fraction(v.get_num_si(), v.get_den_val().get_num_si())


def _parts(aff: Any, names: _Names) -> tuple[list[tuple[E.PrimExpr, int]], int, int] | None:
    """An Aff as (numerator terms, numerator constant, denominator), divs as floordivs."""
    den = _val(aff.get_denominator_val())
    terms: list[tuple[E.PrimExpr, int]] = []
    for dt in (isl.dim_type.in_, isl.dim_type.param):
        for i in range(aff.dim(dt)):
            c = _val(aff.get_coefficient_val(dt, i)) * den
            if c != 0:
                v = names.vars.get(aff.get_dim_name(dt, i))
                if v is None:
                    return None
                terms.append((v, int(c)))
    for i in range(aff.dim(isl.dim_type.div)):
        c = int(_val(aff.get_coefficient_val(isl.dim_type.div, i)) * den)
        if c == 0:
            continue
        sub = _parts(aff.get_div(i), names)
        if sub is None:
            return None
        t, c0, d = sub
        if d == 1:
            terms.append((_sum(t, c0), c))
        elif sum(co < 0 for _, co in t) > sum(co > 0 for _, co in t):
            # isl writes floor(x/d) as -floor((d - 1 - x)/d); turn it back into floor(x/d)
            flipped = [(e, -co) for e, co in t]
            terms.append((E.floordiv(_sum(flipped, d - 1 - c0), E.const(d)), -c))
        else:
            terms.append((E.floordiv(_sum(t, c0), E.const(d)), c))
    return terms, int(_val(aff.get_constant_val()) * den), int(den)


def _sum(terms: list[tuple[E.PrimExpr, int]], const: int) -> E.PrimExpr:
    out: E.PrimExpr = E.const(const)
    for e, c in terms:
        out = out + _scale(e, c)
    return simplify(out)


def aff_to_expr(aff: Any, names: _Names) -> E.PrimExpr | None:
    """PrimExpr of an isl Aff (floordiv for divs); None when a name is unknown."""
    parts = _parts(aff, names)
    if parts is None:
        return None
    terms, const, den = parts
    out = _sum(terms, const)
    return out if den == 1 else simplify(E.floordiv(out, E.const(den)))


def _scale(e: E.PrimExpr, c: int) -> E.PrimExpr:
    return e if c == 1 else e * E.const(c)


def pwaff_to_expr(pw: Any, names: _Names) -> E.PrimExpr | None:
    """PrimExpr of a piecewise affine value: one piece, or a max/min of the pieces."""
    pieces = pw.get_pieces()
    if not pieces:
        return None
    affs = [a for _, a in pieces]
    uniq = [affs[0]]
    for a in affs[1:]:
        if not any(a.plain_is_equal(u) for u in uniq):
            uniq.append(a)
    exprs = [aff_to_expr(a, names) for a in uniq]
    if any(x is None for x in exprs):
        return None
    if len(uniq) == 1:
        return exprs[0]
    dom = pw.domain()
    for fn, build in (("max", E.max), ("min", E.min)):
        cand = isl.PwAff.from_aff(uniq[0])
        for a in uniq[1:]:
            cand = getattr(cand, fn)(isl.PwAff.from_aff(a))
        if cand.intersect_domain(dom).is_equal(pw):
            out = exprs[0]
            for x in exprs[1:]:
                out = build(out, x)
            return out
    return None


# ---------------------------------------------------------------------------------------
# Interval fallback


def _interval_dim(d: int, fixed: Sequence[Loop], consumers: Sequence[Consumer],
                  fixed_ids: set[int]) -> tuple[E.PrimExpr, E.PrimExpr] | None:
    ana = Analyzer()
    lo: E.PrimExpr | None = None
    hi: E.PrimExpr | None = None
    for c in consumers:
        dom = {lp.var: (E.const(0, lp.var.dtype), lp.extent) for lp in c.free}
        for acc in c.accesses:
            iv = ana.int_set(acc[d], dom)
            if iv is None:
                return None
            lo = iv.min_value if lo is None else E.min(lo, iv.min_value)
            hi = iv.max_value if hi is None else E.max(hi, iv.max_value)
    if lo is None or hi is None:
        return None
    lo = ana.simplify(lo)
    ext = ana.simplify(hi - lo + 1)
    if any(id(v) in fixed_ids for v in collect_vars(ext)):
        for lp in fixed:
            if isinstance(lp.extent, E.IntImm):
                ana.bind(lp.var, (0, lp.extent.value))
        bound = ana.const_int_bound(ext).max_value
        if bound is None:
            return None
        ext = E.const(bound)
    return lo, ext
