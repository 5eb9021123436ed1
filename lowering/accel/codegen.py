"""Loop IR -> the accelerator's instruction stream, for schedules written as VTA writes them.

Every shape is static, so the loops outside the accelerator's own instructions run here,
at build time, and the stream comes out flat. Inside them each marked nest becomes
instructions:

- a loop with pragma `dma_copy` copies between DRAM and an on-chip scope: LOADs (into
  env.inp_scope, env.wgt_scope, env.acc_scope) or STOREs (from env.acc_scope into an
  int8 argument), 2-D strided (lowering.accel.dma); a copy guarded by
  `if_then_else(bounds, x[...], 0)` (a zero-padded tensor, tensor_expr.ops.pad, set to
  env.inp_scope as VTA's conv2d does) reads only inside the bounds and pads the rest
  with the LOAD's pad fields; a STORE into an int32 argument writes four byte planes
  (the STORE keeps low bytes: an ALU shift right by 8 between), which the kernel joins;
- a nest around the tensorized `env.gemm` call is one GEMM, and the zero-init nest the
  reduction puts before it one GEMM reset: two of its loops become the instruction's
  loops (index factors), the others its micro-op kernel;
- a loop with pragma `alu` is one ALU instruction per operation of its body (shift right,
  min, max, add, multiply, with an immediate or a second accumulator operand), in place:
  a stage that reads one accumulator buffer elementwise shares that buffer's memory (it
  must be its only reader), as TVM's in-place storage rewrite gives VTA.

Micro-op kernels are generated per nest and stored once per distinct content, all loaded
by one LOAD at the start. A loop bound to `te.thread_axis("cthread")` runs its virtual
threads in lock step: the buffers allocated inside get one copy per thread, and each
instruction is emitted once per thread, so one thread's loads overlap another's GEMM.
The dependency tokens come from lowering.accel.deps.

Anything the accelerator cannot run is a ScheduleError naming the buffer or loop and
the fix.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from math import prod

import numpy as np

from lowering import ir
from lowering.accel.affine import Affine, NotAffine, affine, value
from lowering.accel.deps import insert_dependencies
from lowering.accel.dma import Dim, fold, padded
from lowering.accel.dram import Dram, elem_shape
from lowering.accel.env import GEMM_INTRIN, Env
from lowering.accel.isa import Alu, AluOp, Finish, Gemm, Insn, Load, MemType, Store, Uop
from tensor_expr import expr as E
from tessel_errors import ScheduleError

Lane = dict  # Var -> int (bound loops), Buffer -> int (SRAM base of an allocation)
_NAMES = {MemType.INP: "input", MemType.WGT: "weight", MemType.ACC: "accumulator"}
_IMM = (-(1 << 15), (1 << 15) - 1)
PAD_MAX = 15  # the LOAD's pad fields are 4 bits


@dataclass(frozen=True)
class Param:
    """Where an argument lives in DRAM: its memory type (None: no DMA touches it), base
    (in elements) and element count; `output` when a STORE writes it. An int32 output
    is stored as `planes` = 4 arrays of int8 output elements, byte k of every value in
    plane k (the STORE writes low bytes only: see `_wide_store`)."""

    buffer: ir.Buffer
    mem: MemType | None
    base: int
    count: int
    output: bool
    planes: int = 1


@dataclass(frozen=True)
class Program:
    """A generated kernel: the stream (tokens set), its micro-ops, the DRAM image with the
    micro-ops in place, and where each argument goes."""

    insns: tuple[Insn, ...]
    uops: tuple[Uop, ...]
    dram: Dram
    params: tuple[Param, ...]


def generate(func: ir.PrimFunc, env: Env) -> Program:
    """The accelerator program of a lowered schedule (see the module doc)."""
    return _Gen(func, env).run()


def _perfect(s: ir.Stmt) -> tuple[list[ir.For], ir.Stmt]:
    """The loops of a perfect nest from `s` down and its innermost statement."""
    loops = []
    while isinstance(s, ir.For):
        loops.append(s)
        s = s.body
    return loops, s


def _same(a: tuple, b: tuple) -> bool:
    """Two tuples of loop vars (or None) are the same vars (Var's == builds an EQ)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _has_none(vs: tuple) -> bool:
    return any(v is None for v in vs)


def _strip_cast(e: E.PrimExpr) -> E.PrimExpr:
    while isinstance(e, E.Cast):
        e = e.value
    return e


def _guarded(e: E.PrimExpr) -> tuple[E.PrimExpr, list[E.PrimExpr]]:
    """A copy's source as (the value it reads, the conditions guarding it): a zero-padded
    read `if_then_else(c0 && c1 ..., x[...], 0)` gives (x[...], [c0, c1, ...])."""
    e = _strip_cast(e)
    if isinstance(e, E.Call) and e.name == "if_then_else":
        cond, then, other = e.args
    elif isinstance(e, E.Select):
        cond, then, other = e.condition, e.true_value, e.false_value
    else:
        return e, []
    other = _strip_cast(other)
    if not (isinstance(other, (E.IntImm, E.FloatImm)) and other.value == 0):
        return e, []
    conds, todo = [], [cond]
    while todo:
        c = todo.pop()
        if isinstance(c, E.And):
            todo += [c.a, c.b]
        else:
            conds.append(c)
    return _strip_cast(then), conds


_CMP = {E.LT: np.less, E.LE: np.less_equal, E.GT: np.greater, E.GE: np.greater_equal,
        E.EQ: np.equal, E.NE: np.not_equal}


def _valid_ranges(conds: list[E.PrimExpr], free: dict, lane: Lane, head: str
                  ) -> dict | None:
    """For a padded copy: the [lo, hi) range of each free loop inside which every guard
    holds (a guard must compare an affine form of one loop with a constant); None when a
    guard fails everywhere."""
    ranges: dict = {}
    for c in conds:
        kind = type(c)
        form = None
        if kind in _CMP:
            try:
                form = affine(c.a, lane).plus(affine(c.b, lane), -1)
            except NotAffine:
                form = None
        if form is None or len(form.coeffs) > 1:
            raise ScheduleError(f"the dma_copy loop '{head}' is guarded by '{c}'; a padded "
                                "copy's guards must compare one loop's index with a "
                                "constant (as tensor_expr.ops.pad writes them)")
        if not form.coeffs:
            if not _CMP[kind](form.const, 0):
                return None
            continue
        (v, k), = form.coeffs.items()
        it = np.arange(free[v])
        ok = _CMP[kind](k * it + form.const, 0)
        if v in ranges:
            ok &= ranges[v]
        ranges[v] = ok
    out = {}
    for v, ok in ranges.items():
        idx = np.flatnonzero(ok)
        lo, hi = (int(idx[0]), int(idx[-1]) + 1) if idx.size else (0, 0)
        if idx.size and idx.size != hi - lo:
            raise ScheduleError(f"the dma_copy loop '{head}': the guards leave loop "
                                f"'{v.name}' valid on a range with holes")
        out[v] = (lo, hi)
    return out


def _alu_chain(e: E.PrimExpr) -> tuple[ir.BufferLoad | None, list[tuple[AluOp, object]]]:
    """An ALU body as (the operand it updates in place, [(op, imm int or a load)])."""
    e = _strip_cast(e)
    if isinstance(e, ir.BufferLoad):
        return e, []
    op = None
    if isinstance(e, E.Call) and e.name in ("shift_right", "shift_left"):
        a, b, op = e.args[0], e.args[1], AluOp.SHR
    elif isinstance(e, (E.Add, E.Sub, E.Mul, E.Min, E.Max)):
        a, b = e.a, e.b
        op = {E.Add: AluOp.ADD, E.Sub: AluOp.ADD, E.Mul: AluOp.MUL, E.Min: AluOp.MIN,
              E.Max: AluOp.MAX}[type(e)]
        if not isinstance(e, E.Sub) and isinstance(_strip_cast(a), (E.IntImm, ir.BufferLoad)) \
                and not isinstance(_strip_cast(b), (E.IntImm, ir.BufferLoad)):
            a, b = b, a  # commutative: keep the chain on the left
        elif not isinstance(e, E.Sub) and isinstance(_strip_cast(a), E.IntImm):
            a, b = b, a
    if op is None:
        return None, []
    base, ops = _alu_chain(a)
    rhs = _strip_cast(b)
    if isinstance(rhs, E.IntImm):
        imm = int(rhs.value)
        imm = -imm if isinstance(e, (E.Sub,)) or (
            isinstance(e, E.Call) and e.name == "shift_left") else imm
        ops.append((op, imm))
    elif isinstance(rhs, ir.BufferLoad) and not isinstance(e, (E.Sub, E.Call)):
        ops.append((op, rhs))
    else:
        return None, []
    return base, ops


class _Gen:
    def __init__(self, func: ir.PrimFunc, env: Env) -> None:
        self.func, self.env = func, env
        self.scopes = {env.inp_scope: MemType.INP, env.wgt_scope: MemType.WGT,
                       env.acc_scope: MemType.ACC}
        self.body: list[Insn] = []
        self.uops: list[Uop] = []
        self.kernels: dict[tuple[Uop, ...], int] = {}
        self.top = dict.fromkeys(self.scopes.values(), 0)
        self.live: dict[MemType, list[tuple[str, int]]] = {m: [] for m in self.scopes.values()}
        self.alias: dict[ir.Buffer, ir.Buffer] = {}
        self.params: dict[ir.Buffer, Param] = {}
        self.dram = Dram(env)

    # -- driver ------------------------------------------------------------------------
    def run(self) -> Program:
        self._prepare()
        self._walk(self.func.body, [{}])
        stream: list[Insn] = []
        if self.uops:
            if len(self.uops) > self.env.UOP_BUFF_DEPTH:
                raise ScheduleError(
                    f"accel kernel '{self.func.name}': its micro-op kernels take "
                    f"{len(self.uops)} micro-ops, the micro-op buffer holds "
                    f"{self.env.UOP_BUFF_DEPTH}; make the tiles the GEMM and ALU nests run "
                    "over smaller (split the axes inside them)")
            base = self.dram.place_uops(self.uops)
            stream.append(Load(mem=MemType.UOP, sram_base=0, dram_base=base, y_size=1,
                               x_size=len(self.uops), x_stride=len(self.uops)))
        stream += self.body + [Finish()]
        params = tuple(self.params[b] for b in self.func.params)
        return Program(tuple(insert_dependencies(stream, self.uops)), tuple(self.uops),
                       self.dram, params)

    def _prepare(self) -> None:
        """DRAM roles of the arguments (from the copies that touch them) and the aliases
        of in-place ALU stages, before any instruction is made."""
        roles: dict[ir.Buffer, tuple[MemType, bool]] = {}
        reads: dict[ir.Buffer, int] = {}
        alu_bases: list[tuple[ir.Buffer, ir.Buffer]] = []

        def count(e: E.PrimExpr) -> None:
            if isinstance(e, ir.BufferLoad):
                reads[e.buffer] = reads.get(e.buffer, 0) + 1

        def visit(s: ir.Stmt) -> None:
            if isinstance(s, ir.BufferStore):
                from tensor_expr.visitor import post_order_visit

                post_order_visit(s.value, count)
            if isinstance(s, ir.For) and s.annotations:
                keys = {k for k, _ in s.annotations}
                _, leaf = _perfect(s)
                if self.env.dma_copy in keys and isinstance(leaf, ir.BufferStore):
                    src, _ = _guarded(leaf.value)
                    if isinstance(src, ir.BufferLoad):
                        if leaf.buffer.scope in self.scopes and src.buffer.scope == "global":
                            self._role(roles, src.buffer, self.scopes[leaf.buffer.scope], False)
                        elif leaf.buffer.scope == "global":
                            self._role(roles, leaf.buffer, MemType.OUT, True)
                if self.env.alu in keys and isinstance(leaf, ir.BufferStore):
                    base, _ = _alu_chain(leaf.value)
                    if base is not None and base.buffer is not leaf.buffer:
                        alu_bases.append((leaf.buffer, base.buffer))
            for c in ir.stmt_children(s):
                visit(c)

        visit(self.func.body)
        for dst, base in alu_bases:
            if dst.scope == self.env.acc_scope and base.scope == self.env.acc_scope:
                if reads.get(base, 0) > 1:
                    raise ScheduleError(
                        f"'{dst.name}' is computed by the ALU in place over '{base.name}' "
                        f"(the ALU updates accumulators in place), but '{base.name}' has "
                        "other readers; give each other reader its own stage, or fold the "
                        f"operations into the stage that computes '{dst.name}'")
                self.alias[dst] = base
        for b in self.func.params:
            mem, out = roles.get(b, (None, False))
            if mem is None:
                self.params[b] = Param(b, None, 0, 0, False)
                continue
            planes = 4 if out and b.dtype == "int32" else 1
            count_ = self._elements(b, mem, f"argument '{b.name}'", planes > 1)
            self.params[b] = Param(b, mem, self.dram.alloc(mem, planes * count_), count_,
                                   out, planes)

    def _role(self, roles: dict, buf: ir.Buffer, mem: MemType, out: bool) -> None:
        if buf not in self.func.params:
            raise ScheduleError(f"buffer '{buf.name}' in scope '{buf.scope}' is copied by "
                                "DMA; DRAM buffers must be kernel arguments (set the scope "
                                "of the intermediate stage to an accelerator scope)")
        old = roles.get(buf)
        if old is not None and old[0] is not mem:
            raise ScheduleError(
                f"argument '{buf.name}' is copied as {old[0].name} and as {mem.name} "
                "elements; one argument has one layout on the accelerator: pass it twice "
                "as two arguments")
        roles[buf] = (mem, out)

    # -- buffers -----------------------------------------------------------------------
    def _elements(self, buf: ir.Buffer, mem: MemType, what: str, wide: bool = False) -> int:
        """Whole elements of `mem` in `buf` (its trailing dims must be one element); a
        `wide` output holds int32 values."""
        eshape, dtype = elem_shape(self.env, mem)
        dims = [value(d, {}) for d in buf.shape]
        if tuple(dims[-len(eshape):]) != eshape or len(dims) <= len(eshape):
            raise ScheduleError(
                f"{what} of shape {tuple(dims)} holds {mem.name} elements of shape "
                f"{list(eshape)} ({dtype}): its trailing dims must be "
                f"{', '.join(map(str, eshape))}; pack it in the accelerator's blocked "
                "layout (env.BATCH, env.BLOCK_IN, env.BLOCK_OUT)")
        if buf.dtype != dtype and not ((mem is MemType.ACC or wide) and buf.dtype == "int32"):
            raise ScheduleError(f"{what} is {buf.dtype}; the accelerator's {mem.name} "
                                f"elements are {dtype}")
        if buf.strides is not None:
            raise ScheduleError(f"{what} has padded strides (storage_align); the "
                                "accelerator's buffers are compact")
        return prod(dims[:-len(eshape)])

    def _alloc(self, buf: ir.Buffer, lane: Lane) -> int:
        mem = self.scopes[buf.scope]
        n = self._elements(buf, mem, f"buffer '{buf.name}' (scope {buf.scope})")
        depth = self.env.depth(mem.name)
        base = self.top[mem]
        if base + n > depth:
            held = ", ".join(f"'{name}' {k}" for name, k in self.live[mem]) or "nothing"
            threads = " (one copy per virtual thread)" if len(lane.get("_lanes", ())) else ""
            raise ScheduleError(
                f"buffer '{buf.name}' (scope {buf.scope}) needs {n} {_NAMES[mem]} elements"
                f"{threads}, the {_NAMES[mem]} buffer holds {depth} and already holds "
                f"{held}; compute '{buf.name}' at an inner loop or split the loops it "
                "covers by a smaller factor")
        self.top[mem] = base + n
        self.live[mem].append((buf.name, n))
        return base

    def _sram_base(self, buf: ir.Buffer, lane: Lane) -> int:
        root = buf
        while root in self.alias:
            root = self.alias[root]
        if root not in lane:
            raise ScheduleError(f"buffer '{buf.name}' is used outside the scope of "
                                f"'{root.name}', whose memory it shares (an in-place ALU "
                                "stage); compute both at the same loop")
        return lane[root]

    def _access(self, load: ir.BufferLoad | ir.BufferStore, lane: Lane,
                mem: MemType | None = None) -> tuple[Affine, tuple[E.Var | None, ...]]:
        """(element index as an affine form of the nest's loops, the loop var running
        over each trailing element dim, None where that index is 0)."""
        buf = load.buffer
        on_chip = buf.scope in self.scopes
        if mem is None:
            mem = self.scopes[buf.scope] if on_chip else self.params[buf].mem
        assert mem is not None
        eshape, _ = elem_shape(self.env, mem)
        ne = len(eshape)
        dims = [value(d, {}) for d in buf.shape]
        lead, trail = load.indices[:-ne], load.indices[-ne:]
        evars: list[E.Var | None] = []
        for idx in trail:
            form = affine(idx, lane)
            if not form.coeffs and form.const == 0:
                evars.append(None)
                continue
            (v, c), = form.coeffs.items() if len(form.coeffs) == 1 else ((None, 0),)
            if c != 1 or form.const != 0:
                raise ScheduleError(
                    f"'{buf.name}[{', '.join(map(str, load.indices))}]': the accelerator "
                    f"moves whole elements of {list(eshape)}, so the trailing indices must "
                    "be the loops over those dims (do not split or reorder them)")
            evars.append(v)
        form = Affine(self._sram_base(buf, lane) if on_chip else self.params[buf].base)
        stride = 1
        for idx, size in reversed(list(zip(lead, dims[:len(lead)]))):
            form = form.plus(affine(idx, lane), stride)
            stride *= size
        if any(v in form.coeffs for v in evars if v is not None):
            raise ScheduleError(f"'{buf.name}': a loop over an element dim also indexes "
                                "its outer dims")
        return form, tuple(evars)

    # -- the walk ----------------------------------------------------------------------
    def _walk(self, s: ir.Stmt, lanes: list[Lane]) -> None:
        if isinstance(s, ir.SeqStmt):
            for c in s.stmts:
                self._walk(c, lanes)
        elif isinstance(s, ir.Allocate):
            self._walk_alloc(s, lanes)
        elif isinstance(s, ir.For):
            self._walk_for(s, lanes)
        elif isinstance(s, ir.Evaluate):
            for lane in lanes:
                self._gemm([], s, lane)
        elif isinstance(s, ir.BufferStore) and self._is_reset(s):
            for lane in lanes:
                self._reset([], s, lane)
        elif isinstance(s, ir.BufferStore):
            raise self._unmarked(s)
        elif isinstance(s, ir.IfThenElse):
            raise ScheduleError(f"the accelerator cannot run the guard 'if {s.condition}' "
                                "(a split whose factor does not divide the extent); choose "
                                "split factors that divide the axes")
        else:
            raise ScheduleError(f"the accelerator cannot run a {type(s).__name__} statement")

    def _walk_alloc(self, s: ir.Allocate, lanes: list[Lane]) -> None:
        buf = s.buffer
        if buf in self.alias:
            self._walk(s.body, lanes)
            return
        if buf.scope not in self.scopes:
            raise ScheduleError(
                f"buffer '{buf.name}' is in scope '{buf.scope}'; on the accelerator an "
                "intermediate lives on chip: set_scope(env.inp_scope / env.wgt_scope / "
                "env.acc_scope) on its stage, or compute_inline it")
        mem = self.scopes[buf.scope]
        top, live = self.top[mem], len(self.live[mem])
        inner = [{**lane, buf: self._alloc(buf, lane)} for lane in lanes]
        self._walk(s.body, inner)
        self.top[mem] = top
        del self.live[mem][live:]

    def _walk_for(self, s: ir.For, lanes: list[Lane]) -> None:
        keys = {k for k, _ in s.annotations}
        loops, leaf = _perfect(s)
        if self.env.dma_copy in keys:
            for lane in lanes:
                self._dma(loops, leaf, lane)
        elif self.env.alu in keys:
            for lane in lanes:
                self._alu(loops, leaf, lane)
        elif s.kind is ir.ForKind.THREAD_BINDING:
            if s.thread_tag != "cthread":
                raise ScheduleError(f"loop '{s.var.name}' is bound to '{s.thread_tag}'; the "
                                    "accelerator's virtual threads are te.thread_axis("
                                    "'cthread')")
            n = value(s.extent, lanes[0])
            self._walk(s.body, [{**lane, s.var: t, "_lanes": (*lane.get("_lanes", ()), n)}
                                for lane in lanes for t in range(n)])
        elif self._is_gemm(leaf) and all(not f.annotations for f in loops):
            for lane in lanes:
                self._gemm(loops, leaf, lane)
        elif isinstance(leaf, ir.BufferStore) and self._is_reset(leaf):
            for lane in lanes:
                self._reset(loops, leaf, lane)
        else:
            for k in range(value(s.extent, lanes[0])):
                self._walk(s.body, [{**lane, s.var: k} for lane in lanes])

    def _is_gemm(self, s: ir.Stmt) -> bool:
        return isinstance(s, ir.Evaluate) and isinstance(s.value, E.Call) and \
            s.value.name == GEMM_INTRIN

    def _is_reset(self, s: ir.BufferStore) -> bool:
        v = _strip_cast(s.value)
        return s.buffer.scope == self.env.acc_scope and isinstance(v, E.IntImm) and v.value == 0

    def _unmarked(self, s: ir.BufferStore) -> ScheduleError:
        buf = s.buffer
        if buf.scope in self.scopes:
            kind = "alu" if buf.scope == self.env.acc_scope else "dma_copy"
            return ScheduleError(
                f"'{buf.name}' (scope {buf.scope}) is written by a loop the accelerator "
                f"has no instruction for: '{buf.name}[...] = {s.value}'; mark its copy or "
                f"elementwise loop with s[{buf.name}].pragma(axis, env.{kind})")
        return ScheduleError(
            f"argument '{buf.name}' is written by a plain loop ('{buf.name}[...] = "
            f"{s.value}'); the accelerator writes DRAM only by DMA from env.acc_scope: "
            f"mark the copy with s[{buf.name}].pragma(axis, env.dma_copy)")

    # -- DMA ---------------------------------------------------------------------------
    def _dma(self, loops: list[ir.For], leaf: ir.Stmt, lane: Lane) -> None:
        head = loops[0].var.name
        if not isinstance(leaf, ir.BufferStore):
            raise ScheduleError(f"the dma_copy loop '{head}' must be a perfect nest around "
                                "one copy; split the stage or move the pragma inward")
        src, guards = _guarded(leaf.value)
        if not isinstance(src, ir.BufferLoad):
            raise ScheduleError(
                f"the dma_copy loop '{head}' computes '{leaf.buffer.name}[...] = "
                f"{leaf.value}'; a DMA only copies (and narrows to int8 on a STORE), or "
                "pads with zeros: do the arithmetic in an env.acc_scope stage with pragma "
                "env.alu")
        dst = leaf.buffer
        if dst.scope in self.scopes and src.buffer.scope == "global":
            mem, load = self.scopes[dst.scope], True
        elif dst.scope == "global" and src.buffer.scope == self.env.acc_scope:
            mem, load = MemType.OUT, False
        else:
            raise ScheduleError(
                f"the dma_copy loop '{head}' copies '{src.buffer.name}' ({src.buffer.scope}) "
                f"to '{dst.name}' ({dst.scope}); DMAs go from DRAM arguments into "
                "env.inp_scope/env.wgt_scope/env.acc_scope, and from env.acc_scope to DRAM")
        lane = {**lane}
        free = {f.var: value(f.extent, lane) for f in loops}
        d_form, d_ev = self._access(leaf, lane, None if load else MemType.OUT)
        s_form, s_ev = self._access(src, lane, mem if load else None)
        eshape, _ = elem_shape(self.env, mem)
        if not _same(d_ev, s_ev) or _has_none(d_ev) or [free[v] for v in d_ev] != list(eshape):
            raise ScheduleError(
                f"the dma_copy loop '{head}' must copy whole elements of {list(eshape)}: "
                f"the loops over '{dst.name}''s and '{src.buffer.name}''s trailing dims "
                "must be the same full loops")
        sram, dram = (d_form, s_form) if load else (s_form, d_form)
        valid = _valid_ranges(guards, free, lane, head) if guards else {}
        if valid is None:  # the whole block is padding
            valid = {v: (0, 0) for v in free if not any(v is e for e in d_ev)}
        dims = [Dim(free[v], sram.coeff(v), dram.coeff(v), valid.get(v)) for v in free
                if not any(v is e for e in d_ev)]
        if any(not d.full for d in dims):
            self._padded(head, mem, load, dims, sram.const, dram.const)
            return
        blocks = fold(dims)
        if not load and self.params[dst].planes > 1:
            self._wide_store(blocks, sram.const, dram.const, self.params[dst].count)
            return
        for b in blocks:
            fields = dict(sram_base=sram.const + b.sram, dram_base=dram.const + b.dram,
                          y_size=b.y_size, x_size=b.x_size, x_stride=b.x_stride)
            self.body.append(Load(mem=mem, **fields) if load else Store(**fields))

    def _wide_store(self, blocks: list, sram: int, dram: int, count: int) -> None:
        """int32 accumulators to DRAM: the STORE keeps the low 8 bits, so each block is
        stored four times, into four planes `count` elements apart, an arithmetic shift
        right by 8 between (the host joins the bytes). The shifts clobber the
        accumulators: the stored stage must have no later reader (its only reader is
        this copy, which _prepare's in-place rule also gives)."""
        for plane in range(4):
            if plane:
                for b in blocks:
                    bgn = self._uop_kernel((Uop(sram + b.sram),))
                    self.body.append(Alu(op=AluOp.SHR, use_imm=True, imm=8, uop_bgn=bgn,
                                         uop_end=bgn + 1, iter_out=b.y_size,
                                         iter_in=b.x_size, dst_factor_out=b.x_size,
                                         dst_factor_in=1, src_factor_out=b.x_size,
                                         src_factor_in=1))
            for b in blocks:
                self.body.append(Store(sram_base=sram + b.sram,
                                       dram_base=dram + b.dram + plane * count,
                                       y_size=b.y_size, x_size=b.x_size, x_stride=b.x_stride))

    def _uop_kernel(self, uops: tuple[Uop, ...]) -> int:
        """The micro-op buffer index of a kernel with this content (stored once)."""
        if uops not in self.kernels:
            self.kernels[uops] = len(self.uops)
            self.uops += uops
        return self.kernels[uops]

    def _padded(self, head: str, mem: MemType, load: bool, dims: list[Dim], sram: int,
                dram: int) -> None:
        blocks = padded(dims)
        if isinstance(blocks, str) or not load or mem is not MemType.INP:
            why = blocks if isinstance(blocks, str) else "only input loads pad"
            raise ScheduleError(f"the dma_copy loop '{head}' reads a zero-padded tensor "
                                f"but cannot pad: {why}; copy the padded tensor into "
                                "env.inp_scope with its rows and columns innermost")
        for b in blocks:
            if max(b.pads) > PAD_MAX:
                raise ScheduleError(
                    f"the dma_copy loop '{head}' needs {max(b.pads)} rows or columns of "
                    f"padding on one side, the LOAD's pad fields hold at most {PAD_MAX}; "
                    "tile the padded axes smaller")
            y0, y1, x0, x1 = b.pads
            self.body.append(Load(mem=mem, sram_base=sram + b.sram, dram_base=dram + b.dram,
                                  y_size=b.y_size, x_size=b.x_size, x_stride=b.x_stride,
                                  y_pad_0=y0, y_pad_1=y1, x_pad_0=x0, x_pad_1=x1))

    # -- GEMM, reset, ALU ----------------------------------------------------------------
    def _kernel(self, loops: list[ir.For], lane: Lane, skip: set[E.Var],
                forms: list[Affine]) -> tuple[int, int, dict[str, int]]:
        """(uop_bgn, uop_end, loop fields) of a compute nest whose every iteration does
        one micro-op at indices `forms` (dst, src, wgt): two loops become the
        instruction's, the others its micro-ops."""
        ext = [(f.var, value(f.extent, lane)) for f in loops if f.var not in skip]
        ext = [(v, n) for v, n in ext if n > 1]
        hw = sorted(sorted(range(len(ext)), key=lambda i: -ext[i][1])[:2])
        rest = [ext[i] for i in range(len(ext)) if i not in hw]
        if prod(n for _, n in rest) > self.env.UOP_BUFF_DEPTH:
            raise ScheduleError(
                f"the compute nest from loop '{loops[0].var.name}' needs "
                f"{prod(n for _, n in rest)} micro-ops, the micro-op buffer holds "
                f"{self.env.UOP_BUFF_DEPTH}; tile the loops inside it smaller")
        zero = {v: 0 for v, _ in ext} | {v: 0 for v in skip}
        uops = []
        for point in itertools.product(*(range(n) for _, n in rest)):
            at = zero | {v: p for (v, _), p in zip(rest, point)}
            uops.append(Uop(*(f.at(at | {v: 0 for v in f.coeffs if v not in at})
                              for f in forms)))
        bgn = self._uop_kernel(tuple(uops))
        fields: dict[str, int] = {}
        for name, slot in (("iter_out", 0), ("iter_in", 1)):
            if slot < len(hw):
                v, n = ext[hw[slot]]
                fields[name] = n
                suffix = name[5:]
                for f, field in zip(forms, ("dst", "src", "wgt")):
                    fields[f"{field}_factor_{suffix}"] = f.coeff(v)
        return bgn, bgn + len(uops), fields

    def _gemm(self, loops: list[ir.For], leaf: ir.Evaluate, lane: Lane) -> None:
        call = leaf.value
        if not self._is_gemm(leaf):
            raise ScheduleError(f"the accelerator cannot run '{call}': tensorize with "
                                "env.gemm is its only intrinsic")
        want = (self.env.acc_scope, self.env.inp_scope, self.env.wgt_scope)
        forms = []
        for arg, scope, what in zip(call.args, want, ("output", "input", "weight")):
            if not isinstance(arg, ir.BufferLoad) or arg.buffer.scope != scope:
                name = arg.buffer.name if isinstance(arg, ir.BufferLoad) else str(arg)
                raise ScheduleError(
                    f"env.gemm's {what} '{name}' must be in scope '{scope}'; cache it there "
                    "(cache_read / cache_write / set_scope) and copy it with dma_copy")
            form, evars = self._access(arg, lane)
            if any(v is not None for v in evars):
                raise ScheduleError(f"env.gemm's {what} '{arg.buffer.name}' must start at an "
                                    "element boundary")
            forms.append(form)
        bgn, end, fields = self._kernel(loops, lane, set(), forms)
        self.body.append(Gemm(uop_bgn=bgn, uop_end=end, **fields))

    def _reset(self, loops: list[ir.For], leaf: ir.BufferStore, lane: Lane) -> None:
        form, evars = self._access(leaf, lane)
        self._whole(loops, evars, lane, leaf.buffer.name, "zero-init")
        bgn, end, fields = self._kernel(loops, lane, set(evars), [form])
        self.body.append(Gemm(reset=True, uop_bgn=bgn, uop_end=end, **fields))

    def _whole(self, loops: list[ir.For], evars: tuple, lane: Lane, name: str,
               what: str) -> None:
        ext = {f.var: value(f.extent, lane) for f in loops}
        eshape, _ = elem_shape(self.env, MemType.ACC)
        if _has_none(evars) or [ext.get(v) for v in evars] != list(eshape):
            raise ScheduleError(f"the {what} of '{name}' must cover whole accumulator "
                                f"elements of {list(eshape)} (full loops over its trailing "
                                "dims)")

    def _alu(self, loops: list[ir.For], leaf: ir.Stmt, lane: Lane) -> None:
        head = loops[0].var.name
        base, ops = _alu_chain(leaf.value) if isinstance(leaf, ir.BufferStore) else (None, [])
        if base is None or not ops:
            what = f"'{leaf.buffer.name}[...] = {leaf.value}'" if isinstance(
                leaf, ir.BufferStore) else "its body"
            raise ScheduleError(
                f"the alu loop '{head}' computes {what}; the tensor ALU does shift right/left "
                "by a constant, min, max, add, subtract and multiply of an accumulator by a "
                "constant or another accumulator, over a perfect loop nest")
        assert isinstance(leaf, ir.BufferStore)
        for b in (leaf.buffer, base.buffer):
            if b.scope != self.env.acc_scope:
                raise ScheduleError(f"the alu loop '{head}' uses '{b.name}' in scope "
                                    f"'{b.scope}'; the ALU works on env.acc_scope buffers")
        dst, evars = self._access(leaf, lane)
        self._whole(loops, evars, lane, leaf.buffer.name, "alu loop")
        src, s_ev = self._access(base, lane)
        if (src.const, src.coeffs) != (dst.const, dst.coeffs) or not _same(s_ev, evars):
            raise ScheduleError(f"the alu loop '{head}' reads '{base.buffer.name}' at other "
                                f"elements than it writes '{leaf.buffer.name}'; the ALU "
                                "updates in place, elementwise")
        for op, rhs in ops:
            if isinstance(rhs, int):
                if not _IMM[0] <= rhs <= _IMM[1]:
                    raise ScheduleError(f"the alu loop '{head}': immediate {rhs} does not fit "
                                        "the ALU's 16-bit signed immediate")
                bgn, end, fields = self._kernel(loops, lane, set(evars), [dst])
                fields = {k: v for k, v in fields.items() if not k.startswith("wgt")}
                self.body.append(Alu(op=op, use_imm=True, imm=rhs, uop_bgn=bgn, uop_end=end,
                                     **fields))
                continue
            if rhs.buffer.scope != self.env.acc_scope:
                raise ScheduleError(f"the alu loop '{head}' reads '{rhs.buffer.name}' in "
                                    f"scope '{rhs.buffer.scope}'; load it into "
                                    "env.acc_scope with dma_copy first")
            other, o_ev = self._access(rhs, lane)
            if not _same(o_ev, evars):
                raise ScheduleError(f"the alu loop '{head}' must read '{rhs.buffer.name}' "
                                    "elementwise over the element dims it writes")
            bgn, end, fields = self._kernel(loops, lane, set(evars), [dst, other])
            fields = {k: v for k, v in fields.items() if not k.startswith("wgt")}
            self.body.append(Alu(op=op, uop_bgn=bgn, uop_end=end, **fields))


__all__ = ["Param", "Program", "generate"]
