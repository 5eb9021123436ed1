"""PrimFunc -> LLVM IR text: statements, loops of every kind, allocations, asserts.

The generated module exports `i32 @<name>(ptr args, ptr shapes)`: `args` holds one data
pointer per parameter buffer, `shapes` every dimension of every parameter (int64, in order).
Symbolic shape Vars are bound from `shapes`; the Python Kernel checks their consistency
before calling. The return value is 0, or the 1-based index of the failing check in
`CodeGen.messages` (AssertStmt, out of memory), which the Kernel raises as an error.

The body lives in `@<name>.body`, whose buffer pointers are `noalias` (the Kernel refuses
overlapping arrays), so that LLVM may keep values in registers across stores.

    >>> import tensor_expr as te
    >>> from lowering.ir import Buffer, BufferStore, For, ForKind, PrimFunc
    >>> A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    >>> i = te.var("i")
    >>> f = PrimFunc("twice", (A, B), For(i, te.const(0), te.const(8), ForKind.SERIAL,
    ...              BufferStore(B, A[i] * 2.0, (i,))))
    >>> "define" in generate(f, "llvm").text
    True
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from lowering import ir as lir
from lowering.llvm import parallel
from lowering.llvm.exprs import BufInfo, ExprEmitter, VecCtx
from lowering.llvm.fastir import Builder, fast_scope
from lowering.llvm.types import (
    I1,
    I32,
    I64,
    PTR,
    alloca,
    const,
    elem_bytes,
    mem_type,
    reg_type,
    vec,
)
from lowering.llvm.vectorize import chunk_lanes, flat_coeff, vector_body_ok
from tensor_expr import expr as E
from tessel_errors import CodegenError
from tessel_target import Target

STACK_LIMIT = 256 * 1024  # local buffers above this many bytes go on the heap
MAX_UNROLL = 512  # longer "unrolled" loops stay loops (copies would only slow LLVM down)


@dataclass
class Generated:
    """The result of code generation: IR text, entry symbol, check messages."""

    text: str
    entry: str
    messages: list[str]
    num_threads_symbol: str
    launch_symbol: str = "__tessel_launch"


class CodeGen(ExprEmitter):
    """Emits one PrimFunc as an LLVM module."""

    def __init__(self, func: lir.PrimFunc, target: Target) -> None:
        self.func = func
        self.target = target
        self.module = ir.Module(name=func.name)
        self.fmf: tuple[str, ...] = ("fast",) if target.fast_math else ("contract",)
        self.messages: list[str] = []
        self.env: dict[int, ir.Value] = {}
        self.env64: dict[int, ir.Value] = {}
        self.bufs: dict[int, BufInfo] = {}
        self.vec: VecCtx | None = None
        self.memo: dict[int, tuple[Any, ir.Value]] = {}
        self.var_memo: dict[int, tuple[Any, frozenset[int]]] = {}
        self.in_parallel = False
        self.nthreads_sym = "__tessel_num_threads"
        g = ir.GlobalVariable(self.module, I32, self.nthreads_sym)
        g.initializer = ir.Constant(I32, 1)
        self.nthreads = g
        self.launch_sym = "__tessel_launch"
        launch = ir.GlobalVariable(self.module, PTR, self.launch_sym)
        launch.initializer = ir.Constant(PTR, None)
        launch.type = PTR
        self.launch = launch
        self.functions: list[str] = []
        self.fail: Callable[[int], None] = self._fail_return
        self._uid = 0

    # ------------------------------------------------------------------ module
    def generate(self) -> Generated:
        """Emit the module and return its text."""
        f = self.func
        body = self._body_function()
        wrapper = ir.Function(self.module, ir.FunctionType(I32, [PTR, PTR]), f.name)
        self.functions.append(f.name)
        b = ir.IRBuilder(wrapper.append_basic_block("entry"))
        args, shapes = wrapper.args
        ptrs = []
        for k in range(len(f.params)):
            slot = b.gep(args, [ir.Constant(I64, k)], source_etype=PTR)
            ptrs.append(b.load(slot, typ=PTR, align=8))
        b.ret(b.call(body, ptrs + [shapes]))
        text = _fix_loop_ids(self._add_function_attrs(str(self.module)))
        return Generated(text, f.name, self.messages, self.nthreads_sym)

    def _body_function(self) -> ir.Function:
        f = self.func
        ftype = ir.FunctionType(I32, [PTR] * len(f.params) + [PTR])
        fn = ir.Function(self.module, ftype, f.name + ".body")
        fn.linkage = "internal"
        self.functions.append(fn.name)
        for a in fn.args[:-1]:
            a.attributes.add("noalias")
        with self.function_scope(fn):
            shapes = fn.args[-1]
            pos = 0
            for buf in f.params:
                for d in buf.shape:
                    if isinstance(d, E.Var) and id(d) not in self.env:
                        slot = self.b.gep(shapes, [ir.Constant(I64, pos)], source_etype=I64)
                        w = self.b.load(slot, typ=I64, align=8)
                        self.env64[id(d)] = w
                        self.env[id(d)] = self.cast(w, "int64", d.dtype)
                    pos += 1
            for buf, ptr in zip(f.params, fn.args[:-1]):
                self.bind_buffer(buf, ptr)
            self.stmt(f.body)
            self.b.ret(ir.Constant(I32, 0))
        return fn

    def _add_function_attrs(self, text: str) -> str:
        # llvmlite cannot spell string attributes; add them on each `define` line.
        attrs = '"prefer-vector-width"="512" nounwind'
        if self.target.fast_math:
            attrs += ' "no-nans-fp-math"="true" "unsafe-fp-math"="true"'
        return _after_define_lines(text, " " + attrs)

    @contextlib.contextmanager
    def function_scope(self, fn: ir.Function) -> Iterator[None]:
        """Emit into `fn`: fresh builder, entry block for allocas, fresh environment."""
        saved = (self.b if hasattr(self, "b") else None, getattr(self, "entry_b", None),
                 self.env, self.env64, self.bufs, self.memo, self.vec, self.fail)
        fast_scope(fn)
        entry = fn.append_basic_block("entry")
        start = fn.append_basic_block("start")
        self.entry_b = Builder(entry)
        self.b = Builder(start)
        self.env, self.env64, self.bufs, self.memo, self.vec = {}, {}, {}, {}, None
        self.fail = self._fail_return
        try:
            yield
        finally:
            self.entry_b.branch(start)
            (self.b, self.entry_b, self.env, self.env64, self.bufs, self.memo, self.vec,
             self.fail) = saved  # type: ignore[assignment]

    def fresh(self, base: str) -> str:
        """A unique symbol name derived from `base`."""
        self._uid += 1
        return f"{self.func.name}.{base}.{self._uid}"

    def _fail_return(self, code: int) -> None:
        self.b.ret(ir.Constant(I32, code))

    def check(self, cond: ir.Value, message: str) -> None:
        """Branch to failure with `message` unless `cond` (i1) holds."""
        self.messages.append(message)
        code = len(self.messages)
        fn = self.b.function
        ok = fn.append_basic_block("check.ok")
        bad = fn.append_basic_block("check.fail")
        self.b.cbranch(cond, ok, bad)
        self.b.position_at_end(bad)
        self.fail(code)
        self.b.position_at_end(ok)

    # ------------------------------------------------------------------ buffers
    def strides_of(self, buf: lir.Buffer) -> list[E.PrimExpr]:
        """Element strides of `buf` (explicit, or row-major from its shape)."""
        if buf.strides is not None:
            return list(buf.strides)
        out: list[E.PrimExpr] = []
        acc: E.PrimExpr = E.const(1, "int64")
        for d in reversed(buf.shape):
            out.append(acc)
            acc = acc * E.cast(d, "int64")
        return out[::-1]

    def const_strides(self, buf: lir.Buffer) -> list[int | None]:
        """Strides of `buf` as ints, None where symbolic."""
        info = self.bufs.get(id(buf))
        if info is not None:
            return info.const_strides
        return [s.value if isinstance(s, E.IntImm) else None for s in self.strides_of(buf)]

    def bind_buffer(self, buf: lir.Buffer, ptr: ir.Value) -> None:
        """Make `buf` addressable at `ptr` in the current function."""
        exprs = self.strides_of(buf)
        vals = [self.emit_index(s) for s in exprs]
        cs = [s.value if isinstance(s, E.IntImm) else None for s in exprs]
        self.bufs[id(buf)] = BufInfo(ptr, vals, cs)

    def _size_elems(self, buf: lir.Buffer) -> ir.Value:
        if buf.strides is None:
            n: ir.Value = ir.Constant(I64, 1)
            for d in buf.shape:
                n = self.b.mul(n, self.emit_index(d))
            return n
        n = ir.Constant(I64, 1)
        for d, s in zip(buf.shape, buf.strides):
            ext = self.b.sub(self.emit_index(d), ir.Constant(I64, 1))
            n = self.b.add(n, self.b.mul(ext, self.emit_index(s)))
        return n

    # ------------------------------------------------------------------ statements
    def stmt(self, s: lir.Stmt) -> None:
        """Emit statement `s` at the current position."""
        method = getattr(self, "_s_" + type(s).__name__, None)
        if method is None:
            raise CodegenError(f"the LLVM backend cannot emit statement {type(s).__name__}")
        self.memo = {}
        method(s)
        self.memo = {}

    def _s_SeqStmt(self, s: lir.SeqStmt) -> None:
        for c in s.stmts:
            self.stmt(c)

    def _s_BufferStore(self, s: lir.BufferStore) -> None:
        info = self.buffer(s.buffer)
        mt = mem_type(s.buffer.dtype)
        align = elem_bytes(s.buffer.dtype)
        value = self.emit(s.value)
        if s.value.dtype != s.buffer.dtype:
            value = self.cast(value, s.value.dtype, s.buffer.dtype)
        vc = self.vec
        if vc is None:
            ptr = self.b.gep(info.ptr, [self.flat_index(s.buffer, s.indices)], source_etype=mt)
            self.b.store(self.to_mem(value, s.buffer.dtype), ptr, align=align)
            return
        value = self.to_mem(self.splat(value, vc.lanes), s.buffer.dtype)
        c = flat_coeff(s.buffer, info.const_strides, s.indices, vc.var, vc.varying,
                       self.var_memo)
        if c == 1:
            ptr = self.b.gep(info.ptr, [self.lane0_index(s.buffer, s.indices)],
                             source_etype=mt)
            if vc.mask is None:
                self.b.store(value, ptr, align=align)
            else:
                self.intrinsic("masked.store", ir.VoidType(),
                               [value, ptr, const(I32, align), vc.mask],
                               [value.type, PTR])
            return
        idx = self.splat(self.flat_index(s.buffer, s.indices), vc.lanes)
        ptrs = self.vgep(info.ptr, idx, mt)
        mask = vc.mask if vc.mask is not None else const(vec(I1, vc.lanes), 1)
        self.intrinsic("masked.scatter", ir.VoidType(),
                       [value, ptrs, const(I32, align), mask], [value.type, ptrs.type])

    def _s_Evaluate(self, s: lir.Evaluate) -> None:
        self.emit(s.value)

    def _s_LetStmt(self, s: lir.LetStmt) -> None:
        value = self.emit(s.value)
        key = id(s.var)
        old, old64 = self.env.get(key), self.env64.pop(key, None)
        self.env[key] = value
        varying = self.vec is not None and isinstance(value.type, ir.VectorType)
        if varying:
            self.vec.varying.add(key)  # type: ignore[union-attr]
        try:
            self.stmt(s.body)
        finally:
            if varying:
                self.vec.varying.discard(key)  # type: ignore[union-attr]
            self._restore(key, old, old64)

    def _restore(self, key: int, old: ir.Value | None, old64: ir.Value | None) -> None:
        if old is None:
            self.env.pop(key, None)
        else:
            self.env[key] = old
        if old64 is None:
            self.env64.pop(key, None)
        else:
            self.env64[key] = old64

    def _s_AssertStmt(self, s: lir.AssertStmt) -> None:
        cond = self.emit(s.condition)
        self.check(cond, s.message)
        self.stmt(s.body)

    def _s_IfThenElse(self, s: lir.IfThenElse) -> None:
        cond = self.emit(s.condition)
        if isinstance(cond.type, ir.VectorType):
            self._masked_if(s, cond)
            return
        fn = self.b.function
        then_bb = fn.append_basic_block("if.then")
        end_bb = fn.append_basic_block("if.end")
        else_bb = fn.append_basic_block("if.else") if s.else_case is not None else end_bb
        self.b.cbranch(cond, then_bb, else_bb)
        self.b.position_at_end(then_bb)
        self.stmt(s.then_case)
        self.b.branch(end_bb)
        if s.else_case is not None:
            self.b.position_at_end(else_bb)
            self.stmt(s.else_case)
            self.b.branch(end_bb)
        self.b.position_at_end(end_bb)

    def _masked_if(self, s: lir.IfThenElse, cond: ir.Value) -> None:
        # both sides run, each with the lanes where it is taken; stores and loads are masked
        vc = self.vec
        assert vc is not None
        outer = vc.mask
        neg = self.b.not_(cond)
        try:
            vc.mask = cond if outer is None else self.b.and_(outer, cond)
            self.stmt(s.then_case)
            if s.else_case is not None:
                vc.mask = neg if outer is None else self.b.and_(outer, neg)
                self.stmt(s.else_case)
        finally:
            vc.mask = outer

    def _s_Allocate(self, s: lir.Allocate) -> None:
        buf = s.buffer
        mt = mem_type(buf.dtype)
        n = self._const_size(buf)
        if buf.scope == "local" and n is not None and n * elem_bytes(buf.dtype) <= STACK_LIMIT:
            ptr = alloca(self.entry_b, ir.ArrayType(mt, max(n, 1)), buf.name,
                         max(64, buf.align))
            self.bind_buffer(buf, ptr)
            self.stmt(s.body)
            self.bufs.pop(id(buf), None)
            return
        nbytes = self.b.mul(self._size_elems(buf), ir.Constant(I64, elem_bytes(buf.dtype)))
        # aligned_alloc wants a multiple of the alignment
        rounded = self.b.and_(self.b.add(nbytes, ir.Constant(I64, 63)), ir.Constant(I64, -64))
        rounded = self.b.select(self.b.icmp_signed("==", rounded, ir.Constant(I64, 0)),
                                ir.Constant(I64, 64), rounded)
        alloc = self.extern("aligned_alloc", PTR, [I64, I64])
        ptr = self.b.call(alloc, [ir.Constant(I64, 64), rounded])
        self.check(self.b.icmp_unsigned("!=", ptr, ir.Constant(PTR, None)),
                   f"out of memory allocating buffer '{buf.name}'")
        self.bind_buffer(buf, ptr)
        self.stmt(s.body)
        self.bufs.pop(id(buf), None)
        self.b.call(self.extern("free", ir.VoidType(), [PTR]), [ptr])

    def _const_size(self, buf: lir.Buffer) -> int | None:
        n = 1
        dims = buf.shape if buf.strides is None else ()
        for d in dims:
            if not isinstance(d, E.IntImm):
                return None
            n *= d.value
        if buf.strides is not None:
            n = 1
            for d, st in zip(buf.shape, buf.strides):
                if not isinstance(d, E.IntImm) or not isinstance(st, E.IntImm):
                    return None
                n += (d.value - 1) * st.value
        return n

    # ------------------------------------------------------------------ loops
    def loop(self, lo: ir.Value, hi: ir.Value, body: Callable[[ir.Value], None],
             name: str = "for", hint: str = "") -> None:
        """Emit `for (c = lo; c < hi; ++c) body(c)` with an i64 counter; `hint`
        "vectorize" or "unroll" asks LLVM's loop passes for it (loop metadata)."""
        fn = self.b.function
        pre = self.b.block
        head = fn.append_basic_block(name + ".head")
        loop_bb = fn.append_basic_block(name + ".body")
        exit_bb = fn.append_basic_block(name + ".end")
        self.b.branch(head)
        self.b.position_at_end(head)
        phi = self.b.phi(I64, name=name + ".i")
        phi.add_incoming(lo, pre)
        self.b.cbranch(self.b.icmp_signed("<", phi, hi), loop_bb, exit_bb)
        self.b.position_at_end(loop_bb)
        saved = self.memo
        self.memo = {}
        body(phi)
        self.memo = saved
        nxt = self.b.add(phi, const(I64, 1), flags=["nsw"])
        phi.add_incoming(nxt, self.b.block)
        latch = self.b.branch(head)
        if hint:
            latch.set_metadata("llvm.loop", self._loop_md(hint))
        self.b.position_at_end(exit_bb)

    def _loop_md(self, hint: str) -> ir.MDValue:
        # LLVM wants `!L = distinct !{!L, !{...}}`; llvmlite cannot write a self-reference,
        # so the node is emitted as `!{!"tessel.loop.self", ...}` and fixed up in the text
        key = {"vectorize": "llvm.loop.vectorize.enable",
               "unroll": "llvm.loop.unroll.enable"}[hint]
        opt = self.module.add_metadata([ir.MetaDataString(self.module, key),
                                        ir.Constant(I1, 1)])
        return self.module.add_metadata([ir.MetaDataString(self.module, "tessel.loop.self"),
                                         opt])

    def bind_loop_var(self, var: E.Var, value64: ir.Value) -> tuple[Any, Any]:
        """Bind `var` to the i64 `value64` (and its own dtype); returns what to restore."""
        key = id(var)
        old = (self.env.get(key), self.env64.get(key))
        self.env64[key] = value64
        self.env[key] = self.cast(value64, "int64", var.dtype) if var.dtype != "int64" \
            else value64
        return old

    def _s_For(self, s: lir.For) -> None:
        kind = s.kind
        if kind is lir.ForKind.THREAD_BINDING:
            raise CodegenError(
                f"loop '{s.var.name}' is bound to GPU thread axis '{s.thread_tag}'; the LLVM "
                "(CPU) backend cannot run thread-bound loops: build for target 'cuda' or "
                "remove the bind"
            )
        ext = s.extent.value if isinstance(s.extent, E.IntImm) else None
        if kind is lir.ForKind.PARALLEL and not self.in_parallel and self.vec is None:
            parallel.emit_parallel_for(self, s)
            return
        if kind is lir.ForKind.UNROLLED and ext is not None and ext <= MAX_UNROLL:
            self._unrolled(s, ext)
            return
        if kind is lir.ForKind.VECTORIZED and ext is not None and self.vec is None:
            lanes = chunk_lanes(ext)
            if lanes > 1 and vector_body_ok(s.body, s.var, self.const_strides,
                                                self.var_memo):
                self._vectorized(s, ext, lanes)
                return
        hint = {lir.ForKind.VECTORIZED: "vectorize", lir.ForKind.UNROLLED: "unroll"}
        self.serial(s, hint.get(kind, ""))

    def serial(self, s: lir.For, hint: str = "") -> None:
        """Emit `s` as an ordinary loop (with a vectorize/unroll hint for LLVM)."""
        lo = self.emit_index(s.min)
        hi = self.index_op("add", lo, self.emit_index(s.extent))

        def body(c: ir.Value) -> None:
            old = self.bind_loop_var(s.var, c)
            self.stmt(s.body)
            self._restore(id(s.var), *old)

        self.loop(lo, hi, body, name="for." + s.var.name, hint=hint)

    def _unrolled(self, s: lir.For, ext: int) -> None:
        lo = self.emit_index(s.min)
        for k in range(ext):
            c = self.index_op("add", lo, const(I64, k))  # a constant when `lo` is one
            old = self.bind_loop_var(s.var, c)
            self.stmt(s.body)
            self._restore(id(s.var), *old)

    def _vectorized(self, s: lir.For, ext: int, lanes: int) -> None:
        lo = self.emit_index(s.min)
        steps = ir.Constant(vec(I64, lanes), list(range(lanes)))

        def one_chunk(base: ir.Value) -> None:
            vc = VecCtx(s.var, lanes, {id(s.var)}, None, base)
            if isinstance(base, ir.Constant) and type(base.constant) is int:
                lanes64 = ir.Constant(vec(I64, lanes),
                                      [base.constant + k for k in range(lanes)])
            else:
                lanes64 = self.b.add(self.splat(base, lanes), steps, flags=["nsw"])
            key = id(s.var)
            old = (self.env.get(key), self.env64.get(key))
            self.env64[key] = lanes64
            self.env[key] = self.cast(lanes64, "int64", s.var.dtype)
            saved_vec, self.vec = self.vec, vc
            try:
                self.stmt(s.body)
            finally:
                self.vec = saved_vec
                self._restore(key, *old)

        if lanes == ext:
            one_chunk(lo)
            return

        def chunk(c: ir.Value) -> None:
            base = self.b.add(lo, self.b.mul(c, const(I64, lanes), flags=["nsw"]),
                              flags=["nsw"])
            one_chunk(base)

        self.loop(const(I64, 0), const(I64, ext // lanes), chunk, name="vec")


def _after_define_lines(text: str, extra: str) -> str:
    """`extra` after the last `)` of each line that starts with `define ` (what a
    multi-line regex substitution of `^(define [^<newline>]*<close paren>)` did), without a
    regex scan of every line of a module of megabytes: there are a few such lines."""
    out: list[str] = []
    pos = 0
    if text.startswith("define "):
        at = 0
    else:
        nxt = text.find("\ndefine ")
        at = nxt + 1 if nxt >= 0 else -1
    while at >= 0:
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        close = text.rfind(")", at, end)  # the regex's greedy [^\n]* ends at the last one
        if close >= 0:
            out.append(text[pos:close + 1])
            out.append(extra)
            pos = close + 1
        nxt = text.find("\ndefine ", end)
        at = nxt + 1 if nxt >= 0 else -1
    out.append(text[pos:])
    return "".join(out)


_LOOP_SELF = re.compile(r'^(!\d+) = !\{\s*!"tessel\.loop\.self"\s*,', flags=re.M)


def _fix_loop_ids(text: str) -> str:
    """Turn `!N = !{ !"tessel.loop.self", ...}` into LLVM's self-referential loop ids."""
    if '"tessel.loop.self"' not in text:
        return text
    # metadata lines (the only ones that start with "!") come last: scan from there
    start = 0 if text.startswith("!") else text.find("\n!") + 1
    if start == 0 and not text.startswith("!"):
        return text
    return text[:start] + _LOOP_SELF.sub(r"\1 = distinct !{\1,", text[start:])


def generate(func: lir.PrimFunc, target: Any = "llvm") -> Generated:
    """Generate the LLVM module of `func` for `target` (IR text, not yet compiled)."""
    t = Target.parse(target)
    if t.kind != "llvm":
        raise CodegenError(f"lowering.llvm generates code for 'llvm' targets, got '{t}'")
    if not isinstance(func, lir.PrimFunc):
        raise CodegenError(f"expected a PrimFunc, got {type(func).__name__}")
    # Tens of thousands of llvmlite objects (in reference cycles: instruction <-> block) are
    # made here and none is garbage until the module is dropped; the cyclic collector's
    # passes over them cost a quarter of the time. It runs again once we are done.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return CodeGen(func, t).generate()
    finally:
        if was_enabled:
            gc.enable()


__all__ = ["CodeGen", "Generated", "generate", "reg_type"]
