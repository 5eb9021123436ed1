"""Schedule -> loop IR: loop nests from the leaf iter vars, compute_at nests inside their
consumers' loops, inlined stages substituted, reductions as init + update, buffers sized by
bound inference, guards for non-dividing splits; then the loop passes, one line each.

    >>> import tensor_expr as te, lowering
    >>> from schedule import create_schedule
    >>> A = te.placeholder((8,), name="A")
    >>> B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    >>> print(lowering.lower(create_schedule(B), [A, B]))
    func main(A: float32[8], B: float32[8]) {
      for (i, 0, 8) {
        B[i] = (A[i] * 2.0)
      }
    }
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lowering import ir
from lowering.bound import Consumer, Loop, footprint
from lowering.passes.hoist_guards import hoist_guards
from lowering.passes.loop_partition import loop_partition
from lowering.passes.remove_no_op import remove_no_op
from lowering.passes.simplify import simplify
from lowering.passes.verify_loops import verify_loops
from lowering.prefetch import prefetch_stmts
from schedule.relations import Fuse, Split, pass_down_extents, pass_up_values
from schedule.schedule import Schedule
from schedule.stage import INLINE, PLACEHOLDER, ROOT, SCOPE, Prefetch, Stage
from schedule.tensorize import Region
from tensor_expr import expr as E
from tensor_expr.arith import Analyzer
from tensor_expr.arith import simplify as simplify_expr
from tensor_expr.tensor import ComputeOp, PlaceholderOp, Tensor
from tensor_expr.visitor import ExprMutator, collect_vars, post_order_visit, substitute
from tessel_errors import LoweringError, ScheduleError


def lower(sch: Schedule, args: Sequence[Tensor], name: str = "main", *,
          partition: bool = True) -> ir.PrimFunc:
    """Lower a schedule to a loop-IR PrimFunc: `print(lower(s, [A, B, C]))`."""
    func = schedule_to_func(sch, args, name)
    func = simplify(func)
    if partition:
        func = hoist_guards(func)
        func = loop_partition(func)
    func = remove_no_op(func)
    func = simplify(func)
    func = verify_loops(func)
    return func


_KINDS = {"vectorize": ir.ForKind.VECTORIZED, "unroll": ir.ForKind.UNROLLED,
          "parallel": ir.ForKind.PARALLEL, "bind": ir.ForKind.THREAD_BINDING,
          "serial": ir.ForKind.SERIAL, "tensorize": ir.ForKind.SERIAL}


@dataclass
class _Info:
    """What lowering knows about one computed stage."""

    stage: Stage
    body: tuple[E.PrimExpr, ...] = ()  # inlined, over the op's root vars
    loopvar: dict[E.IterVar, E.Var] = field(default_factory=dict)
    chain: list[tuple[Stage, E.IterVar]] = field(default_factory=list)
    root_min: dict[E.IterVar, E.PrimExpr] = field(default_factory=dict)
    ext: dict[E.IterVar, E.PrimExpr] = field(default_factory=dict)
    val: dict[E.IterVar, E.PrimExpr] = field(default_factory=dict)
    rootval: dict[E.IterVar, E.PrimExpr] = field(default_factory=dict)
    # (lo, expr, hi, reduce?, need_lo, need_hi): lo <= expr < hi must hold to run the body
    guards: list[tuple[E.PrimExpr, E.PrimExpr, E.PrimExpr, bool, bool, bool]] = \
        field(default_factory=list)
    bufs: list[ir.Buffer] = field(default_factory=list)
    buf_min: list[E.PrimExpr] = field(default_factory=list)
    allocate: list[ir.Buffer] = field(default_factory=list)  # the bufs that are not args


def schedule_to_func(sch: Schedule, args: Sequence[Tensor], name: str = "main") -> ir.PrimFunc:
    """The loop nest of a schedule, before the loop passes."""
    return _Lowerer(sch, args).run(name)


class _Lowerer:
    def __init__(self, sch: Schedule, args: Sequence[Tensor]) -> None:
        self.sch = sch
        self.names: set[str] = set()
        self.buf_names: set[str] = set()
        self.info: dict[Stage, _Info] = {}
        self.arg_buf: dict[tuple[Stage, int], ir.Buffer] = {}
        self.params: list[ir.Buffer] = []
        for t in args:
            if not isinstance(t, Tensor):
                raise LoweringError(f"lower: arguments must be tensors, got {t!r}")
            try:
                st = sch[t]
            except ScheduleError as e:
                if isinstance(t.op, PlaceholderOp):
                    # an input the computation never reads (ONNX Dropout's ratio, say) is
                    # still a parameter of the kernel, as in TVM: it gets an unused buffer
                    self.params.append(ir.Buffer(self._buf_name(t.name), t.shape, t.dtype))
                    continue
                raise LoweringError(f"lower: argument '{t.name}' is not part of the schedule "
                                    f"({e})") from None
            if st.attach_type == INLINE:
                raise LoweringError(f"lower: argument '{t.name}' is inlined and has no buffer; "
                                    "drop it from the arguments or compute_root it")
            key = (st, t.value_index)
            if key in self.arg_buf:
                raise LoweringError(f"lower: argument '{t.name}' is given twice")
            b = ir.Buffer(self._buf_name(t.name), t.shape, t.dtype)
            self.arg_buf[key] = b
            self.params.append(b)
        self.compute = [s for s in sch.stages if s.attach_type not in (PLACEHOLDER, INLINE)]
        for st in sch.stages:
            if st.attach_type == PLACEHOLDER and (st, 0) not in self.arg_buf and \
                    any(st in self._reads(c) for c in self.compute):
                raise LoweringError(f"lower: placeholder '{st.name}' is read but is not among "
                                    "the arguments; pass it in args")

    # ------------------------------------------------------------------ naming
    def _fresh(self, name: str) -> str:
        base, n = name, 1
        while name in self.names:
            name, n = f"{base}_{n}", n + 1
        self.names.add(name)
        return name

    def _buf_name(self, name: str) -> str:
        base, n = name, 1
        while name in self.buf_names:
            name, n = f"{base}_{n}", n + 1
        self.buf_names.add(name)
        return name

    # ------------------------------------------------------------------ driver
    def run(self, name: str) -> ir.PrimFunc:
        self._inline_bodies()
        self._attach_tree()
        for st in self.roots:
            self._assign_loops(st, [])
        for st in reversed(self.compute):
            self._infer(st)
        stmt: ir.Stmt | None = None
        for st in reversed(self.roots):
            stmt = self._with_alloc(st, ir.seq(self._emit_stage(st), stmt))
        return ir.PrimFunc(name, tuple(self.params), stmt if stmt is not None else ir.SeqStmt(()))

    def _reads(self, st: Stage) -> list[Stage]:
        return [self.sch[t] for t in st.op.input_tensors]

    def _inline_bodies(self) -> None:
        cache: dict[Stage, tuple[E.PrimExpr, ...]] = {}

        def body_of(st: Stage) -> tuple[E.PrimExpr, ...]:
            if st not in cache:
                cache[st] = tuple(_Inliner(self.sch, body_of).visit(b)
                                  for b in st.op.body)  # type: ignore[attr-defined]
            return cache[st]

        for st in self.compute:
            self.info[st] = _Info(st, body=body_of(st))

    def _attach_tree(self) -> None:
        self.roots = [s for s in self.compute if s.attach_type == ROOT]
        self.attached: dict[tuple[Stage, E.IterVar], list[Stage]] = {}
        for st in self.compute:
            if st.attach_type != SCOPE:
                continue
            x, lv = st.attach_stage, st.attach_ivar
            assert x is not None and lv is not None
            if x.attach_type == INLINE:
                raise LoweringError(f"stage '{st.name}' is computed at '{x.name}', which is "
                                    f"inlined; compute_at a stage that has loops")
            self.attached.setdefault((x, _follow_to_leaf(x, lv)), []).append(st)

    def _assign_loops(self, st: Stage, prefix: list[tuple[Stage, E.IterVar]]) -> None:
        inf = self.info[st]
        inf.chain = list(prefix)
        for lv in st.leaf_iter_vars:
            inf.loopvar[lv] = E.Var(self._fresh(lv.var.name), lv.var.dtype)
            inf.chain.append((st, lv))
            for p in self.attached.get((st, lv), []):
                self._assign_loops(p, list(inf.chain))

    def _loop(self, entry: tuple[Stage, E.IterVar]) -> Loop:
        st, lv = entry
        inf = self.info[st]
        return Loop(inf.loopvar[lv], inf.ext[lv])

    # ------------------------------------------------------------- bound inference
    def _infer(self, st: Stage) -> None:
        inf = self.info[st]
        op = st.op
        assert isinstance(op, ComputeOp)
        shape = op.shape
        if st.attach_type == SCOPE:
            region = _whole_tiles(st, self._region(st))
        else:
            region = [(E.const(0, d.dtype), d) for d in shape]
        for a, (mn, ex) in zip(op.axis, region):
            inf.root_min[a] = mn
            inf.ext[a] = ex
        for r in op.reduce_axis:
            inf.root_min[r] = r.dom.min  # type: ignore[union-attr]
            inf.ext[r] = r.dom.extent  # type: ignore[union-attr]
        inf.ext = pass_down_extents(st.relations, inf.ext)
        inf.val = pass_up_values(st.relations, {lv: inf.loopvar[lv] for lv in st.leaf_iter_vars},
                                 inf.ext)
        inf.val = {k: simplify_expr(v) for k, v in inf.val.items()}
        for root in list(op.axis) + list(op.reduce_axis):
            inf.rootval[root] = simplify_expr(inf.root_min[root] + inf.val[root])
        self._guards(st, inf, op, shape)
        self._buffers(st, inf, op, region)

    def _region(self, st: Stage) -> list[tuple[E.PrimExpr, E.PrimExpr]]:
        inf = self.info[st]
        outs = {id(t) for t in st.op.outputs}
        prefix = inf.chain[:len(inf.chain) - len(st.leaf_iter_vars)]
        # a shared buffer serves all threads of a block: its region is relaxed over the
        # threadIdx loops around it (the producer's loops are meant to be bound to them)
        relaxed = [e for e in prefix if st.scope == "shared" and _thread_tag(e).startswith(
            "threadIdx")]
        fixed = [self._loop(e) for e in prefix if e not in relaxed]
        consumers = []
        for c in self.compute:
            if c is st:
                continue
            cinf = self.info[c]
            accesses: list[tuple[E.PrimExpr, ...]] = []

            def grab(e: Any, acc: list = accesses) -> None:
                if isinstance(e, E.ProducerLoad) and id(e.producer) in outs:
                    acc.append(e.indices)

            for b in cinf.body:
                post_order_visit(b, grab)
            if not accesses:
                continue
            if cinf.chain[:len(prefix)] != prefix or not cinf.loopvar:
                x, lv = st.attach_stage, st.attach_ivar
                raise LoweringError(
                    f"stage '{st.name}' is computed at axis '{lv.var.name}' of '{x.name}' "  # type: ignore
                    f"but its consumer '{c.name}' runs outside that loop; compute_at '{st.name}' "
                    "at a loop enclosing all its consumers, or compute_root it")
            vmap = cinf.rootval
            accs = [tuple(simplify_expr(substitute(i, vmap)) for i in a) for a in accesses]
            free = [self._loop(e) for e in relaxed + cinf.chain[len(prefix):]]
            # a guard may only speak of the loops this region is a function of (fixed) or
            # ranges over (free): one of an outer stage's inner loops (the output loops of
            # a stage whose local cache the consumer is) would leak in as a parameter and
            # make the region's shape depend on a loop outside it; dropping such a guard
            # only widens the region
            known = {id(lp.var) for lp in fixed + free}
            cons = []
            seen: list[Stage] = []
            for s2, _ in cinf.chain:
                if s2 not in seen:
                    seen.append(s2)
                    cons += [(g[0], g[1], g[2]) for g in self.info[s2].guards
                             if all(id(v) in known for v in collect_vars(g[1]))]
            consumers.append(Consumer(free, cons, accs))
        return footprint(fixed, consumers, st.op.shape)  # type: ignore[attr-defined]

    def _analyzer(self, inf: _Info) -> Analyzer:
        """An Analyzer that knows the ranges of the stage's loops."""
        ana = Analyzer()
        for e in inf.chain:
            lp = self._loop(e)
            ana.bind(lp.var, (0, lp.extent))
        return ana

    def _guards(self, st: Stage, inf: _Info, op: ComputeOp, shape: Sequence[E.PrimExpr]) -> None:
        ana = self._analyzer(inf)
        zero = E.const(0)

        def add(lo: E.PrimExpr, e: E.PrimExpr, hi: E.PrimExpr, red: bool) -> None:
            b_lo, b_hi = ana.const_int_bound(e)
            lo_c = lo.value if isinstance(lo, E.IntImm) else None
            hi_c = hi.value if isinstance(hi, E.IntImm) else None
            need_lo = not (b_lo is not None and lo_c is not None and b_lo >= lo_c)
            need_hi = not (b_hi is not None and hi_c is not None and b_hi < hi_c)
            inf.guards.append((lo, e, hi, red, need_lo, need_hi))

        for r in st.relations:
            if isinstance(r, Split) and r.parent not in inf.root_min:
                add(zero, inf.val[r.parent], inf.ext[r.parent], st.is_reduce(r.parent))
        for a, d in zip(op.axis, shape):
            add(zero, inf.val[a], inf.ext[a], False)
            if st.attach_type == SCOPE:
                add(zero, inf.rootval[a], d, False)
        for r in op.reduce_axis:
            add(r.dom.min, inf.rootval[r], simplify_expr(r.dom.min + r.dom.extent), True)  # type: ignore

    def _buffers(self, st: Stage, inf: _Info, op: ComputeOp,
                 region: list[tuple[E.PrimExpr, E.PrimExpr]]) -> None:
        inf.buf_min = [m for m, _ in region]
        shape = tuple(simplify_expr(e) for _, e in region)
        for k, t in enumerate(op.outputs):
            arg = self.arg_buf.get((st, k))
            if arg is not None:
                if st.attach_type == SCOPE:
                    at = st.attach_stage.name  # type: ignore[union-attr]
                    raise LoweringError(f"argument '{t.name}' is computed at '{at}'; a stage "
                                        "passed as an argument is stored whole: compute_root it")
                inf.bufs.append(arg)
                continue
            if st.scope == "local" and not all(isinstance(d, E.IntImm) for d in shape):
                raise LoweringError(
                    f"local buffer of stage '{st.name}' has non-constant shape "
                    f"[{', '.join(str(d) for d in shape)}]; compute_at it inside a loop so that "
                    "its footprint is constant, or use scope 'global'")
            buf = ir.Buffer(self._buf_name(t.name), shape, t.dtype, st.scope,
                            _strides(st, shape))
            inf.bufs.append(buf)
            inf.allocate.append(buf)

    # ------------------------------------------------------------------ emission
    def _with_alloc(self, st: Stage, body: ir.Stmt) -> ir.Stmt:
        for b in reversed(self.info[st].allocate):
            body = ir.Allocate(b, body)
        return body

    def _emit_stage(self, st: Stage) -> ir.Stmt:
        inf = self.info[st]
        leaves = st.leaf_iter_vars
        red_pos = next((n for n, lv in enumerate(leaves) if st.is_reduce(lv)), None)
        is_red = isinstance(inf.body[0], E.Reduce)

        def nest(pos: int) -> ir.Stmt:
            if pos == len(leaves):
                return self._body_stmt(st, inf)
            lv = leaves[pos]
            attr = st.iter_attrs.get(lv)
            if attr is not None and attr.kind == "tensorize":
                call = self._tensorize(st, inf, pos)
                if is_red and (red_pos is None or red_pos >= pos):
                    return ir.seq(self._init_nest(st, inf, pos), call)
                return call
            inner = self._wrap_attached(st, lv, nest(pos + 1))
            if attr is not None and attr.prefetches:
                inner = ir.seq(self._prefetches(st, pos, attr.prefetches, inner), inner)
            loop = self._for(st, inf, lv, inner)
            if is_red and pos == red_pos:
                return ir.seq(self._init_nest(st, inf, pos), loop)
            return loop

        out = nest(0)
        if is_red and red_pos is None:  # reduce axes of extent... none left as leaves
            out = ir.seq(self._init_nest(st, inf, len(leaves)), out)
        return out

    def _prefetches(self, st: Stage, pos: int, pfs: Sequence[Prefetch],
                    body: ir.Stmt) -> ir.Stmt | None:
        lv = st.leaf_iter_vars[pos]
        where = f"stage '{st.name}', axis '{lv.var.name}'"
        if st.iter_attrs[lv].kind in ("vectorize", "bind", "parallel"):
            raise LoweringError(f"prefetch at {where}: a {st.iter_attrs[lv].kind}d loop; "
                                "prefetch at a serial or unrolled loop")
        out = []
        for pf in pfs:
            try:
                buf = self._buffer_of(pf.tensor)[0]
            except (KeyError, ScheduleError):
                buf = None
            stmts = prefetch_stmts(body, buf, pf, where) if buf is not None else None
            if stmts is None:
                raise LoweringError(f"prefetch at {where}: the loop body reads no element of "
                                    f"'{pf.tensor.name}' (inlined, or read elsewhere)")
            if pf.spread is not None:
                stmts = ir.IfThenElse(self._spread_turn(st, pos, pf.spread, where), stmts)
            out.append(stmts)
        return ir.seq(*out)

    def _spread_turn(self, st: Stage, pos: int, spread: tuple[E.IterVar, int],
                     where: str) -> E.PrimExpr:
        """Whether this iteration is the spread axis's turn (see Stage.prefetch)."""
        outer, n = spread
        inf = self.info[st]
        lv = st.leaf_iter_vars[pos]
        here = next(n for n, (s, v) in enumerate(inf.chain) if s is st and v is lv)
        owner = next((s for s, v in inf.chain[:here] if v is outer), None)
        if owner is None:
            raise LoweringError(f"prefetch at {where}: spread axis '{outer.var.name}' is not "
                                "a loop around it (an axis of this stage further out, or of "
                                "the stage it is computed at)")
        k: E.PrimExpr = E.const(0)
        for lv in st.leaf_iter_vars[:pos + 1]:
            if lv is outer:
                continue
            ext = simplify_expr(inf.ext[lv])
            if not isinstance(ext, E.IntImm):
                raise LoweringError(f"prefetch at {where}: spread needs constant loop "
                                    f"extents, '{lv.var.name}' has {ext}")
            k = k * ext.value + inf.loopvar[lv]
        v = self.info[owner].loopvar[outer]
        return E.FloorMod(simplify_expr(k), E.const(n)) == E.FloorMod(v, E.const(n))

    def _wrap_attached(self, st: Stage, lv: E.IterVar, inner: ir.Stmt) -> ir.Stmt:
        for p in reversed(self.attached.get((st, lv), [])):
            inner = self._with_alloc(p, ir.seq(self._emit_stage(p), inner))
        return inner

    def _for(self, st: Stage, inf: _Info, lv: E.IterVar, body: ir.Stmt,
             var: E.Var | None = None) -> ir.For:
        attr = st.iter_attrs.get(lv)
        kind = _KINDS[attr.kind] if attr is not None else ir.ForKind.SERIAL
        ext = simplify_expr(inf.ext[lv])
        if kind in (ir.ForKind.VECTORIZED, ir.ForKind.UNROLLED) and \
                not isinstance(ext, E.IntImm):
            raise LoweringError(f"{attr.kind} of axis '{lv.var.name}' of stage '{st.name}' "  # type: ignore
                                f"needs a constant extent, got {ext}; split it by a constant "
                                "factor and use the inner axis")
        bound = attr.bind_thread if attr is not None else None
        tag = bound.thread_tag if bound is not None else ""
        ann = tuple(attr.pragmas) if attr is not None else ()
        v = inf.loopvar[lv] if var is None else var
        return ir.For(v, E.const(0, ext.dtype), ext, kind, body, tag, ann)

    def _guard(self, inf: _Info, body: ir.Stmt, reduce_too: bool,
               vmap: dict[Any, E.PrimExpr] | None = None) -> ir.Stmt:
        conds: list[E.PrimExpr] = []
        for lo, e, hi, red, need_lo, need_hi in inf.guards:
            if red and not reduce_too:
                continue
            if vmap:
                e = simplify_expr(substitute(e, vmap))
            if need_lo:
                conds.append(lo <= e)
            if need_hi:
                conds.append(e < hi)
        if not conds:
            return body
        return ir.IfThenElse(E.all(*conds), body)

    def _store_index(self, inf: _Info) -> tuple[E.PrimExpr, ...]:
        op = inf.stage.op
        return tuple(inf.rootval[a] - m
                     for a, m in zip(op.axis, inf.buf_min))  # type: ignore[attr-defined]

    def _convert(self, e: E.PrimExpr, inf: _Info) -> E.PrimExpr:
        return _ToBuffers(self).visit(substitute(e, inf.rootval))

    def _buffer_of(self, t: Tensor) -> tuple[ir.Buffer, list[E.PrimExpr]]:
        st = self.sch[t]
        if st.attach_type == PLACEHOLDER:
            b = self.arg_buf[(st, 0)]
            return b, [E.const(0)] * b.ndim
        inf = self.info[st]
        return inf.bufs[t.value_index], inf.buf_min

    def _body_stmt(self, st: Stage, inf: _Info) -> ir.Stmt:
        idx = self._store_index(inf)
        body = inf.body
        if not isinstance(body[0], E.Reduce):
            stores = [ir.BufferStore(b, self._convert(v, inf), idx)
                      for b, v in zip(inf.bufs, body)]
            return self._guard(inf, ir.seq(*stores), True)
        red: E.Reduce = body[0]
        comb = red.combiner
        lhs = [ir.BufferLoad(b, idx) for b in inf.bufs]
        rhs = [self._convert(s, inf) for s in red.source]
        vmap: dict[Any, E.PrimExpr] = dict(zip(comb.lhs, lhs)) | dict(zip(comb.rhs, rhs))
        results = [substitute(r, vmap) for r in comb.result]
        if len(results) == 1:
            stmt: ir.Stmt = ir.BufferStore(inf.bufs[0], results[0], idx)
        else:
            tmps = [E.Var(self._fresh(f"{b.name}.next"), r.dtype)
                    for b, r in zip(inf.bufs, results)]
            stmt = ir.seq(*[ir.BufferStore(b, t, idx) for b, t in zip(inf.bufs, tmps)])
            for t, r in reversed(list(zip(tmps, results))):
                stmt = ir.LetStmt(t, r, stmt)
        cond = self._convert(red.condition, inf)
        if not (isinstance(cond, E.IntImm) and cond.value == 1):
            stmt = ir.IfThenElse(cond, stmt)
        return self._guard(inf, stmt, True)

    def _init_nest(self, st: Stage, inf: _Info, start: int) -> ir.Stmt:
        red: E.Reduce = inf.body[0]  # type: ignore[assignment]
        inits = red.init or red.combiner.identity_element
        leaves = st.leaf_iter_vars
        inner = [lv for lv in leaves[start:] if not st.is_reduce(lv)]
        ivars = {lv: E.Var(self._fresh(lv.var.name + ".init"), lv.var.dtype) for lv in inner}
        vmap: dict[Any, E.PrimExpr] = {inf.loopvar[lv]: v for lv, v in ivars.items()}
        idx = tuple(simplify_expr(substitute(i, vmap)) for i in self._store_index(inf))
        stmt: ir.Stmt = ir.seq(*[ir.BufferStore(b, v, idx) for b, v in zip(inf.bufs, inits)])
        stmt = self._guard(inf, stmt, False, vmap)
        for lv in reversed(inner):
            stmt = self._for(st, inf, lv, stmt, ivars[lv])
            if stmt.kind is ir.ForKind.PARALLEL:  # type: ignore[attr-defined]
                stmt = ir.For(stmt.var, stmt.min, stmt.extent, ir.ForKind.SERIAL,  # type: ignore
                              stmt.body)  # type: ignore[attr-defined]
        return stmt

    def _tensorize(self, st: Stage, inf: _Info, pos: int) -> ir.Stmt:
        attr = st.iter_attrs[st.leaf_iter_vars[pos]]
        intrin = attr.tensor_intrin
        assert intrin is not None
        zero = {inf.loopvar[lv]: E.const(0) for lv in st.leaf_iter_vars[pos:]}
        idx = tuple(simplify_expr(substitute(i, zero)) for i in self._store_index(inf))
        d_ext, _ = intrin.extents
        for b in inf.bufs:  # bound inference may have cut the buffer to what is read
            have = [d.value if isinstance(d, E.IntImm) else None for d in b.shape]
            if any(h is not None and h < want for h, want in zip(have[-len(d_ext):], d_ext)):
                raise LoweringError(
                    f"tensorize '{intrin.name}' at stage '{st.name}': the intrinsic writes "
                    f"{list(d_ext)} elements but buffer '{b.name}' holds {have[-len(d_ext):]}"
                    " in those dims (its consumers read less); compute whole intrinsic "
                    "tiles, e.g. into a padded buffer that the consumer crops")
        outs = [Region(b, idx, tuple(d_ext), ir.BufferLoad(b, idx)) for b in inf.bufs]
        ins: list[Region] = []
        seen: set[int] = set()
        body = inf.body[0].source[0] if isinstance(inf.body[0], E.Reduce) else inf.body[0]
        loads: list[E.ProducerLoad] = []
        post_order_visit(body, lambda e: loads.append(e) if isinstance(e, E.ProducerLoad)
                         else None)
        for ld in loads:
            if id(ld.producer) in seen:
                continue
            seen.add(id(ld.producer))
            conv = self._convert(ld, inf)
            assert isinstance(conv, ir.BufferLoad)
            start = tuple(simplify_expr(substitute(i, zero)) for i in conv.indices)
            ins.append(Region(conv.buffer, start, (), ir.BufferLoad(conv.buffer, start)))
        return ir.Evaluate(intrin.emit(outs, ins))


