"""Parallel loops: the body is outlined into its own function and run on threads started
with pthread_create from the generated code (the calling thread takes chunk 0 itself).

For `for (v, min, ext) parallel { body }` we emit
  - `i32 @f.par.N(ptr noalias bufs..., i64 strides..., captured scalars..., i64 lo, i64 hi)`
    running `for v in [lo, hi): body` (noalias so the chunk keeps values in registers),
  - `ptr @f.worker.N(ptr targ)`, the thread entry: it unpacks a closure of i64 slots
    (min, ext, then every captured value), computes its static chunk from (tid, nthreads)
    and stores the body's return code in its targ record,
  - at the loop site: closure and per-thread records on the stack, `nthreads - 1`
    pthread_create calls, chunk 0 inline, pthread_join, then the first error code.
The thread count is the global `__tessel_num_threads` (set by the Kernel); at most
MAX_THREADS. If pthread_create fails the chunk runs inline, so results never depend on it.

    >>> # used by CodeGen._s_For; see lowering.llvm.codegen
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from lowering import ir as lir
from lowering.llvm.exprs import BufInfo
from lowering.llvm.types import I32, I64, PTR, alloca
from tensor_expr import expr as E
from tensor_expr.visitor import post_order_visit

MAX_THREADS = 64
_TARG = 4  # i64 slots per thread record: closure, tid, nthreads, return code


def captured(cg: Any, body: lir.Stmt) -> tuple[list[lir.Buffer], list[E.Var]]:
    """Buffers and variables of the enclosing scope that `body` uses, in first-use order."""
    bufs: dict[int, lir.Buffer] = {}
    vars_: dict[int, E.Var] = {}

    def on_expr(n: Any) -> None:
        if isinstance(n, E.Var) and id(n) in cg.env:
            vars_.setdefault(id(n), n)
        elif isinstance(n, lir.BufferLoad) and id(n.buffer) in cg.bufs:
            bufs.setdefault(id(n.buffer), n.buffer)

    def on_stmt(s: lir.Stmt) -> None:
        for name in s.__dataclass_fields__:  # type: ignore[attr-defined]
            v = getattr(s, name)
            if isinstance(v, E.PrimExpr):
                post_order_visit(v, on_expr)
            elif isinstance(v, tuple):
                for x in v:
                    if isinstance(x, E.PrimExpr):
                        post_order_visit(x, on_expr)
            elif isinstance(v, lir.Buffer):
                if id(v) in cg.bufs:
                    bufs.setdefault(id(v), v)
                for d in v.shape + (v.strides or ()):
                    post_order_visit(d, on_expr)

    lir.post_order_visit_stmt(body, on_stmt)
    return list(bufs.values()), list(vars_.values())


def _to_slot(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    t = v.type
    if isinstance(t, ir.PointerType):
        return b.ptrtoint(v, I64)
    if isinstance(t, (ir.HalfType, ir.FloatType, ir.DoubleType)):
        width = {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(t)]
        v = b.bitcast(v, ir.IntType(width))
        t = v.type
    return v if t.width == 64 else b.zext(v, I64)


def _from_slot(b: ir.IRBuilder, s: ir.Value, t: ir.Type) -> ir.Value:
    if isinstance(t, ir.PointerType):
        return b.inttoptr(s, PTR)
    if isinstance(t, (ir.HalfType, ir.FloatType, ir.DoubleType)):
        width = {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(t)]
        i = s if width == 64 else b.trunc(s, ir.IntType(width))
        return b.bitcast(i, t)
    return s if t.width == 64 else b.trunc(s, t)


def _slot_ptr(b: ir.IRBuilder, base: ir.Value, k: Any) -> ir.Value:
    idx = k if isinstance(k, ir.Value) else ir.Constant(I64, k)
    return b.gep(base, [idx], source_etype=I64)


def _smin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def emit_parallel_for(cg: Any, s: lir.For) -> None:
    """Emit parallel loop `s` at the current position of `cg`."""
    bufs, vars_ = captured(cg, s.body)
    infos = [cg.bufs[id(x)] for x in bufs]
    var_vals = [cg.env[id(v)] for v in vars_]
    lo = cg.emit_index(s.min)
    ext = cg.emit_index(s.extent)

    body_fn = _body_function(cg, s, bufs, infos, vars_, var_vals)
    worker = _worker_function(cg, body_fn, infos, var_vals)

    b = cg.b
    # closure: min, ext, then ptr + strides per buffer, then scalars
    values: list[ir.Value] = [lo, ext]
    for info in infos:
        values.append(info.ptr)
        values.extend(info.strides)
    values.extend(var_vals)
    closure = alloca(cg.entry_b, ir.ArrayType(I64, len(values)), "closure", 8)
    for k, v in enumerate(values):
        b.store(_to_slot(b, v), _slot_ptr(b, closure, k), align=8)
    targs = alloca(cg.entry_b, ir.ArrayType(I64, MAX_THREADS * _TARG), "targs", 8)
    tids = alloca(cg.entry_b, ir.ArrayType(I64, MAX_THREADS), "tids", 8)

    want = b.sext(b.load(cg.nthreads, typ=I32), I64)
    nt = _smin(b, _smin(b, want, ext), ir.Constant(I64, MAX_THREADS))
    nt = b.select(b.icmp_signed("<", nt, ir.Constant(I64, 1)), ir.Constant(I64, 1), nt)
    create = cg.extern("pthread_create", I32, [PTR, PTR, PTR, PTR])
    join = cg.extern("pthread_join", I32, [I64, PTR])
    worker_ptr = b.bitcast(worker, PTR)

    def wait(t: ir.Value) -> None:
        tid = b.load(_slot_ptr(b, tids, t), typ=I64, align=8)
        with b.if_then(b.icmp_signed("!=", tid, ir.Constant(I64, 0))):
            b.call(join, [tid, ir.Constant(PTR, None)])

    def record(t: ir.Value) -> ir.Value:
        rec = _slot_ptr(b, targs, b.mul(t, ir.Constant(I64, _TARG)))
        b.store(b.ptrtoint(closure, I64), rec, align=8)
        b.store(t, _slot_ptr(b, rec, 1), align=8)
        b.store(nt, _slot_ptr(b, rec, 2), align=8)
        b.store(ir.Constant(I64, 0), _slot_ptr(b, rec, 3), align=8)
        return rec

    def spawn(t: ir.Value) -> None:
        rec = record(t)
        tid_slot = _slot_ptr(b, tids, t)
        rc = b.call(create, [tid_slot, ir.Constant(PTR, None), worker_ptr, rec])
        with b.if_then(b.icmp_signed("!=", rc, ir.Constant(I32, 0))):
            b.call(worker, [rec])  # no thread: run the chunk here
            b.store(ir.Constant(I64, 0), tid_slot, align=8)

    launch = b.load(cg.launch, typ=PTR)
    fn = b.function
    pool_bb, own_bb, done_bb = (fn.append_basic_block(x) for x in
                                ("par.pool", "par.threads", "par.done"))
    b.cbranch(b.icmp_unsigned("!=", launch, ir.Constant(PTR, None)), pool_bb, own_bb)
    # the runtime's persistent pool (lowering.llvm.runtime)
    b.position_at_end(pool_bb)
    cg.loop(ir.Constant(I64, 0), nt, record, name="records")
    launch_t = ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]).as_pointer()
    b.call(b.inttoptr(b.ptrtoint(launch, I64), launch_t), [worker_ptr, targs, nt])
    b.branch(done_bb)
    # no pool: start the threads here
    b.position_at_end(own_bb)
    cg.loop(ir.Constant(I64, 1), nt, spawn, name="spawn")
    b.call(worker, [record(ir.Constant(I64, 0))])
    cg.loop(ir.Constant(I64, 1), nt, wait, name="join")
    b.branch(done_bb)
    b.position_at_end(done_bb)
    err = alloca(cg.entry_b, I64, "par.err", 8)
    b.store(ir.Constant(I64, 0), err)

    def collect(t: ir.Value) -> None:
        rec = _slot_ptr(b, targs, b.mul(t, ir.Constant(I64, _TARG)))
        code = b.load(_slot_ptr(b, rec, 3), typ=I64, align=8)
        old = b.load(err, typ=I64)
        b.store(b.select(b.icmp_signed("!=", old, ir.Constant(I64, 0)), old, code), err)

    cg.loop(ir.Constant(I64, 0), nt, collect, name="collect")
    code = b.load(err, typ=I64)
    bad = fn.append_basic_block("par.fail")
    ok = fn.append_basic_block("par.ok")
    b.cbranch(b.icmp_signed("!=", code, ir.Constant(I64, 0)), bad, ok)
    b.position_at_end(bad)
    b.ret(b.trunc(code, I32))
    b.position_at_end(ok)


def _body_function(cg: Any, s: lir.For, bufs: list[lir.Buffer], infos: list[BufInfo],
                   vars_: list[E.Var], var_vals: list[ir.Value]) -> ir.Function:
    argtys: list[ir.Type] = [PTR] * len(bufs)
    for info in infos:
        argtys.extend([I64] * len(info.strides))
    argtys.extend(v.type for v in var_vals)
    argtys.extend([I64, I64])
    fn = ir.Function(cg.module, ir.FunctionType(I32, argtys), cg.fresh("par"))
    fn.linkage = "internal"
    for a in fn.args[: len(bufs)]:
        a.attributes.add("noalias")
    with cg.function_scope(fn):
        args = list(fn.args)
        ptrs, args = args[: len(bufs)], args[len(bufs):]
        for buf, info, ptr in zip(bufs, infos, ptrs):
            n = len(info.strides)
            strides, args = args[:n], args[n:]
            cs = info.const_strides
            vals = [ir.Constant(I64, c) if c is not None else a for c, a in zip(cs, strides)]
            cg.bufs[id(buf)] = BufInfo(ptr, vals, list(cs))
        for v, a in zip(vars_, args):
            cg.env[id(v)] = a
        lo, hi = args[len(vars_)], args[len(vars_) + 1]
        cg.in_parallel = True
        try:
            def body(c: ir.Value) -> None:
                old = cg.bind_loop_var(s.var, c)
                cg.stmt(s.body)
                cg._restore(id(s.var), *old)

            cg.loop(lo, hi, body, name="par." + s.var.name)
            cg.b.ret(ir.Constant(I32, 0))
        finally:
            cg.in_parallel = False
    return fn


def _worker_function(cg: Any, body_fn: ir.Function, infos: list[BufInfo],
                     var_vals: list[ir.Value]) -> ir.Function:
    fn = ir.Function(cg.module, ir.FunctionType(PTR, [PTR]), cg.fresh("worker"))
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    rec = fn.args[0]
    closure = b.inttoptr(b.load(rec, typ=I64, align=8), PTR)
    tid = b.load(_slot_ptr(b, rec, 1), typ=I64, align=8)
    nt = b.load(_slot_ptr(b, rec, 2), typ=I64, align=8)
    lo0 = b.load(_slot_ptr(b, closure, 0), typ=I64, align=8)
    ext = b.load(_slot_ptr(b, closure, 1), typ=I64, align=8)
    zero = ir.Constant(I64, 0)
    ext = b.select(b.icmp_signed("<", ext, zero), zero, ext)
    per = b.sdiv(b.add(ext, b.sub(nt, ir.Constant(I64, 1))), nt)
    start = _smin(b, b.mul(tid, per), ext)
    stop = _smin(b, b.add(start, per), ext)
    args: list[ir.Value] = []
    k = 2
    ptr_args, stride_args = [], []
    for info in infos:
        ptr_args.append(b.inttoptr(b.load(_slot_ptr(b, closure, k), typ=I64, align=8), PTR))
        k += 1
        for _ in info.strides:
            stride_args.append(b.load(_slot_ptr(b, closure, k), typ=I64, align=8))
            k += 1
    args = ptr_args + stride_args
    for v in var_vals:
        args.append(_from_slot(b, b.load(_slot_ptr(b, closure, k), typ=I64, align=8), v.type))
        k += 1
    args += [b.add(lo0, start), b.add(lo0, stop)]
    rc = b.call(body_fn, args)
    b.store(b.zext(rc, I64), _slot_ptr(b, rec, 3), align=8)
    b.ret(ir.Constant(PTR, None))
    return fn
