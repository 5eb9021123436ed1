"""Tensors and the operations that produce them: placeholder, compute, reductions.

    >>> import tensor_expr as te
    >>> A = te.placeholder((4, 8), "float32", name="A")
    >>> k = te.reduce_axis((0, 8), name="k")
    >>> S = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="S")
    >>> [int(d.value) for d in S.shape], S.op.reduce_axis[0].var.name
    ([4], 'k')
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensor_expr.dtype import check_dtype, is_integral
from tensor_expr.expr import (
    CommReducer,
    IntImm,
    IterType,
    IterVar,
    PrimExpr,
    ProducerLoad,
    Range,
    Reduce,
    Var,
    as_expr,
    const,
    max_value,
    min_value,
)
from tensor_expr.expr import max as emax
from tensor_expr.expr import min as emin
from tessel_errors import TensorExprError

_node = dataclass(frozen=True, slots=True, eq=False)


def _as_shape(shape: Any, where: str) -> tuple[PrimExpr, ...]:
    if isinstance(shape, (int, PrimExpr)):
        shape = (shape,)
    out = []
    for d, dim in enumerate(shape):
        e = as_expr(dim)
        if not is_integral(e.dtype):
            raise TensorExprError(f"{where}: dimension {d} is {e} of dtype {e.dtype}; "
                                  "shape dimensions must be integers or integer Vars")
        if isinstance(e, IntImm) and e.value < 0:
            raise TensorExprError(f"{where}: dimension {d} is negative ({e.value})")
        out.append(e)
    return tuple(out)


class Operation:
    """Base of the operations that produce tensors."""

    __slots__ = ()
    name: str

    @property
    def num_outputs(self) -> int:
        return 1

    def output(self, index: int) -> Tensor:
        """The `index`-th output tensor (the same object every time)."""
        return self.outputs[index]  # type: ignore[attr-defined]

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return ()


@_node
class PlaceholderOp(Operation):
    """An input tensor of the program."""

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str
    outputs: tuple[Tensor, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "outputs", (Tensor(self, 0),))


@_node
class ComputeOp(Operation):
    """`out[axis] = body` for every point of `axis`; bodies may be reductions."""

    name: str
    tag: str
    attrs: tuple[tuple[str, Any], ...]
    axis: tuple[IterVar, ...]
    reduce_axis: tuple[IterVar, ...]
    body: tuple[PrimExpr, ...]
    outputs: tuple[Tensor, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "outputs", tuple(Tensor(self, i) for i in range(len(self.body))))

    @property
    def num_outputs(self) -> int:
        return len(self.body)

    @property
    def shape(self) -> tuple[PrimExpr, ...]:
        return tuple(iv.dom.extent for iv in self.axis)  # type: ignore[union-attr]

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        from tensor_expr.visitor import collect_tensor_reads

        return collect_tensor_reads(self.body)


@_node
class Tensor:
    """The `value_index`-th output of `op`; index it to read: `A[i, j]`."""

    op: Operation
    value_index: int = 0

    @property
    def shape(self) -> tuple[PrimExpr, ...]:
        return self.op.shape  # type: ignore[attr-defined]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> str:
        op = self.op
        if isinstance(op, ComputeOp):
            return op.body[self.value_index].dtype
        return op.dtype  # type: ignore[attr-defined]

    @property
    def name(self) -> str:
        n = self.op.name
        return n if self.op.num_outputs == 1 else f"{n}.v{self.value_index}"

    def __getitem__(self, indices: Any) -> ProducerLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise TensorExprError(
                f"tensor '{self.name}' has {self.ndim} dimensions, indexed with {len(indices)}"
            )
        idx = []
        for d, i in enumerate(indices):
            e = as_expr(i)
            if not is_integral(e.dtype):
                raise TensorExprError(
                    f"index {d} of tensor '{self.name}' is {e} of dtype {e.dtype}; "
                    "indices must be integers"
                )
            idx.append(e)
        return ProducerLoad(self, tuple(idx))

    def __str__(self) -> str:
        return f"Tensor({self.name}, shape={[str(d) for d in self.shape]}, {self.dtype})"

    __repr__ = __str__

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: Any) -> bool:  # type: ignore[override]
        return self is other

    def __ne__(self, other: Any) -> bool:  # type: ignore[override]
        return self is not other

    def __bool__(self) -> bool:
        return True


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor: `A = te.placeholder((M, K), "float32", name="A")`."""
    check_dtype(dtype)
    return PlaceholderOp(name, _as_shape(shape, f"placeholder '{name}'"), dtype).output(0)


