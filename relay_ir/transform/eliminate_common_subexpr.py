"""EliminateCommonSubexpr: compute each effect-free value once.

Two op calls with the same op, equal attrs and the same (already merged) arguments
become one node; likewise tuples, tuple projections, constructor calls and equal small
constants. In a let chain, a binding whose value equals an earlier binding's value is
dropped and its variable replaced by the earlier one. Effectful or identity-carrying
nodes (ref creation and reads, calls of functions) are never merged.

    >>> from relay_ir.expr import Var, Tuple
    >>> x = Var("x")
    >>> t = eliminate_common_subexpr(Tuple((Tuple((x,)), Tuple((x,)))))
    >>> t.fields[0] is t.fields[1]
    True
"""

from __future__ import annotations

from collections.abc import Hashable

from relay_ir.expr import Call, Constant, Constructor, Expr, Function, Let, Tuple, TupleGetItem, Var
from relay_ir.module import IRModule
from relay_ir.op.registry import Op
from relay_ir.transform.analysis import post_order
from relay_ir.transform.pass_manager import FunctionPass, PassContext
from relay_ir.transform.rewrite import rewrite

_SMALL_CONSTANT = 64  # merge constants up to this many elements by value


def _attrs_key(attrs: object) -> Hashable:
    try:
        hash(attrs)
        return attrs  # type: ignore[return-value]
    except TypeError:
        return ("id", id(attrs))


def _key(node: Expr) -> Hashable | None:
    """A key equal for nodes that compute the same value, or None (never merge)."""
    if isinstance(node, Call) and isinstance(node.op, (Op, Constructor)):
        return ("call", id(node.op), _attrs_key(node.attrs), tuple(id(a) for a in node.args))
    if isinstance(node, Tuple):
        return ("tuple", tuple(id(f) for f in node.fields))
    if isinstance(node, TupleGetItem):
        return ("get", id(node.tuple_value), node.index)
    if isinstance(node, Constant) and node.data.size <= _SMALL_CONSTANT:
        return ("const", node.data.dtype.str, node.data.shape, node.data.tobytes())
    return None


def eliminate_common_subexpr(expr: Expr) -> Expr:
    """`expr` with duplicate effect-free computations merged."""
    table: dict[Hashable, Expr] = {}

    def visit(old: Expr, new: Expr) -> Expr:
        key = _key(new)
        if key is None:
            return new
        return table.setdefault(key, new)

    out = rewrite(expr, visit)
    return _merge_let_chains(out)


def _merge_let_chains(expr: Expr) -> Expr:
    """Within each let chain, replace a later binding of an already bound value."""
    alias: dict[Var, Var] = {}
    dropped: set[int] = set()
    scanned: set[int] = set()
    # Reverse post-order puts a chain's head before its tail: scan each chain once, top-down.
    for node in reversed(post_order(expr)):
        if not isinstance(node, Let) or id(node) in scanned:
            continue
        chain_seen: dict[int, Var] = {}
        cur: Expr = node
        while isinstance(cur, Let):
            scanned.add(id(cur))
            if _key(cur.value) is not None and id(cur.value) in chain_seen:
                alias[cur.var] = chain_seen[id(cur.value)]
                dropped.add(id(cur))
            else:
                chain_seen.setdefault(id(cur.value), cur.var)
            cur = cur.body
    if not alias:
        return expr

    def visit(old: Expr, new: Expr) -> Expr:
        if isinstance(old, Var) and old in alias:
            target = alias[old]
            while target in alias:
                target = alias[target]
            return target
        if isinstance(old, Let) and id(old) in dropped:
            return new.body  # type: ignore[attr-defined]
        return new

    return rewrite(expr, visit)


class EliminateCommonSubexpr(FunctionPass):
    """Merge duplicate effect-free computations in every function."""

    name = "EliminateCommonSubexpr"
    opt_level = 3

    def transform_function(self, fn: Function, mod: IRModule, ctx: PassContext) -> Function:
        """Merge duplicates in one function."""
        out = eliminate_common_subexpr(fn)
        assert isinstance(out, Function)
        return out


__all__ = ["EliminateCommonSubexpr", "eliminate_common_subexpr"]
