"""InferType: fill in `checked_type` on every expression.

The pass is a thin adapter: `relay_ir.typing.infer_type` does the work (unification,
gradual shapes, run-time shape checks where a shape is only known at run time). Other
passes call `ensure_typed(mod)` when they need types and the module may lack them.

    >>> from relay_ir.transform import InferType
    >>> InferType().name
    'InferType'
"""

from __future__ import annotations

from relay_ir.expr import Expr
from relay_ir.module import IRModule
from relay_ir.transform.pass_manager import Pass, PassContext


class InferType(Pass):
    """Type-check the module; every node gets its checked_type (raises RelayTypeError)."""

    name = "InferType"
    opt_level = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Run type inference over every global function."""
        from relay_ir.typing import infer_type

        return infer_type(mod)


def is_typed(mod: IRModule) -> bool:
    """Whether every global function body already carries a checked_type."""
    return all(
        fn.checked_type is not None and fn.body.checked_type is not None
        for fn in mod.functions.values()
    )


def ensure_typed(mod: IRModule) -> IRModule:
    """`mod` itself when already typed, else `infer_type(mod)`."""
    if is_typed(mod):
        return mod
    from relay_ir.typing import infer_type

    return infer_type(mod)


def type_of(expr: Expr) -> object:
    """The checked type of a typed expression (None when inference has not run)."""
    return expr.checked_type


__all__ = ["InferType", "ensure_typed", "is_typed", "type_of"]
