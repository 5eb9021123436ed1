"""Tensor-core fragments in the CUDA backend: the loop-IR pass that turns an accumulator's
zero-init loops into fills, the nvcuda::wmma code of the fragment buffers and calls
(schedule.templates.cuda_wmma), and their warp-collective semantics for the simulator.

A fragment buffer (scope local.wmma.*, shape [..., R, C], R and C multiples of 16) is an
array of 16x16 tiles; a call names a tile by the index of its first element, so tile
(r, c) of a [R, C] buffer is fragment (r / 16) * (C / 16) + c / 16 of the C array. Its
elements are opaque (how the lanes of a warp hold them is the hardware's business), so
any other access to one is refused.

    >>> fragment_type("local.wmma.accumulator", "float32")
    'nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from lowering import ir as lir
from lowering.passes import storage_sync
from schedule.templates.cuda_wmma import (
    MIN_ARCH,
    SCOPE_A,
    SCOPE_ACC,
    SCOPE_B,
    SCOPES,
    TILE,
    WMMA_CALLS,
    WMMA_FILL,
    WMMA_LOAD_A,
    WMMA_LOAD_B,
    WMMA_MMA,
    WMMA_STORE,
)
from tensor_expr import expr as E
from tensor_expr.arith import simplify
from tensor_expr.visitor import collect_vars, substitute
from tessel_errors import CodegenError, LoweringError, RaceError
from tessel_target.gpu import arch_number

NS = "nvcuda::wmma"
INCLUDE = "#include <mma.h>\n"

# the store writes shared memory through its first argument (storage_sync must know)
storage_sync.REGION_WRITES[WMMA_STORE] = (0,)


def is_fragment(buf: lir.Buffer) -> bool:
    """True for a buffer of tensor-core fragments."""
    return buf.scope in SCOPES


def is_wmma(s: lir.Stmt) -> bool:
    """True for a statement that is a warp matrix call."""
    return isinstance(s, lir.Evaluate) and isinstance(s.value, E.Call) \
        and s.value.name in WMMA_CALLS


def check_arch(arch: str, kernel: str) -> None:
    """Refuse tensor-core code for an architecture without tensor cores."""
    if arch_number(arch) < MIN_ARCH:
        raise CodegenError(f"kernel '{kernel}' uses tensor cores (nvcuda::wmma), which need "
                           f"sm_{MIN_ARCH} or later; the target is {arch}: build for "
                           f"-arch=sm_{MIN_ARCH} or newer, or use a template without tensor "
                           "cores (dense.cuda)")


# ---------------------------------------------------------------------------------------
# The fill pass


def lower_fill(s: lir.Stmt) -> lir.Stmt:
    """Replace each innermost pair of 16-iteration loops that stores one constant into a
    16x16 tile of an accumulator fragment (the init nest of a tensorized reduction) by a
    WMMA_FILL call; any other store into a fragment is a CodegenError."""
    return _Fill().visit(s)


class _Fill(lir.StmtMutator):
    def visit_For(self, s: lir.For) -> lir.Stmt:  # noqa: N802 (the mutator's naming)
        fill = _as_fill(s)
        if fill is not None:
            return fill
        return self.generic_visit(s)

    def visit_BufferStore(self, s: lir.BufferStore) -> lir.Stmt:  # noqa: N802
        if is_fragment(s.buffer):
            raise CodegenError(
                f"a store to one element of tensor-core fragment '{s.buffer.name}' "
                f"({s.buffer.scope}); fragments are written whole by tensorized loads, "
                "multiply-accumulates and fills of 16x16 tiles only")
        return s


def _as_fill(s: lir.For) -> lir.Stmt | None:
    inner = s.body
    if not (isinstance(inner, lir.For) and isinstance(inner.body, lir.BufferStore)):
        return None
    st = inner.body
    if st.buffer.scope != SCOPE_ACC or not isinstance(st.value, (E.FloatImm, E.IntImm)):
        return None
    if not all(isinstance(f.extent, E.IntImm) and f.extent.value == TILE
               and isinstance(f.min, E.IntImm) and f.min.value == 0 for f in (s, inner)):
        return None
    zero = {s.var: E.const(0, s.var.dtype), inner.var: E.const(0, inner.var.dtype)}
    first = tuple(simplify(substitute(i, zero)) for i in st.indices)
    rows, cols = st.indices[-2:]
    ok = [simplify(rows - first[-2]), simplify(cols - first[-1])]
    lead_free = all(not {id(v) for v in collect_vars(i)} & {id(s.var), id(inner.var)}
                    for i in st.indices[:-2])
    if not (lead_free and _is_var(ok[0], s.var) and _is_var(ok[1], inner.var)):
        return None
    value = E.FloatImm(float(st.value.value), "float32")
    return lir.Evaluate(E.Call("int32", WMMA_FILL, (lir.BufferLoad(st.buffer, first), value)))


def _is_var(e: E.PrimExpr, v: E.Var) -> bool:
    return isinstance(e, E.Var) and e is v


# ---------------------------------------------------------------------------------------
# CUDA C


def fragment_type(scope: str, dtype: str) -> str:
    """The nvcuda::wmma fragment type of a buffer scope."""
    if scope == SCOPE_A:
        return f"{NS}::fragment<{NS}::matrix_a, 16, 16, 16, __half, {NS}::row_major>"
    if scope == SCOPE_B:
        return f"{NS}::fragment<{NS}::matrix_b, 16, 16, 16, __half, {NS}::col_major>"
    return f"{NS}::fragment<{NS}::accumulator, 16, 16, 16, float>"


_DTYPES = {SCOPE_A: "float16", SCOPE_B: "float16", SCOPE_ACC: "float32"}


def fragment_count(buf: lir.Buffer, kernel: str) -> int:
    """How many 16x16 tiles a fragment buffer holds (its shape checked)."""
    dims = [simplify(d) for d in buf.shape]
    if len(dims) < 2 or not all(isinstance(d, E.IntImm) for d in dims) or \
            dims[-1].value % TILE or dims[-2].value % TILE:
        raise CodegenError(
            f"tensor-core fragment '{buf.name}' of kernel '{kernel}' has shape "
            f"[{', '.join(str(d) for d in dims)}]; fragments are tiles of 16x16: constant "
            "shapes whose last two dims are multiples of 16")
    if buf.dtype != _DTYPES[buf.scope] or buf.strides is not None:
        raise CodegenError(f"tensor-core fragment '{buf.name}' ({buf.scope}) must be "
                           f"{_DTYPES[buf.scope]} and unpadded, got {buf.dtype}")
    n = 1
    for d in dims:
        n *= d.value
    return n // (TILE * TILE)


def fragment_index(load: lir.BufferLoad) -> E.PrimExpr:
    """The index of the fragment whose first element `load` names (simplified)."""
    dims = [int(simplify(d).value) for d in load.buffer.shape]  # checked by fragment_count
    tiles = dims[:-2] + [dims[-2] // TILE, dims[-1] // TILE]
    idx = list(load.indices[:-2]) + [E.FloorDiv(i, E.const(TILE, i.dtype))
                                     for i in load.indices[-2:]]
    flat = idx[0]
    for i, n in zip(idx[1:], tiles[1:]):
        flat = flat * E.const(n, flat.dtype) + i
    return simplify(flat)


def emit_call(call: E.Call, fragment: Callable[[lir.BufferLoad], str],
              address: Callable[[lir.BufferLoad], str], expr: Callable[[E.PrimExpr], str],
              kernel: str) -> str:
    """The nvcuda::wmma statement of a warp matrix call."""
    args = call.args
    frag_args = {WMMA_FILL: (0,), WMMA_LOAD_A: (0,), WMMA_LOAD_B: (0,), WMMA_MMA: (0, 1, 2),
                 WMMA_STORE: (1,)}[call.name]
    want = {WMMA_FILL: (SCOPE_ACC,), WMMA_LOAD_A: (SCOPE_A,), WMMA_LOAD_B: (SCOPE_B,),
            WMMA_MMA: (SCOPE_ACC, SCOPE_A, SCOPE_B), WMMA_STORE: (SCOPE_ACC,)}[call.name]
    for k, scope in zip(frag_args, want):
        a = args[k]
        if not isinstance(a, lir.BufferLoad) or a.buffer.scope != scope:
            raise CodegenError(f"kernel '{kernel}': argument {k} of {call.name} must be a "
                               f"{scope} fragment, got '{a}'")
    if call.name == WMMA_FILL:
        return f"{NS}::fill_fragment({fragment(args[0])}, {expr(args[1])});"
    if call.name == WMMA_MMA:
        c, a, b = (fragment(x) for x in args)
        return f"{NS}::mma_sync({c}, {a}, {b}, {c});"
    mem = args[1] if call.name in (WMMA_LOAD_A, WMMA_LOAD_B) else args[0]
    if not isinstance(mem, lir.BufferLoad) or is_fragment(mem.buffer):
        raise CodegenError(f"kernel '{kernel}': {call.name} needs a memory tile, got '{mem}'")
    elem = "__half" if call.name != WMMA_STORE else "float"
    if mem.buffer.dtype != ("float16" if elem == "__half" else "float32"):
        raise CodegenError(f"kernel '{kernel}': {call.name} of buffer '{mem.buffer.name}' "
                           f"({mem.buffer.dtype}); tensor-core tiles are float16 in and "
                           "float32 out")
    ldm = simplify(args[2])
    multiple = 8 if elem == "__half" else 4  # 16 bytes
    if isinstance(ldm, E.IntImm) and ldm.value % multiple:
        raise CodegenError(f"kernel '{kernel}': {call.name} of '{mem.buffer.name}' has rows "
                           f"{ldm.value} elements apart; tensor cores need a multiple of "
                           f"{multiple} (pad the rows with storage_align)")
    if call.name == WMMA_STORE:
        return (f"{NS}::store_matrix_sync(&{address(mem)}, {fragment(args[1])}, "
                f"{expr(ldm)}, {NS}::mem_row_major);")
    return (f"{NS}::load_matrix_sync({fragment(args[0])}, reinterpret_cast<const __half*>("
            f"&{address(mem)}), {expr(ldm)});")


# ---------------------------------------------------------------------------------------
# The simulator: one operation per warp


@dataclasses.dataclass(frozen=True)
class Tile:
    """A 16x16 tile in simulated memory: the buffer state, its first element's offset, the
    distance between its rows."""

    state: Any  # lowering.interpreter._BufState
    offset: int
    ld: int

    def index(self) -> np.ndarray:
        rows = np.arange(TILE)[:, None] * self.ld + np.arange(TILE)[None, :]
        idx = self.offset + rows
        if self.offset < 0 or int(idx.max()) >= len(self.state.flat):
            raise LoweringError(f"a tensor-core tile of '{self.state.buf.name}' at element "
                                f"{self.offset} (rows {self.ld} apart) runs past the end of "
                                f"the buffer ({len(self.state.flat)} elements)")
        return idx

    def key(self) -> tuple[int, int, int]:
        return (id(self.state), self.offset, self.ld)


def run_op(name: str, args: list[Any], track: Callable[[Tile, bool], None]) -> None:
    """Execute one warp matrix call for a whole warp; `track(tile, write)` reports the
    memory tiles it reads or writes (the race detector's accesses)."""
    with np.errstate(all="ignore"):
        if name == WMMA_FILL:
            frag, value = args
            frag.state.flat[frag.index()] = np.float32(value)
        elif name in (WMMA_LOAD_A, WMMA_LOAD_B):
            frag, mem = args[0], args[1]
            track(mem, False)
            frag.state.flat[frag.index()] = mem.state.flat[mem.index()]
        elif name == WMMA_MMA:
            c, a, b = args
            av = a.state.flat[a.index()].astype(np.float32)
            bv = b.state.flat[b.index()].astype(np.float32)
            cv = c.state.flat[c.index()]
            c.state.flat[c.index()] = (cv + av @ bv.T).astype(np.float32)
        elif name == WMMA_STORE:
            mem, frag = args[0], args[1]
            track(mem, True)
            mem.state.flat[mem.index()] = frag.state.flat[frag.index()].astype(
                mem.state.flat.dtype)
        else:  # pragma: no cover (WMMA_CALLS lists the names handled)
            raise LoweringError(f"unknown warp matrix call {name}")


def check_warp(kernel: str, block: tuple[int, ...], warp: int, lanes: dict[Any, Any],
               size: int) -> Any:
    """The one call all lanes of a warp wait at (they must agree), or a RaceError."""
    if len(lanes) != size:
        raise RaceError(f"kernel '{kernel}' block {block}: {len(lanes)} of the {size} lanes "
                        f"of warp {warp} reach a tensor-core operation together; warp "
                        "matrix operations are collective: every lane of the warp must make "
                        "the same call (is it under a condition on threadIdx.x?)")
    calls = list(lanes.items())
    t0, first = calls[0]
    for t, ev in calls[1:]:
        if ev.signature() != first.signature():
            raise RaceError(f"kernel '{kernel}' block {block}: lanes {t0} and {t} of warp "
                            f"{warp} make different tensor-core calls ({first.name} and "
                            f"{ev.name}, or other tiles); every lane of the warp must make "
                            "the same call")
    return first


@dataclasses.dataclass(frozen=True)
class Event:
    """What a simulated thread yields at a warp matrix call."""

    point: int
    name: str
    args: tuple[Any, ...]

    def signature(self) -> tuple[Any, ...]:
        return (self.point, self.name, tuple(a.key() if isinstance(a, Tile) else float(a)
                                             for a in self.args))


__all__ = ["Event", "INCLUDE", "MIN_ARCH", "Tile", "check_arch", "check_warp", "emit_call",
           "fragment_count", "fragment_index", "fragment_type", "is_fragment", "is_wmma",
           "lower_fill", "run_op"]
