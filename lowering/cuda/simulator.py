"""The GPU simulator: runs a CUDA program's loop IR on the CPU under the GPU execution
model, to prove in CI (no GPU) that GPU schedules compute the right answer.

Every block of the grid runs in turn; in a block every thread runs the kernel's loop
nest as its own program (loops bound to threadIdx / blockIdx take the thread's and the
block's index, vthread loops run serially), with the block's `shared` buffers shared and
`local` buffers private. Barriers are the phase boundaries: each thread runs until it
reaches a barrier, and the next phase starts when all have. Threads that wait at
different barriers, or some at a barrier while others have finished, are a RaceError
(a GPU would hang or compute garbage).

It is also a race detector. Between two barriers, two threads of a block touching one
element of a shared or global buffer, at least one writing, is a RaceError naming the
buffer, the element and the two threads; so are two blocks touching one global element
in a launch with a write among them (blocks have no order). A missing barrier is found
here, before any GPU runs the kernel. Reads of never-written shared or local memory give
NaN (floats), and every access is bounds-checked, as in lowering.interpreter, whose
expression semantics (numpy's) the simulator shares.

It is slow by design: small shapes.

    >>> run(program, [a, b])                     # doctest: +SKIP
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from lowering import ir as lir
from lowering.cuda import wmma
from lowering.cuda.codegen import CudaProgram, DeviceKernel
from lowering.interpreter import _BufState, _Compiler, _scalar
from lowering.kernel import check_arguments
from lowering.passes.storage_sync import BARRIER
from lowering.passes.thread_allreduce import (
    ALLREDUCE,
    allreduce_args,
    allreduce_form,
    shared_tree_reduce,
    warp_shuffle_reduce,
)
from tensor_expr import expr as E
from tensor_expr.dtype import is_float
from tessel_errors import LoweringError, RaceError

Env = dict[int, Any]
Thread = tuple[int, int, int]
# yields the id of the barrier it waits at, or (id, op, axis, value) at an all-reduce,
# whose result it is sent back
Step = Generator[Any, Any, None]

_TRACKER = -1  # env key of the block's access tracker


def run(program: CudaProgram, arrays: list[np.ndarray]) -> None:
    """Run `program` on host arrays (one per parameter; outputs written in place)."""
    func = program.func
    _, shape_vars = check_arguments(func, tuple(arrays))
    scalars: dict[int, int] = dict(shape_vars)
    states: dict[int, _BufState] = {}
    env0: Env = {k: _scalar(v, "int64") for k, v in scalars.items()}
    for p, a in zip(func.params, arrays):
        states[id(p)] = _BufState(p, a.reshape(-1), env0)
    def alloc(buf: lir.Buffer, shape: tuple[int, ...]) -> None:
        st = _BufState(buf, np.empty(0, buf.dtype), {k: _scalar(v, "int64")
                                                      for k, v in scalars.items()})
        fill = np.nan if is_float(buf.dtype) else 0
        st.flat = np.full(max(0, int(np.prod(shape))), fill, buf.dtype)
        states[id(buf)] = st

    def launch(index: int, grid: tuple[int, ...]) -> None:
        _launch(program.kernels[index], grid, scalars, states)

    with np.errstate(all="ignore"):
        program.run_host(scalars, alloc, launch, lambda buf: states.pop(id(buf), None))


def _launch(kernel: DeviceKernel, grid: tuple[int, ...], scalars: dict[int, int],
            states: dict[int, _BufState]) -> None:
    program = _ThreadProgram(kernel)
    launch_log = _LaunchLog(kernel.name)
    for bz, by, bx in itertools.product(range(grid[2]), range(grid[1]), range(grid[0])):
        block = (bx, by, bz)
        tracker = _BlockTracker(kernel.name, block, launch_log)
        shared: dict[int, _BufState] = {}
        threads = {}
        bz_, by_, bx_ = kernel.block[2], kernel.block[1], kernel.block[0]
        for tz, ty, tx in itertools.product(range(bz_), range(by_), range(bx_)):
            env: Env = {k: _scalar(v, "int64") for k, v in scalars.items()}
            env.update(states)
            env[_TRACKER] = tracker
            thread = (tx, ty, tz)
            threads[thread] = program.start(env, block, thread, shared)
        _run_block(kernel.name, block, threads, tracker, kernel.block)


def _run_block(name: str, block: Thread, threads: dict[Thread, Step],
               tracker: _BlockTracker, shape: tuple[int, int, int]) -> None:
    """Run the block's threads phase by phase: each runs to its next barrier (or
    all-reduce), which all must reach together. A warp matrix call is a rendezvous of the
    32 lanes of one warp only: it runs once those lanes have all made it, and they go on
    without waiting for the block."""
    live = dict(threads)
    parked: dict[Thread, Any] = {}  # waiting at a barrier or an all-reduce
    given: dict[Thread, Any] = {}  # what each thread's all-reduce returns
    finished: list[Thread] = []
    while live:
        at_wmma: dict[Thread, wmma.Event] = {}
        for t, gen in live.items():
            if t in parked:
                continue
            tracker.thread = t
            try:
                event = gen.send(given.pop(t, None))
            except StopIteration:
                finished.append(t)
                continue
            if isinstance(event, wmma.Event):
                at_wmma[t] = event
            else:
                parked[t] = event
        live = {t: g for t, g in live.items() if t not in finished}
        if at_wmma:
            _run_wmma(name, block, at_wmma, tracker, shape)
            continue
        if not parked:
            return
        if finished:
            raise RaceError(
                f"kernel '{name}' block {block}: thread {next(iter(parked))} waits at a "
                f"barrier that thread {finished[0]} never reaches (it finished); a barrier "
                "must be reached by every thread of the block")
        points = {w[0] if isinstance(w, tuple) else w for w in parked.values()}
        if len(points) > 1:
            t1, first = next(iter(parked.items()))
            t2 = next(t for t, b in parked.items() if b != first)
            raise RaceError(f"kernel '{name}' block {block}: threads {t1} and {t2} wait at "
                            "different barriers")
        given = _all_reduce(parked, shape) if isinstance(next(iter(parked.values())),
                                                          tuple) else {}
        parked = {}
        tracker.new_phase()


def _warp_of(t: Thread, shape: tuple[int, int, int]) -> int:
    return (t[0] + shape[0] * (t[1] + shape[1] * t[2])) // 32


def _run_wmma(name: str, block: Thread, at_wmma: dict[Thread, wmma.Event],
              tracker: _BlockTracker,
              shape: tuple[int, int, int]) -> None:
    """Run the warp matrix calls whose warps have all their lanes there (once per warp);
    lanes of a warp elsewhere are a RaceError (the call is collective)."""
    if (shape[0] * shape[1] * shape[2]) % 32:
        raise RaceError(f"kernel '{name}': a block of {shape[0] * shape[1] * shape[2]} "
                        "threads makes tensor-core calls; warp matrix operations need whole "
                        "warps: make the block a multiple of 32 threads")
    warps: dict[int, dict[Thread, wmma.Event]] = {}
    for t, ev in at_wmma.items():
        warps.setdefault(_warp_of(t, shape), {})[t] = ev
    for w, lanes in warps.items():
        ev = wmma.check_warp(name, block, w, lanes, 32)
        tracker.thread = min(lanes)

        def track(tile: wmma.Tile, write: bool) -> None:
            for off in tile.index().reshape(-1):
                tracker.access(tile.state, int(off), [int(off)], write)

        wmma.run_op(ev.name, list(ev.args), track)


def _all_reduce(waiting: dict[Thread, Any], shape: tuple[int, int, int]
                ) -> dict[Thread, Any]:
    """Each thread's result of the all-reduce all threads wait at: the values of the
    threads that differ from it only along the reduced axis, combined as the CUDA code
    for a block of `shape` combines them (warp shuffles or the shared tree)."""
    _, op, axis, _ = next(iter(waiting.values()))
    groups: dict[Thread, list[tuple[int, Any]]] = {}
    for t, (_, _, _, value) in waiting.items():
        key = tuple(0 if k == axis else i for k, i in enumerate(t))
        groups.setdefault(key, []).append((t[axis], value))
    extent = shape[axis]
    form = allreduce_form("threadIdx." + "xyz"[axis], extent, shape)
    reduce = warp_shuffle_reduce if form == "warp" else shared_tree_reduce
    totals = {}
    for key, members in groups.items():
        members.sort(key=lambda m: m[0])
        totals[key] = reduce(op, [v for _, v in members])
    return {t: totals[tuple(0 if k == axis else i for k, i in enumerate(t))]
            for t in waiting}


class _LaunchLog:
    """Global-memory accesses of a whole launch, by block, for races between blocks."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.writer: dict[tuple[int, int], Thread] = {}
        self.reader: dict[tuple[int, int], Thread] = {}


