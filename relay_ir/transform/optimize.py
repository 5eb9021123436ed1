"""The standard optimisation sequence, one for every caller: `standard_sequence(purpose)`.

    InferType -> SimplifyInference -> Inline -> ToGraphNormalForm -> DeadCodeElimination
    -> EliminateCommonSubexpr (opt 3) -> FoldConstant (opt 2) -> FoldScaleAxis (opt 2)
    -> SimplifyExpr -> FoldConstant -> FuseOps (fusion from opt 1; at opt 0 each op gets
    its own function)

FoldScaleAxis comes after the FoldConstant that turns a batch norm's scale (SimplifyInference's
`gamma / sqrt(var + eps)`) into one Constant, and before FuseOps, so the multiply it folds
into a conv2d / dense weight never reaches a kernel's epilogue. It runs at opt_level 2, the
default PassContext's, so relay_ir.build and autotune's task extraction (which must see
build's groups) both run it by default; the tuning tasks do not change, as a task is keyed
by its anchor's shapes and attrs, not by its weight's values.

`relay_ir.transform.optimize`, `relay_ir.build` (and autotune's task extraction, which
must see build's groups) all run this sequence under the current PassContext: a pass runs
when its opt_level is at most the context's, or `required_pass` names it, and not when
`disabled_pass` names it. The purpose says which passes the caller cannot do without; they
run under every context and disabling one is an error:

- "optimize" (transform.optimize): InferType. `disabled_pass=["FuseOps"]` stops before
  fusion.
- "build" (a backend that compiles every Primitive group into a kernel and plans a
  dataflow graph: relay_ir.build, and the VM to come): InferType, ToGraphNormalForm,
  FuseOps.

    >>> [p.name for p in standard_sequence().passes][:2]
    ['InferType', 'SimplifyInference']
    >>> standard_sequence("build").required
    ('InferType', 'ToGraphNormalForm', 'FuseOps')
"""

from __future__ import annotations

from collections.abc import Iterable

from relay_ir.module import IRModule
from relay_ir.transform.dead_code import DeadCodeElimination
from relay_ir.transform.eliminate_common_subexpr import EliminateCommonSubexpr
from relay_ir.transform.fold_constant import FoldConstant
from relay_ir.transform.fold_scale_axis import FoldScaleAxis
from relay_ir.transform.fuse_ops import DEFAULT_MAX_DEPTH, FuseOps
from relay_ir.transform.graph_normal_form import ToGraphNormalForm
from relay_ir.transform.infer_type import InferType
from relay_ir.transform.inline import Inline
from relay_ir.transform.pass_manager import PassContext, Sequential
from relay_ir.transform.simplify_expr import SimplifyExpr
from relay_ir.transform.simplify_inference import SimplifyInference
from tessel_errors import RelayError

# The passes each purpose's result cannot do without (see the module docstring).
REQUIRED = {
    "optimize": ("InferType",),
    "build": ("InferType", "ToGraphNormalForm", "FuseOps"),
}


def standard_sequence(purpose: str = "optimize", max_fuse_depth: int = DEFAULT_MAX_DEPTH
                      ) -> Sequential:
    """The standard passes as one Sequential named `purpose` ("optimize" or "build").

    >>> standard_sequence("build").name
    'build'
    """
    if purpose not in REQUIRED:
        raise RelayError(f"standard_sequence purpose must be one of {', '.join(REQUIRED)}, "
                         f"got {purpose!r}")
    passes = [
        InferType(),
        SimplifyInference(),
        Inline(),
        ToGraphNormalForm(),
        DeadCodeElimination(),
        EliminateCommonSubexpr(),
        FoldConstant(),
        FoldScaleAxis(),
        SimplifyExpr(),
        FoldConstant(),
        FuseOps(fuse_opt_level=None, max_depth=max_fuse_depth),
    ]
    return Sequential(passes, name=purpose, required=REQUIRED[purpose])


def optimize(
    mod: IRModule,
    opt_level: int | None = None,
    required_pass: Iterable[str] = (),
    disabled_pass: Iterable[str] = (),
    verify: bool = False,
    max_fuse_depth: int = DEFAULT_MAX_DEPTH,
) -> IRModule:
    """Run the standard sequence; `opt_level=None` uses the current PassContext as is.

    Each other argument, when given, replaces the current context's for this call.

    >>> from relay_ir.expr import Var, Function
    >>> from relay_ir.ty import TensorType
    >>> x = Var("x", TensorType((2,)))
    >>> len(optimize(IRModule.from_expr(Function((x,), x)), opt_level=2).functions)
    1
    """
    seq = standard_sequence("optimize", max_fuse_depth)
    if opt_level is None and not required_pass and not disabled_pass and not verify:
        return seq(mod)
    outer = PassContext.current()
    level = outer.opt_level if opt_level is None else opt_level
    with PassContext(level, tuple(required_pass) or outer.required_pass,
                     tuple(disabled_pass) or outer.disabled_pass, verify or outer.verify,
                     outer.timing) as ctx:
        out = seq(mod)
    outer.timings.extend(ctx.timings)
    return out


__all__ = ["optimize", "standard_sequence"]
