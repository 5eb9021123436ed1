"""Math intrinsics in LLVM code: LLVM intrinsics where LLVM has one (llvm.exp, llvm.sqrt,
llvm.fma, ...), libm for erf (one call per lane in vector code), and an inline rational
approximation for float32 tanh, so that tanh vectorizes (LLVM has no vector tanh and a
libm call per lane would dominate fused elementwise kernels).

float16 math is done in float32 and rounded back, as numpy does.

Tensor intrinsics that work on memory regions (a tensorized nest's Call, whose arguments
are the first elements of its regions) are in REGION_CALLS: `dot4_u8i8`, the 4-wide int8
dot of schedule.templates.x86_int8_dot, becomes VNNI's vpdpbusd where the target has it,
else two vpmaddwd on bytes widened to int16 (exact, where vpmaddubsw would saturate),
else plain shifts and multiplies.

    >>> # used by ExprEmitter._e_Call; see lowering.llvm.exprs
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from lowering import ir as lir
from lowering.llvm.types import I8, I32, PTR, const, lanes_of, mem_type, reg_type, vec
from lowering.prefetch import PREFETCH
from schedule.templates.x86_int8_dot import DOT4, dot4_instruction
from tensor_expr import expr as E
from tessel_errors import CodegenError

_LLVM_UNARY = {
    "exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "log10": "log10",
    "sqrt": "sqrt", "sin": "sin", "cos": "cos", "floor": "floor", "ceil": "ceil",
    "trunc": "trunc", "fabs": "fabs", "round": "roundeven", "round_half_away": "round",
}

# Eigen's float tanh: odd rational function on [-7.9053, 7.9053], exact sign and clamping.
_TANH_CLAMP = 7.90531110763549805
_TANH_ALPHA = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
               5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
               4.89352455891786e-03)
_TANH_BETA = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
              4.89352518554385e-03)


def emit(cg: Any, name: str, dtype: str, arg_dtypes: list[str], args: list[ir.Value]) -> ir.Value:
    """The value of intrinsic `name` applied to `args` (already unified), of `dtype`."""
    if name == "isnan":
        return cg.b.fcmp_unordered("uno", args[0], args[0])
    if name == "popcount":
        return cg.intrinsic("ctpop", args[0].type, args, [args[0].type])
    if name == "shift_left":
        return cg.b.shl(args[0], args[1])
    if name == "shift_right":
        shr = cg.b.lshr if dtype.startswith("uint") else cg.b.ashr
        return shr(args[0], args[1])
    if dtype not in ("float16", "float32", "float64"):
        raise CodegenError(
            f"intrinsic '{name}' is not supported by the LLVM backend for dtype {dtype} "
            "(tensorize intrinsics need a backend that implements them)"
        )
    if dtype == "float16":
        wide = [cg.cast(a, "float16", "float32") for a in args]
        out = _float_math(cg, name, "float32", wide)
        return cg.cast(out, "float32", "float16")
    return _float_math(cg, name, dtype, args)


def _float_math(cg: Any, name: str, dtype: str, args: list[ir.Value]) -> ir.Value:
    b = cg.b
    t = args[0].type
    fmf = cg.fmf
    if name == "exp" and dtype == "float32":
        return _exp_f32(cg, args[0])
    if name in _LLVM_UNARY:
        return cg.intrinsic(_LLVM_UNARY[name], t, args[:1], [t])
    if name == "pow":
        return cg.intrinsic("pow", t, args[:2], [t])
    if name == "fma":
        return cg.intrinsic("fma", t, args[:3], [t])
    if name == "rsqrt":
        s = cg.intrinsic("sqrt", t, args[:1], [t])
        return b.fdiv(const(t, 1.0), s, flags=fmf)
    if name == "sigmoid":
        neg = b.fsub(const(t, 0.0), args[0], flags=fmf)
        e = _exp_f32(cg, neg) if dtype == "float32" else cg.intrinsic("exp", t, [neg], [t])
        return b.fdiv(const(t, 1.0), b.fadd(const(t, 1.0), e, flags=fmf), flags=fmf)
    if name == "tanh" and dtype == "float32":
        return _tanh_f32(cg, args[0])
    if name in ("tanh", "erf"):
        cname = name + ("f" if dtype == "float32" else "")
        return _libm_lanes(cg, cname, dtype, args[0])
    raise CodegenError(f"unknown intrinsic '{name}' in LLVM code generation")


def _libm_lanes(cg: Any, cname: str, dtype: str, x: ir.Value) -> ir.Value:
    """Call the libm function `cname` on a scalar, or once per lane on a vector."""
    st = reg_type(dtype)
    fn = cg.extern(cname, st, [st])
    n = lanes_of(x.type)
    if not n:
        return cg.b.call(fn, [x])
    out = ir.Constant(vec(st, n), ir.Undefined)
    for i in range(n):
        lane = cg.b.extract_element(x, ir.Constant(I32, i))
        out = cg.b.insert_element(out, cg.b.call(fn, [lane]), ir.Constant(I32, i))
    return out


def _tanh_f32(cg: Any, x: ir.Value) -> ir.Value:
    """tanh(x) = x * P(x^2) / Q(x^2) after clamping; |x| < 4e-4 returns x (Eigen)."""
    b, t = cg.b, x.type
    # plain IEEE ops (no reassociation), so the result does not depend on fast-math
    hi, lo = const(t, _TANH_CLAMP), const(t, -_TANH_CLAMP)
    xc = b.select(b.fcmp_ordered(">", x, hi), hi, x)
    xc = b.select(b.fcmp_ordered("<", xc, lo), lo, xc)
    x2 = b.fmul(xc, xc)
    p = const(t, _TANH_ALPHA[0])
    for a in _TANH_ALPHA[1:]:
        p = cg.intrinsic("fma", t, [x2, p, const(t, a)], [t])
    p = b.fmul(xc, p)
    q = const(t, _TANH_BETA[0])
    for c in _TANH_BETA[1:]:
        q = cg.intrinsic("fma", t, [x2, q, const(t, c)], [t])
    r = b.fdiv(p, q)
    ax = cg.intrinsic("fabs", t, [x], [t])
    tiny = b.fcmp_ordered("<", ax, const(t, 0.0004))
    return b.select(tiny, x, r)


# Cephes expf: exp(x) = 2^n * P(r), r = x - n ln2 (Cody-Waite split of ln2), |r| <= ln2/2
_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
          1.6666665459e-1, 5.0000001201e-1)


def _exp_f32(cg: Any, x: ir.Value) -> ir.Value:
    """float32 exp in straight-line code, so that it vectorizes (LLVM would call expf
    once per lane). About 1 ulp; overflow gives inf, underflow denormals then 0, NaN NaN."""
    b, t = cg.b, x.type
    n_lanes = lanes_of(t)
    i32 = vec(I32, n_lanes) if n_lanes else I32

    def fma(a: ir.Value, c: ir.Value, d: ir.Value) -> ir.Value:
        return cg.intrinsic("fma", t, [a, c, d], [t])

    hi, lo = const(t, 88.8), const(t, -104.0)
    xc = b.select(b.fcmp_ordered(">", x, hi), hi, x)
    xc = b.select(b.fcmp_ordered("<", xc, lo), lo, xc)
    n = cg.intrinsic("roundeven", t, [b.fmul(xc, const(t, 1.4426950408889634))], [t])
    r = fma(n, const(t, -_LN2_HI), xc)
    r = fma(n, const(t, -_LN2_LO), r)
    p = const(t, _EXP_P[0])
    for c in _EXP_P[1:]:
        p = fma(p, r, const(t, c))
    y = b.fadd(fma(p, b.fmul(r, r), r), const(t, 1.0))
    # 2^n as two factors so that results down to the denormals come out right
    k = b.fptosi(n, i32)
    k1 = b.ashr(k, const(i32, 1))
    k2 = b.sub(k, k1)
    for kk in (k1, k2):
        scale = b.bitcast(b.shl(b.add(kk, const(i32, 127)), const(i32, 23)), t)
        y = b.fmul(y, scale)
    return b.select(b.fcmp_unordered("uno", x, x), x, y)


# ---------------------------------------------------------------------------------------
# Region intrinsics (tensorize)


def _address(cg: Any, load: Any) -> ir.Value:
    """The address of a region's first element (a BufferLoad argument of the Call)."""
    if not isinstance(load, lir.BufferLoad):
        raise CodegenError(f"a region intrinsic takes the first element of each region, "
                           f"got '{load}'")
    info = cg.buffer(load.buffer)
    if info.const_strides and info.const_strides[-1] != 1:
        raise CodegenError(f"the region of '{load.buffer.name}' must be contiguous in its "
                           f"last dimension for a tensorized intrinsic")
    return cg.b.gep(info.ptr, [cg.flat_index(load.buffer, load.indices)],
                    source_etype=mem_type(load.buffer.dtype))


