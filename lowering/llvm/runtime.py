"""The parallel runtime: a persistent thread pool written in LLVM IR and JIT-compiled once
per process, so that a parallel loop costs a condition-variable wake-up instead of a
pthread_create per thread per call.

Exported (C ABI):
  - `void tessel_pool_ensure(i64 workers)`: start worker threads until there are at least
    `workers` (after a fork the child's pool is rebuilt from scratch);
  - `void tessel_pool_launch(ptr fn, ptr records, i64 n)`: run `fn(records + 32 * t)` for
    t in [0, n): t = 0 (and every (workers+1)-th after it) on the caller, the rest on the
    workers; returns when all are done. One launch at a time (a launch mutex); from a
    different process than the pool's it runs everything on the caller.
Kernels find `tessel_pool_launch` through their global `__tessel_launch`, which the
Kernel sets; when it is null the generated code starts pthreads itself.

glibc's mutex and condition variable initialisers are all-zero bytes, so zeroed globals
of 64 bytes (larger than both types) are ready to use.

    >>> from lowering.llvm.runtime import pool_launch_address
    >>> pool_launch_address(2) != 0
    True
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from llvmlite import ir

from lowering.llvm.types import I32, I64, PTR, VOID

# Polls of an idle worker (and of a waiting launcher) before sleeping on the condition
# variable: about 0.1-0.3 ms, so back-to-back kernels find the workers awake, while an
# idle pool stops taking CPU from other processes soon after.
SPIN = 4096
_STATE = ("lock", "launch_lock", "work", "done")  # 64-byte pthread objects
_lock = threading.Lock()
_runtime: dict[str, object] = {}


def _zeros(m: ir.Module, name: str, size: int) -> ir.GlobalVariable:
    g = ir.GlobalVariable(m, ir.ArrayType(ir.IntType(8), size), name)
    g.initializer = ir.Constant(g.value_type, None)
    g.align = 64
    g.type = PTR
    return g


def _i64(m: ir.Module, name: str) -> ir.GlobalVariable:
    # keeps its typed pointer (i64*): llvmlite's atomic instructions want the pointee type
    g = ir.GlobalVariable(m, I64, name)
    g.initializer = ir.Constant(I64, 0)
    g.align = 8
    return g


def build_module() -> str:
    """The LLVM IR text of the pool."""
    m = ir.Module(name="tessel_runtime")
    objs = {n: _zeros(m, f"pool.{n}", 64) for n in _STATE}
    gen, fn_g, rec_g, n_g, claim, finished, workers, pid = (
        _i64(m, f"pool.{n}") for n in ("gen", "fn", "records", "n", "claim", "finished",
                                        "workers", "pid"))

    def ext(name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        return ir.Function(m, ir.FunctionType(ret, args), name)

    lock = ext("pthread_mutex_lock", I32, [PTR])
    unlock = ext("pthread_mutex_unlock", I32, [PTR])
    wait = ext("pthread_cond_wait", I32, [PTR, PTR])
    bcast = ext("pthread_cond_broadcast", I32, [PTR])
    create = ext("pthread_create", I32, [PTR, PTR, PTR, PTR])
    detach = ext("pthread_detach", I32, [I64])
    getpid = ext("getpid", I32, [])
    memset = ext("memset", PTR, [PTR, I32, I64])
    pause = ext("llvm.x86.sse2.pause", VOID, [])
    task_t = ir.FunctionType(PTR, [PTR])
    c64 = lambda v: ir.Constant(I64, v)  # noqa: E731

    def ld(b: ir.IRBuilder, g: ir.Value) -> ir.Value:
        return b.load_atomic(g, "acquire", 8, typ=I64)

    def st(b: ir.IRBuilder, v: ir.Value, g: ir.Value) -> None:
        b.store_atomic(v, g, "release", 8)

    def blocks(fn: ir.Function, *names: str) -> list[ir.Block]:
        return [fn.append_basic_block(x) for x in names]

    def spin_until(b: ir.IRBuilder, fn: ir.Function, g: ir.Value, done: Any) -> None:
        # poll `g` up to SPIN times (pausing between) until done(value); the caller then
        # takes the lock and re-checks, so a missed change only costs a condvar wait
        pre = b.block
        head, body, end = blocks(fn, "spin.head", "spin.body", "spin.end")
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I64)
        k.add_incoming(c64(0), pre)
        stop = b.or_(done(ld(b, g)), b.icmp_signed(">=", k, c64(SPIN)))
        b.cbranch(stop, end, body)
        b.position_at_end(body)
        b.call(pause, [])
        k.add_incoming(b.add(k, c64(1)), body)
        b.branch(head)
        b.position_at_end(end)

    def run_claimed(b: ir.IRBuilder, fn: ir.Function, my_gen: ir.Value, task: ir.Value,
                    recs: ir.Value, n: ir.Value) -> None:
        # claim task indices of generation my_gen until none is left; run each; the one
        # finishing the last task wakes the launcher
        callee = b.inttoptr(b.ptrtoint(task, I64), task_t.as_pointer())
        head, try_, run, last, end = blocks(fn, "claim", "claim.try", "claim.run",
                                            "claim.last", "claim.end")
        b.branch(head)
        b.position_at_end(head)
        w = ld(b, claim)
        idx = b.and_(w, c64(0xFFFFFFFF))
        ours = b.icmp_signed("==", b.lshr(w, c64(32)), b.and_(my_gen, c64(0xFFFFFFFF)))
        b.cbranch(b.and_(ours, b.icmp_signed("<", idx, n)), try_, end)
        b.position_at_end(try_)
        res = b.cmpxchg(claim, w, b.add(w, c64(1)), "acq_rel", "acquire")
        b.cbranch(b.extract_value(res, 1), run, head)
        b.position_at_end(run)
        b.call(callee, [b.gep(recs, [b.mul(idx, c64(32))], source_etype=ir.IntType(8))])
        done = b.add(b.atomic_rmw("add", finished, c64(1), "acq_rel"), c64(1))
        b.cbranch(b.icmp_signed("==", done, n), last, head)
        b.position_at_end(last)
        b.call(lock, [objs["lock"]])
        b.call(bcast, [objs["done"]])
        b.call(unlock, [objs["lock"]])
        b.branch(head)
        b.position_at_end(end)

    # worker thread: wait for a new generation, then claim tasks of it
    worker = ir.Function(m, task_t, "pool.worker")
    worker.linkage = "internal"
    b = ir.IRBuilder(worker.append_basic_block("entry"))
    b.call(lock, [objs["lock"]])
    seen0 = ld(b, gen)
    b.call(unlock, [objs["lock"]])
    entry_end = b.block
    loop, check, waitb, go = blocks(worker, "loop", "check", "wait", "go")
    b.branch(loop)
    b.position_at_end(loop)
    seen = b.phi(I64)
    seen.add_incoming(seen0, entry_end)
    spin_until(b, worker, gen, lambda v: b.icmp_signed("!=", v, seen))
    b.call(lock, [objs["lock"]])
    b.branch(check)
    b.position_at_end(check)
    b.cbranch(b.icmp_signed("==", ld(b, gen), seen), waitb, go)
    b.position_at_end(waitb)
    b.call(wait, [objs["work"], objs["lock"]])
    b.branch(check)
    b.position_at_end(go)
    cur = ld(b, gen)
    task, recs, n = b.inttoptr(ld(b, fn_g), PTR), b.inttoptr(ld(b, rec_g), PTR), ld(b, n_g)
    b.call(unlock, [objs["lock"]])
    run_claimed(b, worker, cur, task, recs, n)
    seen.add_incoming(cur, b.block)
    b.branch(loop)

    # tessel_pool_ensure(k)
    ensure = ir.Function(m, ir.FunctionType(VOID, [I64]), "tessel_pool_ensure")
    b = ir.IRBuilder(ensure.append_basic_block("entry"))
    mypid = b.sext(b.call(getpid, []), I64)
    with b.if_then(b.icmp_signed("!=", ld(b, pid), mypid)):
        # a fresh process (or a fork): no workers exist here, reset all state
        for o in objs.values():
            b.call(memset, [o, ir.Constant(I32, 0), c64(64)])
        for g in (gen, claim, finished, workers):
            st(b, c64(0), g)
        st(b, mypid, pid)
    b.call(lock, [objs["launch_lock"]])
    tid = b.alloca(I64)
    head, body, started, end = blocks(ensure, "head", "body", "started", "end")
    b.branch(head)
    b.position_at_end(head)
    have = ld(b, workers)
    b.cbranch(b.icmp_signed("<", have, ensure.args[0]), body, end)
    b.position_at_end(body)
    rc = b.call(create, [tid, ir.Constant(PTR, None), worker, ir.Constant(PTR, None)])
    b.cbranch(b.icmp_signed("==", rc, ir.Constant(I32, 0)), started, end)
    b.position_at_end(started)
    b.call(detach, [b.load(tid, typ=I64)])
    st(b, b.add(have, c64(1)), workers)
    b.branch(head)
    b.position_at_end(end)
    b.call(unlock, [objs["launch_lock"]])
    b.ret_void()

    # tessel_pool_launch(fn, records, n)
    launch = ir.Function(m, ir.FunctionType(VOID, [PTR, PTR, I64]), "tessel_pool_launch")
    b = ir.IRBuilder(launch.append_basic_block("entry"))
    fn, recs, n = launch.args
    serial, pooled = blocks(launch, "serial", "pooled")
    same = b.icmp_signed("==", ld(b, pid), b.sext(b.call(getpid, []), I64))
    has = b.icmp_signed(">", ld(b, workers), c64(0))
    many = b.icmp_signed(">", n, c64(1))
    b.cbranch(b.and_(b.and_(same, has), many), pooled, serial)
    b.position_at_end(serial)
    callee = b.inttoptr(b.ptrtoint(fn, I64), task_t.as_pointer())
    with cfor(b, launch, c64(0), n) as t:
        b.call(callee, [b.gep(recs, [b.mul(t, c64(32))], source_etype=ir.IntType(8))])
    b.ret_void()
    b.position_at_end(pooled)
    b.call(lock, [objs["launch_lock"]])
    b.call(lock, [objs["lock"]])
    st(b, b.ptrtoint(fn, I64), fn_g)
    st(b, b.ptrtoint(recs, I64), rec_g)
    st(b, n, n_g)
    st(b, c64(0), finished)
    g = b.add(ld(b, gen), c64(1))
    st(b, b.shl(b.and_(g, c64(0xFFFFFFFF)), c64(32)), claim)
    st(b, g, gen)
    b.call(bcast, [objs["work"]])
    b.call(unlock, [objs["lock"]])
    run_claimed(b, launch, g, fn, recs, n)
    spin_until(b, launch, finished, lambda v: b.icmp_signed("==", v, n))
    b.call(lock, [objs["lock"]])
    head, waitb, end = blocks(launch, "w.head", "w.wait", "w.end")
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(b.icmp_signed("!=", ld(b, finished), n), waitb, end)
    b.position_at_end(waitb)
    b.call(wait, [objs["done"], objs["lock"]])
    b.branch(head)
    b.position_at_end(end)
    b.call(unlock, [objs["lock"]])
    b.call(unlock, [objs["launch_lock"]])
    b.ret_void()
    return str(m)


class cfor:  # noqa: N801 - used as a statement-like context manager
    """`with cfor(b, fn, lo, hi) as t:` emits a counted loop around the block's body."""

    def __init__(self, b: ir.IRBuilder, fn: ir.Function, lo: ir.Value, hi: ir.Value) -> None:
        self.b, self.fn, self.lo, self.hi = b, fn, lo, hi

    def __enter__(self) -> ir.Value:
        b = self.b
        pre = b.block
        self.head, self.body, self.end = (self.fn.append_basic_block(x)
                                          for x in ("for.head", "for.body", "for.end"))
        b.branch(self.head)
        b.position_at_end(self.head)
        self.t = b.phi(I64)
        self.t.add_incoming(self.lo, pre)
        b.cbranch(b.icmp_signed("<", self.t, self.hi), self.body, self.end)
        b.position_at_end(self.body)
        return self.t

    def __exit__(self, *exc: Any) -> None:
        b = self.b
        self.t.add_incoming(b.add(self.t, ir.Constant(I64, 1)), b.block)
        b.branch(self.head)
        b.position_at_end(self.end)


def pool_launch_address(workers: int) -> int:
    """Address of `tessel_pool_launch`, after making sure `workers` threads exist."""
    with _lock:
        jit = _runtime.get("jit")
        if jit is None:
            from lowering.llvm.jit import compile_ir

            jit = compile_ir(build_module(), "llvm")
            _runtime["jit"] = jit
            _runtime["ensure"] = ctypes.CFUNCTYPE(None, ctypes.c_int64)(
                jit.address("tessel_pool_ensure"))  # type: ignore[attr-defined]
        if workers > 0 and os.environ.get("TESSEL_THREAD_POOL", "1") != "0":
            _runtime["ensure"](workers)  # type: ignore[operator]
        return jit.address("tessel_pool_launch")  # type: ignore[attr-defined]
