"""Schedule: the stages of a TE program, and the primitives that rewrite its dataflow
(cache_read, cache_write, rfactor). Every primitive is recorded for JSON replay.

    >>> import tensor_expr as te
    >>> from schedule import create_schedule
    >>> A = te.placeholder((16,), name="A")
    >>> B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    >>> s = create_schedule(B)
    >>> [st.name for st in s.stages]
    ['A', 'B']
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from schedule.relations import pass_down_extents, pass_up_values
from schedule.stage import INLINE, PLACEHOLDER, ROOT, Stage
from tensor_expr.expr import (
    IntImm,
    IterType,
    IterVar,
    PrimExpr,
    ProducerLoad,
    Range,
    Reduce,
    Select,
    Var,
    const,
)
from tensor_expr.expr import (
    all as te_all,
)
from tensor_expr.tensor import ComputeOp, Operation, PlaceholderOp, Tensor
from tensor_expr.visitor import ExprMutator, substitute
from tessel_errors import ScheduleError


class Schedule:
    """The stages (in producer-before-consumer order) of the ops reachable from outputs."""

    def __init__(self, outputs: Sequence[Operation]) -> None:
        self.outputs: list[Operation] = list(outputs)
        self.stages: list[Stage] = []
        self.stage_map: dict[Operation, Stage] = {}
        self.primitives: list[dict[str, Any]] = []
        self._depth = 0
        for op in _topo_order(self.outputs):
            st = Stage(op, self)
            self.stages.append(st)
            self.stage_map[op] = st
        for op in self.outputs:
            self.stage_map[op].is_output = True

    # ----------------------------------------------------------------------- lookups
    def __getitem__(self, key: Any) -> Stage:
        if isinstance(key, Stage):
            return key
        op = key.op if isinstance(key, Tensor) else key
        st = self.stage_map.get(op) if isinstance(op, Operation) else None
        if st is None:
            names = ", ".join(f"'{s.name}'" for s in self.stages)
            raise ScheduleError(f"{key!r} is not part of this schedule; its stages are {names}")
        return st

    def __repr__(self) -> str:
        return f"Schedule({', '.join(s.name for s in self.stages)})"

    def current(self, t: Tensor) -> Tensor:
        """The tensor that now stands for `t` (dataflow rewrites replace ops)."""
        return self[t].op.output(t.value_index)

    def _owner_of(self, iv: IterVar) -> Stage | None:
        for st in self.stages:
            if any(v is iv for v in st.all_iter_vars):
                return st
        return None

    def readers(self, st: Stage) -> list[Stage]:
        """Stages whose op reads one of `st`'s outputs directly."""
        outs = set(map(id, st.op.outputs))
        return [c for c in self.stages
                if any(id(t) in outs for t in c.op.input_tensors)]

    def _downstream(self, st: Stage) -> list[Stage]:
        seen: list[Stage] = []
        todo = [st]
        while todo:
            for c in self.readers(todo.pop()):
                if c not in seen:
                    seen.append(c)
                    todo.append(c)
        return [s for s in self.stages if s in seen]

    def stage_ref(self, st: Stage) -> str:
        """A deterministic name for a stage: its op name, '#k' added when names repeat."""
        same = [s for s in self.stages if s.name == st.name]
        return st.name if len(same) == 1 else f"{st.name}#{same.index(st)}"

    def stage_by_ref(self, ref: str) -> Stage:
        """The stage named `ref` (see stage_ref)."""
        name, _, k = ref.partition("#")
        same = [s for s in self.stages if s.name == name]
        if not same or (k and int(k) >= len(same)):
            raise ScheduleError(f"no stage named '{ref}' in this schedule; stages are "
                                + ", ".join(f"'{self.stage_ref(s)}'" for s in self.stages))
        return same[int(k) if k else 0]

    # --------------------------------------------------------------------- recording
    @contextlib.contextmanager
    def _recording(self) -> Iterator[bool]:
        top = self._depth == 0
        self._depth += 1
        try:
            yield top
        finally:
            self._depth -= 1

    def _record(self, st: Stage, prim: str, args: dict[str, Any], top: bool = False) -> None:
        # a primitive is recorded once, by the outermost call (tile records, its splits don't)
        if not top and self._depth > 0:
            return
        from schedule.serialize import encode_args

        self.primitives.append({"prim": prim, "stage": self.stage_ref(st),
                                "args": encode_args(self, args)})

    def to_json(self) -> str:
        """The primitives applied so far, as JSON text (replay with apply_json)."""
        from schedule.serialize import to_json

        return to_json(self)

    @staticmethod
    def from_json(text: str, outputs: Any) -> Schedule:
        """A fresh schedule of `outputs` with the primitives of `text` replayed."""
        from schedule.serialize import apply_json

        s = create_schedule(outputs)
        apply_json(s, text)
        return s

    # ------------------------------------------------------------- dataflow rewrites
    def cache_read(self, tensor: Tensor, scope: str, readers: Any) -> Tensor:
        """Read `tensor` through a cache in `scope` for the given reader stages.

        `AA = s.cache_read(A, "local", [C])` gives a stage AA[i] = A[i] that C now reads.
        """
        prim = "cache_read"
        src = self[tensor]
        _check_scope(src, prim, scope)
        cur = self.current(tensor)
        rlist = list(readers) if isinstance(readers, (list, tuple)) else [readers]
        rstages = [self[r] for r in rlist]
        if not rstages:
            raise src._err(prim, "cache_read needs at least one reader stage")
        direct = self.readers(src)
        for r in rstages:
            if r not in direct:
                legal = "readers of it are: " + ", ".join(f"'{d.name}'" for d in direct)
                raise src._err(prim, f"{r.describe()} does not read '{cur.name}'", legal=legal)
        with self._recording() as top:
            if top:
                self._record(src, prim, {"tensor": cur, "scope": scope, "readers": rstages},
                             top=True)
            axis = tuple(IterVar(Range(const(0, d.dtype), d), Var(f"ax{n}", d.dtype))
                         for n, d in enumerate(cur.shape))
            body = (ProducerLoad(cur, tuple(a.var for a in axis)),)
            cop = ComputeOp(f"{cur.name}.{scope}", "cache_read", (), axis, (), body)
            cst = self._insert(cop, after=src)
            cst.scope = scope
            self._replace_tensors({cur: cop.output(0)}, only=set(map(id, rstages)))
        return cop.output(0)

    def cache_write(self, tensor: Tensor, scope: str) -> Any:
        """Compute `tensor` into a cache in `scope`; the original stage becomes a copy.

        `CC = s.cache_write(C, "local")`, then `s[CC].compute_at(s[C], jo)`.
        """
        prim = "cache_write"
        st = self[tensor]
        _check_scope(st, prim, scope)
        st._require_compute(prim)
        if st.relations or st.leaf_iter_vars != st.all_iter_vars:
            raise st._err(prim, "cache_write must come before split/fuse/reorder on the stage "
                          "it caches; call it first, then schedule both stages")
        if st.attach_type == INLINE:
            raise st._err(prim, "cache_write of an inlined stage; compute_root it first")
        op = st.op
        assert isinstance(op, ComputeOp)
        with self._recording() as top:
            if top:
                self._record(st, prim, {"tensor": self.current(tensor), "scope": scope}, top=True)
            new_axis = tuple(_copy_iv(a) for a in op.axis)
            new_red = tuple(_copy_iv(a) for a in op.reduce_axis)
            body = _rename_axes(op.body, dict(zip(op.axis, new_axis)) |
                                dict(zip(op.reduce_axis, new_red)))
            cop = ComputeOp(f"{op.name}.{scope}", op.tag, op.attrs, new_axis, new_red, body)
            copy_body = tuple(ProducerLoad(t, tuple(a.var for a in op.axis))
                              for t in cop.outputs)
            nop = ComputeOp(op.name, op.tag, op.attrs, op.axis, (), copy_body)
            cst = self._insert(cop, before=st)
            cst.scope = scope
            self._set_op(st, nop, reset=False)
            st.all_iter_vars = list(op.axis)
            st.leaf_iter_vars = list(op.axis)
            st.iter_attrs = {k: v for k, v in st.iter_attrs.items()
                             if any(k is a for a in op.axis)}
        outs = list(cop.outputs)
        return outs[0] if len(outs) == 1 else outs

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
        """Factor a reduction over leaf `axis` into a new stage with `axis` as a data axis.

        `CF = s.rfactor(C, ki)`: CF[ki, i] = sum_ko A[i, ko*f + ki]; C[i] = sum_v CF[v, i].
        Both stages restart from their root axes.
        """
        prim = "rfactor"
        st = self[tensor]
        st._require_compute(prim)
        op = st.op
        assert isinstance(op, ComputeOp)
        if not op.reduce_axis:
            raise st._err(prim, "rfactor needs a reduction; this stage has no reduce axis")
        if len(op.body) != 1:
            raise st._err(prim, "rfactor of a tuple reduction (argmax) is not supported")
        st._leaf_index(prim, axis)
        if not st.is_reduce(axis):
            raise st._err(prim, "rfactor axis must be a reduction axis (or a split of one)",
                          axis, legal="reduce leaves are: " + ", ".join(
                              f"'{v.var.name}'" for v in st.leaf_iter_vars if st.is_reduce(v)))
        if not isinstance(factor_axis, int) or not 0 <= factor_axis <= len(op.axis):
            raise st._err(prim, f"factor_axis must be an integer in [0, {len(op.axis)}], "
                          f"got {factor_axis!r}")
        red: Reduce = op.body[0]  # type: ignore[assignment]
        with self._recording() as top:
            if top:
                self._record(st, prim, {"tensor": self.current(tensor), "axis": axis,
                                        "factor_axis": factor_axis}, top=True)
            rf_op = _make_rfactor_op(st, op, red, axis, factor_axis)
            rv = IterVar(Range(const(0), rf_op.axis[factor_axis].dom.extent),  # type: ignore
                         Var(axis.var.name + ".v"), IterType.REDUCE)
            idx = [a.var for a in op.axis]
            idx.insert(factor_axis, rv.var)
            final = Reduce(red.combiner, (ProducerLoad(rf_op.output(0), tuple(idx)),), (rv,),
                           const(True), 0, red.init)
            nop = ComputeOp(op.name, op.tag, op.attrs, op.axis, (rv,), (final,))
            self._insert(rf_op, before=st)
            self._set_op(st, nop, reset=True)
        return rf_op.output(0)

    # ------------------------------------------------------------------- internals
    def _insert(self, op: ComputeOp, after: Stage | None = None,
                before: Stage | None = None) -> Stage:
        st = Stage(op, self)
        pos = self.stages.index(after) + 1 if after is not None else self.stages.index(before)
        self.stages.insert(pos, st)
        self.stage_map[op] = st
        return st

    def _set_op(self, st: Stage, nop: ComputeOp, reset: bool) -> None:
        old = st.op
        st.op = nop
        self.stage_map[nop] = st
        if reset:
            st.all_iter_vars = list(nop.axis) + list(nop.reduce_axis)
            st.leaf_iter_vars = list(st.all_iter_vars)
            st.relations = []
            st.iter_attrs = {}
            st._names = {iv.var.name for iv in st.all_iter_vars}
        self._replace_tensors(dict(zip(old.outputs, nop.outputs)), skip=st)

    def _replace_tensors(self, tmap: dict[Tensor, Tensor], only: set[int] | None = None,
                         skip: Stage | None = None) -> None:
        """Re-point readers of the tensors in `tmap` (only the stages in `only`, if given),
        then rebuild everything downstream so that it reads the rebuilt ops."""
        carried: dict[Tensor, Tensor] = {}
        for st in self.stages:
            if st is skip or not isinstance(st.op, ComputeOp):
                continue
            m = dict(carried)
            if only is None or id(st) in only:
                m.update(tmap)
            if not m:
                continue
            op = st.op
            body = _LoadReplacer(m).visit_all(op.body)
            if all(a is b for a, b in zip(body, op.body)):
                continue
            nop = ComputeOp(op.name, op.tag, op.attrs, op.axis, op.reduce_axis, body)
            carried.update(zip(op.outputs, nop.outputs))
            st.op = nop
            self.stage_map[nop] = st
        self.outputs = [self.stage_map[o].op for o in self.outputs]


