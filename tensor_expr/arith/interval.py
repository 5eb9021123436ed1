"""Integer intervals with infinite ends: the arithmetic of constant bounds.

An interval is a pair (lo, hi) of ints or +-inf (floats), both ends included.

    >>> from tensor_expr.arith.interval import imul, ifloordiv
    >>> imul((-2, 3), (4, 5)), ifloordiv((0, 31), (32, 32))
    ((-10, 15), (0, 0))
"""

from __future__ import annotations

import math

INF = math.inf
Interval = tuple[float, float]
EVERYTHING: Interval = (-INF, INF)


def dtype_range(dtype: str) -> Interval:
    """The values of an integer or bool dtype; everything for wide or float types."""
    if dtype == "bool":
        return (0, 1)
    if not dtype.startswith(("int", "uint")):
        return EVERYTHING
    width = int("".join(ch for ch in dtype if ch.isdigit()))
    if dtype.startswith("uint"):
        return (0, (1 << width) - 1)
    return (-(1 << (width - 1)), (1 << (width - 1)) - 1)


def _mul(a: float, b: float) -> float:
    if a == 0 or b == 0:
        return 0  # 0 * inf is 0 here: a zero factor pins the product
    return a * b


def iadd(x: Interval, y: Interval) -> Interval:
    return (x[0] + y[0], x[1] + y[1])


def iscale(x: Interval, c: int) -> Interval:
    lo, hi = _mul(x[0], c), _mul(x[1], c)
    return (lo, hi) if c >= 0 else (hi, lo)


def imul(x: Interval, y: Interval) -> Interval:
    p = [_mul(a, b) for a in x for b in y]
    return (min(p), max(p))


def _floordiv(a: float, b: float) -> float:
    """floor(a / b) at the corners, with the limits at infinite ends (nan: undefined)."""
    ia, ib = math.isinf(a), math.isinf(b)
    if ia and ib:
        return math.nan
    if ia:
        return a if b > 0 else -a
    if ib:
        if b > 0:
            return 0 if a >= 0 else -1
        return -1 if a > 0 else 0
    return int(a) // int(b)


def ifloordiv(x: Interval, y: Interval) -> Interval:
    """floor(x / y) when y excludes 0 (monotone in each argument); everything otherwise."""
    if y[0] <= 0 <= y[1]:
        return EVERYTHING
    p = [_floordiv(a, b) for a in x for b in y]
    if any(math.isnan(v) for v in p):
        return EVERYTHING
    return (min(p), max(p))


def ifloormod(x: Interval, y: Interval) -> Interval:
    """floormod(x, y): within [0, max(y) - 1] for positive y."""
    if y[0] > 0:
        hi_div = y[1] - 1
        if x[0] >= 0:
            return (0, min(x[1], hi_div))
        return (0, hi_div)
    if y[1] < 0:
        return (y[0] + 1, 0)
    return EVERYTHING


def imin(x: Interval, y: Interval) -> Interval:
    return (min(x[0], y[0]), min(x[1], y[1]))


def imax(x: Interval, y: Interval) -> Interval:
    return (max(x[0], y[0]), max(x[1], y[1]))


def iunion(x: Interval, y: Interval) -> Interval:
    return (min(x[0], y[0]), max(x[1], y[1]))


def iintersect(x: Interval, y: Interval) -> Interval:
    return (max(x[0], y[0]), min(x[1], y[1]))


def to_public(x: Interval) -> tuple[int | None, int | None]:
    """(lo, hi) with None for an infinite end."""
    lo = None if math.isinf(x[0]) else int(x[0])
    hi = None if math.isinf(x[1]) else int(x[1])
    return lo, hi
