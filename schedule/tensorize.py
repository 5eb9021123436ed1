"""Tensor intrinsics: a declared computation (over placeholders) replaced by one call.

`stage.tensorize(axis, intrin)` checks that the loop nest from `axis` inwards computes
what the intrinsic declares (same extents, same expression shape); lowering then emits
`Evaluate(intrin.emit(outs, ins))` instead of that nest. For a reduction the init stays
as loops and the intrinsic accumulates into the output region.

As in TVM, a tensor may have more dims than the intrinsic's placeholder: the intrinsic
matches its trailing dims, and the leading ones must be fixed by the loops enclosing
`axis` (their indices use no axis of the nest), so that each call sees one sub-tensor.
That is how VTA's GEMM intrinsic over [BATCH, BLOCK] tiles applies to packed 4-D/6-D
layouts such as data[n, c, h, w, BATCH, BLOCK_IN].

    >>> import tensor_expr as te
    >>> from schedule import decl_tensor_intrin
    >>> a = te.placeholder((16,), name="a"); b = te.placeholder((16,), name="b")
    >>> c = te.compute((16,), lambda i: a[i] + b[i], name="c")
    >>> vadd = decl_tensor_intrin(c, "vadd16")
    >>> vadd.name
    'vadd16'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from schedule.relations import pass_down_extents, roots_of
from tensor_expr.expr import Call, FloatImm, IntImm, IterVar, PrimExpr, ProducerLoad, Reduce, Var
from tensor_expr.tensor import ComputeOp, Tensor
from tensor_expr.visitor import children, post_order_visit
from tessel_errors import ScheduleError

if TYPE_CHECKING:
    from schedule.stage import Stage


@dataclass(frozen=True)
class Region:
    """The part of a buffer an intrinsic touches: its first element and the extents.

    `first` is the load of the first element (a lowering BufferLoad, built by lowering so
    that this module needs no loop-IR types); it stands for the region's address."""

    buffer: Any  # lowering.ir.Buffer
    start: tuple[PrimExpr, ...]
    extents: tuple[int, ...]
    first: PrimExpr


def default_emit(name: str) -> Callable[[Sequence[Region], Sequence[Region]], PrimExpr]:
    """`name(out_first, in_firsts...)`: the first element of each region, outputs first."""

    def emit(outs: Sequence[Region], ins: Sequence[Region]) -> PrimExpr:
        return Call("int32", name, tuple(r.first for r in list(outs) + list(ins)))

    return emit


@dataclass(frozen=True, eq=False)
class TensorIntrin:
    """A computation (an op over placeholders) and the call that implements it."""

    name: str
    op: ComputeOp
    emit: Callable[[Sequence[Region], Sequence[Region]], PrimExpr]

    @property
    def extents(self) -> tuple[list[int], list[int]]:
        """(data-axis extents, reduce-axis extents) of the declared computation."""
        return ([_int(a.dom.extent) for a in self.op.axis],  # type: ignore[union-attr]
                [_int(a.dom.extent) for a in self.op.reduce_axis])  # type: ignore[union-attr]


def decl_tensor_intrin(out: Tensor, name: str,
                       emit: Callable[..., PrimExpr] | None = None) -> TensorIntrin:
    """Declare an intrinsic computing `out` (constant shape); emit builds its call."""
    if not isinstance(out, Tensor) or not isinstance(out.op, ComputeOp):
        raise ScheduleError(f"decl_tensor_intrin '{name}': expected a computed tensor")
    op = out.op
    for a in list(op.axis) + list(op.reduce_axis):
        if _int(a.dom.extent) is None:  # type: ignore[union-attr]
            raise ScheduleError(f"decl_tensor_intrin '{name}': axis '{a.var.name}' must have "
                                "a constant extent")
    return TensorIntrin(name, op, emit or default_emit(name))