def create_schedule(outputs: Any) -> Schedule:
    """A default schedule (every stage at root, loops in axis order) of the given outputs.

    `s = create_schedule(C)` or `create_schedule([C, D])`; ops are accepted too.
    """
    items = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    ops: list[Operation] = []
    for t in items:
        op = t.op if isinstance(t, Tensor) else t
        if not isinstance(op, Operation):
            raise ScheduleError(f"create_schedule takes tensors or ops, got {type(t).__name__}")
        if isinstance(op, PlaceholderOp):
            raise ScheduleError(f"create_schedule: output '{op.name}' is a placeholder; "
                                "outputs must be computed tensors")
        if op not in ops:
            ops.append(op)
    return Schedule(ops)


def _topo_order(outputs: Sequence[Operation]) -> list[Operation]:
    order: list[Operation] = []
    seen: set[int] = set()
    for out in outputs:
        stack: list[tuple[Operation, bool]] = [(out, False)]
        while stack:
            op, done = stack.pop()
            if done:
                order.append(op)
                continue
            if id(op) in seen:
                continue
            seen.add(id(op))
            stack.append((op, True))
            for t in reversed(op.input_tensors):
                if id(t.op) not in seen:
                    stack.append((t.op, False))
    return order


def _check_scope(st: Stage, prim: str, scope: Any) -> None:
    # "local.<tag>" names a backend's own on-chip memory (the accelerator's
    # env.inp_scope = "local.inp_buffer"), as TVM tags scopes
    if scope not in ("global", "local", "shared") and not (
            isinstance(scope, str) and scope.startswith("local.") and len(scope) > 6):
        raise st._err(prim, f"unknown storage scope {scope!r}",
                      legal="scopes are: global, local, shared, local.<tag>")


