"""Expression emission for the LLVM backend: scalar code, and vector code inside a
vectorized loop (a value is either a scalar, for lane-invariant expressions, or a
`<N x T>` vector; mixing broadcasts the scalar).

Semantics follow the interpreter: floor division and modulo (cheap shifts and masks for
power-of-two divisors, a sign fix-up otherwise; division by zero gives 0, like numpy),
`min`/`max` NaN-propagating like numpy (llvm.minimum/maximum, smin/smax), casts with
C/numpy rules, `if_then_else` lazy (a branch in scalar code, masked loads in vector code).

    >>> # used through CodeGen; see lowering.llvm.codegen
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llvmlite import ir

from lowering import ir as lir
from lowering.llvm import intrinsics
from lowering.llvm.types import (
    I1,
    I8,
    I32,
    I64,
    PTR,
    const,
    elem_bytes,
    lanes_of,
    mangle,
    mem_type,
    reg_type,
    scalar_of,
    vec,
)
from lowering.llvm.vectorize import VarMemo, flat_coeff, uses_any
from tensor_expr import expr as E
from tensor_expr.dtype import bits, is_float, is_uint
from tessel_errors import CodegenError


@dataclass
class BufInfo:
    """Where a buffer lives in the code being emitted."""

    ptr: ir.Value
    strides: list[ir.Value]  # i64, in elements
    const_strides: list[int | None]


@dataclass
class VecCtx:
    """The vectorized loop being emitted: its var, lane count, lane-varying var ids and
    the current lane mask (None = all lanes)."""

    var: E.Var
    lanes: int
    varying: set[int] = field(default_factory=set)
    mask: ir.Value | None = None
    lane0: ir.Value | None = None  # i64 value of the var in lane 0


# (emitter class, expression class) -> the unbound _e_<Class> method: a dict lookup
# instead of building the name and a getattr for each of the thousands of nodes
_EMIT: dict[tuple[type, type], Any] = {}

_INDEX_OP = {E.Add: "add", E.Sub: "sub", E.Mul: "mul"}

_INT_CMP = {E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.EQ: "==", E.NE: "!="}


_COMPARE = {"<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y,
            ">=": lambda x, y: x >= y, "==": lambda x, y: x == y, "!=": lambda x, y: x != y}


def _int_constant(v: ir.Value) -> int | None:
    """The value of a scalar integer constant (as llvmlite holds it), else None."""
    if isinstance(v, ir.Constant) and isinstance(v.type, ir.IntType) and \
            type(v.constant) is int:
        return v.constant
    return None


def _as_signed(v: int, width: int) -> int:
    """An integer constant of `width` bits read as two's complement."""
    v %= 1 << width
    return v - (1 << width) if v >= 1 << (width - 1) else v


