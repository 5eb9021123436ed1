"""Generic traversal of expressions: visit, mutate, substitute, collect.

The mutator is reflective (it walks dataclass fields), so nodes defined in later layers
(lowering's BufferLoad) are handled without registering anything. A mutator returns the node
itself when no child changed and memoises by identity, since expressions are DAGs.

    >>> import tensor_expr as te
    >>> i, j = te.var("i"), te.var("j")
    >>> print(te.substitute(i * 2 + j, {i: j + 1}))
    (((j + 1) * 2) + j)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tensor_expr.expr import IterVar, PrimExpr, ProducerLoad, Range, Reduce, Var

_FIELD_CACHE: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELD_CACHE.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        _FIELD_CACHE[cls] = names
    return names


def children(e: PrimExpr) -> list[PrimExpr]:
    """The direct sub-expressions of `e` (tuple fields flattened, reduce axes excluded)."""
    out: list[PrimExpr] = []
    for name in _fields(type(e)):
        v = getattr(e, name)
        if isinstance(v, PrimExpr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, PrimExpr))
    return out


def post_order_visit(e: Any, fn: Callable[[Any], None]) -> None:
    """Call `fn` on every sub-expression of `e` (children first), each node once."""
    seen: set[int] = set()
    stack: list[tuple[Any, bool]] = [(e, False)]
    while stack:
        node, done = stack.pop()
        if done:
            fn(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if isinstance(node, PrimExpr):
            for c in reversed(children(node)):
                stack.append((c, False))


class ExprMutator:
    """Rebuilds an expression bottom-up; override `visit_<NodeClass>` to rewrite a kind."""

    def __init__(self) -> None:
        # id -> (node, result): holding the node keeps its id from being reused
        self.memo: dict[int, tuple[Any, Any]] = {}

    def visit(self, e: Any) -> Any:
        if not isinstance(e, PrimExpr):
            return e
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        method = getattr(self, "visit_" + type(e).__name__, None)
        out = method(e) if method is not None else self.generic_visit(e)
        self.memo[id(e)] = (e, out)
        return out

    def generic_visit(self, e: PrimExpr) -> PrimExpr:
        changes: dict[str, Any] = {}
        for name in _fields(type(e)):
            v = getattr(e, name)
            if isinstance(v, PrimExpr):
                nv = self.visit(v)
                if nv is not v:
                    changes[name] = nv
            elif isinstance(v, tuple) and v and any(isinstance(x, PrimExpr) for x in v):
                nt = tuple(self.visit(x) for x in v)
                if any(a is not b for a, b in zip(nt, v)):
                    changes[name] = nt
        return dataclasses.replace(e, **changes) if changes else e  # type: ignore[type-var]


class _Substituter(ExprMutator):
    def __init__(self, vmap: Mapping[Var, Any]) -> None:
        super().__init__()
        self.vmap = {id(k.var if isinstance(k, IterVar) else k): v for k, v in vmap.items()}

    def visit_Var(self, e: Var) -> PrimExpr:
        from tensor_expr.expr import as_expr

        v = self.vmap.get(id(e))
        return e if v is None else as_expr(v)

    def visit_Reduce(self, e: Reduce) -> PrimExpr:
        out = self.generic_visit(e)
        # substitute inside reduce-axis domains too (symbolic extents)
        axes = tuple(_subst_itervar(a, self) for a in e.axis)
        if any(a is not b for a, b in zip(axes, e.axis)):
            out = dataclasses.replace(out, axis=axes)  # type: ignore[type-var]
        return out


def _subst_itervar(iv: IterVar, m: ExprMutator) -> IterVar:
    if iv.dom is None:
        return iv
    lo, ext = m.visit(iv.dom.min), m.visit(iv.dom.extent)
    if lo is iv.dom.min and ext is iv.dom.extent:
        return iv
    return dataclasses.replace(iv, dom=Range(lo, ext))


def substitute(e: Any, vmap: Mapping[Any, Any]) -> Any:
    """Replace variables (or IterVars' vars) by expressions: `substitute(e, {i: j + 1})`."""
    if not vmap:
        return e
    return _Substituter(vmap).visit(e)


def collect_vars(e: Any) -> list[Var]:
    """The distinct free Vars of `e`, in first-seen order."""
    out: list[Var] = []
    seen: set[int] = set()

    def f(n: Any) -> None:
        if isinstance(n, Var) and id(n) not in seen:
            seen.add(id(n))
            out.append(n)

    post_order_visit(e, f)
    return out


def collect_tensor_reads(exprs: Iterable[PrimExpr]) -> tuple[Any, ...]:
    """The distinct tensors read by `exprs` (ProducerLoad producers), in first-seen order."""
    out: list[Any] = []
    seen: set[int] = set()

    def f(n: Any) -> None:
        if isinstance(n, ProducerLoad) and id(n.producer) not in seen:
            seen.add(id(n.producer))
            out.append(n.producer)

    for e in exprs:
        post_order_visit(e, f)
    return tuple(out)


def uses_var(e: Any, v: Var) -> bool:
    """True when `v` occurs in `e`."""
    found = False

    def f(n: Any) -> None:
        nonlocal found
        if n is v:
            found = True

    post_order_visit(e, f)
    return found
