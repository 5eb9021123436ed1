# ruff: noqa: F401, I001  (re-exports, in dependency order: syntax, ops, passes)
"""relay_ir: Tessel's functional IR with gradual shape types.

    >>> import relay_ir
    >>> x = relay_ir.Var("x", relay_ir.TensorType((1, "?"), "float32"))
    >>> x.type_annotation.shape
    (1, ?)

Parsing, type checking and interpreting need only relay_ir itself; the compiler half
(`build`, `load_compiled`, `CompiledModel`, `MemoryPlan`, `ProfileTable`, `strategy`,
`vm`, `quantize`)
pulls in lowering, llvmlite, islpy and the tuning database, so those names load on first
use (module `__getattr__` below) and `import relay_ir; relay_ir.parse(text)` stays light.
"""

from typing import Any

# syntax: types, expressions, modules, text
from relay_ir.span import Span
from relay_ir.ty import (
    ANY,
    AnyDim,
    Dim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    ShapeVar,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    TypeVar,
    is_dynamic,
    scalar_type,
)
from relay_ir.expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
    pattern_vars,
)
from relay_ir.module import IRModule
from relay_ir.visitor import ExprFunctor, ExprMutator, ExprVisitor, free_vars, post_order
from relay_ir.structural import assert_structural_equal, structural_equal, structural_hash
from relay_ir.parser import parse, parse_expr, parse_type
from relay_ir.printer import astext
from relay_ir.builder import (
    ScopeBuilder,
    const,
    func,
    function,
    global_var,
    if_,
    let,
    match,
    pctor,
    ptuple,
    pvar,
    pwild,
    ref,
    ref_read,
    ref_write,
    tensor_type,
    tuple_,
    tuple_get_item,
    var,
)

# ops and type inference
from relay_ir import op
from relay_ir import nn
from relay_ir.op.tensor import (
    abs,
    add,
    cast,
    ceil,
    clip,
    copy,
    divide,
    equal,
    erf,
    exp,
    floor,
    full,
    full_like,
    greater,
    greater_equal,
    left_shift,
    less,
    less_equal,
    log,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    ones,
    ones_like,
    power,
    right_shift,
    round,
    rsqrt,
    sigmoid,
    sqrt,
    subtract,
    tanh,
    where,
    zeros,
    zeros_like,
)
from relay_ir.op.nn import matmul
from relay_ir.op.reduce import argmax, argmin, max, mean, min, prod, sum
from relay_ir.op.transform import (
    concatenate,
    expand_dims,
    layout_transform,
    reshape,
    split,
    squeeze,
    strided_slice,
    take,
    transpose,
)
from relay_ir.op.runtime import check_shape
from relay_ir.op.shape_of import shape_of
from relay_ir.op.dyn_reshape import dyn_reshape
from relay_ir.op.dyn_strided_slice import dyn_strided_slice
from relay_ir.op.registry import get_op
from relay_ir.typing import TypeInferenceReport, infer_expr_type, infer_type

# the interpreter, passes and the ONNX frontend (onnx itself loads at the first from_onnx)
from relay_ir.interpreter import Closure, ConstructorValue, Interpreter, RefValue, interpret
from relay_ir import transform
from relay_ir import frontend

# the compiler half, loaded on first use: name -> (module, attribute or None for the module)
_LAZY = {
    "build": ("relay_ir.backend", "build"),
    "load_compiled": ("relay_ir.backend", "load"),
    "CompiledModel": ("relay_ir.backend", "CompiledModel"),
    "MemoryPlan": ("relay_ir.backend", "MemoryPlan"),
    "ProfileTable": ("relay_ir.backend", "ProfileTable"),
    "strategy": ("relay_ir.strategy", None),
    "vm": ("relay_ir.vm", None),
    "quantize": ("relay_ir.quantize", None),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'relay_ir' has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
