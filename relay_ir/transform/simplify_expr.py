"""SimplifyExpr: algebraic and shape simplifications that need no evaluation.

Rules (each checked against the types, so a rewrite never changes a result's shape or
dtype):
- `x * 1`, `1 * x`, `x + 0`, `0 + x`, `x - 0`, `x / 1` -> `x` (the constant all ones /
  zeros, and the result of the same type as `x`);
- `(x + c1) + c2` -> `x + (c1 + c2)` and `(x * c1) * c2` -> `x * (c1 * c2)`, the
  constants in either operand position, when both are Constants of x's dtype whose
  broadcast does not enlarge x (a conv's own bias followed by a batch norm's shift, once
  FoldScaleAxis has moved the scale into the weight, is one add; TVM's
  SimplifyAdjacentMultiplyOrAdd). Floats are reassociated: the result may differ in the
  last bit, as with TVM;
- chains of reshape / squeeze / expand_dims (they keep the row-major element order):
  collapsed into one `reshape` to the final static shape, or into `x` when that shape is
  x's own; with `?` dims, a reshape of a reshape into one when the outer has no 0;
- `transpose(transpose(x, p), q)` -> one transpose with the composed permutation, and
  an identity transpose -> `x`;
- `cast(x, t)` where x already has dtype t -> `x`;
- `dyn.reshape(x, s)` where every element of s is known when compiling (a number, or
  `?` dim i of x itself at position i, which the static reshape's 0 copies;
  relay_ir.transform.shape_value) -> the static `reshape`, when its type relation accepts
  the shape (else the call stays, and fails when run naming dyn.reshape). So a model
  whose shapes are all static needs no dyn.reshape (relay_ir.build runs it, also at
  opt_level 0), and the flatten `reshape(x, [shape_of(x)[0], -1])` keeps its static
  dims;
- `dyn.strided_slice(x, b, e, s)` where b, e and s are numbers when compiling (constants
  after folding, or shape_value's numbers) -> the static `strided_slice`, the bounds
  resolved as ONNX resolves them (relay_ir.op.dyn_strided_slice.static_bounds: so
  INT64_MAX stays within what a kernel indexes), when its type relation accepts them (a
  stride of 0, or a backwards slice of a `?` dim from a begin below -1, stays);
- `runtime.check_shape(r, shape)` where r is such a static reshape whose type has every
  dim the check wants (type inference checked a `?` of the dyn.reshape that the static
  relation now computes) -> `r`. Only there: the type of a value a check guards is the
  refinement the check establishes, not a proof.

The pass runs type inference first when types are missing.

    >>> SimplifyExpr().name
    'SimplifyExpr'
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from relay_ir.expr import Call, Constant, Expr, Function
from relay_ir.module import IRModule
from relay_ir.op._common import NotReady, RelationError
from relay_ir.op.dyn_strided_slice import static_bounds
from relay_ir.op.registry import TYPE_RELATIONS, get_op
from relay_ir.transform.analysis import op_name
from relay_ir.transform.infer_type import ensure_typed
from relay_ir.transform.pass_manager import FunctionPass, PassContext
from relay_ir.transform.rewrite import op_call, rewrite
from relay_ir.transform.shape_value import shape_value, static_reshape
from relay_ir.ty import TensorType

_SHAPE_ONLY = {"reshape", "squeeze", "expand_dims"}


def _all(e: Expr, value: float) -> bool:
    return isinstance(e, Constant) and e.data.size > 0 and bool(np.all(e.data == value))


def _static(t: object) -> TensorType | None:
    if isinstance(t, TensorType) and all(isinstance(d, int) for d in t.shape):
        return t
    return None


def _identity_arith(old: Call, new: Call) -> Expr | None:
    """`x op c` -> x when c is the op's identity element and types agree."""
    name = old.op.name
    if len(new.args) != 2:
        return None
    candidates: list[tuple[int, float]] = []  # (index of x, identity the other must be)
    if name == "multiply":
        candidates = [(0, 1.0), (1, 1.0)]
    elif name == "add":
        candidates = [(0, 0.0), (1, 0.0)]
    elif name == "subtract":
        candidates = [(0, 0.0)]
    elif name == "divide":
        candidates = [(0, 1.0)]
    for xi, identity in candidates:
        other = new.args[1 - xi]
        if _all(other, identity) and old.args[xi].checked_type == old.checked_type and (
            old.checked_type is not None
        ):
            return new.args[xi]
    return None


