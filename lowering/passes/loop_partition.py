"""Pass loop_partition: split a loop into head / main / tail so that the guards of
non-dividing splits (`if (i.outer*4 + i.inner < 10)`) vanish from the main body.

For a loop over `v` with constant bounds, each guard conjunct that is linear in `v`, with
the rest bounded by loops inside it, holds on an interval of `v`; on the intersection of
those intervals (the main part) the conjuncts are dropped. Head and tail keep the guards;
a one-iteration piece gets `v` substituted, which lets the inner loops partition in turn.
Only guards around little work count (a guard around a loop nest is one test per run of
it; hoist_guards has moved each conjunct out as far as it goes), and inside a head or
tail, a loop around much work is not partitioned again on the guards that made it one:
a conv's border column tile keeps its per-(column, kw) guard rather than copying its
unrolled micro-kernel once more per kw that reaches into the padding (and its unrolled
loops around loop nests are rolled). A loop of little work (an unrolled column tile)
also reads the ranges of the loops around it: a border tile's column guard `c + kw >= 1`
holds for every kw from column 1 on, so the tile's columns split in two, no copy.

    >>> import tensor_expr as te, lowering
    >>> from schedule import create_schedule
    >>> A = te.placeholder((10,), name="A")
    >>> B = te.compute((10,), lambda i: A[i] + 1.0, name="B")
    >>> s = create_schedule(B); io, ii = s[B].split(B.op.axis[0], factor=4)
    >>> print(lowering.lower(s, [A, B]))
    func main(A: float32[10], B: float32[10]) {
      for (i.outer, 0, 2) {
        for (i.inner, 0, 4) {
          B[((i.outer * 4) + i.inner)] = (A[((i.outer * 4) + i.inner)] + 1.0)
        }
      }
      for (i.inner, 0, 2) {
        B[(i.inner + 8)] = (A[(i.inner + 8)] + 1.0)
      }
    }
"""

from __future__ import annotations

import dataclasses

from lowering import ir
from lowering.passes.hoist_guards import SMALL_WORK, as_negative, conjuncts, work
from lowering.passes.remove_no_op import substitute_stmt
from tensor_expr import expr as E
from tensor_expr.arith import Analyzer, simplify
from tensor_expr.arith.linear import linearize
from tensor_expr.visitor import collect_vars

