"""FoldConstant: evaluate at compile time whatever depends only on constants.

Bottom-up: an op call whose arguments are all constants is evaluated through the op's
numpy reference (the interpreter's `evaluate_op`) and replaced by a Constant (a Tuple of
Constants for tuple-valued ops); a projection of a literal tuple becomes the field; an
`if` on a constant condition becomes the taken branch; a `let` binding a constant is
inlined; `shape_of` of a tensor whose type has no `?` dim becomes its shape. A call
whose evaluation fails (e.g. a run-time shape check that would fire) is left alone, so
the program still reports the error when run. Results larger than `max_elements` are not
folded (they would bloat the module).

    >>> import numpy as np
    >>> from relay_ir.expr import Constant, Tuple, TupleGetItem
    >>> fold_constant(TupleGetItem(Tuple((Constant(np.float32(1)),)), 0)).data
    array(1., dtype=float32)
"""

from __future__ import annotations

import math

import numpy as np

from relay_ir.expr import Call, Constant, Expr, Function, If, Let, Tuple, TupleGetItem, Var
from relay_ir.interpreter import evaluate_op
from relay_ir.module import IRModule
from relay_ir.op.registry import Op
from relay_ir.op.shape_of import shape_of_op, static_shape_of
from relay_ir.transform.analysis import post_order
from relay_ir.transform.pass_manager import FunctionPass, PassContext
from relay_ir.transform.rewrite import rewrite
from relay_ir.ty import TensorType
from tessel_errors import TesselError

DEFAULT_MAX_ELEMENTS = 1 << 20
# folding would drop what the call is for: its result type (the `?` dims it introduces)
KEPT_OPS = {"runtime.relax_shape"}


def _as_expr(value: object) -> Expr | None:
    if isinstance(value, np.ndarray):
        return Constant(value)
    if isinstance(value, tuple):
        fields = [_as_expr(v) for v in value]
        if any(f is None for f in fields):
            return None
        return Tuple(tuple(fields))  # type: ignore[arg-type]
    return None


def _size(value: object) -> int:
    if isinstance(value, np.ndarray):
        return int(value.size)
    if isinstance(value, tuple):
        return sum(_size(v) for v in value)
    return 0


def _is_const(e: Expr) -> bool:
    return isinstance(e, Constant) or (
        isinstance(e, Tuple) and all(_is_const(f) for f in e.fields)
    )


def _value(e: Expr) -> object:
    if isinstance(e, Constant):
        return e.data
    assert isinstance(e, Tuple)
    return tuple(_value(f) for f in e.fields)


def fold_constant(expr: Expr, max_elements: int = DEFAULT_MAX_ELEMENTS) -> Expr:
    """`expr` with its constant sub-computations evaluated."""
    const_lets: dict[Var, Let] = {}
    memo: dict[int, Expr] = {}
    lets = {n.var: n for n in post_order(expr) if isinstance(n, Let)}

    def visit(old: Expr, new: Expr) -> Expr:
        if isinstance(old, Var) and old in lets:
            value = memo.get(id(lets[old].value))
            if value is not None and _is_const(value):
                const_lets[old] = lets[old]
                return value
            return new
        if isinstance(new, Let) and new.var in const_lets:
            return new.body
        if isinstance(new, Let) and _is_const(new.value):
            return new  # constant but unused in the body: DeadCodeElimination's job
        if isinstance(new, TupleGetItem) and isinstance(new.tuple_value, Tuple):
            return new.tuple_value.fields[new.index]
        if isinstance(new, If) and isinstance(new.cond, Constant) and new.cond.data.size == 1:
            return new.true_branch if bool(new.cond.data.reshape(())) else new.false_branch
        if isinstance(new, Call) and isinstance(new.op, Op) and new.op is shape_of_op:
            shape = static_shape_of(new, old.args[0].checked_type)  # type: ignore[union-attr]
            return new if shape is None else Constant(shape)
        if isinstance(new, Call) and isinstance(new.op, Op) and new.op.name not in KEPT_OPS:
            if all(_is_const(a) for a in new.args) and not _too_big(old, max_elements):
                return _fold_call(new, max_elements)
        return new

    return rewrite(expr, visit, memo)


def _too_big(call: Expr, max_elements: int) -> bool:
    """Whether the call's inferred type says its value is past the limit: checked before
    evaluating, so `full(0.5f, shape=[1073741826, 4])` is not computed to be thrown away."""
    t = call.checked_type
    if not isinstance(t, TensorType) or not all(isinstance(d, int) for d in t.shape):
        return False
    return math.prod(t.shape) > max_elements


def _fold_call(call: Call, max_elements: int) -> Expr:
    try:
        value = evaluate_op(call, [_value(a) for a in call.args])
    except TesselError:
        return call  # leave it: the program reports the error when it runs
    if _size(value) > max_elements:
        return call
    folded = _as_expr(value)
    return folded if folded is not None else call


class FoldConstant(FunctionPass):
    """Evaluate constant sub-expressions of every function."""

    name = "FoldConstant"
    opt_level = 2

    def __init__(self, max_elements: int = DEFAULT_MAX_ELEMENTS) -> None:
        super().__init__()
        self.max_elements = max_elements

    def transform_function(self, fn: Function, mod: IRModule, ctx: PassContext) -> Function:
        """Fold one function."""
        out = fold_constant(fn, self.max_elements)
        assert isinstance(out, Function)
        return out


__all__ = ["FoldConstant", "fold_constant"]
