"""ToGraphNormalForm: replace let-bound variables by their values (lets become sharing).

In graph normal form a value used twice is one node referenced twice (a DAG), which is
what FuseOps and the other dataflow passes work on. A binding stays a `let` when
inlining it would change meaning: its value has an effect (a ref write or a call that
may write one), the value allocates a reference cell (each use would get a cell of its
own), or the value is a function that refers to its own variable (local recursion).
Unused effect-free bindings disappear.

    >>> from relay_ir.expr import Var, Let, Tuple
    >>> x, y = Var("x"), Var("y")
    >>> to_graph_normal_form(Let(y, Tuple((x,)), Tuple((y, y)))).fields[0].fields[0] is x
    True
"""

from __future__ import annotations

from relay_ir.expr import Expr, Function, Let, RefCreate, Var
from relay_ir.module import IRModule
from relay_ir.transform.analysis import free_vars, is_pure, post_order
from relay_ir.transform.pass_manager import FunctionPass, PassContext
from relay_ir.transform.rewrite import rewrite


def to_graph_normal_form(expr: Expr) -> Expr:
    """`expr` with every effect-free, non-recursive let inlined into its uses."""
    inline: dict[Var, Let] = {}
    for node in post_order(expr):
        if not isinstance(node, Let):
            continue
        recursive = isinstance(node.value, Function) and node.var in free_vars(node.value)
        if not recursive and is_pure(node.value) and not isinstance(node.value, RefCreate):
            inline[node.var] = node
    if not inline:
        return expr
    memo: dict[int, Expr] = {}

    def visit(old: Expr, new: Expr) -> Expr:
        if isinstance(old, Var) and old in inline:
            return memo[id(inline[old].value)]  # the value is rewritten before any use
        if isinstance(old, Let) and old.var in inline:
            return new.body  # type: ignore[attr-defined]
        return new

    return rewrite(expr, visit, memo)


class ToGraphNormalForm(FunctionPass):
    """Turn let bindings into shared dataflow nodes wherever that keeps meaning."""

    name = "ToGraphNormalForm"
    opt_level = 1

    def transform_function(self, fn: Function, mod: IRModule, ctx: PassContext) -> Function:
        """Convert one function."""
        out = to_graph_normal_form(fn)
        assert isinstance(out, Function)
        return out


__all__ = ["ToGraphNormalForm", "to_graph_normal_form"]
