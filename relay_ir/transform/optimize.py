"""The standard optimisation sequence, as `relay_ir.transform.optimize(mod, opt_level=2)`.

    InferType -> SimplifyInference -> Inline -> ToGraphNormalForm -> DeadCodeElimination
    -> EliminateCommonSubexpr (opt 3) -> FoldConstant (opt 2) -> SimplifyExpr
    -> FoldConstant -> FuseOps (fusion from opt 1; at opt 0 each op gets its own function)

Each pass runs only when the PassContext enables it (its opt_level, required_pass,
disabled_pass), so `optimize(mod, opt_level=0)` still types the module and puts each op
in a Primitive function, and `disabled_pass=["FuseOps"]` stops before fusion.

    >>> [p.name for p in standard_passes()][:2]
    ['InferType', 'SimplifyInference']
"""

from __future__ import annotations

from collections.abc import Iterable

from relay_ir.module import IRModule
from relay_ir.transform.dead_code import DeadCodeElimination
from relay_ir.transform.eliminate_common_subexpr import EliminateCommonSubexpr
from relay_ir.transform.fold_constant import FoldConstant
from relay_ir.transform.fuse_ops import DEFAULT_MAX_DEPTH, FuseOps
from relay_ir.transform.graph_normal_form import ToGraphNormalForm
from relay_ir.transform.infer_type import InferType
from relay_ir.transform.inline import Inline
from relay_ir.transform.pass_manager import Pass, PassContext, Sequential
from relay_ir.transform.simplify_expr import SimplifyExpr
from relay_ir.transform.simplify_inference import SimplifyInference


def standard_passes(max_fuse_depth: int = DEFAULT_MAX_DEPTH) -> list[Pass]:
    """The passes of the standard sequence, in order."""
    return [
        InferType(),
        SimplifyInference(),
        Inline(),
        ToGraphNormalForm(),
        DeadCodeElimination(),
        EliminateCommonSubexpr(),
        FoldConstant(),
        SimplifyExpr(),
        FoldConstant(),
        FuseOps(fuse_opt_level=None, max_depth=max_fuse_depth),
    ]


def optimize(
    mod: IRModule,
    opt_level: int | None = None,
    required_pass: Iterable[str] = (),
    disabled_pass: Iterable[str] = (),
    verify: bool = False,
    max_fuse_depth: int = DEFAULT_MAX_DEPTH,
) -> IRModule:
    """Run the standard sequence; `opt_level=None` uses the current PassContext as is.

    >>> from relay_ir.expr import Var, Function
    >>> from relay_ir.ty import TensorType
    >>> x = Var("x", TensorType((2,)))
    >>> len(optimize(IRModule.from_expr(Function((x,), x)), opt_level=2).functions)
    1
    """
    seq = Sequential(standard_passes(max_fuse_depth), name="optimize")
    if opt_level is None and not required_pass and not disabled_pass and not verify:
        return seq(mod)
    outer = PassContext.current()
    level = outer.opt_level if opt_level is None else opt_level
    with PassContext(level, required_pass, disabled_pass, verify or outer.verify,
                     outer.timing) as ctx:
        out = seq(mod)
    outer.timings.extend(ctx.timings)
    return out


__all__ = ["optimize", "standard_passes"]