class _BlockTracker:
    """Accesses of the current phase of one block: element -> (writer, readers)."""

    def __init__(self, kernel: str, block: Thread, launch: _LaunchLog) -> None:
        self.kernel, self.block, self.launch = kernel, block, launch
        self.thread: Thread = (0, 0, 0)
        self.phase: dict[tuple[int, int], list[Any]] = {}

    def new_phase(self) -> None:
        self.phase = {}

    def access(self, st: _BufState, offset: int, idx: list[int], write: bool) -> None:
        if st.buf.scope == "local":
            return
        key = (id(st.buf), offset)
        entry = self.phase.get(key)
        me = self.thread
        if entry is None:
            self.phase[key] = [me if write else None, set() if write else {me}]
        else:
            writer, readers = entry
            other = writer if writer is not None and writer != me else None
            if other is None and write:
                other = next((r for r in readers if r != me), None)
            if other is not None:
                self._race(st, idx, other, write)
            if write:
                entry[0] = me
            else:
                readers.add(me)
        if st.buf.scope == "global":
            log = self.launch
            w = log.writer.get(key)
            if w is not None and w != self.block:
                self._race(st, idx, None, write, other_block=w)
            if write:
                r = log.reader.get(key)
                if r is not None and r != self.block:
                    self._race(st, idx, None, write, other_block=r)
                log.writer[key] = self.block
            else:
                log.reader.setdefault(key, self.block)

    def _race(self, st: _BufState, idx: list[int], other: Thread | None, write: bool,
              other_block: Thread | None = None) -> None:
        what = "writes" if write else "reads"
        if other_block is not None:
            raise RaceError(
                f"race in kernel '{self.kernel}' on {st.buf.scope} buffer '{st.buf.name}' "
                f"element {idx}: block {self.block} thread {self.thread} {what} it and block "
                f"{other_block} also accesses it in the same launch, a write among them; "
                "blocks run in no particular order")
        raise RaceError(
            f"race in kernel '{self.kernel}' block {self.block} on {st.buf.scope} buffer "
            f"'{st.buf.name}' element {idx}: thread {self.thread} {what} it and thread "
            f"{other} also accessed it since the last barrier, a write among them; a "
            "barrier (__syncthreads) is missing between them, or the threads' index "
            "ranges overlap")


