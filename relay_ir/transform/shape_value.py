"""What is known at compile time of a small integer vector computed from shapes (the new
shape of a dyn.reshape), element by element: a number, or "dim `axis` of tensor `x`"
where that dim is `?`.

The vector is evaluated over the expression graph: constants, `shape_of` (a static dim is
a number, a `?` dim a symbol), casts between integer dtypes, the ops that only rearrange
elements (take with constant indices, strided_slice, concatenate, reshape, squeeze,
expand_dims: run through their numpy reference on the numbers and, alongside, on the
symbols' codes), and any other op whose integer arguments are all numbers. Anything else
(a parameter, a value read from a tensor) leaves the vector unknown. This is what
SimplifyExpr needs to turn `dyn.reshape(x, concatenate((take(shape_of(x), 0), [-1])))`,
the flatten of exported ONNX models, into the static `reshape(x, (0, -1))`.

    >>> import relay_ir
    >>> from relay_ir.transform import InferType
    >>> mod = InferType()(relay_ir.parse(
    ...     "def @main(%x: Tensor[(?, 3), float32]) { shape_of(%x) }"))
    >>> v = shape_value(mod["main"].body)
    >>> v.known(), [d if isinstance(d, int) else f"dim {d[1]} of %{d[0].name_hint}"
    ...             for d in v.elements()]
    (False, ['dim 0 of %x', 3])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.expr import Call, Constant, Expr, Tuple
from relay_ir.interpreter import evaluate_op
from relay_ir.op._common import NotReady, RelationError
from relay_ir.op.registry import TYPE_RELATIONS, Op, get_op
from relay_ir.op.shape_of import shape_of_op
from relay_ir.ty import TensorType, Type
from tessel_errors import TesselError

# a shape computation's vectors are short; a larger integer tensor is data, not a shape
MAX_ELEMENTS = 64
_REARRANGING = frozenset({"take", "strided_slice", "concatenate", "reshape", "squeeze",
                          "expand_dims"})


@dataclass(frozen=True)
class ShapeValue:
    """An integer array whose element k is `numbers[k]` where `codes[k]` is -1, else dim
    `dims[codes[k]][1]` of the tensor `dims[codes[k]][0]`."""

    numbers: np.ndarray
    codes: np.ndarray
    dims: tuple[tuple[Expr, int], ...]

    def known(self) -> bool:
        """Whether every element is a number."""
        return bool(np.all(self.codes < 0))

    def elements(self) -> list[int | tuple[Expr, int]]:
        """The flattened array's elements: a number, or (tensor, axis) for a `?` dim."""
        return [int(n) if c < 0 else self.dims[int(c)]
                for n, c in zip(self.numbers.reshape(-1), self.codes.reshape(-1))]


def _checked_type(e: Expr) -> Any:
    return e.checked_type