_PMADDWD = {128: "x86.sse2.pmadd.wd", 256: "x86.avx2.pmadd.wd",
            512: "x86.avx512.pmaddw.d.512"}


def _pmaddwd(cg: Any, x: ir.Value, y: ir.Value, lanes: int) -> ir.Value:
    name = "llvm." + _PMADDWD[32 * lanes]
    fn = cg.module.globals.get(name)
    if fn is None:
        fn = ir.Function(cg.module, ir.FunctionType(vec(I32, lanes), [x.type, y.type]), name)
    return cg.b.call(fn, [x, y])


def _dot4(cg: Any, e: E.Call) -> ir.Value:
    """acc[0:lanes] += sum_k a[k] * byte_k(b[0:lanes]) (see schedule.templates.x86_int8_dot)."""
    acc_first, a_first, b_first, n = e.args
    if not isinstance(n, E.IntImm):
        raise CodegenError(f"{DOT4}: the lane count must be a constant, got '{n}'")
    lanes = n.value
    bd = cg.b
    vt = vec(I32, lanes)
    acc_p, a_p, b_p = (_address(cg, x) for x in (acc_first, a_first, b_first))
    acc = bd.load(acc_p, typ=vt, align=4)
    words = bd.load(b_p, typ=vt, align=4)
    paired = a_first.buffer.dtype == "uint16"  # a0 a2 | a1 a3, else 4 uint8 a0 a1 a2 a3
    if paired:
        a_even = bd.load(a_p, typ=I32, align=2)
        a_odd = bd.load(bd.gep(a_p, [ir.Constant(I32, 4)], source_etype=I8), typ=I32, align=2)
        a4 = bd.or_(a_even, bd.shl(a_odd, const(I32, 8)))
    else:
        a4 = bd.load(a_p, typ=I32, align=1)  # the 4 uint8 values as one little-endian word
    how = dot4_instruction(cg.target.features, lanes)
    if how == "vpdpbusd":
        bytes_t = vec(I8, 4 * lanes)
        av = bd.bitcast(cg.splat(a4, lanes), bytes_t)
        out = cg.intrinsic(f"x86.avx512.vpdpbusd.{32 * lanes}", vt,
                           [acc, av, bd.bitcast(words, bytes_t)], [])
    elif how == "vpmaddwd":
        # int16 lanes of the words: (byte1 byte0), (byte3 byte2); the even bytes and the
        # odd ones sign-extended to int16 meet a's (a0, a2) and (a1, a3) pairs, so each
        # vpmaddwd sums two exact products into the int32 lane of their output channel
        i16 = vec(ir.IntType(16), 2 * lanes)
        halves = bd.bitcast(words, i16)
        eight = const(i16, 8)
        even = bd.ashr(bd.shl(halves, eight), eight)
        odd = bd.ashr(halves, eight)
        if paired:  # stored as the two pairs: one broadcast load each
            pe, po = cg.splat(a_even, lanes), cg.splat(a_odd, lanes)
        else:  # split in vector registers (a scalar split costs GPR -> vector moves)
            a_all = cg.splat(a4, lanes)
            pair = const(vt, 0x00FF00FF)
            pe = bd.and_(a_all, pair)
            po = bd.and_(bd.lshr(a_all, const(vt, 8)), pair)
        out = bd.add(acc, bd.add(_pmaddwd(cg, even, bd.bitcast(pe, i16), lanes),
                                 _pmaddwd(cg, odd, bd.bitcast(po, i16), lanes)))
    else:
        out = acc
        for k in range(4):
            wk = bd.ashr(bd.shl(words, const(vt, 24 - 8 * k)), const(vt, 24))
            ak = bd.and_(bd.lshr(a4, const(I32, 8 * k)), const(I32, 255))
            out = bd.add(out, bd.mul(wk, cg.splat(ak, lanes)))
    bd.store(out, acc_p, align=4)
    return const(I32, 0)


def _prefetch(cg: Any, e: E.Call) -> ir.Value:
    """llvm.prefetch of one element's cache line (lowering.prefetch): a read, into the
    cache level the locality names (3: L1, 2: L2, 1: L3)."""
    first, locality = e.args
    if not isinstance(locality, E.IntImm) or not 0 <= locality.value <= 3:
        raise CodegenError(f"{PREFETCH}: the locality must be a constant in [0, 3], got "
                           f"'{locality}'")
    cg.intrinsic("prefetch", ir.VoidType(),
                 [_address(cg, first), ir.Constant(I32, 0), ir.Constant(I32, locality.value),
                  ir.Constant(I32, 1)], [PTR])
    return const(I32, 0)


# name -> emit(codegen, call): Calls whose arguments are regions' first elements
REGION_CALLS = {DOT4: _dot4, PREFETCH: _prefetch}
