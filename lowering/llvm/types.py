"""Tessel dtypes as LLVM types, constants of scalar or vector type, intrinsic name mangling.

bool is i1 in registers and i8 in memory; float16 is `half`.

    >>> from lowering.llvm.types import reg_type, mem_type
    >>> str(reg_type("bool")), str(mem_type("bool")), str(reg_type("float16"))
    ('i1', 'i8', 'half')
"""

from __future__ import annotations

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

_FLOATS = {"float16": ir.HalfType(), "float32": ir.FloatType(), "float64": ir.DoubleType()}


def reg_type(dtype: str) -> ir.Type:
    """The LLVM type of a value of `dtype` in a register."""
    if dtype in _FLOATS:
        return _FLOATS[dtype]
    if dtype == "bool":
        return I1
    if dtype == "handle":
        return PTR
    return ir.IntType(bits(dtype))


def mem_type(dtype: str) -> ir.Type:
    """The LLVM type of an element of `dtype` in memory (bool is a byte)."""
    return I8 if dtype == "bool" else reg_type(dtype)


def elem_bytes(dtype: str) -> int:
    """Bytes per element of `dtype` in memory."""
    return max(1, bits(dtype) // 8)


def vec(t: ir.Type, lanes: int) -> ir.Type:
    """`<lanes x t>`."""
    return ir.VectorType(t, lanes)


def scalar_of(t: ir.Type) -> ir.Type:
    """The element type of a vector type, or `t` itself."""
    return t.element if isinstance(t, ir.VectorType) else t


def lanes_of(t: ir.Type) -> int:
    """The lane count of a vector type, 0 for a scalar."""
    return t.count if isinstance(t, ir.VectorType) else 0


def const(t: ir.Type, value: Any) -> ir.Constant:
    """A constant of scalar or vector type `t` (vectors get `value` in every lane)."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [value] * t.count)
    return ir.Constant(t, value)


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