def _arg_names(fcompute: Callable, ndim: int) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    plain = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(plain) == ndim and not any(p.kind == p.VAR_POSITIONAL for p in params):
        return [p.name for p in plain]
    if any(p.kind == p.VAR_POSITIONAL for p in params) or not params:
        return [f"i{d}" for d in range(ndim)]
    raise TensorExprError(
        f"compute lambda takes {len(plain)} index arguments but the shape has {ndim} dims"
    )


def compute(
    shape: Any,
    fcompute: Callable[..., Any],
    name: str = "compute",
    tag: str = "",
    attrs: dict[str, Any] | None = None,
) -> Any:
    """`T[i, ...] = fcompute(i, ...)`; returns a Tensor, or a list for a tuple body.

    >>> import tensor_expr as te
    >>> A = te.placeholder((8,), name="A")
    >>> B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    """
    where = f"compute '{name}'"
    shp = _as_shape(shape, where)
    names = _arg_names(fcompute, len(shp))
    axis = tuple(
        IterVar(Range(const(0, d.dtype), d), Var(n, d.dtype), IterType.DATA_PAR)
        for n, d in zip(names, shp)
    )
    result = fcompute(*[iv.var for iv in axis])
    bodies = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if not bodies:
        raise TensorExprError(f"{where}: the lambda returned an empty tuple")
    body = tuple(as_expr(b) for b in bodies)
    reduce_axis = _check_reductions(body, where)
    op = ComputeOp(name, tag, tuple(sorted((attrs or {}).items())), axis, reduce_axis, body)
    return op.outputs[0] if len(body) == 1 else list(op.outputs)


def _check_reductions(body: tuple[PrimExpr, ...], where: str) -> tuple[IterVar, ...]:
    from tensor_expr.visitor import post_order_visit

    reduces = [b for b in body if isinstance(b, Reduce)]
    for b in body:
        def nested(e: Any, top: PrimExpr = b) -> None:
            if isinstance(e, Reduce) and e is not top:
                raise TensorExprError(
                    f"{where}: a reduction must be the whole body of a compute, found one "
                    f"nested inside '{top}'; compute the reduction in its own tensor first"
                )
        post_order_visit(b, nested)
    if not reduces:
        return ()
    if len(reduces) != len(body):
        raise TensorExprError(f"{where}: either every output or none must be a reduction")
    first = reduces[0]
    for r in reduces[1:]:
        if r.axis != first.axis or r.combiner is not first.combiner:
            raise TensorExprError(
                f"{where}: the outputs of a tuple reduction must share axes and combiner"
            )
    return first.axis


def reduce_axis(dom: Any, name: str = "rv") -> IterVar:
    """A reduction axis over `dom` = (begin, end): `k = te.reduce_axis((0, K), name="k")`."""
    if isinstance(dom, Range):
        rng = dom
    else:
        begin, end = dom
        rng = Range.make(begin, end)
    return IterVar(rng, Var(name, rng.extent.dtype), IterType.REDUCE)


def thread_axis(tag: str, name: str | None = None) -> IterVar:
    """A GPU thread or block index to bind a loop to: `te.thread_axis("threadIdx.x")`;
    "cthread" is the accelerator's virtual thread (VTA's name)."""
    legal = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
             "threadIdx.z", "vthread", "cthread")
    if tag not in legal:
        raise TensorExprError(f"unknown thread tag {tag!r}; expected one of {', '.join(legal)}")
    return IterVar(None, Var(name or tag), IterType.THREAD, tag)