_MAX_PIECES_DEPTH = 4  # partitioned loops nested at most this deep (code size)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class _Partition(ir.StmtMutator):
    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        # enclosing loops of one iteration (a compute_at stage's own axes, still loops
        # here: remove_no_op inlines them later): their vars are constants for the loops
        # inside, e.g. the row of a conv's accumulator tile in its padding guard
        self.units: list[tuple[E.Var, int]] = []
        # the vars of the loops whose border piece is being partitioned (see visit_For)
        self.frozen: set[int] = set()
        # enclosing loops (pieces) of constant bounds: a loop of little work (an unrolled
        # column tile) is partitioned on a guard whose other vars are these (a border
        # tile's column guard `c + kw >= 1` holds for every kw from column 1 on: two
        # pieces of the same unrolled columns, no copy)
        self.ranges: list[tuple[E.Var, int, int]] = []

    def _visit_inside(self, s: ir.Stmt, v: E.Var, lo: int, hi: int) -> ir.Stmt:
        self.ranges.append((v, lo, hi))
        try:
            return self.generic_visit(s) if isinstance(s, ir.For) and s.var is v \
                else self.visit(s)
        finally:
            self.ranges.pop()

    def visit_For(self, s: ir.For) -> ir.Stmt:
        if isinstance(s.min, E.IntImm) and isinstance(s.extent, E.IntImm) \
                and s.extent.value == 1 and s.kind is not ir.ForKind.THREAD_BINDING:
            self.units.append((s.var, s.min.value))
            try:
                return self.generic_visit(s)
            finally:
                self.units.pop()
        if not (isinstance(s.min, E.IntImm) and isinstance(s.extent, E.IntImm)) \
                or self.depth >= _MAX_PIECES_DEPTH or s.kind is ir.ForKind.THREAD_BINDING:
            return self.generic_visit(s)
        lo, hi = s.min.value, s.min.value + s.extent.value
        conds = _worth_peeling(s.body)
        little = work(s.body) < SMALL_WORK
        if self.frozen and not little:
            conds = [c for c in conds if not any(id(v) in self.frozen
                                                 for v in collect_vars(c))]
        if not conds:
            return self._visit_inside(s, s.var, lo, hi)
        inner = _inner_analyzer(s.body)
        if little:
            for var, a, b in self.ranges:
                inner.bind(var, (a, b))
        for var, value in self.units:
            inner.bind(var, (value, value + 1))
        m_lo, m_hi = lo, hi
        known: list[tuple[E.PrimExpr, tuple[float, float], tuple[float, float]]] = []
        for c in conds:
            iv = _intervals(c, s.var, inner)
            if iv is None:
                continue
            known.append((c, *iv))
            m_lo, m_hi = max(m_lo, iv[0][0]), min(m_hi, iv[0][1])  # type: ignore[assignment]
        m_lo, m_hi = int(min(max(m_lo, lo), hi)), int(max(min(m_hi, hi), lo))
        if not known:
            return self._visit_inside(s, s.var, lo, hi)
        spans: list[tuple[int, int]] = [(lo, m_lo), (m_lo, m_hi), (m_hi, hi)]
        if m_lo >= m_hi:
            # no iteration free of every guard (a tile row of two tiles, the left one
            # guarded on the left, the right one on the right): cut where any guard starts
            # or stops holding, so that each piece drops the guards that hold on it
            cuts = sorted({int(p) for _, al, nv in known for p in (*al, *nv)
                           if p != float("inf") and p != -float("inf") and lo < p < hi})
            if not cuts:
                return self._visit_inside(s, s.var, lo, hi)
            spans = list(zip([lo, *cuts], [*cuts, hi]))
        pieces: list[tuple[int, int, ir.Stmt]] = []
        self.depth += 1
        for a, b in spans:
            if b <= a:
                continue
            true_ids = {id(c) for c, al, _ in known if al[0] <= a and b <= al[1]}
            false_ids = {id(c) for c, _, nv in known if nv[0] <= a and b <= nv[1]}
            body = _Rewrite(true_ids, false_ids).visit(s.body)
            # a border piece keeps the guards that made it one: loops of much work inside
            # it are not partitioned on them again (a conv's border column tile would copy
            # its micro-kernel once more per kw that reaches into the padding); loops of
            # little work still are
            border = len(true_ids) + len(false_ids) < len(known)
            one = b - a == 1 and s.kind is not ir.ForKind.VECTORIZED
            if border:
                self.frozen.add(id(s.var))
            if one:  # its var a constant for the loops inside (substituted below)
                self.units.append((s.var, a))
            try:
                body = self.visit(body) if one else self._visit_inside(body, s.var, a, b)
            finally:
                self.frozen.discard(id(s.var))
                if one:
                    self.units.pop()
            if one:
                body = substitute_stmt(body, s.var, E.const(a, s.var.dtype))
            if border:  # unrolled copies of loop nests for a few border iterations
                body = _Roll().visit(body)
            pieces.append((a, b, body))
        self.depth -= 1
        if s.kind is ir.ForKind.PARALLEL:
            return _one_parallel_loop(s, pieces)
        return ir.seq(*[body if b - a == 1 and s.kind is not ir.ForKind.VECTORIZED else
                        dataclasses.replace(s, min=E.const(a, s.min.dtype),
                                            extent=E.const(b - a, s.extent.dtype), body=body)
                        for a, b, body in pieces])


class _Roll(ir.StmtMutator):
    """Unrolled loops around a loop nest become serial: in a border piece, a conv's
    unrolled kw around its input channels would triple the micro-kernels built for a
    tile or two (ResNet-18's 64@56 tuning candidates, AVX-512 code: median build 0.33
    -> 0.25 s, the padded copy's 0.19)."""

    def visit_For(self, s: ir.For) -> ir.Stmt:
        body = self.visit(s.body)
        if s.kind is ir.ForKind.UNROLLED and ir.has_loop(body, ir.ForKind.SERIAL):
            return dataclasses.replace(s, kind=ir.ForKind.SERIAL, body=body)
        return s if body is s.body else dataclasses.replace(s, body=body)


