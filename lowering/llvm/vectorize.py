"""Analyses behind vectorized loops: which values vary with the vector lane, how an index
moves with it (contiguous, strided, or unknown), and whether a loop body can be emitted as
vector code at all.

A vectorized loop over `v` becomes straight-line code on `<N x T>` values: loads whose flat
index moves by 1 per lane are vector loads, by 0 a scalar load broadcast, otherwise a
gather. When the body holds something we do not emit in vector form (a nested loop, a
store that does not move with the lane) the loop is emitted as a scalar loop and LLVM's
loop vectorizer gets it instead. A branch on a lane-varying condition (the guard of a
non-dividing split) becomes a lane mask: masked loads and stores.

    >>> import tensor_expr as te
    >>> i, v = te.var("i"), te.var("v")
    >>> lin_coeff(i * 64 + v * 2 + 1, v, {id(v)})
    2
"""

from __future__ import annotations

from typing import Any

from lowering import ir as lir
from tensor_expr import expr as E
from tensor_expr.visitor import children, post_order_visit

MAX_LANES = 64  # one vector op holds at most this many lanes; longer loops are chunked


VarMemo = dict[int, tuple[Any, frozenset[int]]]
_NONE: frozenset[int] = frozenset()


def var_ids(e: Any, memo: VarMemo) -> frozenset[int]:
    """The ids of the Vars that `e` reads, each sub-expression's set kept in `memo`
    (id -> (node, ids); the node is held so that its id is not reused)."""
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    if not isinstance(e, E.PrimExpr):
        return _NONE
    stack: list[tuple[Any, bool]] = [(e, False)]
    while stack:
        node, done = stack.pop()
        if done:
            if isinstance(node, E.Var):
                ids = frozenset((id(node),))
            else:
                subs = [memo[id(c)][1] for c in children(node)]
                ids = _NONE.union(*subs) if subs else _NONE
            memo[id(node)] = (node, ids)
            continue
        if id(node) in memo:
            continue
        stack.append((node, True))
        for c in children(node):
            if id(c) not in memo:
                stack.append((c, False))
    return memo[id(e)][1]


def uses_any(e: Any, ids: set[int], memo: VarMemo | None = None) -> bool:
    """True when expression `e` reads one of the variables whose id is in `ids`; with a
    `memo` (see var_ids), repeated questions about the same nodes are answered from it."""
    if memo is not None:
        return not var_ids(e, memo).isdisjoint(ids)
    found = False

    def f(n: Any) -> None:
        nonlocal found
        if isinstance(n, E.Var) and id(n) in ids:
            found = True

    post_order_visit(e, f)
    return found


def lin_coeff(e: E.PrimExpr, v: E.Var, varying: set[int],
              memo: VarMemo | None = None) -> int | None:
    """How much `e` grows per step of `v` (an int), or None when it is not affine in `v`
    with a constant coefficient. Expressions that do not vary give 0."""
    if not uses_any(e, varying, memo):
        return 0
    if isinstance(e, E.Var):
        return 1 if e is v else None
    if isinstance(e, (E.Add, E.Sub)):
        a, b = lin_coeff(e.a, v, varying, memo), lin_coeff(e.b, v, varying, memo)
        if a is None or b is None:
            return None
        return a + b if isinstance(e, E.Add) else a - b
    if isinstance(e, E.Mul):
        a, b = lin_coeff(e.a, v, varying, memo), lin_coeff(e.b, v, varying, memo)
        if a is None or b is None:
            return None
        if b == 0 and isinstance(e.b, E.IntImm):
            return a * e.b.value
        if a == 0 and isinstance(e.a, E.IntImm):
            return b * e.a.value
        return None
    if isinstance(e, E.Cast) and e.dtype in ("int32", "int64") and e.value.dtype in (
        "int8", "int16", "int32", "int64"
    ):
        return lin_coeff(e.value, v, varying, memo)
    return None


def flat_coeff(buf: lir.Buffer, strides: list[int | None], indices: tuple[E.PrimExpr, ...],
               v: E.Var, varying: set[int], memo: VarMemo | None = None) -> int | None:
    """The per-lane step of the flattened index of `buf[indices]`, or None if unknown."""
    total = 0
    for idx, stride in zip(indices, strides):
        c = lin_coeff(idx, v, varying, memo)
        if c is None:
            return None
        if c == 0:
            continue
        if stride is None:
            return None
        total += c * stride
    return total


def vector_body_ok(body: lir.Stmt, v: E.Var, const_strides: Any,
                   memo: VarMemo | None = None) -> bool:
    """True when `body` of a loop vectorized over `v` can be emitted as vector code.

    `const_strides(buffer)` gives the buffer's strides as ints (None where symbolic).
    """
    varying = {id(v)}

    def ok(s: lir.Stmt) -> bool:
        if isinstance(s, lir.SeqStmt):
            return all(ok(c) for c in s.stmts)
        if isinstance(s, lir.BufferStore):
            c = flat_coeff(s.buffer, const_strides(s.buffer), s.indices, v, varying, memo)
            return c != 0
        if isinstance(s, lir.LetStmt):
            if uses_any(s.value, varying, memo):
                varying.add(id(s.var))
            return ok(s.body)
        if isinstance(s, lir.IfThenElse):
            # a lane-varying condition becomes a lane mask on the stores and loads below
            return ok(s.then_case) and (s.else_case is None or ok(s.else_case))
        return False

    return ok(body)


def chunk_lanes(extent: int) -> int:
    """Lanes per vector op for a vectorized loop of `extent`; 0 when none fits."""
    if extent <= MAX_LANES:
        return extent
    for w in (64, 32, 16, 8, 4):
        if extent % w == 0:
            return w
    return 0