class _SimCompiler(_Compiler):
    """The interpreter's expressions, with loads reported to the block's tracker."""

    def _e_BufferLoad(self, e: lir.BufferLoad) -> Callable[[Env], Any]:
        key, buf = id(e.buffer), e.buffer
        fidx = [self.expr(i) for i in e.indices]

        def load(env: Env) -> Any:
            st = env.get(key)
            if st is None:
                raise LoweringError(f"buffer '{buf.name}' is read outside its allocation")
            idx = [int(f(env)) for f in fidx]
            off = st.offset(idx, "read of")
            env[_TRACKER].access(st, off, idx, write=False)
            return st.flat[off]

        return load


_AXIS = {"x": 0, "y": 1, "z": 2}


class _ThreadProgram:
    """A kernel's loop nest compiled once into generator steps, run once per thread."""

    def __init__(self, kernel: DeviceKernel) -> None:
        self.kernel = kernel
        self.cc = _SimCompiler(kernel.name)
        self.body = self.stmt(kernel.body)

    def start(self, env: Env, block: Thread, thread: Thread,
              shared: dict[int, _BufState]) -> Step:
        env[-2], env[-3], env[-4] = block, thread, shared
        return self.body(env)

    def stmt(self, s: lir.Stmt) -> Callable[[Env], Step]:
        method = getattr(self, "_s_" + type(s).__name__, None)
        if method is None:
            raise LoweringError(f"the GPU simulator cannot run a {type(s).__name__}")
        return method(s)

    def _s_SeqStmt(self, s: lir.SeqStmt) -> Callable[[Env], Step]:
        parts = [self.stmt(c) for c in s.stmts]

        def seq(env: Env) -> Step:
            for p in parts:
                yield from p(env)

        return seq

    def _s_For(self, s: lir.For) -> Callable[[Env], Step]:
        flo, fext, body = self.cc.expr(s.min), self.cc.expr(s.extent), self.stmt(s.body)
        key, ty = id(s.var), np.dtype(s.var.dtype).type
        tag = s.thread_tag if s.kind is lir.ForKind.THREAD_BINDING else ""
        if tag.startswith(("threadIdx.", "blockIdx.")):
            which = -3 if tag.startswith("threadIdx") else -2
            axis = _AXIS[tag[-1]]

            def bound(env: Env) -> Step:
                env[key] = ty(int(flo(env)) + env[which][axis])
                yield from body(env)

            return bound

        def loop(env: Env) -> Step:
            lo, ext = int(flo(env)), int(fext(env))
            for k in range(lo, lo + ext):
                env[key] = ty(k)
                yield from body(env)

        return loop

    def _s_BufferStore(self, s: lir.BufferStore) -> Callable[[Env], Step]:
        key, buf, dtype = id(s.buffer), s.buffer, s.buffer.dtype
        fv, fidx = self.cc.expr(s.value), [self.cc.expr(i) for i in s.indices]

        def store(env: Env) -> Step:
            st = env.get(key)
            if st is None:
                raise LoweringError(f"buffer '{buf.name}' is written outside its allocation")
            v = fv(env)
            idx = [int(f(env)) for f in fidx]
            off = st.offset(idx, "write of")
            env[_TRACKER].access(st, off, idx, write=True)
            st.flat[off] = _scalar(v, dtype)
            return
            yield

        return store

    def _s_Allocate(self, s: lir.Allocate) -> Callable[[Env], Step]:
        buf, key, body = s.buffer, id(s.buffer), self.stmt(s.body)
        shape = self.kernel.block

        def fresh(env: Env) -> _BufState:
            st = _BufState(buf, np.empty(0, buf.dtype), env)
            size = 1 + sum((n - 1) * k for n, k in zip(st.shape, st.strides))
            fill = np.nan if is_float(buf.dtype) else 0
            st.flat = np.full(max(size, 0) if min(st.shape, default=1) > 0 else 0, fill,
                              dtype=buf.dtype)
            return st

        def allocate(env: Env) -> Step:
            if buf.scope == "shared":  # one per block, for the kernel's whole run
                shared = env[-4]
                if key not in shared:
                    shared[key] = fresh(env)
                env[key] = shared[key]
            elif wmma.is_fragment(buf):  # one per warp: its 32 lanes hold it together
                shared, warp = env[-4], _warp_of(env[-3], shape)
                if (key, warp) not in shared:
                    shared[(key, warp)] = fresh(env)
                env[key] = shared[(key, warp)]
            else:
                env[key] = fresh(env)
            yield from body(env)

        return allocate

    def _s_IfThenElse(self, s: lir.IfThenElse) -> Callable[[Env], Step]:
        fc, ft = self.cc.expr(s.condition), self.stmt(s.then_case)
        fe = self.stmt(s.else_case) if s.else_case is not None else None

        def branch(env: Env) -> Step:
            if fc(env):
                yield from ft(env)
            elif fe is not None:
                yield from fe(env)

        return branch

    def _s_LetStmt(self, s: lir.LetStmt) -> Callable[[Env], Step]:
        fv, body, key = self.cc.expr(s.value), self.stmt(s.body), id(s.var)

        def let(env: Env) -> Step:
            env[key] = fv(env)
            yield from body(env)

        return let

    def _s_Evaluate(self, s: lir.Evaluate) -> Callable[[Env], Step]:
        if wmma.is_wmma(s):
            return self._wmma(s)
        if isinstance(s.value, E.Call) and s.value.name == ALLREDUCE:
            op, red, tag, _ = allreduce_args(s.value)
            here, key, axis = id(s), id(red), _AXIS[tag[-1]]

            def all_reduce(env: Env) -> Step:
                st = env[key]
                total = yield (here, op, axis, st.flat[0])
                st.flat[0] = total

            return all_reduce
        if isinstance(s.value, E.Call) and s.value.name == BARRIER:
            here = id(s)

            def barrier(env: Env) -> Step:
                yield here

            return barrier
        fv = self.cc.expr(s.value)

        def evaluate(env: Env) -> Step:
            fv(env)
            return
            yield

        return evaluate


    def _wmma(self, s: lir.Evaluate) -> Callable[[Env], Step]:
        """A warp matrix call: the thread yields its tiles; the block runs the call once
        for the warp (lowering.cuda.wmma.run_op)."""
        call = s.value
        assert isinstance(call, E.Call)
        here, name = id(s), call.name
        parts: list[Callable[[Env], Any]] = []
        for k, a in enumerate(call.args):
            if isinstance(a, lir.BufferLoad):
                parts.append(self._tile(a, call, k))
            else:
                parts.append(self.cc.expr(a))

        def wmma_call(env: Env) -> Step:
            yield wmma.Event(here, name, tuple(p(env) for p in parts))

        return wmma_call

    def _tile(self, a: lir.BufferLoad, call: E.Call, k: int) -> Callable[[Env], wmma.Tile]:
        key, buf = id(a.buffer), a.buffer
        fidx = [self.cc.expr(i) for i in a.indices]
        memory = {wmma.WMMA_LOAD_A: 1, wmma.WMMA_LOAD_B: 1, wmma.WMMA_STORE: 0}
        ld_arg = 2 if memory.get(call.name) == k else None  # else a fragment: its width
        fld = self.cc.expr(call.args[ld_arg]) if ld_arg is not None else None

        def tile(env: Env) -> wmma.Tile:
            st = env.get(key)
            if st is None:
                raise LoweringError(f"buffer '{buf.name}' is used outside its allocation")
            off = st.offset([int(f(env)) for f in fidx], "tensor-core tile of")
            ld = int(fld(env)) if fld is not None else int(st.strides[-2])
            return wmma.Tile(st, off, ld)

        return tile


__all__ = ["run"]