class _Evaluator:
    def __init__(self, type_of: Callable[[Expr], Any]) -> None:
        self.type_of = type_of
        self.dims: list[tuple[Expr, int]] = []
        self.memo: dict[int, Any] = {}

    def small_int(self, e: Expr) -> bool:
        t = self.type_of(e)
        return isinstance(t, TensorType) and np.dtype(t.dtype).kind in "iu" and \
            all(isinstance(d, int) for d in t.shape) and int(np.prod(t.shape)) <= MAX_ELEMENTS

    def code(self, x: Expr, axis: int) -> int:
        for k, (y, a) in enumerate(self.dims):
            if y is x and a == axis:
                return k
        self.dims.append((x, axis))
        return len(self.dims) - 1

    def value(self, e: Expr) -> tuple[np.ndarray, np.ndarray] | None:
        key = id(e)
        if key not in self.memo:
            self.memo[key] = self._value(e)
        return self.memo[key]

    def _value(self, e: Expr) -> tuple[np.ndarray, np.ndarray] | None:
        if isinstance(e, Constant):
            data = np.asarray(e.data)
            if data.dtype.kind not in "iu" or data.size > MAX_ELEMENTS:
                return None
            return data.astype("int64"), np.full(data.shape, -1, "int64")
        if not (isinstance(e, Call) and isinstance(e.op, Op)) or not self.small_int(e):
            return None
        if e.op is shape_of_op:
            x = e.args[0]
            t = self.type_of(x)
            if not isinstance(t, TensorType):
                return None
            numbers = np.array([d if isinstance(d, int) else 0 for d in t.shape], "int64")
            codes = np.array([-1 if isinstance(d, int) else self.code(x, i)
                              for i, d in enumerate(t.shape)], "int64")
            return numbers, codes
        if e.op.name == "cast":
            return self.value(e.args[0])
        try:
            if e.op.name in _REARRANGING:
                return self.rearranged(e)
            args = [self.value(a) for a in e.args]
            if any(a is None or np.any(a[1] >= 0) for a in args):
                return None
            out = np.asarray(evaluate_op(e, [a[0] for a in args]))  # type: ignore[index]
            return out.astype("int64"), np.full(out.shape, -1, "int64")
        except TesselError:  # an op that would fail at run time: nothing is known
            return None

    def rearranged(self, e: Call) -> tuple[np.ndarray, np.ndarray] | None:
        """An op that only moves elements, applied to the numbers and to the codes."""
        first = e.args[0]
        if isinstance(first, Tuple):
            parts = [self.value(f) for f in first.fields]
            if any(p is None for p in parts):
                return None
            numbers: Any = tuple(p[0] for p in parts)  # type: ignore[index]
            codes: Any = tuple(p[1] for p in parts)  # type: ignore[index]
        else:
            v = self.value(first)
            if v is None:
                return None
            numbers, codes = v
        rest = [self.value(a) for a in e.args[1:]]  # take's indices: numbers only
        if any(r is None or np.any(r[1] >= 0) for r in rest):
            return None
        rest_numbers = [r[0] for r in rest]  # type: ignore[index]
        return (np.asarray(evaluate_op(e, [numbers, *rest_numbers])),
                np.asarray(evaluate_op(e, [codes, *rest_numbers])))


def shape_value(e: Expr, type_of: Callable[[Expr], Any] = _checked_type
                ) -> ShapeValue | None:
    """What is known of the small integer tensor `e` at compile time, or None when nothing
    can be said: see the module docstring. `type_of` gives a node's type (its checked_type
    unless told otherwise).

        >>> from relay_ir.builder import const
        >>> shape_value(const(np.array([2, -1]))).numbers
        array([ 2, -1])
    """
    ev = _Evaluator(type_of)
    v = ev.value(e)
    if v is None:
        return None
    return ShapeValue(v[0], v[1], tuple(ev.dims))


def static_reshape(data: Expr, newshape: Expr, allowzero: int,
                   type_of: Callable[[Expr], Any] = _checked_type
                   ) -> tuple[tuple[int, ...], Type] | None:
    """The static reshape's newshape (0 copying a dim) that does what dyn.reshape(data,
    newshape, allowzero) does, and the type of its result, when every element of newshape
    is known when compiling: a number, or the `?` dim i of `data` itself at position i.
    None where an element is not known, a 0 under allowzero is an extent (the static 0
    copies), or the static relation refuses the shape (dyn.reshape then fails when run,
    naming itself).

        >>> from relay_ir.builder import var
        >>> from relay_ir.op.shape_of import shape_of
        >>> from relay_ir.transform import InferType
        >>> from relay_ir.module import IRModule
        >>> x = var("x", shape=(None, 2, 3))
        >>> body = InferType()(IRModule.from_expr(shape_of(x)))["main"].body
        >>> x = body.args[0]
        >>> newshape, t = static_reshape(x, body, 0)
        >>> newshape, str(t)
        ((0, 2, 3), 'Tensor[(?, 2, 3), float32]')
    """
    value = shape_value(newshape, type_of)
    if value is None or value.numbers.ndim != 1:
        return None
    out: list[int] = []
    for i, d in enumerate(value.elements()):
        if isinstance(d, int):
            if d == 0 and allowzero:
                return None
            out.append(d)
        elif d[0] is data and d[1] == i:
            out.append(0)
        else:
            return None
    reshape = get_op("reshape")
    try:
        t = TYPE_RELATIONS[reshape]([type_of(data)], reshape.make_attrs({"newshape": tuple(out)}))
    except (RelationError, NotReady):
        return None
    return tuple(out), getattr(t, "ret", t)


__all__ = ["MAX_ELEMENTS", "ShapeValue", "shape_value", "static_reshape"]
