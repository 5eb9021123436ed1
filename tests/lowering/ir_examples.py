"""Hand-built loop-IR programs shared by the interpreter and LLVM backend tests.

Each example is `(PrimFunc, make_inputs(rng) -> list of arrays, reference(arrays) -> dict
{argument position: expected array})`. Outputs are passed in filled with a sentinel so that
an unwritten element shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import tensor_expr as te
from lowering.ir import (
    Allocate,
    AssertStmt,
    Buffer,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    PrimFunc,
    seq,
)

Example = tuple[PrimFunc, Callable[[np.random.Generator], list[np.ndarray]],
                Callable[[list[np.ndarray]], dict[int, np.ndarray]]]
S, P, V, U = ForKind.SERIAL, ForKind.PARALLEL, ForKind.VECTORIZED, ForKind.UNROLLED
c = te.const


def loop(v: Any, ext: Any, body: Any, kind: ForKind = S, lo: Any = 0) -> For:
    """`for v in [lo, lo + ext)` of `kind`."""
    return For(v, te.as_expr(lo), te.as_expr(ext), kind, body)


def sentinel(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An output array filled with a value no example computes."""
    if dtype == "bool":
        return np.zeros(shape, dtype)
    fill = -77 if np.dtype(dtype).kind in "iu" else np.nan
    if np.dtype(dtype).kind == "u":
        fill = 201
    return np.full(shape, fill, dtype)


