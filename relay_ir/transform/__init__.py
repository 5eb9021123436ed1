"""relay_ir.transform: the pass manager and the passes (one file per pass).

    >>> import relay_ir.transform as T
    >>> T.FuseOps().name, T.PassContext(opt_level=3).opt_level
    ('FuseOps', 3)
"""

from relay_ir.transform.a_normal_form import ToANormalForm, to_a_normal_form
from relay_ir.transform.analysis import check_well_formed, free_vars, post_order
from relay_ir.transform.dead_code import DeadCodeElimination, eliminate_dead_code
from relay_ir.transform.eliminate_common_subexpr import (
    EliminateCommonSubexpr,
    eliminate_common_subexpr,
)
from relay_ir.transform.fold_constant import FoldConstant, fold_constant
from relay_ir.transform.fold_scale_axis import FoldScaleAxis, fold_scale_axis
from relay_ir.transform.fuse_ops import FuseOps, fuse_expr
from relay_ir.transform.graph_normal_form import ToGraphNormalForm, to_graph_normal_form
from relay_ir.transform.infer_type import InferType
from relay_ir.transform.inline import Inline
from relay_ir.transform.optimize import optimize, standard_sequence
from relay_ir.transform.pass_manager import (
    FunctionPass,
    ModulePass,
    Pass,
    PassContext,
    Sequential,
    function_pass,
    module_pass,
    verify_module,
)
from relay_ir.transform.simplify_expr import SimplifyExpr, simplify_expr
from relay_ir.transform.simplify_inference import SimplifyInference, simplify_inference

__all__ = [
    "DeadCodeElimination",
    "EliminateCommonSubexpr",
    "FoldConstant",
    "FoldScaleAxis",
    "FunctionPass",
    "FuseOps",
    "InferType",
    "Inline",
    "ModulePass",
    "Pass",
    "PassContext",
    "Sequential",
    "SimplifyExpr",
    "SimplifyInference",
    "ToANormalForm",
    "ToGraphNormalForm",
    "check_well_formed",
    "eliminate_common_subexpr",
    "eliminate_dead_code",
    "fold_constant",
    "fold_scale_axis",
    "free_vars",
    "function_pass",
    "fuse_expr",
    "module_pass",
    "optimize",
    "post_order",
    "simplify_expr",
    "simplify_inference",
    "standard_sequence",
    "to_a_normal_form",
    "to_graph_normal_form",
    "verify_module",
]