def _adjacent_constants(old: Call, new: Call) -> Expr | None:
    """`(x op c1) op c2` -> `x op (c1 op c2)` for op add or multiply (module docstring)."""
    name = old.op.name
    t = _static(old.checked_type)
    if t is None or len(new.args) != 2:
        return None
    for k in (0, 1):  # the inner op is args[k], the outer constant the other
        inner_old, inner_new, c2 = old.args[k], new.args[k], new.args[1 - k]
        if op_name(inner_new) != name or not isinstance(c2, Constant) or \
                op_name(inner_old) != name or inner_old.checked_type != t:
            continue
        for j in (0, 1):  # the value is inner args[j], the inner constant the other
            x, c1 = inner_new.args[j], inner_new.args[1 - j]  # type: ignore[attr-defined]
            if not isinstance(c1, Constant) or \
                    inner_old.args[j].checked_type != t:  # type: ignore[attr-defined]
                continue
            dtype = np.dtype(t.dtype)
            if c1.data.dtype != dtype or c2.data.dtype != dtype:
                continue
            try:
                shape = np.broadcast_shapes(c1.data.shape, c2.data.shape, t.shape)
            except ValueError:
                continue
            if shape != tuple(t.shape):  # the constants would enlarge x
                continue
            ufunc = np.add if name == "add" else np.multiply
            c = Constant(np.asarray(ufunc(c1.data, c2.data), dtype=dtype))
            return op_call(name, [x, c])
    return None


def _perm(attrs: object, ndim: int) -> list[int]:
    axes = getattr(attrs, "axes", None)
    if axes is None:
        return list(reversed(range(ndim)))
    return [a % ndim for a in axes]


def simplify_expr(expr: Expr) -> Expr:
    """`expr` with the rules above applied bottom-up; needs checked types."""
    # Rebuilt nodes lose their checked_type, but each keeps the type of the node it
    # replaces: remember it, so rules can look at the types of rewritten children.
    types: dict[int, object] = {}
    # the static reshapes made here: their type is their relation's on their input's, a
    # fact, where a checked_type may be a refinement a check still has to establish
    made: set[int] = set()

    def type_of(e: Expr) -> object:
        return types.get(id(e), e.checked_type)

    def visit(old: Expr, new: Expr) -> Expr:
        out = rule(old, new)
        # a rule may know a more precise type than the node it replaces (a static reshape)
        t = out.checked_type if out.checked_type is not None else old.checked_type
        if t is not None:
            types[id(out)] = t
        return out

    def rule(old: Expr, new: Expr) -> Expr:
        name = op_name(new)
        if name is None:
            return new
        assert isinstance(old, Call) and isinstance(new, Call)
        if name in ("multiply", "add", "subtract", "divide"):
            out = _identity_arith(old, new)
            if out is None and name in ("add", "multiply"):
                out = _adjacent_constants(old, new)
            return out or new
        if name == "cast":
            src = old.args[0].checked_type
            if isinstance(src, TensorType) and src == old.checked_type:
                return new.args[0]
            return new
        if name in _SHAPE_ONLY:
            return _simplify_shape(old, new, type_of)
        if name == "transpose":
            return _simplify_transpose(old, new, type_of)
        if name == "dyn.reshape":
            out = _static_reshape(old, new)
            if out is not new:
                made.add(id(out))
            return out
        if name == "dyn.strided_slice":
            return _static_slice(old, new, type_of)
        if name == "runtime.check_shape" and id(new.args[0]) in made and \
                _proven(type_of(new.args[0]), new.attrs.shape):
            return new.args[0]
        return new

    return rewrite(expr, visit)


def _simplify_shape(old: Call, new: Call, type_of: Callable[[Expr], object]) -> Expr:
    out_t = _static(old.checked_type)
    if out_t is None:
        return _merge_reshapes(new)
    inner = new.args[0]
    inner_t = _static(old.args[0].checked_type)
    # Look through a chain of shape-only ops to its source (in the rewritten graph).
    source, source_t = inner, inner_t
    while op_name(source) in _SHAPE_ONLY:
        arg = source.args[0]  # type: ignore[attr-defined]
        arg_t = _static(type_of(arg))
        if arg_t is None:
            break
        source, source_t = arg, arg_t
    if source_t is not None and source_t.shape == out_t.shape:
        return source
    if source is not inner:
        return op_call("reshape", [source], newshape=tuple(out_t.shape))
    return new


