"""Fixed-length features of a candidate for the cost model.

`loop_features(func)` reads the lowered loop IR: for the (up to) `MAX_STMTS` innermost
statements that run most often, the loops along the nest (extent, kind, and for GPU code
whether it is bound to a block, a thread or a virtual thread), arithmetic op counts by
kind, bytes touched per buffer at each loop level, strides of the innermost loop per
buffer (contiguity) and along threadIdx.x (coalescing; shared-memory bank conflicts at
multiples of 32 words), vector lanes and unroll factor, and for GPU code the threads per
block, the blocks and the shared-memory bytes per block. `knob_features(space, index)` is
the cheap alternative: each knob's value (split factors in log2 with the log2 outer count,
which is relative to the shape; the choice index otherwise).

    >>> from autotune.task import Task
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> len(loop_features(t.lower(t.config(0)))) == LOOP_FEATURE_LEN
    True
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from lowering import ir
from schedule.space import ConfigSpace, SplitEntity
from tensor_expr import expr as E

MAX_STMTS = 3      # statements described, most executed first
MAX_DEPTH = 8      # loops per statement, innermost aligned
MAX_BUFS = 4       # buffers per statement (the stored one first)
_KINDS = [ir.ForKind.SERIAL, ir.ForKind.PARALLEL, ir.ForKind.VECTORIZED, ir.ForKind.UNROLLED]
_OPS: list[tuple[str, tuple[type, ...]]] = [
    ("add", (E.Add, E.Sub)), ("mul", (E.Mul,)), ("div", (E.Div, E.FloorDiv, E.FloorMod)),
    ("minmax", (E.Min, E.Max)), ("cmp", (E.CmpOp, E.Not, E.Select)), ("call", (E.Call,)),
    ("cast", (E.Cast,)), ("load", (ir.BufferLoad,)),
]
_BINDINGS = ("blockIdx", "threadIdx", "vthread")
_LOOP_LEN = 1 + len(_KINDS) + len(_BINDINGS)
# bytes per level, innermost stride, contiguous flag, reuse flag, threadIdx.x stride,
# bank-conflict flag
_BUF_LEN = MAX_DEPTH + 5
_STMT_LEN = 3 + MAX_DEPTH * _LOOP_LEN + len(_OPS) + MAX_BUFS * _BUF_LEN
LOOP_FEATURE_LEN = MAX_STMTS * _STMT_LEN + 2 + 3


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


def _const(e: Any) -> int | None:
    if isinstance(e, int):
        return e
    if isinstance(e, E.IntImm):
        return e.value
    return None


def _eval(e: Any, env: dict[Any, int]) -> int:
    """The integer value of an index expression with loop vars bound (others 0)."""
    if isinstance(e, int):
        return e
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return env.get(e, 0)
    if isinstance(e, E.Cast):
        return _eval(e.value, env)
    ops: dict[type, Callable[[int, int], int]] = {
        E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
        E.FloorDiv: lambda a, b: a // b if b else 0, E.FloorMod: lambda a, b: a % b if b else 0,
        E.Min: min, E.Max: max}
    fn = ops.get(type(e))
    if fn is not None:
        return fn(_eval(e.a, env), _eval(e.b, env))
    return 0


def _flat(buf: ir.Buffer, indices: tuple[Any, ...]) -> Callable[[dict[Any, int]], int]:
    shape = [_const(d) or 1 for d in buf.shape]
    strides = ([_const(s) or 1 for s in buf.strides] if buf.strides is not None else
               [math.prod(shape[k + 1:]) for k in range(len(shape))])

    def f(env: dict[Any, int]) -> int:
        return sum(_eval(i, env) * s for i, s in zip(indices, strides))

    return f


def _bytes(dtype: str) -> int:
    digits = "".join(c for c in dtype if c.isdigit())
    return max(1, int(digits) // 8) if digits else 1


class _Stmt:
    def __init__(self, loops: list[ir.For], stmt: Any) -> None:
        self.loops = loops
        self.stmt = stmt
        self.count = math.prod(_const(f.extent) or 1 for f in loops)


def _collect(s: Any, loops: list[ir.For], out: list[_Stmt]) -> None:
    if isinstance(s, ir.For):
        _collect(s.body, loops + [s], out)
    elif isinstance(s, ir.SeqStmt):
        for x in s.stmts:
            _collect(x, loops, out)
    elif isinstance(s, (ir.Allocate, ir.LetStmt)):
        _collect(s.body, loops, out)
    elif isinstance(s, ir.IfThenElse):
        _collect(s.then_case, loops, out)
        if s.else_case is not None:
            _collect(s.else_case, loops, out)
    elif isinstance(s, (ir.BufferStore, ir.Evaluate)):
        out.append(_Stmt(loops, s))


def _stmt_vector(st: _Stmt) -> list[float]:
    v: list[float] = [_log(st.count), float(len(st.loops)), 1.0]
    loops = st.loops[-MAX_DEPTH:]
    pad = [0.0] * (_LOOP_LEN * (MAX_DEPTH - len(loops)))
    v += pad
    for f in loops:
        v.append(_log(_const(f.extent) or 1))
        v += [1.0 if f.kind == k else 0.0 for k in _KINDS]
        v += [1.0 if f.thread_tag.startswith(b) else 0.0 for b in _BINDINGS]
    # arithmetic by kind, and the buffers the statement touches
    counts = [0] * len(_OPS)
    accesses: list[tuple[ir.Buffer, tuple[Any, ...]]] = []
    if isinstance(st.stmt, ir.BufferStore):
        accesses.append((st.stmt.buffer, st.stmt.indices))
    value = st.stmt.value

    def visit(node: Any) -> None:
        for k, (_, types) in enumerate(_OPS):
            if isinstance(node, types):
                counts[k] += 1
        if isinstance(node, ir.BufferLoad):
            accesses.append((node.buffer, node.indices))

    E_post_order(value, visit)
    v += [_log(c) for c in counts]
    seen: set[int] = set()
    uniq = []
    for b, idx in accesses:
        if id(b) not in seen:
            seen.add(id(b))
            uniq.append((b, idx))
    for b, idx in uniq[:MAX_BUFS]:
        flat = _flat(b, idx)
        base = flat({})
        strides = [abs(flat({f.var: 1}) - base) for f in loops]
        per_level = []
        for d in range(len(loops)):
            touched = math.prod((_const(f.extent) or 1) for f, s in
                                zip(loops[d:], strides[d:]) if s != 0)
            per_level.append(_log(touched * _bytes(b.dtype)))
        per_level = [0.0] * (MAX_DEPTH - len(per_level)) + per_level
        inner = strides[-1] if strides else 0
        tx = next((st for f, st in zip(loops, strides) if f.thread_tag == "threadIdx.x"), 0)
        conflict = b.scope == "shared" and tx > 0 and tx % 32 == 0
        v += per_level + [_log(inner), 1.0 if inner == 1 else 0.0, 1.0 if inner == 0 else 0.0,
                          _log(tx), 1.0 if conflict else 0.0]
    v += [0.0] * (_BUF_LEN * (MAX_BUFS - min(len(uniq), MAX_BUFS)))
    return v


def E_post_order(e: Any, fn: Callable[[Any], None]) -> None:  # noqa: N802
    """Visit every sub-expression of `e` (loads' indices included)."""
    from tensor_expr.visitor import post_order_visit

    post_order_visit(e, fn)


def loop_features(func: ir.PrimFunc) -> np.ndarray:
    """LOOP_FEATURE_LEN floats describing a lowered PrimFunc (see the module docstring)."""
    stmts: list[_Stmt] = []
    _collect(func.body, [], stmts)
    stmts.sort(key=lambda s: -s.count)
    v: list[float] = []
    for st in stmts[:MAX_STMTS]:
        v += _stmt_vector(st)
    v += [0.0] * (_STMT_LEN * (MAX_STMTS - min(len(stmts), MAX_STMTS)))
    lanes = max([(_const(f.extent) or 1) for st in stmts for f in st.loops
                 if f.kind == ir.ForKind.VECTORIZED] or [1])
    unroll = max([math.prod((_const(f.extent) or 1) for f in st.loops
                            if f.kind == ir.ForKind.UNROLLED) for st in stmts] or [1])
    v += [_log(lanes), _log(unroll)]
    v += _launch_features(func.body)
    return np.asarray(v, dtype=np.float32)


def _launch_features(body: Any) -> list[float]:
    """log2 of threads per block, of blocks and of shared bytes per block (0 for CPU code)."""
    extents: dict[str, int] = {}
    shared = 0

    def visit(s: Any) -> None:
        nonlocal shared
        if isinstance(s, ir.For) and s.thread_tag.startswith(("blockIdx", "threadIdx")):
            extents.setdefault(s.thread_tag, _const(s.extent) or 1)
        elif isinstance(s, ir.Allocate) and s.buffer.scope == "shared":
            shared += math.prod(_const(d) or 1 for d in s.buffer.shape) * _bytes(
                s.buffer.dtype)

    ir.post_order_visit_stmt(body, visit)
    threads = math.prod(n for t, n in extents.items() if t.startswith("threadIdx"))
    blocks = math.prod(n for t, n in extents.items() if t.startswith("blockIdx"))
    return [_log(threads if extents else 0), _log(blocks if extents else 0), _log(shared)]


def _split_row(knob: Any, ent: SplitEntity) -> list[float]:
    """log2 of the inner factors, then of the outer count (extent over their product): the
    last says how much of the extent a tile covers, which carries over between shapes."""
    inner = [max(1, int(f)) for f in ent.size[1:]]
    extent = getattr(knob, "extent", None) or math.prod(inner)
    return [_log(f) for f in inner] + [_log(-(-int(extent) // math.prod(inner)))]


def knob_features(space: ConfigSpace, index: int) -> np.ndarray:
    """Per knob of point `index`: a split's log2 inner factors and log2 outer count (shape-
    relative, so records of other shapes describe alike tiles alike), else the choice."""
    point = space.get(index)
    v: list[float] = []
    for name, knob in space.knobs.items():
        ent = point.values[name]
        if isinstance(ent, SplitEntity):
            v += _split_row(knob, ent)
        else:
            v.append(float(knob.entities.index(ent)))
    return np.asarray(v, dtype=np.float32)


def task_context(args: Any) -> np.ndarray:
    """log2(1 + d) of every dimension of every (shape, dtype) argument: constant within a
    task, it lets a cost model trained on other shapes of a template tell them apart
    (a 1x1 conv from a 3x3 one) when it ranks this task's points.

        >>> task_context([((1, 64, 56, 56), "float32"), ((64, 64, 3, 3), "float32")]).shape
        (8,)
    """
    return np.asarray([_log(d) for shape, _ in args for d in shape], dtype=np.float32)


def knob_layout(space: ConfigSpace) -> tuple[tuple[str, int], ...]:
    """(knob name, feature width) per knob: two spaces of a template whose layouts are equal
    give comparable knob feature rows (transfer between shapes checks it)."""
    return tuple((name, len(_split_row(k, k.entities[0])) if isinstance(k.entities[0],
                                                                          SplitEntity) else 1)
                 for name, k in space.knobs.items())


# per live space, its knob tables and the knob shape they were made for (a template may
# still declare knobs after a first lookup); weak keys, so a dropped space frees its entry
# and a later space that happens to reuse its id() starts afresh
_TABLES: weakref.WeakKeyDictionary[ConfigSpace, tuple[tuple[Any, ...], list[np.ndarray]]] = \
    weakref.WeakKeyDictionary()


def knob_tables(space: ConfigSpace) -> list[np.ndarray]:
    """Per knob, the feature rows of its choices (cached while the space lives)."""
    shape = tuple(zip(space.knobs, space.dims()))
    hit = _TABLES.get(space)
    if hit is not None and hit[0] == shape:
        return hit[1]
    tables = []
    for knob in space.knobs.values():
        rows = [_split_row(knob, e) if isinstance(e, SplitEntity) else [float(k)]
                for k, e in enumerate(knob.entities)]
        tables.append(np.asarray(rows, np.float32))
    _TABLES[space] = (shape, tables)
    return tables


def knob_features_batch(space: ConfigSpace, indices: Any) -> np.ndarray:
    """knob_features of many points as a 2-D array (a row per index), vectorized."""
    tables = knob_tables(space)
    idx = np.asarray([int(i) for i in indices], dtype=np.int64 if space.size < 2**62 else object)
    cols = []
    for t, d in zip(tables, space.dims()):
        cols.append(t[(idx % d).astype(np.int64)])
        idx = idx // d
    return np.concatenate(cols, axis=1) if cols else np.zeros((len(idx), 0), np.float32)
