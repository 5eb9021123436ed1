"""Scalar data types: names, classes and the promotion rule for mixed arithmetic.

    >>> from tensor_expr.dtype import promote, is_float
    >>> promote("int32", "float32"), is_float("float16")
    ('float32', True)
"""

from __future__ import annotations

from tessel_errors import TensorExprError

FLOAT_TYPES = ("float16", "float32", "float64")
INT_TYPES = ("int8", "int16", "int32", "int64")
UINT_TYPES = ("uint8", "uint16", "uint32", "uint64")
DTYPES = FLOAT_TYPES + INT_TYPES + UINT_TYPES + ("bool", "handle")


def check_dtype(dtype: str) -> str:
    """Return `dtype` if it is a known scalar type, else raise with the legal names."""
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise TensorExprError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
    return dtype


def is_float(dtype: str) -> bool:
    """True for float16/float32/float64."""
    return dtype in FLOAT_TYPES


def is_int(dtype: str) -> bool:
    """True for signed integer types."""
    return dtype in INT_TYPES


def is_uint(dtype: str) -> bool:
    """True for unsigned integer types."""
    return dtype in UINT_TYPES


def is_integral(dtype: str) -> bool:
    """True for signed or unsigned integer types (not bool)."""
    return dtype in INT_TYPES or dtype in UINT_TYPES


def bits(dtype: str) -> int:
    """Width of the type in bits (bool counts as 8, as stored in memory)."""
    n = _BITS.get(dtype)
    if n is not None:
        return n
    if dtype == "bool":
        return 8
    if dtype == "handle":
        return 64
    return int("".join(ch for ch in dtype if ch.isdigit()))


# code generators ask for widths thousands of times a kernel; the known names by table
_BITS: dict[str, int] = {}
_BITS.update({d: bits(d) for d in DTYPES})


def promote(a: str, b: str) -> str:
    """The dtype of a binary op between `a` and `b`: floats win, then the wider type."""
    if a == b:
        return a
    if is_float(a) or is_float(b):
        fa = [t for t in (a, b) if is_float(t)]
        return max(fa, key=bits)
    if a == "bool":
        return b
    if b == "bool":
        return a
    if bits(a) != bits(b):
        return a if bits(a) > bits(b) else b
    return a if is_int(a) else b