def _merge_reshapes(new: Call) -> Expr:
    """reshape(reshape(x, a), b) -> reshape(x, b) with `?` dims, when b has no 0 (which
    would copy a dim of the inner result): a -1 is inferred from the element count, which
    the inner reshape keeps."""
    inner = new.args[0]
    if op_name(new) != "reshape" or 0 in new.attrs.newshape or op_name(inner) != "reshape":
        return new
    return op_call("reshape", [inner.args[0]], newshape=new.attrs.newshape)  # type: ignore[attr-defined]


def _simplify_transpose(old: Call, new: Call, type_of: Callable[[Expr], object]) -> Expr:
    t = old.args[0].checked_type
    if not isinstance(t, TensorType):
        return new
    ndim = t.ndim
    outer = _perm(new.attrs, ndim)
    x = new.args[0]
    if op_name(x) == "transpose" and isinstance(type_of(x.args[0]), TensorType):  # type: ignore[attr-defined]
        inner = _perm(x.attrs, ndim)  # type: ignore[attr-defined]
        composed = [inner[i] for i in outer]
        x = x.args[0]  # type: ignore[attr-defined]
        if composed == list(range(ndim)):
            return x
        return op_call("transpose", [x], axes=tuple(composed))
    if outer == list(range(ndim)):
        return x
    return new


def _static_reshape(old: Call, new: Call) -> Expr:
    """dyn.reshape -> reshape where the new shape is known (see the module docstring)."""
    known = static_reshape(old.args[0], old.args[1], old.attrs.allowzero)
    if known is None:
        return new
    newshape, t = known
    return Call(get_op("reshape"), (new.args[0],), get_op("reshape").make_attrs(
        {"newshape": newshape}), checked_type=t)


def _static_slice(old: Call, new: Call, type_of: Callable[[Expr], object]) -> Expr:
    """dyn.strided_slice -> strided_slice where begin, end and strides are numbers."""
    t = type_of(new.args[0])
    values = [shape_value(a, type_of) for a in new.args[1:]]
    if not isinstance(t, TensorType) or any(
            v is None or not v.known() or v.numbers.ndim != 1 for v in values):
        return new
    begin, end, strides = ([int(n) for n in v.numbers] for v in values)  # type: ignore[union-attr]
    axes = old.attrs.axes
    dims = range(len(begin)) if axes is None else axes
    if not len(begin) == len(end) == len(strides) == len(dims) or \
            any(not -t.ndim <= a < t.ndim for a in dims) or 0 in strides:
        return new  # (fails when run, naming the op)
    bounds = [static_bounds(b, e, s, t.shape[a]) for b, e, s, a in
              zip(begin, end, strides, dims)]
    if any(b is None for b in bounds):
        return new
    op = get_op("strided_slice")
    try:
        attrs = op.make_attrs({"begin": tuple(b[0] for b in bounds),  # type: ignore[index]
                               "end": tuple(b[1] for b in bounds),  # type: ignore[index]
                               "strides": tuple(strides), "axes": axes})
        out_t = TYPE_RELATIONS[op]([t], attrs)
    except (RelationError, NotReady):
        return new
    return Call(op, (new.args[0],), attrs, checked_type=getattr(out_t, "ret", out_t))


def _proven(t: object, shape: tuple[int, ...]) -> bool:
    """Whether a value of type `t` passes check_shape(shape) whatever it holds."""
    return isinstance(t, TensorType) and t.ndim == len(shape) and all(
        w == -1 or d == w for d, w in zip(t.shape, shape))


class SimplifyExpr(FunctionPass):
    """Apply the algebraic and shape simplifications to every function."""

    name = "SimplifyExpr"
    opt_level = 0

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Type the module if needed, then simplify every function."""
        return super().transform_module(ensure_typed(mod), ctx)

    def transform_function(self, fn: Function, mod: IRModule, ctx: PassContext) -> Function:
        """Simplify one function."""
        out = simplify_expr(fn)
        assert isinstance(out, Function)
        return out


__all__ = ["SimplifyExpr", "simplify_expr"]