def _whole_tiles(st: Stage, region: list[tuple[E.PrimExpr, E.PrimExpr]]
                 ) -> list[tuple[E.PrimExpr, E.PrimExpr]]:
    """A tensorized stage computes whole intrinsic tiles: the extents of the dims its
    intrinsic covers (the last ones) are rounded up to multiples of the intrinsic's, so that
    the buffer holds the last tile even when the consumers read only part of it (a guarded
    output whose extent is not a multiple of the tile: the part past the guard is computed
    and not read). Rounded only within the stage's own shape."""
    intrins = [a.tensor_intrin for a in st.iter_attrs.values()
               if a.kind == "tensorize" and a.tensor_intrin is not None]
    if not intrins:
        return region
    d_ext, _ = intrins[0].extents
    out = list(region)
    shape = st.op.shape  # type: ignore[attr-defined]
    for d, tile in zip(range(len(out) - len(d_ext), len(out)), d_ext):
        mn, ex = out[d]
        if d < 0 or not isinstance(ex, E.IntImm) or not isinstance(shape[d], E.IntImm):
            continue
        whole = -(-ex.value // tile) * tile
        if whole <= shape[d].value:
            out[d] = (mn, E.const(whole, ex.dtype))
    return out


def _thread_tag(entry: tuple[Stage, E.IterVar]) -> str:
    attr = entry[0].iter_attrs.get(entry[1])
    thread = attr.bind_thread if attr is not None else None
    return thread.thread_tag if thread is not None else ""


def _follow_to_leaf(st: Stage, iv: E.IterVar) -> E.IterVar:
    """The leaf that now stands for a compute_at axis split or fused afterwards: the inner
    part of a split, the fused var of a fuse (the same or a finer attach point, as in TVM)."""
    while not any(v is iv for v in st.leaf_iter_vars):
        nxt = None
        for r in st.relations:
            if isinstance(r, Split) and r.parent is iv:
                nxt = r.inner
            elif isinstance(r, Fuse) and (r.outer is iv or r.inner is iv):
                nxt = r.fused
        if nxt is None:
            raise LoweringError(f"axis '{iv.var.name}' of stage '{st.name}' is not a loop")
        iv = nxt
    return iv


class _Inliner(ExprMutator):
    """Replace reads of inlined stages by their bodies (recursively)."""

    def __init__(self, sch: Schedule, body_of: Any) -> None:
        super().__init__()
        self.sch, self.body_of = sch, body_of

    def visit_ProducerLoad(self, e: E.ProducerLoad) -> E.PrimExpr:
        idx = tuple(self.visit(i) for i in e.indices)
        st = self.sch[e.producer]
        if st.attach_type != INLINE:
            if all(a is b for a, b in zip(idx, e.indices)):
                return e
            return E.ProducerLoad(e.producer, idx)
        body = self.body_of(st)[e.producer.value_index]
        return substitute(body, dict(zip([a.var for a in st.op.axis], idx)))  # type: ignore


class _ToBuffers(ExprMutator):
    """ProducerLoad(T, idx) -> BufferLoad(buffer of T, idx - region min of T)."""

    def __init__(self, low: _Lowerer) -> None:
        super().__init__()
        self.low = low

    def visit_ProducerLoad(self, e: E.ProducerLoad) -> E.PrimExpr:
        idx = [self.visit(i) for i in e.indices]
        buf, mins = self.low._buffer_of(e.producer)
        return ir.BufferLoad(buf, tuple(i - m for i, m in zip(idx, mins)))


def _strides(st: Stage, shape: Sequence[E.PrimExpr]) -> tuple[E.PrimExpr, ...] | None:
    """Row-major strides with storage_align padding applied (None when not aligned)."""
    if not st.storage_aligns:
        return None
    if not all(isinstance(d, E.IntImm) for d in shape):
        raise LoweringError(f"storage_align of stage '{st.name}' needs a constant buffer shape")
    align = {d: (f, o) for d, f, o in st.storage_aligns}
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        s = strides[d + 1] * shape[d + 1].value  # type: ignore[attr-defined]
        if d in align:
            f, o = align[d]
            s = ((s - o + f - 1) // f) * f + o
        strides[d] = s
    return tuple(E.const(s) for s in strides)
