"""Stage: the schedule of one operation, and the loop primitives that act on its axes.

    >>> import tensor_expr as te
    >>> from schedule import create_schedule
    >>> A = te.placeholder((64, 64), name="A")
    >>> B = te.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
    >>> s = create_schedule(B)
    >>> io, ii = s[B].split(B.op.axis[0], factor=8)
    >>> [iv.var.name for iv in s[B].leaf_iter_vars]
    ['i.outer', 'i.inner', 'j']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from schedule.relations import Fuse, Relation, Split, roots_of
from tensor_expr.expr import (
    IntImm,
    IterType,
    IterVar,
    PrimExpr,
    StringImm,
    Var,
    const,
)
from tensor_expr.tensor import ComputeOp, Operation, PlaceholderOp
from tessel_errors import ScheduleError

if TYPE_CHECKING:
    from schedule.schedule import Schedule
    from schedule.tensorize import TensorIntrin

ROOT, INLINE, SCOPE, PLACEHOLDER = "root", "inline", "scope", "placeholder"


@dataclass(slots=True)
class IterAttr:
    """What a leaf loop becomes: its kind, a bound thread axis, pragmas, a tensor intrinsic."""

    kind: str = "serial"  # serial | vectorize | unroll | parallel | bind | tensorize
    bind_thread: IterVar | None = None
    pragmas: list[tuple[str, Any]] = field(default_factory=list)
    tensor_intrin: TensorIntrin | None = None
    prefetches: list[Prefetch] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Prefetch:
    """A software prefetch at the start of each iteration of a loop (Stage.prefetch)."""

    tensor: Any  # a Tensor the stage reads
    dim: int
    shift: int
    level: int  # the cache level to fill: 1 (L1), 2 or 3
    spread: tuple[IterVar, int] | None = None  # (outer axis, period)
    aligned: bool = False  # the tensor's data starts on a cache line (lowering.prefetch)


class Stage:
    """The schedule of one op: its iter vars, their relations, attachment and loop kinds."""

    def __init__(self, op: Operation, sch: Schedule) -> None:
        self.op: Operation = op
        self.origin_op: Operation = op
        self.schedule = sch
        roots: list[IterVar] = []
        if isinstance(op, ComputeOp):
            roots = list(op.axis) + list(op.reduce_axis)
        self.all_iter_vars: list[IterVar] = list(roots)
        self.leaf_iter_vars: list[IterVar] = list(roots)
        self.relations: list[Relation] = []
        self.attach_type: str = PLACEHOLDER if isinstance(op, PlaceholderOp) else ROOT
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.iter_attrs: dict[IterVar, IterAttr] = {}
        self.storage_aligns: list[tuple[int, int, int]] = []  # (dim, factor, offset)
        self.scope: str = "global"
        self.is_output: bool = False
        self._names: set[str] = {iv.var.name for iv in roots}

    # -------------------------------------------------------------------------- helpers
    @property
    def name(self) -> str:
        return self.op.name

    def __repr__(self) -> str:
        return f"Stage({self.name})"

    def describe(self) -> str:
        """'stage 'C' (compute matmul)': how errors name a stage."""
        tag = getattr(self.op, "tag", "") or ""
        kind = "placeholder" if isinstance(self.op, PlaceholderOp) else "compute"
        return f"stage '{self.name}' ({kind}{' ' + tag if tag else ''})"

    def _err(self, prim: str, why: str, iv: IterVar | None = None,
             legal: str = "") -> ScheduleError:
        if prim not in why.split(" ")[0] and not why.startswith(prim):
            why = f"{prim}: {why}"
        where = f"\n  at {self.describe()}"
        if iv is not None:
            where += f", axis '{iv.var.name}'{self._extent_text(iv)}"
        return ScheduleError(why + where + (f"\n  {legal}" if legal else ""))

    def _extent_text(self, iv: IterVar) -> str:
        if iv.dom is not None and isinstance(iv.dom.extent, IntImm):
            return f" (extent {iv.dom.extent.value})"
        if iv.dom is not None:
            return f" (extent {iv.dom.extent})"
        return ""

    def _leaf_names(self) -> str:
        return "leaf axes are: " + ", ".join(f"'{v.var.name}'" for v in self.leaf_iter_vars)

    def _fresh(self, name: str, iter_type: IterType) -> IterVar:
        base, n = name, 1
        while name in self._names:
            name, n = f"{base}_{n}", n + 1
        self._names.add(name)
        return IterVar(None, Var(name, "int32"), iter_type)

    def _require_compute(self, prim: str) -> None:
        if not isinstance(self.op, ComputeOp):
            raise self._err(prim, f"{prim} applies to compute stages, not to a placeholder")

    def _leaf_index(self, prim: str, iv: Any) -> int:
        if not isinstance(iv, IterVar):
            raise self._err(prim, f"{prim} expects an IterVar of this stage, got "
                            f"{type(iv).__name__} {iv!r}", legal=self._leaf_names())
        for n, v in enumerate(self.leaf_iter_vars):
            if v is iv:
                return n
        owner = self.schedule._owner_of(iv)
        if owner is not None and owner is not self:
            why = f"axis '{iv.var.name}' belongs to {owner.describe()}, not to this stage"
        elif any(v is iv for v in self.all_iter_vars):
            why = (f"axis '{iv.var.name}' is no longer a leaf (it was already split or "
                   "fused); use the axes that replaced it")
        else:
            why = f"axis '{iv.var.name}' is not an axis of this stage"
        raise self._err(prim, why, iv, self._leaf_names())

    def is_reduce(self, iv: IterVar) -> bool:
        """True when `iv` derives from a reduction axis."""
        return any(r.iter_type is IterType.REDUCE for r in roots_of(self.relations, iv))

    def _attr(self, iv: IterVar) -> IterAttr:
        a = self.iter_attrs.get(iv)
        if a is None:
            a = self.iter_attrs[iv] = IterAttr()
        return a

    def _record(self, prim: str, top: bool = False, **args: Any) -> None:
        self.schedule._record(self, prim, args, top)

    # ------------------------------------------------------------------------ primitives
    def split(self, parent: IterVar, factor: Any = None,
              nparts: Any = None) -> tuple[IterVar, IterVar]:
        """Split a leaf axis: `xo, xi = s[C].split(x, factor=8)` (or nparts=4)."""
        self._require_compute("split")
        pos = self._leaf_index("split", parent)
        if (factor is None) == (nparts is None):
            raise self._err("split", "split needs exactly one of factor= or nparts=", parent)
        which, value = ("factor", factor) if factor is not None else ("nparts", nparts)
        v = _positive_int(value)
        if v is None:
            raise self._err("split", f"split {which} must be a positive integer, got {value!r}",
                            parent)
        with self.schedule._recording() as top:
            if top:
                self._record("split", True, axis=parent, factor=factor, nparts=nparts)
            it = IterType.REDUCE if self.is_reduce(parent) else IterType.DATA_PAR
            outer = self._fresh(parent.var.name + ".outer", it)
            inner = self._fresh(parent.var.name + ".inner", it)
            c = v if isinstance(v, PrimExpr) else const(v)
            self.relations.append(Split(parent, outer, inner,
                                        c if factor is not None else None,
                                        c if nparts is not None else None))
            self.all_iter_vars += [outer, inner]
            self.leaf_iter_vars[pos:pos + 1] = [outer, inner]
        return outer, inner

    def tile(self, x_parent: IterVar, y_parent: IterVar, x_factor: Any,
             y_factor: Any) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Tile two axes: `xo, yo, xi, yi = s[C].tile(x, y, 8, 8)` (then reordered)."""
        with self.schedule._recording() as top:
            if top:
                self._record("tile", True, x=x_parent, y=y_parent, x_factor=x_factor,
                             y_factor=y_factor)
            xo, xi = self.split(x_parent, factor=x_factor)
            yo, yi = self.split(y_parent, factor=y_factor)
            self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *axes: IterVar) -> IterVar:
        """Fuse adjacent leaf axes, outer first: `f = s[C].fuse(i, j)`."""
        self._require_compute("fuse")
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        if len(axes) < 2:
            raise self._err("fuse", f"fuse needs at least two axes, got {len(axes)}")
        pos = [self._leaf_index("fuse", a) for a in axes]
        for a, b, pa, pb in zip(axes, axes[1:], pos, pos[1:]):
            if pb != pa + 1:
                raise self._err(
                    "fuse", f"fuse of non-adjacent axes: '{a.var.name}' is leaf {pa} and "
                    f"'{b.var.name}' is leaf {pb}; fuse takes adjacent leaves, outer first",
                    legal="reorder them first; " + self._leaf_names())
        kinds = {self.is_reduce(a) for a in axes}
        if len(kinds) > 1:
            raise self._err("fuse", "fuse of a data-parallel axis with a reduction axis "
                            f"({', '.join(repr(a.var.name) for a in axes)}) is not allowed")
        with self.schedule._recording() as top:
            if top:
                self._record("fuse", True, axes=list(axes))
            it = IterType.REDUCE if kinds == {True} else IterType.DATA_PAR
            cur = axes[0]
            for nxt in axes[1:]:
                fused = self._fresh(f"{cur.var.name}.{nxt.var.name}.fused", it)
                self.relations.append(Fuse(cur, nxt, fused))
                self.all_iter_vars.append(fused)
                p = next(n for n, v in enumerate(self.leaf_iter_vars) if v is cur)
                self.leaf_iter_vars[p:p + 2] = [fused]
                cur = fused
        return cur

    def reorder(self, *axes: IterVar) -> None:
        """Put the given leaf axes in this order (others keep their places)."""
        self._require_compute("reorder")
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        pos = [self._leaf_index("reorder", a) for a in axes]
        if len(set(pos)) != len(pos):
            raise self._err("reorder", "reorder got the same axis twice: "
                            + ", ".join(f"'{a.var.name}'" for a in axes))
        self._record("reorder", axes=list(axes))
        for p, a in zip(sorted(pos), axes):
            self.leaf_iter_vars[p] = a

    def compute_at(self, parent: Stage, axis: IterVar) -> None:
        """Compute this stage inside loop `axis` of its consumer `parent`."""
        prim = "compute_at"
        if not isinstance(parent, Stage):
            raise self._err(prim, f"compute_at expects a Stage (s[T]), got {type(parent).__name__}")
        self._require_compute(prim)
        if self.is_output:
            raise self._err(prim, "an output stage cannot be computed at another stage; "
                            "outputs are written whole")
        if parent is self:
            raise self._err(prim, "a stage cannot be computed at itself")
        consumers = self.schedule._downstream(self)
        if parent not in consumers:
            legal = ("consumers are: " + ", ".join(f"'{c.name}'" for c in consumers)
                     if consumers else "this stage has no consumers")
            raise self._err(prim, f"{parent.describe()} is not a consumer of this stage, so "
                            "it cannot hold its computation", legal=legal)
        if not any(v is axis for v in parent.leaf_iter_vars):
            owner = self.schedule._owner_of(axis) if isinstance(axis, IterVar) else None
            name = axis.var.name if isinstance(axis, IterVar) else repr(axis)
            what = (f"belongs to {owner.describe()}" if owner is not None and owner is not parent
                    else f"is not a leaf axis of {parent.describe()}")
            raise self._err(prim, f"compute_at to an axis that is not a consumer's: '{name}' "
                            f"{what}", legal=parent._leaf_names())
        self._record(prim, parent=parent, axis=axis)
        self.attach_type, self.attach_stage, self.attach_ivar = SCOPE, parent, axis

    def compute_inline(self) -> None:
        """Substitute this stage's body into its consumers (no buffer, no loops)."""
        prim = "compute_inline"
        self._require_compute(prim)
        if self.is_output:
            raise self._err(prim, "inline of an output: outputs must be stored; inline the "
                            "stages feeding it instead")
        if isinstance(self.op, ComputeOp) and self.op.reduce_axis:
            raise self._err(prim, "inline of a reduction is not possible; use compute_at "
                            "to place it inside its consumer")
        self._record(prim)
        self.attach_type, self.attach_stage, self.attach_ivar = INLINE, None, None

    def compute_root(self) -> None:
        """Compute this stage at the root, in its own loop nest (the default)."""
        self._require_compute("compute_root")
        self._record("compute_root")
        self.attach_type, self.attach_stage, self.attach_ivar = ROOT, None, None

    def vectorize(self, axis: IterVar) -> None:
        """Make a leaf loop a vector loop (constant extent, data-parallel)."""
        self._set_kind("vectorize", axis)

    def unroll(self, axis: IterVar) -> None:
        """Unroll a leaf loop (constant extent)."""
        self._set_kind("unroll", axis)

    def parallel(self, axis: IterVar) -> None:
        """Run a data-parallel leaf loop on the thread pool."""
        self._set_kind("parallel", axis)

    def _set_kind(self, kind: str, axis: IterVar) -> None:
        self._require_compute(kind)
        self._leaf_index(kind, axis)
        if kind in ("vectorize", "parallel") and self.is_reduce(axis):
            raise self._err(kind, f"{kind} of a reduction axis: iterations of a reduction "
                            "depend on each other", axis,
                            legal="split the reduction and rfactor it, or pick a data axis")
        self._record(kind, axis=axis)
        self._attr(axis).kind = kind

    def pragma(self, axis: IterVar, key: str, value: Any = 1) -> None:
        """Attach a pragma to a leaf loop: `s[C].pragma(io, "unroll_explicit")`."""
        self._require_compute("pragma")
        self._leaf_index("pragma", axis)
        if not isinstance(key, str) or not key:
            raise self._err("pragma", f"pragma key must be a non-empty string, got {key!r}", axis)
        if not isinstance(value, (int, float, str)):
            raise self._err("pragma", f"pragma value must be int, float or str, got {value!r}")
        self._record("pragma", axis=axis, key=key, value=value)
        self._attr(axis).pragmas.append((key, value))

    def prefetch(self, tensor: Any, axis: IterVar, dim: int = 0, shift: int = 1,
                 level: int = 2, spread: tuple[IterVar, int] | None = None,
                 aligned: bool = False) -> None:
        """Software prefetch: at the start of each iteration of leaf loop `axis`, touch the
        cache lines of `tensor` that the iteration reads, with the index along `dim`
        moved by `shift` (clamped into the tensor), so that a block read later (the next
        block of weights, say) streams in from memory while this one is computed; `level`
        is the cache level to fill (1, 2 or 3). It changes no value.

        With `spread=(outer, n)` the iterations share the work with an enclosing loop
        `outer` (of this stage or of one it is computed at) whose iterations would
        repeat the same prefetches: the k-th iteration of this stage's loops down to
        `axis` (row-major, `outer` left out) prefetches only when k % n equals
        outer % n, so n iterations of `outer` each issue 1/n of them.

        With `aligned` the caller knows the tensor's data starts on a 64-byte line (packed
        constant weights: the executor aligns them), so a region whose spans start a
        whole number of lines in gets exactly its lines, not one more for a span that
        might straddle one. A wrong claim costs a missed line, never a wrong value.

            >>> import tensor_expr as te
            >>> from schedule import create_schedule
            >>> W = te.placeholder((4, 64), name="W")
            >>> k = te.reduce_axis((0, 64), name="k")
            >>> C = te.compute((4,), lambda o: te.sum(W[o, k], axis=k), name="C")
            >>> s = create_schedule(C)
            >>> s[C].prefetch(W, s[C].op.reduce_axis[0], dim=0, shift=1)
        """
        from tensor_expr.tensor import Tensor

        prim = "prefetch"
        self._require_compute(prim)
        self._leaf_index(prim, axis)
        if not isinstance(tensor, Tensor):
            raise self._err(prim, f"prefetch needs a tensor the stage reads, got {tensor!r}",
                            axis)
        ndim = len(tensor.shape)
        if not isinstance(dim, int) or isinstance(dim, bool) or not 0 <= dim < ndim:
            raise self._err(prim, f"prefetch dim must be an integer in [0, {ndim}) for "
                            f"'{tensor.name}' of rank {ndim}, got {dim!r}", axis)
        if not isinstance(shift, int) or isinstance(shift, bool):
            raise self._err(prim, f"prefetch shift must be an integer, got {shift!r}", axis)
        if level not in (1, 2, 3):
            raise self._err(prim, f"prefetch level must be 1, 2 or 3 (the cache level to "
                            f"fill), got {level!r}", axis)
        if spread is not None:
            ok = isinstance(spread, (tuple, list)) and len(spread) == 2 and \
                isinstance(spread[0], IterVar) and isinstance(spread[1], int) and \
                not isinstance(spread[1], bool) and spread[1] > 0
            if not ok:
                raise self._err(prim, "prefetch spread must be (axis, period) with a positive "
                                f"integer period, got {spread!r}", axis)
            spread = (spread[0], int(spread[1]))
        if not isinstance(aligned, bool):
            raise self._err(prim, f"prefetch aligned must be True or False, got {aligned!r}",
                            axis)
        self._record(prim, tensor=tensor, axis=axis, dim=dim, shift=shift, level=level,
                     spread=None if spread is None else list(spread), aligned=aligned)
        self._attr(axis).prefetches.append(Prefetch(tensor, dim, shift, level, spread,
                                                    aligned))

    def storage_align(self, axis: IterVar, factor: int, offset: int) -> None:
        """Pad the stride of `axis`'s dimension to factor*k + offset (avoids bank conflicts)."""
        prim = "storage_align"
        self._require_compute(prim)
        dims = list(self.op.axis)  # type: ignore[attr-defined]
        d = next((n for n, v in enumerate(dims) if v is axis), None)
        if d is None:
            raise self._err(prim, "storage_align takes one of the op's data axes (s[T].op.axis)",
                            axis if isinstance(axis, IterVar) else None)
        if d == len(dims) - 1:
            raise self._err(prim, "storage_align of the innermost dimension has no effect "
                            "(its stride is 1); align an outer dimension", axis)
        if _positive_int(factor) is None or not isinstance(factor, int):
            raise self._err(prim, f"storage_align factor must be a positive integer, got "
                            f"{factor!r}", axis)
        if not isinstance(offset, int) or not 0 <= offset < factor:
            raise self._err(prim, f"storage_align offset must be an integer in [0, {factor}), "
                            f"got {offset!r}", axis)
        self._record(prim, axis=axis, factor=factor, offset=offset)
        self.storage_aligns.append((d, factor, offset))

    def bind(self, axis: IterVar, thread: IterVar) -> None:
        """Bind a leaf loop to a GPU index: `s[C].bind(bx, te.thread_axis("blockIdx.x"))`."""
        prim = "bind"
        self._require_compute(prim)
        self._leaf_index(prim, axis)
        if not isinstance(thread, IterVar) or thread.iter_type is not IterType.THREAD:
            raise self._err(prim, "bind needs a thread axis from te.thread_axis(tag), got "
                            f"{thread!r}", axis)
        if self.is_reduce(axis) and not thread.thread_tag.startswith("threadIdx"):
            raise self._err(prim, f"bind of a reduction axis to {thread.thread_tag}: a "
                            "reduction runs across the threads of one block (bind it to "
                            "threadIdx) and blocks cannot combine their results", axis)
        for other, a in self.iter_attrs.items():
            if a.kind == "bind" and a.bind_thread is not None and other is not axis \
                    and a.bind_thread.thread_tag == thread.thread_tag \
                    and thread.thread_tag != "vthread":
                raise self._err(prim, f"thread tag '{thread.thread_tag}' is already bound to "
                                f"axis '{other.var.name}' of this stage; each tag binds once "
                                "per stage", axis)
        self._record(prim, axis=axis, thread=thread.thread_tag, thread_name=thread.var.name)
        a = self._attr(axis)
        a.kind, a.bind_thread = "bind", thread

    def tensorize(self, axis: IterVar, intrin: TensorIntrin) -> None:
        """Replace the loop nest under (and including) `axis` by a call of `intrin`."""
        from schedule.tensorize import TensorIntrin, check_tensorize

        prim = "tensorize"
        self._require_compute(prim)
        self._leaf_index(prim, axis)
        if not isinstance(intrin, TensorIntrin):
            raise self._err(prim, f"tensorize needs a TensorIntrin, got {type(intrin).__name__}")
        why = check_tensorize(self, axis, intrin)
        if why:
            raise self._err(prim, f"the loop nest under '{axis.var.name}' does not match "
                            f"intrinsic '{intrin.name}': {why}", axis)
        self._record(prim, axis=axis, intrin=intrin.name)
        a = self._attr(axis)
        a.kind, a.tensor_intrin = "tensorize", intrin

    # convenience for cache_read / cache_write on the stage's schedule
    def set_scope(self, scope: str) -> None:
        """Set the storage scope of this stage's buffer ("global", "local", "shared")."""
        from schedule.schedule import _check_scope

        _check_scope(self, "set_scope", scope)
        self._record("set_scope", scope=scope)
        self.scope = scope


def _positive_int(v: Any) -> int | PrimExpr | None:
    """v as a positive int (or a symbolic integer PrimExpr), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if v > 0 else None
    if isinstance(v, IntImm):
        return v.value if v.value > 0 else None
    if isinstance(v, PrimExpr) and not isinstance(v, StringImm) and v.dtype.startswith("int"):
        return v
    return None


__all__ = ["Stage", "IterAttr", "Prefetch", "ROOT", "INLINE", "SCOPE", "PLACEHOLDER"]