def _int(e: PrimExpr) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def check_tensorize(stage: Stage, axis: IterVar, intrin: TensorIntrin) -> str:
    """Why the nest of `stage` under `axis` does not match `intrin` ('' when it does)."""
    op = stage.op
    assert isinstance(op, ComputeOp)
    roots = list(op.axis) + list(op.reduce_axis)
    ext = pass_down_extents(stage.relations, {r: r.dom.extent for r in roots})  # type: ignore
    pos = next(n for n, v in enumerate(stage.leaf_iter_vars) if v is axis)
    nest = stage.leaf_iter_vars[pos:]
    data = [_int(ext[v]) for v in nest if not stage.is_reduce(v)]
    red = [_int(ext[v]) for v in nest if stage.is_reduce(v)]
    want_d, want_r = intrin.extents
    if data != want_d or red != want_r:
        return (f"loop extents under the axis are data {data}, reduce {red}; the intrinsic "
                f"declares data {want_d}, reduce {want_r}")
    if len(op.body) != len(intrin.op.body):
        return f"{len(op.body)} outputs against the intrinsic's {len(intrin.op.body)}"
    # The root axes the nest iterates over (partly or wholly): only trailing dims may use them.
    inner = {id(r.var) for v in nest for r in roots_of(stage.relations, v)}
    k = len(intrin.op.axis)
    lead = [a for a in op.axis[:len(op.axis) - k] if id(a.var) in inner]
    if len(op.axis) < k:
        return f"the output '{op.name}' has {len(op.axis)} dims, fewer than the intrinsic's {k}"
    if lead:
        return (f"the output '{op.name}' must match the intrinsic's {k} dims in its last "
                f"{k} axes; axis '{lead[0].var.name}' is iterated under the tensorized axis")
    for a, b in zip(op.body, intrin.op.body):
        why = _same_shape(a, b, inner)
        if why:
            return why
    return ""


def _uses(e: PrimExpr, names: set[int]) -> Var | None:
    found: list[Var] = []
    post_order_visit(e, lambda x: found.append(x) if isinstance(x, Var) and id(x) in names
                     else None)
    return found[0] if found else None


def _match_load(a: ProducerLoad, b: ProducerLoad, inner: set[int]) -> str:
    """`a` matches `b` on its trailing dims; its leading indices are fixed by outer loops."""
    na, nb = a.producer.ndim, b.producer.ndim
    if na < nb:
        return (f"'{a.producer.name}' has {na} dims, fewer than intrinsic input "
                f"'{b.producer.name}' with {nb}")
    for d, idx in enumerate(a.indices[:na - nb]):
        v = _uses(idx, inner)
        if v is not None:
            return (f"dim {d} of '{a.producer.name}' (index '{idx}') uses '{v.name}', an "
                    f"axis under the tensorized one; the intrinsic covers only the last {nb} "
                    f"dims of '{a.producer.name}', so the other dims must be fixed by the "
                    "enclosing loops (reorder that axis outside)")
    return ""


def _same_shape(a: PrimExpr, b: PrimExpr, inner: set[int]) -> str:
    """Structural match up to tensors and index expressions."""
    if isinstance(a, ProducerLoad) and isinstance(b, ProducerLoad):
        return _match_load(a, b, inner)
    if type(a) is not type(b):
        return f"the computation has '{a}' where the intrinsic has '{b}'"
    if isinstance(a, (IntImm, FloatImm)) and a.value != b.value:  # type: ignore[attr-defined]
        return f"constant {a} against the intrinsic's {b}"
    if isinstance(a, Var):
        return ""
    if isinstance(a, Reduce) and a.combiner.name != b.combiner.name:  # type: ignore[attr-defined]
        return f"a '{a.combiner.name}' reduction against '{b.combiner.name}'"  # type: ignore
    if isinstance(a, Call) and a.name != b.name:  # type: ignore[attr-defined]
        return f"call '{a.name}' against '{b.name}'"  # type: ignore[attr-defined]
    ca, cb = children(a), children(b)
    if len(ca) != len(cb):
        return f"'{a}' and '{b}' differ in shape"
    for x, y in zip(ca, cb):
        why = _same_shape(x, y, inner)
        if why:
            return why
    return ""