def rand(rng: np.random.Generator, shape: tuple[int, ...], dtype: str,
         lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    """Random data of `dtype` in [lo, hi) (bool: coin flips)."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        lo = 0 if np.dtype(dtype).kind == "u" else lo
        return rng.integers(int(lo * 10), int(hi * 10), shape).astype(dtype)
    return rng.uniform(lo, hi, shape).astype(dtype)


def elementwise_2d(kind_i: ForKind = S, kind_j: ForKind = S) -> Example:
    """B[i, j] = A[i, j] * 2.5 - max(A[i, j], 0.5) + 1 over a 13 x 32 grid."""
    A, B = Buffer("A", (13, 32), "float32"), Buffer("B", (13, 32), "float32")
    i, j = te.var("i"), te.var("j")
    x = A[i, j]
    body = loop(i, 13, loop(j, 32, BufferStore(B, x * 2.5 - te.max(x, 0.5) + 1.0, (i, j)),
                            kind_j), kind_i)
    f = PrimFunc("ew", (A, B), body)
    return (f, lambda rng: [rand(rng, (13, 32), "float32"), sentinel((13, 32), "float32")],
            lambda a: {1: a[0] * np.float32(2.5) - np.maximum(a[0], np.float32(0.5)) + 1})


def matmul_blocked(n: int = 32, k: int = 24, m: int = 48) -> Example:
    """C = A @ B with a local accumulator row of 16, parallel rows, vector lanes, unrolled
    init: the shape of a scheduled GEMM."""
    A, B, C = Buffer("A", (n, k), "float32"), Buffer("B", (k, m), "float32"), \
        Buffer("C", (n, m), "float32")
    acc = Buffer("acc", (16,), "float32", scope="local")
    i, jo, ji, kk, u = (te.var(s) for s in ("i", "jo", "ji", "k", "u"))
    init = loop(u, 4, loop(ji, 4, BufferStore(acc, c(0.0), (u * 4 + ji,)), V), U)
    update = loop(kk, k, loop(ji, 16, BufferStore(
        acc, acc[ji] + A[i, kk] * B[kk, jo * 16 + ji], (ji,)), V))
    out = loop(ji, 16, BufferStore(C, acc[ji], (i, jo * 16 + ji)), V)
    body = loop(i, n, loop(jo, m // 16, Allocate(acc, seq(init, update, out))), P)
    f = PrimFunc("mm", (A, B, C), body)
    return (f, lambda rng: [rand(rng, (n, k), "float32"), rand(rng, (k, m), "float32"),
                            sentinel((n, m), "float32")],
            lambda a: {2: a[0] @ a[1]})


def padded_read() -> Example:
    """B[i] = A[i - 2] if 2 <= i < 18 else -1: the guarded read would be out of bounds."""
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (20,), "float32")
    i = te.var("i")
    val = te.if_then_else(te.all(i >= 2, i < 18), A[i - 2], -1.0)
    f = PrimFunc("pad", (A, B), loop(i, 20, BufferStore(B, val, (i,))))

    def ref(a: list[np.ndarray]) -> dict[int, np.ndarray]:
        out = np.full(20, -1.0, "float32")
        out[2:18] = a[0]
        return {1: out}

    return f, lambda rng: [rand(rng, (16,), "float32"), sentinel((20,), "float32")], ref


def padded_read_vector() -> Example:
    """The padded read inside a vectorized loop: a masked load."""
    A, B = Buffer("A", (4, 16), "float32"), Buffer("B", (4, 20), "float32")
    i, j = te.var("i"), te.var("j")
    val = te.if_then_else(te.all(j >= 2, j < 18), A[i, j - 2], -1.0)
    f = PrimFunc("padv", (A, B), loop(i, 4, loop(j, 20, BufferStore(B, val, (i, j)), V)))

    def ref(a: list[np.ndarray]) -> dict[int, np.ndarray]:
        out = np.full((4, 20), -1.0, "float32")
        out[:, 2:18] = a[0]
        return {1: out}

    return f, lambda rng: [rand(rng, (4, 16), "float32"), sentinel((4, 20), "float32")], ref


def int_arith(dtype: str, kind: ForKind = S) -> Example:
    """Integer ops of `dtype`: floordiv/floormod by constants (2^k and not) and by data."""
    A, D, B = (Buffer(nm, (64,), dtype) for nm in ("A", "D", "B"))
    i = te.var("i")
    a, d = A[i], D[i]
    expr = (a * 3 + 7) // 4 - a % 5 + a // 8 + te.min(a, d) + (a // d) + (a % d) + (a // -3)
    f = PrimFunc("ints_" + dtype, (A, D, B), loop(i, 64, BufferStore(B, expr, (i,)), kind))

    def ref(x: list[np.ndarray]) -> dict[int, np.ndarray]:
        a, d = x[0], x[1]
        t = np.dtype(dtype).type
        with np.errstate(all="ignore"):
            r = ((a * t(3) + t(7)) // t(4) - a % t(5) + a // t(8) + np.minimum(a, d)
                 + np.floor_divide(a, d) + np.remainder(a, d))
            if np.dtype(dtype).kind == "u":
                r = r + a // t(np.array(-3).astype(dtype))
            else:
                r = r + a // t(-3)
        return {2: r.astype(dtype)}

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        a = rand(rng, (64,), dtype, -5, 5)
        d = rand(rng, (64,), dtype, -3, 3)
        d[:3] = 0  # division by zero gives 0, as in numpy
        return [a, d, sentinel((64,), dtype)]

    return f, inputs, ref


def float_arith(dtype: str, kind: ForKind = S) -> Example:
    """Float ops of `dtype`: + - * /, floordiv, floormod, min, max, select, casts."""
    A, D, B = (Buffer(nm, (40,), dtype) for nm in ("A", "D", "B"))
    i = te.var("i")
    a, d = A[i], D[i]
    expr = te.select(a > d, a * 1.5 - d, a / d) + te.floordiv(a, d) + te.floormod(a, d) \
        + te.max(a, d) + te.cast(te.cast(a * 4.0, "int32"), dtype)
    f = PrimFunc("floats_" + dtype, (A, D, B), loop(i, 40, BufferStore(B, expr, (i,)), kind))

    def ref(x: list[np.ndarray]) -> dict[int, np.ndarray]:
        a, d = x[0], x[1]
        t = np.dtype(dtype).type
        r = (np.where(a > d, a * t(1.5) - d, a / d) + np.floor(a / d) + np.remainder(a, d)
             + np.maximum(a, d) + (a * t(4.0)).astype("int32").astype(dtype))
        return {2: r.astype(dtype)}

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        d = rand(rng, (40,), dtype, 0.5, 2.0) * np.where(rng.random(40) < 0.5, -1, 1)
        return [rand(rng, (40,), dtype), d.astype(dtype), sentinel((40,), dtype)]

    return f, inputs, ref


def casts() -> Example:
    """Casts among float32, int32, uint8, int8, bool, float16, float64."""
    A = Buffer("A", (32,), "float32")
    outs = [Buffer(f"O{k}", (32,), dt) for k, dt in
            enumerate(("int32", "uint8", "int8", "bool", "float16", "float64", "int64"))]
    i = te.var("i")
    a = A[i]
    vals = [te.cast(a * 10.0, "int32"), te.cast(te.cast(a * 10.0, "int32"), "uint8"),
            te.cast(te.cast(a * 10.0, "int32"), "int8"), te.cast(a, "bool"),
            te.cast(a, "float16"), te.cast(a, "float64"),
            te.cast(te.cast(a > 0.0, "int32") * 3, "int64")]
    body = loop(i, 32, seq(*[BufferStore(o, v, (i,)) for o, v in zip(outs, vals)]))
    f = PrimFunc("casts", (A, *outs), body)

    def ref(x: list[np.ndarray]) -> dict[int, np.ndarray]:
        a = x[0]
        i32 = (a * np.float32(10)).astype("int32")
        return {1: i32, 2: i32.astype("uint8"), 3: i32.astype("int8"), 4: a != 0,
                5: a.astype("float16"), 6: a.astype("float64"),
                7: ((a > 0).astype("int32") * 3).astype("int64")}

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        a = rand(rng, (32,), "float32", -12, 12)
        a[0] = 0.0
        return [a] + [sentinel((32,), o.dtype) for o in outs]

    return f, inputs, ref


def bool_logic(kind: ForKind = S) -> Example:
    """B[i] = (!A[i] | (i % 3 == 0)) & (A[i] != C[i]) over bools."""
    A, C, B = (Buffer(nm, (48,), "bool") for nm in ("A", "C", "B"))
    i = te.var("i")
    expr = (te.logical_not(A[i]) | (i % 3 == 0)) & (A[i] != C[i])
    f = PrimFunc("bools", (A, C, B), loop(i, 48, BufferStore(B, expr, (i,)), kind))

    def ref(x: list[np.ndarray]) -> dict[int, np.ndarray]:
        idx = np.arange(48)
        return {2: (~x[0] | (idx % 3 == 0)) & (x[0] != x[1])}

    return f, lambda rng: [rand(rng, (48,), "bool"), rand(rng, (48,), "bool"),
                           np.zeros(48, "bool")], ref


INTRINSICS = ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "fabs", "floor",
              "ceil", "round", "trunc", "exp2", "log2", "log10", "sin", "cos")


def intrinsic(name: str, dtype: str, kind: ForKind = S) -> Example:
    """B[i] = name(A[i]) on positive inputs (so log and sqrt are defined)."""
    A, B = Buffer("A", (37,), dtype), Buffer("B", (37,), dtype)
    i = te.var("i")
    f = PrimFunc(f"{name}_{dtype}", (A, B),
                 loop(i, 37, BufferStore(B, te.Call(dtype, name, (A[i],)), (i,)), kind))
    npf: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
        "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "erf": np.vectorize(__import__("math").erf), "fabs": np.abs, "floor": np.floor,
        "ceil": np.ceil, "round": np.rint, "trunc": np.trunc, "exp2": np.exp2,
        "log2": np.log2, "log10": np.log10, "sin": np.sin, "cos": np.cos,
    }

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        a = rand(rng, (37,), dtype, 0.05, 4.0)
        a[:3] = (0.5, 1.5, 2.5)  # round half to even
        return [a, sentinel((37,), dtype)]

    return f, inputs, lambda x: {1: npf[name](x[0].astype("float64")).astype(dtype)}


def pow_fma(dtype: str) -> Example:
    """B[i] = pow(A[i], C[i]) + fma(A[i], C[i], 1)."""
    A, C, B = (Buffer(nm, (21,), dtype) for nm in ("A", "C", "B"))
    i = te.var("i")
    expr = te.pow(A[i], C[i]) + te.fma(A[i], C[i], te.const(1.0, dtype))
    f = PrimFunc("powfma", (A, C, B), loop(i, 21, BufferStore(B, expr, (i,)), V))
    return (f, lambda rng: [rand(rng, (21,), dtype, 0.1, 3), rand(rng, (21,), dtype, -2, 2),
                            sentinel((21,), dtype)],
            lambda x: {2: (np.power(x[0], x[1]) + x[0] * x[1] + 1).astype(dtype)})


def symbolic() -> Example:
    """B[i, j] = A[i, j] + n for a symbolic row count n, via a global temporary T[n, 8]."""
    n = te.var("n")
    A, B = Buffer("A", (n, 8), "float32"), Buffer("B", (n, 8), "float32")
    T = Buffer("T", (n, 8), "float32")
    i, j = te.var("i"), te.var("j")
    fill = loop(i, n, loop(j, 8, BufferStore(T, A[i, j] + te.cast(n, "float32"), (i, j)), V))
    copy = loop(i, n, loop(j, 8, BufferStore(B, T[i, j], (i, j))), P)
    f = PrimFunc("sym", (A, B), Allocate(T, seq(fill, copy)))

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        rows = int(rng.integers(3, 9))
        return [rand(rng, (rows, 8), "float32"), sentinel((rows, 8), "float32")]

    return f, inputs, lambda x: {1: x[0] + np.float32(x[0].shape[0])}


def lets_and_branches() -> Example:
    """LetStmt, Let expressions, IfThenElse with else, Evaluate, AssertStmt."""
    A, B = Buffer("A", (24,), "int32"), Buffer("B", (24,), "int32")
    i, t, u = te.var("i"), te.var("t"), te.var("u")
    branch = IfThenElse(t > 10, BufferStore(B, t * 2, (i,)),
                        BufferStore(B, te.Let(u, t + 1, u * u), (i,)))
    body = loop(i, 24, LetStmt(t, A[i] + i, seq(Evaluate(te.const(0)), branch)))
    f = PrimFunc("lets", (A, B), AssertStmt(A[0] < 1000, "A[0] must be below 1000", body))

    def ref(x: list[np.ndarray]) -> dict[int, np.ndarray]:
        t = x[0] + np.arange(24, dtype="int32")
        return {1: np.where(t > 10, t * 2, (t + 1) * (t + 1)).astype("int32")}

    return f, lambda rng: [rand(rng, (24,), "int32", -2, 2), sentinel((24,), "int32")], ref


def strided_vector() -> Example:
    """Vectorized gather (A[2i+1]) and scatter (C[2i]) and a broadcast invariant (D[0])."""
    A, C, D = Buffer("A", (64,), "float32"), Buffer("C", (64,), "float32"), \
        Buffer("D", (1,), "float32")
    i = te.var("i")
    body = loop(i, 32, BufferStore(C, A[i * 2 + 1] * D[0], (i * 2,)), V)
    f = PrimFunc("strided", (A, D, C), body)

    def ref(x: list[np.ndarray]) -> dict[int, np.ndarray]:
        out = x[2].copy()
        out[0::2] = x[0][1::2] * x[1][0]
        return {2: out}

    return f, lambda rng: [rand(rng, (64,), "float32"), rand(rng, (1,), "float32"),
                           sentinel((64,), "float32")], ref


def long_vector() -> Example:
    """A vectorized loop of 256 lanes (chunked) and one of 67 (scalar fallback)."""
    A, B = Buffer("A", (3, 256), "float64"), Buffer("B", (3, 256), "float64")
    i, j, k = te.var("i"), te.var("j"), te.var("k")
    body = loop(i, 3, seq(loop(j, 256, BufferStore(B, A[i, j] * 3.0, (i, j)), V),
                          loop(k, 67, BufferStore(B, A[i, k] + 1.0, (i, k)), V)))
    f = PrimFunc("longv", (A, B), body)

    def ref(x: list[np.ndarray]) -> dict[int, np.ndarray]:
        out = x[0] * 3.0
        out[:, :67] = x[0][:, :67] + 1.0
        return {1: out}

    return f, lambda rng: [rand(rng, (3, 256), "float64"), sentinel((3, 256), "float64")], ref


def strided_alloc() -> Example:
    """A local buffer with padded rows (storage_align-like strides (8, 1)), written by a
    vectorized loop and read back transposed."""
    A, B = Buffer("A", (4, 5), "float32"), Buffer("B", (5, 4), "float32")
    T = Buffer("T", (4, 5), "float32", scope="local", strides=(c(8), c(1)))
    i, j = te.var("i"), te.var("j")
    fill = loop(i, 4, loop(j, 5, BufferStore(T, A[i, j] + 1.0, (i, j)), V))
    read = loop(j, 5, loop(i, 4, BufferStore(B, T[i, j], (j, i)), V))
    f = PrimFunc("stralloc", (A, B), Allocate(T, seq(fill, read)))
    return (f, lambda rng: [rand(rng, (4, 5), "float32"), sentinel((5, 4), "float32")],
            lambda x: {1: (x[0] + 1).T.copy()})


def guarded_vector() -> Example:
    """A non-dividing split (20 = 3 x 8 - 4) with its guard inside the vectorized loop:
    `if (jo * 8 + ji < 20) { B[...] = A[...] * 2 } else-free`, plus an else branch."""
    A, B, D = Buffer("A", (3, 20), "float32"), Buffer("B", (3, 20), "float32"), \
        Buffer("D", (3, 24), "float32")
    i, jo, ji = te.var("i"), te.var("jo"), te.var("ji")
    j = jo * 8 + ji
    guard = IfThenElse(j < 20, seq(BufferStore(B, A[i, j] * 2.0, (i, j)),
                                   BufferStore(D, A[i, j], (i, j))),
                       BufferStore(D, te.const(-1.0), (i, j)))
    f = PrimFunc("guardv", (A, B, D), loop(i, 3, loop(jo, 3, loop(ji, 8, guard, V))))

    def ref(x: list[np.ndarray]) -> dict[int, np.ndarray]:
        d = np.full((3, 24), -1.0, "float32")
        d[:, :20] = x[0]
        return {1: x[0] * 2, 2: d}

    return f, lambda rng: [rand(rng, (3, 20), "float32"), sentinel((3, 20), "float32"),
                           sentinel((3, 24), "float32")], ref


def all_examples() -> dict[str, Example]:
    """Every example by name (the dtype and kind variants included)."""
    out: dict[str, Example] = {
        "elementwise": elementwise_2d(),
        "elementwise_vec_par": elementwise_2d(P, V),
        "elementwise_unrolled": elementwise_2d(S, U),
        "matmul_blocked": matmul_blocked(),
        "padded_read": padded_read(),
        "padded_read_vector": padded_read_vector(),
        "casts": casts(),
        "bools": bool_logic(),
        "bools_vector": bool_logic(V),
        "pow_fma_f32": pow_fma("float32"),
        "pow_fma_f64": pow_fma("float64"),
        "symbolic": symbolic(),
        "lets_and_branches": lets_and_branches(),
        "strided_vector": strided_vector(),
        "long_vector": long_vector(),
        "strided_alloc": strided_alloc(),
        "guarded_vector": guarded_vector(),
    }
    for dt in ("int8", "int16", "int32", "int64", "uint8"):
        out[f"ints_{dt}"] = int_arith(dt)
        out[f"ints_{dt}_vector"] = int_arith(dt, V)
    for dt in ("float16", "float32", "float64"):
        out[f"floats_{dt}"] = float_arith(dt)
        out[f"floats_{dt}_vector"] = float_arith(dt, V)
    return out