class ExprEmitter:
    """Mixin of CodeGen: turns PrimExprs into LLVM values at the current builder."""

    b: ir.IRBuilder
    module: ir.Module
    env: dict[int, ir.Value]
    env64: dict[int, ir.Value]
    bufs: dict[int, BufInfo]
    vec: VecCtx | None
    memo: dict[int, tuple[Any, ir.Value]]
    var_memo: VarMemo  # the Var ids each expression node reads (vectorize.var_ids)
    fmf: tuple[str, ...]

    # ------------------------------------------------------------------ helpers
    def splat(self, v: ir.Value, lanes: int) -> ir.Value:
        """Broadcast scalar `v` to `lanes` lanes (vectors pass through)."""
        if isinstance(v.type, ir.VectorType):
            return v
        if isinstance(v, ir.Constant):
            return const(vec(v.type, lanes), v.constant)
        t = vec(v.type, lanes)
        undef = const(t, ir.Undefined)
        one = self.b.insert_element(undef, v, const(I32, 0))
        return self.b.shuffle_vector(one, undef, const(vec(I32, lanes), 0))

    def unify(self, *vals: ir.Value) -> list[ir.Value]:
        """Broadcast scalars when any operand is a vector."""
        if len(vals) == 2:  # the common case, without a generator
            a, b = vals
            ta, tb = a.type, b.type
            va, vb = isinstance(ta, ir.VectorType), isinstance(tb, ir.VectorType)
            if va == vb:
                return [a, b]
            n = ta.count if va else tb.count
            return [a, self.splat(b, n)] if va else [self.splat(a, n), b]
        n = max(lanes_of(v.type) for v in vals)
        return [self.splat(v, n) for v in vals] if n else list(vals)

    def is_varying(self, e: Any) -> bool:
        """True when `e` differs between lanes of the current vectorized loop."""
        return self.vec is not None and uses_any(e, self.vec.varying, self.var_memo)

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Value],
                  overload: list[ir.Type]) -> ir.Value:
        """Call `llvm.<name>.<mangled overload types>`."""
        full = "llvm." + name + "".join("." + mangle(t) for t in overload)
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, [a.type for a in args]), full)
        return self.b.call(fn, args)

    def vgep(self, base: ir.Value, idx: ir.Value, etype: ir.Type) -> ir.Value:
        """`<N x ptr>` addresses base + idx[lane] (llvmlite types a vector GEP as ptr)."""
        ptrs = self.b.gep(base, [idx], source_etype=etype)
        ptrs.type = vec(PTR, lanes_of(idx.type))
        return ptrs

    def extern(self, name: str, ret: ir.Type, argtys: list[ir.Type]) -> ir.Function:
        """Declare (once) an external C function such as `tanh` or `aligned_alloc`."""
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, argtys), name)
        return fn

    # ------------------------------------------------------------------ entry
    def emit(self, e: Any) -> ir.Value:
        """The value of `e` (scalar, or vector when it varies across lanes)."""
        if not isinstance(e, E.PrimExpr):
            e = E.as_expr(e)
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        kind = type(e)
        method = _EMIT.get((type(self), kind))
        if method is None:
            method = getattr(type(self), "_e_" + kind.__name__, None)
            if method is None:
                raise CodegenError(f"the LLVM backend cannot emit expression '{e}' "
                                   f"({kind.__name__}) in loop IR")
            _EMIT[(type(self), kind)] = method
        out = method(self, e)
        self.memo[id(e)] = (e, out)
        return out

    # ------------------------------------------------------------------ leaves
    def _e_IntImm(self, e: E.IntImm) -> ir.Value:
        if e.dtype == "bool":
            return const(I1, int(bool(e.value)))
        return const(reg_type(e.dtype), e.value & ((1 << bits(e.dtype)) - 1))

    def _e_FloatImm(self, e: E.FloatImm) -> ir.Value:
        return const(reg_type(e.dtype), float(e.value))

    def _e_StringImm(self, e: E.StringImm) -> ir.Value:
        raise CodegenError(f"a string constant {e.value!r} cannot be a value in LLVM code")

    def _e_Var(self, e: E.Var) -> ir.Value:
        v = self.env.get(id(e))
        if v is None:
            raise CodegenError(f"variable '{e.name}' is used but not bound (no loop, let or "
                               "shape dimension defines it)")
        return v

    # ------------------------------------------------------------------ arithmetic
    def _operands(self, e: E.BinaryOp) -> tuple[ir.Value, ir.Value]:
        a, b = self.unify(self.emit(e.a), self.emit(e.b))
        return a, b

    def _e_Add(self, e: E.Add) -> ir.Value:
        a, b = self._operands(e)
        return self.b.fadd(a, b, flags=self.fmf) if is_float(e.dtype) else self.b.add(a, b)

    def _e_Sub(self, e: E.Sub) -> ir.Value:
        a, b = self._operands(e)
        return self.b.fsub(a, b, flags=self.fmf) if is_float(e.dtype) else self.b.sub(a, b)

    def _e_Mul(self, e: E.Mul) -> ir.Value:
        a, b = self._operands(e)
        return self.b.fmul(a, b, flags=self.fmf) if is_float(e.dtype) else self.b.mul(a, b)

    def _e_Div(self, e: E.Div) -> ir.Value:
        a, b = self._operands(e)
        if not is_float(e.dtype):
            raise CodegenError(f"integer '/' in '{e}'; use floordiv")
        return self.b.fdiv(a, b, flags=self.fmf)

    def _e_FloorDiv(self, e: E.FloorDiv) -> ir.Value:
        return self.floor_divmod(e, want_div=True)

    def _e_FloorMod(self, e: E.FloorMod) -> ir.Value:
        return self.floor_divmod(e, want_div=False)

    def floor_divmod(self, e: E.BinaryOp, want_div: bool) -> ir.Value:
        """floordiv / floormod with Python semantics (numpy's 0 for a zero divisor)."""
        a, b = self._operands(e)
        bd = self.b
        if is_float(e.dtype):
            q = bd.fdiv(a, b, flags=self.fmf)
            if want_div:
                return self.intrinsic("floor", q.type, [q], [q.type])
            r = bd.frem(a, b)
            zero = const(r.type, 0.0)
            # numpy.remainder: the result takes the sign of the divisor
            fix = bd.and_(bd.fcmp_ordered("!=", r, zero),
                          bd.xor(bd.fcmp_ordered("<", r, zero), bd.fcmp_ordered("<", b, zero)))
            return bd.select(fix, bd.fadd(r, b), r)
        if e.dtype == "bool":
            raise CodegenError(f"floordiv/floormod of bool values in '{e}'")
        t = a.type
        cb = e.b.value if isinstance(e.b, E.IntImm) else None
        if is_uint(e.dtype):
            if cb is not None and cb > 0:
                return bd.udiv(a, b) if want_div else bd.urem(a, b)
            zero = bd.icmp_unsigned("==", b, const(t, 0))
            safe = bd.select(zero, const(t, 1), b)
            r = bd.udiv(a, safe) if want_div else bd.urem(a, safe)
            return bd.select(zero, const(t, 0), r)
        if cb is not None and cb > 0:
            if cb & (cb - 1) == 0:  # power of two: shifts and masks are exact floor ops
                k = cb.bit_length() - 1
                return bd.ashr(a, const(t, k)) if want_div else bd.and_(a, const(t, cb - 1))
            q, r = bd.sdiv(a, b), bd.srem(a, b)
            neg = bd.icmp_signed("<", r, const(t, 0))
            if want_div:
                return bd.sub(q, bd.zext(neg, t))
            return bd.add(r, bd.select(neg, b, const(t, 0)))
        if cb == -1:
            return bd.neg(a) if want_div else const(t, 0)
        zero = bd.icmp_signed("==", b, const(t, 0))
        minus1 = bd.icmp_signed("==", b, const(t, -1))
        safe = bd.select(bd.or_(zero, minus1), const(t, 1), b)
        q, r = bd.sdiv(a, safe), bd.srem(a, safe)
        adj = bd.and_(bd.icmp_signed("!=", r, const(t, 0)),
                      bd.icmp_signed("<", bd.xor(r, safe), const(t, 0)))
        if want_div:
            res = bd.sub(q, bd.zext(adj, t))
            res = bd.select(minus1, bd.neg(a), res)
        else:
            res = bd.add(r, bd.select(adj, safe, const(t, 0)))
            res = bd.select(minus1, const(t, 0), res)
        return bd.select(zero, const(t, 0), res)

    def _minmax(self, e: E.BinaryOp, kind: str) -> ir.Value:
        # Intrinsics rather than compare+select: LLVM 22's O3 pipeline never returned on a
        # select-based max reduction into a scalar (8x32 -> 0-d), and llvm.maximum/minimum
        # propagate NaN exactly as numpy.maximum/minimum do.
        a, b = self._operands(e)
        if is_float(e.dtype):
            name = "maximum" if kind == "max" else "minimum"
        elif is_uint(e.dtype) or e.dtype == "bool":
            name = "umax" if kind == "max" else "umin"
        else:
            name = "smax" if kind == "max" else "smin"
        return self.intrinsic(name, a.type, [a, b], [a.type])

    def _e_Min(self, e: E.Min) -> ir.Value:
        return self._minmax(e, "min")

    def _e_Max(self, e: E.Max) -> ir.Value:
        return self._minmax(e, "max")

    def _cmp(self, e: E.CmpOp) -> ir.Value:
        a, b = self._operands(e)
        op = _INT_CMP[type(e)]
        dt = e.a.dtype
        ca, cb = _int_constant(a), _int_constant(b)
        if ca is not None and cb is not None and not is_float(dt):
            # known now (an unrolled loop's index against a constant): no instruction, and
            # a select on it emits one arm (_e_Select)
            signed = not (is_uint(dt) or dt == "bool")
            x, y = (_as_signed(ca, a.type.width), _as_signed(cb, b.type.width)) if signed \
                else (ca % (1 << a.type.width), cb % (1 << b.type.width))
            return const(I1, int(_COMPARE[op](x, y)))
        if is_float(dt):
            if op == "!=":
                return self.b.fcmp_unordered(op, a, b, flags=self.fmf)
            return self.b.fcmp_ordered(op, a, b, flags=self.fmf)
        if is_uint(dt) or dt == "bool":
            return self.b.icmp_unsigned(op, a, b)
        return self.b.icmp_signed(op, a, b)

    _e_LT = _e_LE = _e_GT = _e_GE = _e_EQ = _e_NE = _cmp

    def _e_And(self, e: E.And) -> ir.Value:
        a, b = self._operands(e)
        return self.b.and_(a, b)

    def _e_Or(self, e: E.Or) -> ir.Value:
        a, b = self._operands(e)
        return self.b.or_(a, b)

    def _e_Not(self, e: E.Not) -> ir.Value:
        return self.b.not_(self.emit(e.a))

    def _e_Select(self, e: E.Select) -> ir.Value:
        c = self.emit(e.condition)
        known = _int_constant(c)
        if known is not None:
            # a condition known now (a select over the constant iterations of an unrolled
            # loop, as the Winograd transforms' tables are): only the taken arm is emitted,
            # not every arm of the chain for LLVM to fold away
            return self.emit(e.true_value if known else e.false_value)
        t, f = self.unify(self.emit(e.true_value), self.emit(e.false_value))
        if lanes_of(c.type) and not lanes_of(t.type):
            t, f = self.splat(t, lanes_of(c.type)), self.splat(f, lanes_of(c.type))
        return self.b.select(c, t, f)

    def _e_Let(self, e: E.Let) -> ir.Value:
        value = self.emit(e.value)
        old = self.env.get(id(e.var))
        self.env[id(e.var)] = value
        added = self.vec is not None and lanes_of(value.type) > 0
        if added:
            self.vec.varying.add(id(e.var))  # type: ignore[union-attr]
        saved, self.memo = self.memo, {}
        try:
            return self.emit(e.body)
        finally:
            self.memo = saved
            if added:
                self.vec.varying.discard(id(e.var))  # type: ignore[union-attr]
            if old is None:
                self.env.pop(id(e.var), None)
            else:
                self.env[id(e.var)] = old

    # ------------------------------------------------------------------ casts
    def _e_Cast(self, e: E.Cast) -> ir.Value:
        return self.cast(self.emit(e.value), e.value.dtype, e.dtype)

    def _f64_to_f32_odd(self, v: ir.Value) -> ir.Value:
        """float64 -> float32 rounded to odd: toward zero, low bit set when inexact."""
        n = lanes_of(v.type)
        bd = self.b
        ft, it = reg_type("float32"), I32
        ft, it = (vec(ft, n), vec(it, n)) if n else (ft, it)
        f = bd.fptrunc(v, ft)
        back = bd.fpext(f, v.type)
        positive = bd.fcmp_ordered(">", v, const(v.type, 0.0))
        away = bd.select(positive, bd.fcmp_ordered(">", back, v), bd.fcmp_ordered("<", back, v))
        inexact = bd.fcmp_unordered("!=", back, v)
        b = bd.sub(bd.bitcast(f, it), bd.zext(away, it))  # one ulp toward zero (sign-magnitude)
        return bd.bitcast(bd.or_(b, bd.zext(inexact, it)), ft)

    def cast(self, v: ir.Value, src: str, dst: str) -> ir.Value:
        """Convert `v` (scalar or vector) from dtype `src` to `dst`."""
        if src == dst:
            return v
        n = lanes_of(v.type)
        to = reg_type(dst)
        to = vec(to, n) if n else to
        bd = self.b
        if dst == "bool":
            if is_float(src):
                return bd.fcmp_unordered("!=", v, const(v.type, 0.0))
            return bd.icmp_unsigned("!=", v, const(v.type, 0))
        if src == "bool":
            return bd.uitofp(v, to) if is_float(dst) else bd.zext(v, to)
        if src == "float64" and dst == "float16":
            # fptrunc double -> half is a libcall (__truncdfhf2) the JIT cannot resolve; go
            # through float32 rounded to odd, which keeps the second rounding correct
            return self.cast(self._f64_to_f32_odd(v), "float32", "float16")
        if is_float(src) and is_float(dst):
            return bd.fpext(v, to) if bits(dst) > bits(src) else bd.fptrunc(v, to)
        if is_float(dst):
            return bd.uitofp(v, to) if is_uint(src) else bd.sitofp(v, to)
        if is_float(src):
            if bits(dst) < 64:
                # through int64 so that out-of-range values wrap as numpy's casts do
                wide = vec(I64, n) if n else I64
                return bd.trunc(bd.fptosi(v, wide), to)
            return bd.fptoui(v, to) if is_uint(dst) else bd.fptosi(v, to)
        if bits(dst) > bits(src):
            return bd.zext(v, to) if is_uint(src) else bd.sext(v, to)
        if bits(dst) < bits(src):
            if isinstance(v, ir.Constant):
                # a constant loop index (unrolled or one-chunk vector loops): no
                # instruction; masked as _e_IntImm writes integer constants
                m = (1 << bits(dst)) - 1
                if type(v.constant) is int:
                    return const(to, v.constant & m)
                if isinstance(v.constant, list):  # llvmlite keeps lanes as Constants
                    lanes = [x.constant for x in v.constant]
                    if all(type(x) is int for x in lanes):
                        return ir.Constant(to, [x & m for x in lanes])
            return bd.trunc(v, to)
        return v

    # ------------------------------------------------------------------ indices
    def emit_index(self, e: E.PrimExpr) -> ir.Value:
        """`e` as an i64 (scalar or vector) with no-signed-wrap arithmetic: indices are
        computed wide so that they cannot overflow and LLVM can reason about them."""
        if isinstance(e, E.IntImm):
            return const(I64, e.value)
        if isinstance(e, E.Var):
            w = self.env64.get(id(e))
            if w is not None:
                return w
            return self._widen(self.emit(e), e.dtype)
        if isinstance(e, (E.Add, E.Sub, E.Mul)) and e.dtype in ("int32", "int64"):
            return self.index_op(_INDEX_OP[type(e)], self.emit_index(e.a),
                                 self.emit_index(e.b))
        if isinstance(e, E.Cast) and e.dtype in ("int32", "int64") and e.value.dtype in (
            "int8", "int16", "int32", "int64"
        ):
            return self.emit_index(e.value)
        return self._widen(self.emit(e), e.dtype)

    def index_op(self, op: str, a: ir.Value, b: ir.Value) -> ir.Value:
        """`a op b` ("add", "sub", "mul") on i64 indices with nsw, folded where an
        operand is a scalar constant (0 + x, x * 1, x * 0, constant op constant) so that
        no instruction is emitted for what is known now: unrolled and split loops make
        many such terms, and LLVM's O3 would only fold them later."""
        ca = a.constant if isinstance(a, ir.Constant) and a.type is I64 else None
        cb = b.constant if isinstance(b, ir.Constant) and b.type is I64 else None
        if type(ca) is int and type(cb) is int:
            r = ca + cb if op == "add" else ca - cb if op == "sub" else ca * cb
            if -(1 << 63) <= r < (1 << 63):  # else nsw makes it poison: leave it to LLVM
                return const(I64, r)
        elif type(cb) is int and cb == 0 and op != "mul":  # x + 0, x - 0
            return a
        elif op == "add" and type(ca) is int and ca == 0 and b.type is I64:  # 0 + x
            return b
        elif op == "mul" and a.type is I64 and b.type is I64:
            if ca == 1:
                return b
            if cb == 1:
                return a
            if ca == 0 or cb == 0:
                return const(I64, 0)
        a, b = self.unify(a, b)
        return getattr(self.b, op)(a, b, flags=["nsw"])

    def _widen(self, v: ir.Value, dtype: str) -> ir.Value:
        n = lanes_of(v.type)
        t = vec(I64, n) if n else I64
        if scalar_of(v.type) == I64:
            return v
        return self.b.zext(v, t) if is_uint(dtype) or dtype == "bool" else self.b.sext(v, t)

    def flat_index(self, buf: lir.Buffer, indices: tuple[E.PrimExpr, ...]) -> ir.Value:
        """The row-major (or strided) element offset of `buf[indices]`, as i64."""
        info = self.buffer(buf)
        if len(indices) != len(info.strides):
            raise CodegenError(f"buffer '{buf.name}' has {len(info.strides)} dimensions, "
                               f"indexed with {len(indices)}")
        total: ir.Value | None = None
        for idx, stride, cs in zip(indices, info.strides, info.const_strides):
            term = self.emit_index(idx)
            if cs != 1:
                term = self.index_op("mul", term, stride)
            total = term if total is None else self.index_op("add", total, term)
        return total if total is not None else const(I64, 0)

    def buffer(self, buf: lir.Buffer) -> BufInfo:
        """The BufInfo of `buf`, or a CodegenError when it is not in scope."""
        info = self.bufs.get(id(buf))
        if info is None:
            raise CodegenError(f"buffer '{buf.name}' is used outside its allocation (it is "
                               "neither a parameter nor inside an Allocate)")
        return info

    # ------------------------------------------------------------------ loads
    def _e_BufferLoad(self, e: lir.BufferLoad) -> ir.Value:
        info = self.buffer(e.buffer)
        mt = mem_type(e.buffer.dtype)
        align = elem_bytes(e.buffer.dtype)
        vc = self.vec
        if vc is None or (not self.is_varying(e) and vc.mask is None):
            ptr = self.b.gep(info.ptr, [self.flat_index(e.buffer, e.indices)],
                             source_etype=mt)
            v = self.b.load(ptr, typ=mt, align=align)
            return self._from_mem(v, e.buffer.dtype)
        n = vc.lanes
        vt = vec(mt, n)
        mask = vc.mask if vc.mask is not None else const(vec(I1, n), 1)
        c = flat_coeff(e.buffer, info.const_strides, e.indices, vc.var, vc.varying,
                       self.var_memo)
        if c == 1:
            base = self.lane0_index(e.buffer, e.indices)
            ptr = self.b.gep(info.ptr, [base], source_etype=mt)
            if vc.mask is None:
                v = self.b.load(ptr, typ=vt, align=align)
            else:
                v = self.intrinsic("masked.load", vt,
                                   [ptr, const(I32, align), mask, const(vt, 0)],
                                   [vt, PTR])
        else:
            idx = self.splat(self.flat_index(e.buffer, e.indices), n)
            ptrs = self.vgep(info.ptr, idx, mt)
            v = self.intrinsic("masked.gather", vt,
                               [ptrs, const(I32, align), mask, const(vt, 0)],
                               [vt, vec(PTR, n)])
        return self._from_mem(v, e.buffer.dtype)

    def lane0_index(self, buf: lir.Buffer, indices: tuple[E.PrimExpr, ...]) -> ir.Value:
        """The flat index of lane 0 (scalar), for a contiguous vector access."""
        vc = self.vec
        assert vc is not None
        saved = (self.vec, self.memo, self.env.get(id(vc.var)), self.env64.get(id(vc.var)))
        self.vec, self.memo = None, {}
        self.env64[id(vc.var)] = vc.lane0  # type: ignore[assignment]
        self.env[id(vc.var)] = self.cast(vc.lane0, "int64", vc.var.dtype)  # type: ignore
        try:
            return self.flat_index(buf, indices)
        finally:
            self.vec, self.memo = saved[0], saved[1]
            self.env[id(vc.var)] = saved[2]  # type: ignore[assignment]
            self.env64[id(vc.var)] = saved[3]  # type: ignore[assignment]

    def _from_mem(self, v: ir.Value, dtype: str) -> ir.Value:
        if dtype == "bool":
            return self.b.icmp_unsigned("!=", v, const(v.type, 0))
        return v

    def to_mem(self, v: ir.Value, dtype: str) -> ir.Value:
        """A register value of `dtype` in its memory form (bool i1 -> i8)."""
        if dtype == "bool":
            n = lanes_of(v.type)
            return self.b.zext(v, vec(I8, n) if n else I8)
        return v

    # ------------------------------------------------------------------ calls
    def _e_Call(self, e: E.Call) -> ir.Value:
        if e.name == "if_then_else":
            return self._if_then_else(e)
        region = intrinsics.REGION_CALLS.get(e.name)
        if region is not None:
            return region(self, e)
        args = [self.emit(a) for a in e.args]
        if len(args) > 1:
            args = self.unify(*args)
        return intrinsics.emit(self, e.name, e.dtype, [a.dtype for a in e.args], args)

    def _if_then_else(self, e: E.Call) -> ir.Value:
        cond, tv, fv = e.args
        vc = self.vec
        if vc is not None and self.is_varying(cond):
            m = self.emit(cond)
            m = self.splat(m, vc.lanes)
            outer = vc.mask
            mt = m if outer is None else self.b.and_(outer, m)
            mf = self.b.not_(m) if outer is None else self.b.and_(outer, self.b.not_(m))
            saved = self.memo
            try:
                vc.mask, self.memo = mt, {}
                t = self.splat(self.emit(tv), vc.lanes)
                vc.mask, self.memo = mf, {}
                f = self.splat(self.emit(fv), vc.lanes)
            finally:
                vc.mask, self.memo = outer, saved
            return self.b.select(m, t, f)
        c = self.emit(cond)
        fn = self.b.function
        then_bb = fn.append_basic_block("ite.then")
        else_bb = fn.append_basic_block("ite.else")
        end_bb = fn.append_basic_block("ite.end")
        self.b.cbranch(c, then_bb, else_bb)
        results = []
        saved = self.memo
        for bb, sub in ((then_bb, tv), (else_bb, fv)):
            self.b.position_at_end(bb)
            self.memo = dict(saved)
            r = self.emit(sub)
            results.append((r, self.b.block))  # nested branches may have moved on
        self.memo = saved
        # both sides must agree on vector-ness before the phi
        n = max(lanes_of(r.type) for r, _ in results)
        outs = []
        for r, tail in results:
            self.b.position_at_end(tail)
            if n and not lanes_of(r.type):
                r = self.splat(r, n)
            outs.append((r, self.b.block))
            self.b.branch(end_bb)
        self.b.position_at_end(end_bb)
        phi = self.b.phi(outs[0][0].type)
        for r, bb in outs:
            phi.add_incoming(r, bb)
        return phi