def _worth_peeling(s: ir.Stmt) -> list[E.PrimExpr]:
    """The guard conjuncts under `s` worth a copy of a loop body: those of guards around
    little work (fewer than SMALL_WORK statement runs: a store, a short row). A guard
    around more is one test per that much work, cheaper than a copy of it per border:
    hoist_guards puts a conv's row guard around its taps of one kh, a loop nest that
    holds the unrolled micro-kernel."""
    conds: list[E.PrimExpr] = []

    def f(n: ir.Stmt) -> None:
        if isinstance(n, ir.IfThenElse) and work(n) < SMALL_WORK:
            conds.extend(conjuncts(n.condition))

    ir.post_order_visit_stmt(s, f)
    return conds


def _one_parallel_loop(s: ir.For, pieces: list[tuple[int, int, ir.Stmt]]) -> ir.Stmt:
    """The pieces of a partitioned parallel loop as branches of its one body: a head or
    tail as a loop of its own after the parallel one would run on one thread (a batch-1
    dense's last partial column tile did, a sixteenth of its work, serially)."""
    body = pieces[-1][2]
    for _, b, piece in reversed(pieces[:-1]):
        body = ir.IfThenElse(E.LT(s.var, E.const(b, s.var.dtype)), piece, body)
    return dataclasses.replace(s, body=body)


def _intervals(c: E.PrimExpr, v: E.Var, inner: Analyzer
               ) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """([lo, hi) where conjunct c holds for all inner iterations, [lo, hi) where it holds
    for none), infinite ends as floats; None when c is not linear in v over inner loops."""
    neg = as_negative(c)
    if neg is None:
        return None
    lin = linearize(neg)
    coef = lin.take(v)
    if coef == 0:
        return None
    const, lin.const = lin.const, 0
    lo_rest, hi_rest = inner.const_int_bound(lin.to_expr())
    if lo_rest is None or hi_rest is None:
        return None
    inf = float("inf")
    always = -1 - hi_rest - const  # holds everywhere iff coef * v <= always
    never = -lo_rest - const  # fails everywhere iff coef * v >= never
    if coef > 0:
        return (-inf, always // coef + 1), (_ceil_div(never, coef), inf)
    return (_ceil_div(always, coef), inf), (-inf, never // coef + 1)


def _inner_analyzer(s: ir.Stmt) -> Analyzer:
    """An Analyzer that knows the ranges of the constant loops in `s` (a var that several
    loops share gets the union of their ranges)."""
    ranges: dict[int, tuple[E.Var, int, int]] = {}

    def f(n: ir.Stmt) -> None:
        if isinstance(n, ir.For) and isinstance(n.min, E.IntImm) and \
                isinstance(n.extent, E.IntImm) and n.extent.value > 0:
            lo, hi = n.min.value, n.min.value + n.extent.value
            old = ranges.get(id(n.var))
            if old is not None:
                lo, hi = min(old[1], lo), max(old[2], hi)
            ranges[id(n.var)] = (n.var, lo, hi)

    ir.post_order_visit_stmt(s, f)
    ana = Analyzer()
    for var, lo, hi in ranges.values():
        ana.bind(var, (lo, hi))
    return ana


class _Rewrite(ir.StmtMutator):
    """Drop conjuncts known true; an if with a conjunct known false disappears."""

    def __init__(self, true_ids: set[int], false_ids: set[int]) -> None:
        super().__init__()
        self.true_ids, self.false_ids = true_ids, false_ids

    def visit_IfThenElse(self, s: ir.IfThenElse) -> ir.Stmt:
        cs = conjuncts(s.condition)
        if any(id(c) in self.false_ids for c in cs):
            return self.visit(s.else_case) if s.else_case is not None else ir.SeqStmt(())
        then = self.visit(s.then_case)
        other = self.visit(s.else_case)
        keep = [c for c in cs if id(c) not in self.true_ids]
        if not keep:
            return then
        return ir.IfThenElse(simplify(E.all(*keep)), then, other)


def loop_partition(func: ir.PrimFunc) -> ir.PrimFunc:
    """Partition the loops of `func` so that main bodies are guard-free."""
    body = _Partition().visit(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)
