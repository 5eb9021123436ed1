"""tensor_expr: scalar expressions, tensors (placeholder / compute / reduce) and the op library.

    >>> import tensor_expr as te
    >>> A = te.placeholder((16, 16), "float32", name="A")
    >>> B = te.compute((16, 16), lambda i, j: A[j, i] + 1.0, name="B")
    >>> B.op.axis[0].var.name
    'i'
"""

from tensor_expr import arith
from tensor_expr.arith import simplify
from tensor_expr.dtype import DTYPES, promote
from tensor_expr.evaluate import evaluate
from tensor_expr.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Call,
    Cast,
    CmpOp,
    CommReducer,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    IterType,
    IterVar,
    Let,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    ProducerLoad,
    Range,
    Reduce,
    Select,
    StringImm,
    Sub,
    Var,
    all,
    any,
    as_expr,
    cast,
    const,
    floordiv,
    floormod,
    if_then_else,
    logical_and,
    logical_not,
    logical_or,
    max_value,
    min_value,
    select,
    var,
)
from tensor_expr.expr import max as _emax
from tensor_expr.expr import min as _emin
from tensor_expr.intrin import (
    abs,
    ceil,
    cos,
    erf,
    exp,
    exp2,
    floor,
    fma,
    isnan,
    log,
    log2,
    log10,
    pow,
    round,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    tanh,
    trunc,
)
from tensor_expr.printer import expr_to_str
from tensor_expr.tensor import (
    ComputeOp,
    Operation,
    PlaceholderOp,
    Tensor,
    argmax,
    argmin,
    comm_reducer,
    compute,
    placeholder,
    prod,
    reduce_axis,
    sum,
    thread_axis,
)
from tensor_expr.tensor import max as _rmax
from tensor_expr.tensor import min as _rmin
from tensor_expr.visitor import (
    ExprMutator,
    collect_tensor_reads,
    collect_vars,
    post_order_visit,
    substitute,
)


def max(*args, **kwargs):  # noqa: A001
    """`te.max(a, b)` is the elementwise maximum; `te.max(expr, axis=k)` a max-reduction."""
    if "axis" in kwargs or (len(args) >= 2 and _is_axis(args[1])):
        return _rmax(*args, **kwargs)
    return _emax(*args)


def min(*args, **kwargs):  # noqa: A001
    """`te.min(a, b)` is the elementwise minimum; `te.min(expr, axis=k)` a min-reduction."""
    if "axis" in kwargs or (len(args) >= 2 and _is_axis(args[1])):
        return _rmin(*args, **kwargs)
    return _emin(*args)


def _is_axis(v: object) -> bool:
    if isinstance(v, (list, tuple)):
        return bool(v) and all(isinstance(x, IterVar) and x.iter_type is IterType.REDUCE for x in v)
    return isinstance(v, IterVar) and v.iter_type is IterType.REDUCE
