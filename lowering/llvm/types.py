"""Tessel dtypes as LLVM types, constants of scalar or vector type, intrinsic name mangling.

bool is i1 in registers and i8 in memory; float16 is `half`.

    >>> from lowering.llvm.types import reg_type, mem_type
    >>> str(reg_type("bool")), str(mem_type("bool")), str(reg_type("float16"))
    ('i1', 'i8', 'half')
"""

from __future__ import annotations

import math
from typing import Any

from llvmlite import ir

from tensor_expr.dtype import bits
from tessel_errors import CodegenError

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()

_REG: dict[str, ir.Type] = {}  # filled below, once reg_type exists
_FLOATS = {"float16": ir.HalfType(), "float32": ir.FloatType(), "float64": ir.DoubleType()}


def reg_type(dtype: str) -> ir.Type:
    """The LLVM type of a value of `dtype` in a register."""
    t = _REG.get(dtype)
    if t is not None:
        return t
    if dtype in _FLOATS:
        return _FLOATS[dtype]
    if dtype == "bool":
        return I1
    if dtype == "handle":
        return PTR
    return ir.IntType(bits(dtype))


_REG.update({d: reg_type(d) for d in ("float16", "float32", "float64", "bool", "handle", "int8",
                                 "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                 "uint64")})


def mem_type(dtype: str) -> ir.Type:
    """The LLVM type of an element of `dtype` in memory (bool is a byte)."""
    return I8 if dtype == "bool" else reg_type(dtype)


def elem_bytes(dtype: str) -> int:
    """Bytes per element of `dtype` in memory."""
    return max(1, bits(dtype) // 8)


# Code generation builds the same few vector types and constants thousands of times a
# kernel; sharing one object each skips the construction and lets llvmlite's per-object
# string caches (a type's or constant's text) work across instructions. Both are immutable
# in use. Keys hold the element type itself so that its id stays valid.
_VEC: dict[tuple[int, int], tuple[ir.Type, ir.VectorType]] = {}
_CONST: dict[tuple[Any, ...], tuple[ir.Type, ir.Constant]] = {}
_CONST_MAX = 8192


def _remember(cache: dict[Any, Any], key: Any, entry: Any) -> None:
    """Put `entry` in `cache`, emptying it first when full: a long process (a tuning
    worker builds thousands of kernels) keeps the recent keys, not the first 8192."""
    if len(cache) >= _CONST_MAX:
        cache.clear()
    cache[key] = entry


def vec(t: ir.Type, lanes: int) -> ir.Type:
    """`<lanes x t>`."""
    key = (id(t), lanes)
    hit = _VEC.get(key)
    if hit is not None and hit[0] is t:
        return hit[1]
    v = ir.VectorType(t, lanes)
    _remember(_VEC, key, (t, v))
    return v


def _const_key(t: ir.Type, value: Any) -> tuple[Any, ...] | None:
    kind = type(value)
    if kind is int or kind is bool:
        return (id(t), kind, value)
    if kind is float:
        if value != value:  # NaN: never equal to itself, would never hit
            return None
        return (id(t), kind, value, math.copysign(1.0, value))  # keep -0.0 apart from 0.0
    if value is ir.Undefined:
        return (id(t), "undef")
    return None


def scalar_of(t: ir.Type) -> ir.Type:
    """The element type of a vector type, or `t` itself."""
    return t.element if isinstance(t, ir.VectorType) else t


def lanes_of(t: ir.Type) -> int:
    """The lane count of a vector type, 0 for a scalar."""
    return t.count if isinstance(t, ir.VectorType) else 0


def const(t: ir.Type, value: Any) -> ir.Constant:
    """A constant of scalar or vector type `t` (vectors get `value` in every lane)."""
    key = _const_key(t, value)
    if key is not None:
        hit = _CONST.get(key)
        if hit is not None and hit[0] is t:
            return hit[1]
    if isinstance(t, ir.VectorType) and value is not ir.Undefined:
        c = ir.Constant(t, [value] * t.count)
    else:
        c = ir.Constant(t, value)
    if key is not None:
        _remember(_CONST, key, (t, c))
    return c


def alloca(b: ir.IRBuilder, t: ir.Type, name: str = "", align: int = 0) -> ir.Value:
    """`alloca t` whose result is an opaque `ptr` (llvmlite would type it `t*`)."""
    slot = b.alloca(t, name=name)
    slot.type = PTR
    if align:
        slot.align = align
    return slot


def mangle(t: ir.Type) -> str:
    """The overload suffix LLVM intrinsics use for `t`: f32, v16f32, i64, p0."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{mangle(t.element)}"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.PointerType):
        return "p0"
    raise CodegenError(f"no LLVM intrinsic mangling for type {t}")