# ---------------------------------------------------------------------------------------
# Reducers


def comm_reducer(
    fcombine: Callable[..., Any], fidentity: Callable[..., Any], name: str = "reduce"
) -> Callable[..., Any]:
    """Make a reducer from a commutative combine function and its identity.

    >>> import tensor_expr as te
    >>> mysum = te.comm_reducer(lambda x, y: x + y, lambda t: te.const(0, t), name="mysum")
    >>> A = te.placeholder((4, 8), name="A")
    >>> k = te.reduce_axis((0, 8), name="k")
    >>> S = te.compute((4,), lambda i: mysum(A[i, k], axis=k))

    For a tuple reduction (argmax), `fcombine(x, y)` takes and returns tuples and
    `fidentity(*dtypes)` returns a tuple; call the reducer with a tuple of expressions.
    """
    cache: dict[tuple[str, ...], CommReducer] = {}

    def reducer(expr: Any, axis: Any, where: Any = None, init: Any = None) -> Any:
        is_tuple = isinstance(expr, (tuple, list))
        sources = tuple(as_expr(e) for e in (expr if is_tuple else (expr,)))
        dtypes = tuple(s.dtype for s in sources)
        comb = cache.get(dtypes)
        if comb is None:
            lhs = tuple(Var(f"x{i}" if is_tuple else "x", t) for i, t in enumerate(dtypes))
            rhs = tuple(Var(f"y{i}" if is_tuple else "y", t) for i, t in enumerate(dtypes))
            res = fcombine(lhs, rhs) if is_tuple else fcombine(lhs[0], rhs[0])
            ident = fidentity(*dtypes)
            res_t = tuple(as_expr(r) for r in (res if is_tuple else (res,)))
            ident_t = tuple(as_expr(v, t) for v, t in zip(ident if is_tuple else (ident,), dtypes))
            comb = CommReducer(lhs, rhs, res_t, ident_t, name)
            cache[dtypes] = comb
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        for a in axes:
            if not isinstance(a, IterVar) or a.iter_type is not IterType.REDUCE:
                raise TensorExprError(
                    f"{name}(): axis must be reduce axes from te.reduce_axis, got {a!r}"
                )
        cond = const(True) if where is None else as_expr(where)
        init_t: tuple[PrimExpr, ...] = ()
        if init is not None:
            init_t = tuple(as_expr(v, t) for v, t in zip(
                init if isinstance(init, (tuple, list)) else (init,), dtypes))
        outs = [Reduce(comb, sources, axes, cond, i, init_t) for i in range(len(sources))]
        return tuple(outs) if is_tuple else outs[0]

    reducer.__name__ = name
    reducer.__doc__ = f"The '{name}' reduction: {name}(expr, axis=k, where=None, init=None)."
    return reducer


sum = comm_reducer(lambda x, y: x + y, lambda t: const(0, t), name="sum")  # noqa: A001
prod = comm_reducer(lambda x, y: x * y, lambda t: const(1, t), name="prod")
max = comm_reducer(emax, min_value, name="max")  # noqa: A001
min = comm_reducer(emin, max_value, name="min")  # noqa: A001


def _argmax_combine(x: Sequence[PrimExpr], y: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
    from tensor_expr.expr import select

    # ties keep the lower index, as numpy.argmax does
    take_y = (y[1] > x[1]) | ((y[1] == x[1]) & (y[0] < x[0]))
    return select(take_y, y[0], x[0]), select(take_y, y[1], x[1])


def _argmin_combine(x: Sequence[PrimExpr], y: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
    from tensor_expr.expr import select

    take_y = (y[1] < x[1]) | ((y[1] == x[1]) & (y[0] < x[0]))
    return select(take_y, y[0], x[0]), select(take_y, y[1], x[1])


argmax = comm_reducer(
    _argmax_combine, lambda ti, tv: (max_value(ti), min_value(tv)), name="argmax"
)
argmin = comm_reducer(
    _argmin_combine, lambda ti, tv: (max_value(ti), max_value(tv)), name="argmin"
)
