"""A numpy oracle: the values of a TE program computed straight from its compute bodies.

No schedule is involved. Each compute is evaluated over its whole index grid at once
(index vars are broadcast `arange`s; reduce axes are extra grid dimensions reduced by
numpy), so tests can compare any compiled kernel against it.

    >>> import numpy as np, tensor_expr as te
    >>> A = te.placeholder((2, 3), "float32", name="A")
    >>> k = te.reduce_axis((0, 3), name="k")
    >>> S = te.compute((2,), lambda i: te.sum(A[i, k] * 2.0, axis=k), name="S")
    >>> te.evaluate(S, {A: np.ones((2, 3), "float32")})
    array([6., 6.], dtype=float32)

`te.if_then_else` is evaluated with masks: reads in the untaken side are clipped into the
tensor, and a read outside a tensor where it *is* taken raises TensorExprError.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tensor_expr import expr as E
from tensor_expr.tensor import ComputeOp, PlaceholderOp, Tensor
from tessel_errors import TensorExprError

# Grids above this many elements are evaluated in slabs of the outermost axis.
_GRID_LIMIT = 1 << 22

_BINARY = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Min: np.minimum,
    E.Max: np.maximum, E.LT: np.less, E.LE: np.less_equal, E.GT: np.greater,
    E.GE: np.greater_equal, E.EQ: np.equal, E.NE: np.not_equal, E.And: np.logical_and,
    E.Or: np.logical_or,
}

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _intrinsic(name: str, args: list[np.ndarray], dtype: str) -> np.ndarray:
    x = args[0]
    simple = {
        "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "fabs": np.abs,
        "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
        "exp2": np.exp2, "log2": np.log2, "log10": np.log10, "sin": np.sin, "cos": np.cos,
        "isnan": np.isnan,
    }
    if name in simple:
        return simple[name](x)
    if name == "rsqrt":
        return np.asarray(1, dtype) / np.sqrt(x)
    if name == "sigmoid":
        one = np.asarray(1, dtype)
        return one / (one + np.exp(-x))
    if name == "erf":
        return _erf(np.asarray(x, np.float64)).astype(dtype)
    if name == "pow":
        return np.power(x, args[1])
    if name == "fma":
        wide = np.float64 if dtype != "float64" else np.longdouble
        return (np.asarray(x, wide) * args[1] + args[2]).astype(dtype)
    if name == "popcount":
        return np.bitwise_count(x).astype(dtype)
    if name == "round_half_away":
        return (np.sign(x) * np.floor(np.abs(np.asarray(x, np.float64)) + 0.5)).astype(dtype)
    if name == "shift_right":
        return np.right_shift(x, args[1]).astype(dtype)
    if name == "shift_left":
        return np.left_shift(x, args[1]).astype(dtype)
    raise TensorExprError(f"te.evaluate: no numpy rule for the intrinsic '{name}'")


class _Evaluator:
    """Holds the input arrays, the shape-var values and the values computed so far."""

    def __init__(self, inputs: dict[Tensor, Any], shape_vars: dict[E.Var, int] | None):
        self.sizes: dict[int, int] = {}
        for v, n in (shape_vars or {}).items():
            var = v.var if isinstance(v, E.IterVar) else v
            self.sizes[id(var)] = int(n)
        self.values: dict[int, tuple[Any, list[np.ndarray]]] = {}
        self._memo: dict[tuple[int, int, int], tuple[Any, ...]] = {}
        for t, arr in inputs.items():
            if not isinstance(t, Tensor) or not isinstance(t.op, PlaceholderOp):
                raise TensorExprError(
                    f"te.evaluate: inputs must map placeholder tensors to arrays, got key {t!r}")
            self.values[id(t.op)] = (t.op, [self._check_input(t, arr)])

    def _check_input(self, t: Tensor, arr: Any) -> np.ndarray:
        a = np.asarray(arr)
        if a.dtype != np.dtype(t.dtype):
            raise TensorExprError(
                f"te.evaluate: input '{t.name}' has dtype {a.dtype}, expected {t.dtype}; "
                f"convert it with .astype('{t.dtype}')")
        if a.ndim != t.ndim:
            raise TensorExprError(
                f"te.evaluate: input '{t.name}' has {a.ndim} dimensions, expected {t.ndim}")
        for d, dim in enumerate(t.shape):
            if isinstance(dim, E.Var) and id(dim) not in self.sizes:
                self.sizes[id(dim)] = a.shape[d]
            want = self.int_of(dim)
            if want != a.shape[d]:
                raise TensorExprError(
                    f"te.evaluate: input '{t.name}' has shape {a.shape}, dimension {d} should "
                    f"be {want} ({dim})")
        return a

    # ---- tensors -------------------------------------------------------------------------

    def tensor(self, t: Tensor) -> np.ndarray:
        return self.op_values(t.op)[t.value_index]

    def op_values(self, op: Any) -> list[np.ndarray]:
        hit = self.values.get(id(op))
        if hit is not None:
            return hit[1]
        if isinstance(op, PlaceholderOp):
            raise TensorExprError(
                f"te.evaluate: placeholder '{op.name}' has no input array; pass it in inputs")
        if not isinstance(op, ComputeOp):
            raise TensorExprError(f"te.evaluate: cannot evaluate a {type(op).__name__}")
        out = self._compute(op)
        self.values[id(op)] = (op, out)
        return out

    def int_of(self, e: E.PrimExpr) -> int:
        """The value of a shape expression (constants and shape vars only)."""
        return int(self.ev(E.as_expr(e), {}, None))

    def _compute(self, op: ComputeOp) -> list[np.ndarray]:
        shape = [self.int_of(d) for d in op.shape]
        rdoms = [(self.int_of(iv.dom.min), self.int_of(iv.dom.extent)) for iv in op.reduce_axis]
        outs = [np.empty(shape, b.dtype) for b in op.body]
        if any(s == 0 for s in shape):
            return outs
        inner = math.prod(shape[1:]) * math.prod(max(1, e) for _, e in rdoms)
        rows = max(1, _GRID_LIMIT // max(1, inner)) if shape else 1
        n0 = shape[0] if shape else 1
        for start in range(0, n0, rows):
            stop = min(n0, start + rows)
            parts = self._compute_slab(op, shape, rdoms, start, stop)
            for out, part in zip(outs, parts):
                if shape:
                    out[start:stop] = part
                else:
                    out[...] = part
        return outs

    def _compute_slab(self, op: ComputeOp, shape: list[int], rdoms: list[tuple[int, int]],
                      start: int, stop: int) -> list[np.ndarray]:
        ndim = len(shape) + len(rdoms)
        env: dict[int, np.ndarray] = {}
        for d, iv in enumerate(op.axis):
            idx = np.arange(start, stop) if d == 0 else np.arange(shape[d])
            env[id(iv.var)] = _along(idx.astype(iv.var.dtype), d, ndim)
        for r, iv in enumerate(op.reduce_axis):
            lo, ext = rdoms[r]
            env[id(iv.var)] = _along(np.arange(lo, lo + ext).astype(iv.var.dtype),
                                     len(shape) + r, ndim)
        slab = [stop - start] + shape[1:] if shape else []
        if isinstance(op.body[0], E.Reduce):
            return self._reduce(op.body, env, slab, [e for _, e in rdoms])
        return [np.broadcast_to(self.ev(b, env, None), slab).astype(b.dtype) for b in op.body]

    # ---- reductions ----------------------------------------------------------------------

    def _reduce(self, body: tuple[E.PrimExpr, ...], env: dict[int, np.ndarray],
                slab: list[int], rshape: list[int]) -> list[np.ndarray]:
        red: E.Reduce = body[0]  # type: ignore[assignment]
        comb = red.combiner
        grid = slab + rshape
        cond = np.broadcast_to(self.ev(red.condition, env, None), grid)
        axes = tuple(range(len(slab), len(grid)))
        idents = [self.ev(v, {}, None) for v in comb.identity_element]
        srcs = [np.where(cond, np.broadcast_to(self.ev(s, env, cond), grid), ident).astype(s.dtype)
                for s, ident in zip(red.source, idents)]
        kind = _simple_kind(comb)
        if kind is not None:
            fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[kind]
            dt = srcs[0].dtype
            extra = {"initial": idents[0]} if kind in ("max", "min") else {"dtype": dt}
            vals = [np.asarray(fn(srcs[0], axis=axes, **extra)).astype(dt)]
        else:
            vals = self._tree_fold(comb, srcs, len(slab), idents)
        if red.init:
            inits = [np.broadcast_to(self.ev(v, env, None), slab) for v in red.init]
            vals = self._combine(comb, inits, vals)
        return [np.broadcast_to(v, slab).astype(s.dtype) for v, s in zip(vals, red.source)]

    def _tree_fold(self, comb: E.CommReducer, srcs: list[np.ndarray], nslab: int,
                   idents: list[np.ndarray]) -> list[np.ndarray]:
        # associativity + commutativity let us combine halves pairwise: log2(R) steps
        flat = [s.reshape(s.shape[:nslab] + (-1,)) for s in srcs]
        if flat[0].shape[-1] == 0:
            return [np.broadcast_to(i, flat[0].shape[:-1]) for i in idents]
        while flat[0].shape[-1] > 1:
            if flat[0].shape[-1] % 2:
                flat = [np.concatenate([f, np.broadcast_to(i, f.shape[:-1] + (1,)).astype(
                    f.dtype)], axis=-1) for f, i in zip(flat, idents)]
            half = flat[0].shape[-1] // 2
            flat = self._combine(comb, [f[..., :half] for f in flat],
                                 [f[..., half:] for f in flat])
        return [f[..., 0] for f in flat]

    def _combine(self, comb: E.CommReducer, xs: list[np.ndarray],
                 ys: list[np.ndarray]) -> list[np.ndarray]:
        env = {id(v): x for v, x in zip(comb.lhs, xs)}
        env.update({id(v): y for v, y in zip(comb.rhs, ys)})
        return [np.asarray(self.ev(r, env, None)).astype(v.dtype)
                for r, v in zip(comb.result, comb.lhs)]

    # ---- scalar expressions over grids -----------------------------------------------------

    def ev(self, e: E.PrimExpr, env: dict[int, np.ndarray], mask: np.ndarray | None
           ) -> np.ndarray:
        """The value of `e` over the grid; `mask` marks where the value is actually used."""
        # memo per top-level call: programs are DAGs; entries hold env and mask alive so
        # that their ids stay unique while the memo lives
        saved, self._memo = self._memo, {}
        try:
            with np.errstate(all="ignore"):
                return np.asarray(self._ev(e, env, mask))
        finally:
            self._memo = saved

    def _ev(self, e: Any, env: dict[int, np.ndarray], mask: np.ndarray | None) -> Any:
        key = (id(e), id(env), id(mask))
        hit = self._memo.get(key)
        if hit is not None:
            return hit[3]
        out = self._ev_node(e, env, mask)
        self._memo[key] = (e, env, mask, out)
        return out

    def _ev_node(self, e: Any, env: dict[int, np.ndarray], mask: np.ndarray | None) -> Any:
        if isinstance(e, (E.IntImm, E.FloatImm)):
            return np.asarray(e.value, "bool" if e.dtype == "bool" else e.dtype)
        if isinstance(e, E.Var):
            if id(e) in env:
                return env[id(e)]
            if id(e) in self.sizes:
                return np.asarray(self.sizes[id(e)], e.dtype)
            raise TensorExprError(
                f"te.evaluate: variable '{e.name}' has no value; give symbolic shape "
                "dimensions in shape_vars or through an input array")
        if isinstance(e, E.IterVar):
            return self._ev(e.var, env, mask)
        fn = _BINARY.get(type(e))
        if fn is not None:
            return fn(self._ev(e.a, env, mask), self._ev(e.b, env, mask))
        if isinstance(e, (E.Div, E.FloorDiv, E.FloorMod)):
            a, b = self._ev(e.a, env, mask), self._ev(e.b, env, mask)
            if isinstance(e, E.Div):
                return np.true_divide(a, b).astype(e.dtype)
            if isinstance(e, E.FloorMod):
                return np.mod(a, b)
            return np.floor_divide(a, b) if a.dtype.kind in "iu" else np.floor(a / b)
        if isinstance(e, E.Not):
            return np.logical_not(self._ev(e.a, env, mask))
        if isinstance(e, E.Select):
            c = self._ev(e.condition, env, mask)
            return np.where(c, self._ev(e.true_value, env, mask),
                            self._ev(e.false_value, env, mask))
        if isinstance(e, E.Cast):
            return np.asarray(self._ev(e.value, env, mask)).astype(_np_dtype(e.dtype))
        if isinstance(e, E.Call):
            if e.name == "if_then_else":
                c = np.asarray(self._ev(e.args[0], env, mask))
                t = self._ev(e.args[1], env, _and(mask, c))
                f = self._ev(e.args[2], env, _and(mask, np.logical_not(c)))
                return np.where(c, t, f)
            args = [np.asarray(self._ev(a, env, mask)) for a in e.args]
            return np.asarray(_intrinsic(e.name, args, e.dtype)).astype(_np_dtype(e.dtype))
        if isinstance(e, E.ProducerLoad):
            return self._load(e, env, mask)
        if isinstance(e, E.Let):
            inner = dict(env)
            inner[id(e.var)] = self._ev(e.value, env, mask)
            return self._ev(e.body, inner, mask)
        if isinstance(e, E.Reduce):
            raise TensorExprError(
                "te.evaluate: a reduction must be the whole body of a compute, found "
                f"'{e}' inside an expression")
        raise TensorExprError(f"te.evaluate: cannot evaluate a {type(e).__name__} node ({e})")

    def _load(self, e: E.ProducerLoad, env: dict[int, np.ndarray], mask: np.ndarray | None
              ) -> np.ndarray:
        arr = self.tensor(e.producer)
        idx = np.broadcast_arrays(*[np.asarray(self._ev(i, env, mask)) for i in e.indices])
        clipped = []
        for d, (ix, dim) in enumerate(zip(idx, arr.shape)):
            bad = (ix < 0) | (ix >= dim)
            if mask is not None:
                bad = bad & mask
            if np.any(bad):
                full = np.broadcast_shapes(bad.shape, ix.shape)
                pos = tuple(np.argwhere(np.broadcast_to(bad, full))[0])
                value = int(np.broadcast_to(ix, full)[pos])
                raise TensorExprError(
                    f"te.evaluate: read of '{e.producer.name}' out of bounds: index {d} "
                    f"({e.indices[d]}) is {value}, extent {dim}; guard the read with "
                    "te.if_then_else")
            clipped.append(np.clip(ix, 0, max(dim - 1, 0)))
        if not clipped:
            return arr[()]
        return arr[tuple(clipped)]


def _np_dtype(dtype: str) -> str:
    return "bool" if dtype == "bool" else dtype


def _and(mask: np.ndarray | None, c: np.ndarray) -> np.ndarray:
    return c if mask is None else np.logical_and(mask, c)


def _along(idx: np.ndarray, d: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[d] = idx.shape[0]
    return idx.reshape(shape)


def _simple_kind(comb: E.CommReducer) -> str | None:
    """'sum'/'prod'/'max'/'min' when the combiner is exactly x op y (either order)."""
    if len(comb.result) != 1:
        return None
    r, x, y = comb.result[0], comb.lhs[0], comb.rhs[0]
    kinds = {E.Add: "sum", E.Mul: "prod", E.Max: "max", E.Min: "min"}
    kind = kinds.get(type(r))
    if kind is None:
        return None
    if (r.a is x and r.b is y) or (r.a is y and r.b is x):
        return kind
    return None


def evaluate(outputs: Any, inputs: dict[Tensor, Any],
             shape_vars: dict[E.Var, int] | None = None) -> Any:
    """The values of `outputs` (a Tensor or a list) computed from their definitions.

    >>> import numpy as np, tensor_expr as te
    >>> n = te.var("n")
    >>> A = te.placeholder((n,), "int32", name="A")
    >>> B = te.compute((n,), lambda i: A[i] // 2, name="B")
    >>> te.evaluate(B, {A: np.array([-3, 4, 5], "int32")})
    array([-2,  2,  2], dtype=int32)
    """
    ev = _Evaluator(inputs, shape_vars)
    if isinstance(outputs, Tensor):
        return ev.tensor(outputs)
    return [ev.tensor(t) for t in outputs]
