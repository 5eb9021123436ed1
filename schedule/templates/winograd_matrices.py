"""The transform matrices of Winograd's minimal filtering F(m, r) (Lavin and Gray, "Fast
Algorithms for Convolutional Neural Networks", 2015), built exactly from interpolation
points with fractions, and the expressions that apply them with only their nonzero terms.

One output tile of m values of a correlation of data d (m + r - 1 values) with a filter g
(r values) is y = A^T [(G g) * (B^T d)]. The points 0, 1, -1, 2, -2, 1/2, -1/2 and infinity
are the usual ones (TVM's and wincnn's); each row of B^T is scaled to small integers and
the scale moved into G's row, so the data transform, which runs in float32 on every call,
multiplies by integers only (the kernel transform of a constant weight runs once, in
float64, in numpy).

    >>> at, g, bt = transform_matrices(2)
    >>> bt.astype(int).tolist()
    [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, -1, 0, 1]]
    >>> at.astype(int).tolist()
    [[1, 1, 1, 0], [0, 1, -1, 1]]
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from tensor_expr.expr import PrimExpr, const, select
from tessel_errors import ScheduleError

# the finite interpolation points of F(m, 3) (m + 1 of them; the last point is infinity)
POINTS = {2: (0, 1, -1), 4: (0, 1, -1, 2, -2),
          6: (0, 1, -1, 2, -2, Fraction(1, 2), Fraction(-1, 2))}

Matrix = list[list[Fraction]]


def _evaluation(points: Sequence[Fraction], cols: int) -> Matrix:
    """Rows evaluate a polynomial of `cols` coefficients at each point, the last row at
    infinity (its leading coefficient)."""
    rows = [[Fraction(p) ** j for j in range(cols)] for p in points]
    return rows + [[Fraction(0)] * (cols - 1) + [Fraction(1)]]


def _inverse(a: Matrix) -> Matrix:
    """Exact Gauss-Jordan inverse of a square matrix of fractions."""
    n = len(a)
    aug = [list(row) + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(a)]
    for col in range(n):
        piv = next(r for r in range(col, n) if aug[r][col] != 0)
        aug[col], aug[piv] = aug[piv], aug[col]
        lead = aug[col][col]
        aug[col] = [v / lead for v in aug[col]]
        for r in range(n):
            if r != col and aug[r][col] != 0:
                f = aug[r][col]
                aug[r] = [v - f * w for v, w in zip(aug[r], aug[col])]
    return [row[n:] for row in aug]


@functools.cache
def transform_matrices(m: int, r: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T [m, n], G [n, r], B^T [n, n]) of F(m, r), n = m + r - 1, as float64 arrays.

        >>> [x.shape for x in transform_matrices(4)]
        [(4, 6), (6, 3), (6, 6)]
    """
    if m not in POINTS or len(POINTS[m]) + 1 != m + r - 1:
        raise ScheduleError(f"Winograd F({m}, {r}): tile sizes with points are "
                            f"{sorted(POINTS)} for r = 3; choose one of them")
    n = m + r - 1
    points = [Fraction(p) for p in POINTS[m]]
    a = _evaluation(points, m)       # n x m: A
    g = _evaluation(points, r)       # n x r: G
    b = _inverse(_evaluation(points, n))  # n x n: B (interpolation)
    bt = [[b[j][i] for j in range(n)] for i in range(n)]
    for i in range(n):  # row i of B^T to coprime integers, its scale into row i of G
        den = math.lcm(*(v.denominator for v in bt[i]))
        num = math.gcd(*(int(v * den) for v in bt[i]))
        scale = Fraction(den, num)
        bt[i] = [v * scale for v in bt[i]]
        g[i] = [v / scale for v in g[i]]
    at = [[a[j][i] for j in range(n)] for i in range(m)]
    return tuple(np.array([[float(v) for v in row] for row in x])  # type: ignore[return-value]
                 for x in (at, g, bt))


def linear_combination(coeffs: Sequence[float], terms: Sequence[PrimExpr]) -> PrimExpr:
    """sum(c * t) over the nonzero coefficients, without multiplying by 1 or -1.

        >>> import tensor_expr as te
        >>> a, b = te.var("a", "float32"), te.var("b", "float32")
        >>> str(linear_combination([1.0, -1.0], [a, b]))
        '(a - b)'
    """
    out: PrimExpr | None = None
    for c, t in zip(coeffs, terms):
        if c == 0:
            continue
        if out is None:
            out = t if c == 1 else (-t if c == -1 else t * const(float(c), t.dtype))
        elif c == 1:
            out = out + t
        elif c == -1:
            out = out - t
        elif c < 0:
            out = out - t * const(float(-c), t.dtype)
        else:
            out = out + t * const(float(c), t.dtype)
    if out is None:
        raise ScheduleError("a transform row with no nonzero coefficient")
    return out


def transform_2d(left: np.ndarray, right: np.ndarray, read: Callable[[int, int], PrimExpr],
                 u: Any, v: Any) -> PrimExpr:
    """Element (u, v) of left @ X @ right^T, X[i][j] = read(i, j), as a select over the
    constant (u, v) pairs: each arm only its nonzero terms. `u` and `v` must be loops the
    schedule unrolls (each arm is then a constant choice LLVM folds away)."""
    rows, inner = left.shape
    cols, inner2 = right.shape
    arms = [[linear_combination(
        [left[a, i] * right[b, j] for i in range(inner) for j in range(inner2)],
        [read(i, j) for i in range(inner) for j in range(inner2)])
        for b in range(cols)] for a in range(rows)]
    return choose(u, [choose(v, row) for row in arms])


def choose(index: Any, values: Sequence[PrimExpr]) -> PrimExpr:
    """values[index] for an index in [0, len(values)): a chain of selects."""
    out = values[-1]
    for k in range(len(values) - 2, -1, -1):
        out = select(index == k, values[k], out)
    return out