def _copy_iv(iv: IterVar) -> IterVar:
    return IterVar(iv.dom, Var(iv.var.name, iv.var.dtype), iv.iter_type, iv.thread_tag)


class _LoadReplacer(ExprMutator):
    def __init__(self, tmap: dict[Tensor, Tensor]) -> None:
        super().__init__()
        self.tmap = {id(k): v for k, v in tmap.items()}

    def visit_all(self, body: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        return tuple(self.visit(b) for b in body)

    def visit_ProducerLoad(self, e: ProducerLoad) -> PrimExpr:
        idx = tuple(self.visit(i) for i in e.indices)
        t = self.tmap.get(id(e.producer), e.producer)
        if t is e.producer and all(a is b for a, b in zip(idx, e.indices)):
            return e
        return ProducerLoad(t, idx)


class _AxisRenamer(ExprMutator):
    def __init__(self, ivmap: dict[IterVar, IterVar]) -> None:
        super().__init__()
        self.ivmap = {id(k): v for k, v in ivmap.items()}
        self.vmap = {id(k.var): v.var for k, v in ivmap.items()}

    def visit_Var(self, e: Var) -> PrimExpr:
        return self.vmap.get(id(e), e)

    def visit_Reduce(self, e: Reduce) -> PrimExpr:
        out = self.generic_visit(e)
        axes = tuple(self.ivmap.get(id(a), a) for a in e.axis)
        return Reduce(out.combiner, out.source, axes, out.condition,  # type: ignore[attr-defined]
                      out.value_index, out.init)  # type: ignore[attr-defined]


def _rename_axes(body: tuple[PrimExpr, ...],
                 ivmap: dict[IterVar, IterVar]) -> tuple[PrimExpr, ...]:
    m = _AxisRenamer(ivmap)
    return tuple(m.visit(b) for b in body)


def _make_rfactor_op(st: Stage, op: ComputeOp, red: Reduce, axis: IterVar,
                     factor_axis: int) -> ComputeOp:
    """The factored op: `axis` becomes a data axis, the other reduce leaves stay reductions."""
    root_ext = {iv: iv.dom.extent for iv in list(op.axis) + list(op.reduce_axis)}  # type: ignore
    ext = pass_down_extents(st.relations, root_ext)
    data_axes = [_copy_iv(a) for a in op.axis]
    new_data = IterVar(Range(const(0), ext[axis]), Var(axis.var.name), IterType.DATA_PAR)
    data_axes.insert(factor_axis, new_data)
    leaf_val: dict[IterVar, PrimExpr] = {}
    new_red: list[IterVar] = []
    for lv in st.leaf_iter_vars:
        if lv is axis:
            leaf_val[lv] = new_data.var
        elif st.is_reduce(lv):
            nr = IterVar(Range(const(0), ext[lv]), Var(lv.var.name), IterType.REDUCE)
            new_red.append(nr)
            leaf_val[lv] = nr.var
        else:
            leaf_val[lv] = const(0)
    val = pass_up_values(st.relations, leaf_val, ext)
    conds: list[PrimExpr] = []
    vmap: dict[Any, PrimExpr] = {}
    for a, na in zip(op.axis, [d for d in data_axes if d is not new_data]):
        vmap[a.var] = na.var
    for r in op.reduce_axis:
        vmap[r.var] = r.dom.min + val[r] if not _is_zero(r.dom.min) else val[r]  # type: ignore
    for iv in [r.parent for r in st.relations if hasattr(r, "factor")] + list(op.reduce_axis):
        if not st.is_reduce(iv) or not _may_overrun(st, iv, ext):
            continue
        conds.append(val[iv] < ext[iv])
    src = tuple(substitute(s, vmap) for s in red.source)
    cond = substitute(red.condition, vmap)
    if not (isinstance(cond, IntImm) and cond.value == 1):
        conds.append(cond)
    full = te_all(*conds) if conds else const(True)
    if new_red:
        body: PrimExpr = Reduce(red.combiner, src, tuple(new_red), full, 0, ())
    elif conds:
        body = Select(full, src[0], red.combiner.identity_element[0])
    else:
        body = src[0]
    return ComputeOp(op.name + ".rf", op.tag, op.attrs, tuple(data_axes), tuple(new_red),
                     (body,))


def _is_zero(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def _may_overrun(st: Stage, iv: IterVar, ext: dict[IterVar, PrimExpr]) -> bool:
    """True unless every split below `iv` divides its parent exactly (constants)."""
    from schedule.relations import Split

    for r in st.relations:
        if isinstance(r, Split):
            pe, f = ext[r.parent], r.factor if r.factor is not None else r.nparts
            if not (isinstance(pe, IntImm) and isinstance(f, IntImm) and pe.value % f.value == 0):
                return True
    return False


__all__ = ["Schedule", "create_schedule", "PLACEHOLDER", "ROOT"]
