"""The shared list of relay_ir test programs, each with a maker of fresh random inputs.

Every pass is checked on every program here (the interpreter's result before and after,
on fresh inputs), and the printer/parser round-trip uses them too. A program is built
afresh by each call of `build()` (no node is shared between two modules).

    >>> import numpy as np
    >>> p = PROGRAMS_BY_NAME["mlp"]
    >>> mod = p.build(); args = p.inputs(np.random.default_rng(0))
    >>> len(args) == len(mod["main"].params)
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir import nn
from relay_ir.expr import (
    Call,
    Clause,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    PatternConstructor,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from relay_ir.interpreter import ConstructorValue, RefValue
from relay_ir.module import IRModule
from relay_ir.op import reduce as R
from relay_ir.op import tensor as T
from relay_ir.op import transform as X
from relay_ir.ty import TensorType, TupleType

F32 = "float32"


def tvar(name: str, shape: tuple, dtype: str = F32) -> Var:
    """A tensor-typed variable."""
    return Var(name, TensorType(shape, dtype))


def const(data: Any, dtype: str = F32) -> Constant:
    """A constant of `dtype`."""
    return Constant(np.asarray(data, dtype=dtype))


def rand(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    """Standard-normal float32 values (never all zeros)."""
    return (rng.standard_normal(shape) * scale).astype(F32)


def positive(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Float32 values in [0.5, 1.5) (variances)."""
    return (rng.random(shape) + 0.5).astype(F32)


@dataclass(frozen=True)
class TestProgram:
    """A named program: `build()` gives a fresh module, `inputs(rng)` fresh arguments."""

    __test__ = False  # not a pytest test class

    name: str
    build: Callable[[], IRModule]
    inputs: Callable[[np.random.Generator], list[Any]]
    uses_prelude: bool = False
    rtol: float = 1e-5
    atol: float = 1e-5


def main_module(params: list[Var], body: Expr, **globals_: Function) -> IRModule:
    """A module with @main(params) = body and the given extra globals."""
    mod = IRModule()
    for name, fn in globals_.items():
        mod = mod.with_function(name, fn)
    return mod.with_function("main", Function(tuple(params), body))


# --- dataflow programs -------------------------------------------------------------------


def mlp() -> IRModule:
    """dense-bias-relu-dense-bias-softmax."""
    x, w1, b1 = tvar("x", (4, 16)), tvar("w1", (32, 16)), tvar("b1", (32,))
    w2, b2 = tvar("w2", (10, 32)), tvar("b2", (10,))
    h = nn.relu(nn.bias_add(nn.dense(x, w1), b1, axis=1))
    y = nn.softmax(nn.bias_add(nn.dense(h, w2), b2, axis=1), axis=-1)
    return main_module([x, w1, b1, w2, b2], y)


def mlp_inputs(rng: np.random.Generator) -> list[Any]:
    return [rand(rng, 4, 16), rand(rng, 32, 16, scale=0.3), rand(rng, 32),
            rand(rng, 10, 32, scale=0.3), rand(rng, 10)]


def mlp_dynamic() -> IRModule:
    """An MLP whose batch dimension is `?` (gradual shapes)."""
    x, w = tvar("x", (None, 8)), tvar("w", (16, 8))
    y = T.tanh(nn.dense(x, w))
    return main_module([x, w], R.sum(y, axis=(1,)))


def mlp_dynamic_inputs(rng: np.random.Generator) -> list[Any]:
    return [rand(rng, int(rng.integers(1, 6)), 8), rand(rng, 16, 8, scale=0.3)]


def gradual_checked() -> IRModule:
    """x: Tensor[(?, ?)] into a dense with a (16, 3) weight: inference refines x's second
    dim to 3 and inserts a run-time shape check."""
    x, w = tvar("x", (None, None)), tvar("w", (16, 3))
    return main_module([x, w], nn.relu(nn.dense(x, w)))


def gradual_checked_inputs(rng: np.random.Generator) -> list[Any]:
    return [rand(rng, int(rng.integers(1, 5)), 3), rand(rng, 16, 3)]


def dyn_reshape() -> IRModule:
    """Reshapes to shapes read at run time: the flatten [shape_of(x)[0], -1] (static once
    simplified: (?, 12)), then to the shape of y (known only when run: dyn.reshape)."""
    from relay_ir.op.dyn_reshape import dyn_reshape as dyn
    from relay_ir.op.shape_of import shape_of

    x, y = tvar("x", (None, 3, 4)), tvar("y", (None, None))
    batch = X.take(shape_of(x), const(0, "int64"), axis=0)
    flatten = X.concatenate(Tuple((X.expand_dims(batch, 0), const([-1], "int64"))),
                            axis=0)
    flat = dyn(nn.relu(x), flatten)
    return main_module([x, y], R.sum(dyn(T.tanh(flat), shape_of(y)), axis=(1,)))


def dyn_reshape_inputs(rng: np.random.Generator) -> list[Any]:
    batch = int(rng.integers(1, 5))
    return [rand(rng, batch, 3, 4), rand(rng, batch * 4, 3)]


def dyn_strided_slice() -> IRModule:
    """Slices with bounds read at run time: columns k .. k + 3 of tanh(x) (k a parameter:
    dyn.strided_slice, clamped when k is out of range), and the rows of x reversed
    (constant bounds on a `?` dim: the static strided_slice once simplified)."""
    from relay_ir.op.dyn_strided_slice import dyn_strided_slice as dyn

    x, k = tvar("x", (None, 6)), tvar("k", (1,), "int64")
    cols = dyn(T.tanh(x), k, T.add(k, const([3], "int64")), const([1], "int64"), axes=(1,))
    rows = dyn(x, const([-1], "int64"), const([-(2**63)], "int64"), const([-1], "int64"))
    return main_module([x, k], Tuple((R.sum(cols, axis=(1,)), T.negative(rows))))


def dyn_strided_slice_inputs(rng: np.random.Generator) -> list[Any]:
    batch = int(rng.integers(1, 5))
    return [rand(rng, batch, 6), np.array([rng.integers(-8, 8)], "int64")]


def _bn(x: Expr, c: int, rng: np.random.Generator) -> Expr:
    """batch_norm(x).0 with constant (folded-at-compile-time) statistics."""
    gamma, beta = const(positive(rng, c)), const(rand(rng, c, scale=0.1))
    mean, var = const(rand(rng, c, scale=0.1)), const(positive(rng, c))
    return TupleGetItem(nn.batch_norm(x, gamma, beta, mean, var, axis=1, epsilon=1e-5), 0)


def conv_bn_relu() -> IRModule:
    """conv2d -> batch_norm (statistics as parameters) -> relu."""
    x, w = tvar("x", (1, 3, 8, 8)), tvar("w", (4, 3, 3, 3))
    g, b, m, v = (tvar(n, (4,)) for n in ("gamma", "beta", "mean", "var"))
    bn = nn.batch_norm(nn.conv2d(x, w, padding=(1, 1)), g, b, m, v)
    return main_module([x, w, g, b, m, v], nn.relu(TupleGetItem(bn, 0)))


def conv_bn_relu_inputs(rng: np.random.Generator) -> list[Any]:
    return [rand(rng, 1, 3, 8, 8), rand(rng, 4, 3, 3, 3, scale=0.3), positive(rng, 4),
            rand(rng, 4), rand(rng, 4), positive(rng, 4)]


def resnet_block() -> IRModule:
    """conv-bn-relu-conv-bn, plus the input (residual), then relu; bn stats constant."""
    rng = np.random.default_rng(1234)  # fixed: the constants are part of the program
    x, w1, w2 = tvar("x", (1, 8, 6, 6)), tvar("w1", (8, 8, 3, 3)), tvar("w2", (8, 8, 3, 3))
    h = nn.relu(_bn(nn.conv2d(x, w1, padding=(1, 1)), 8, rng))
    h = _bn(nn.conv2d(h, w2, padding=(1, 1)), 8, rng)
    return main_module([x, w1, w2], nn.relu(T.add(h, x)))


def resnet_block_inputs(rng: np.random.Generator) -> list[Any]:
    return [rand(rng, 1, 8, 6, 6), rand(rng, 8, 8, 3, 3, scale=0.2),
            rand(rng, 8, 8, 3, 3, scale=0.2)]


def gelu(x: Expr) -> Expr:
    """x * 0.5 * (1 + erf(x / sqrt(2)))."""
    inner = T.erf(T.multiply(x, const(1 / np.sqrt(2))))
    return T.multiply(T.multiply(x, const(0.5)), T.add(const(1.0), inner))


def transformer_block() -> IRModule:
    """Single-head attention + residual + layer_norm + a gelu feed-forward + residual."""
    s, d, hdim = 4, 8, 16
    x = tvar("x", (s, d))
    wq, wk, wv = tvar("wq", (d, d)), tvar("wk", (d, d)), tvar("wv", (d, d))
    gamma, beta = tvar("gamma", (d,)), tvar("beta", (d,))
    w1, b1, w2 = tvar("w1", (hdim, d)), tvar("b1", (hdim,)), tvar("w2", (d, hdim))
    q = X.reshape(nn.dense(x, wq), (1, s, d))
    k = X.reshape(nn.dense(x, wk), (1, s, d))
    v = X.reshape(nn.dense(x, wv), (1, s, d))
    scores = T.multiply(nn.batch_matmul(q, k), const(1 / np.sqrt(d)))
    attn = nn.softmax(scores, axis=-1)
    ctx = nn.batch_matmul(attn, X.transpose(v, (0, 2, 1)))
    h = nn.layer_norm(T.add(X.reshape(ctx, (s, d)), x), gamma, beta, axis=-1)
    ff = nn.dense(gelu(nn.bias_add(nn.dense(h, w1), b1, axis=1)), w2)
    return main_module([x, wq, wk, wv, gamma, beta, w1, b1, w2], T.add(ff, h))


def transformer_block_inputs(rng: np.random.Generator) -> list[Any]:
    return [rand(rng, 4, 8), rand(rng, 8, 8, scale=0.3), rand(rng, 8, 8, scale=0.3),
            rand(rng, 8, 8, scale=0.3), positive(rng, 8), rand(rng, 8),
            rand(rng, 16, 8, scale=0.3), rand(rng, 16), rand(rng, 8, 16, scale=0.3)]


def simplifiable() -> IRModule:
    """Redundancy on purpose: double transposes and reshapes, x*1 and x+0, a constant
    subgraph, duplicated subexpressions and a dead let."""
    x = tvar("x", (2, 3, 4))
    t = X.transpose(X.transpose(x, (1, 0, 2)), (1, 0, 2))
    r = X.reshape(X.reshape(t, (6, 4)), (2, 12))
    r = T.add(T.multiply(r, const(np.ones((2, 12)))), const(0.0))
    c = T.add(T.exp(const([0.5] * 12)), const(1.0))
    s1, s2 = T.add(r, c), T.add(r, c)
    dead = Var("dead")
    body = Let(dead, T.exp(x), T.multiply(s1, X.squeeze(X.expand_dims(s2, 0), (0,))))
    return main_module([x], body)


def simplifiable_inputs(rng: np.random.Generator) -> list[Any]:
    return [rand(rng, 2, 3, 4)]


def let_chain() -> IRModule:
    """A program written with lets (A-normal-ish), with sharing and a dead binding."""
    x = tvar("x", (5,))
    a, b, c, u = Var("a"), Var("b"), Var("c"), Var("unused")
    body = Let(a, T.add(x, x),
               Let(u, T.exp(x),
                   Let(b, T.multiply(a, const(3.0)),
                       Let(c, T.subtract(b, a), T.multiply(c, a)))))
    return main_module([x], body)


def inline_square() -> IRModule:
    """@square marked ("Inline", 1), called twice."""
    y = tvar("y", (3,))
    square = Function((y,), T.multiply(y, y), attrs=(("Inline", 1),))
    x = tvar("x", (3,))
    gv = GlobalVar("square")
    body = T.add(Call(gv, (x,)), Call(gv, (T.exp(x),)))
    mod = IRModule({gv: square})
    return mod.with_function("main", Function((x,), body))


def one_vector(rng: np.random.Generator, n: int) -> list[Any]:
    return [rand(rng, n)]


# --- control flow, closures, refs -----------------------------------------------------------


def loop_program(iterations_arg: bool = True) -> IRModule:
    """@loop(i, acc) = if (i < 1) { acc } else { @loop(i - 1, acc * 0.9 + 0.1) }."""
    i, acc = tvar("i", (), "int32"), tvar("acc", (3,))
    loop = GlobalVar("loop")
    step = T.add(T.multiply(acc, const(0.9)), const(0.1))
    body = If(T.less(i, const(1, "int32")), acc,
              Call(loop, (T.subtract(i, const(1, "int32")), step)))
    n, x = tvar("n", (), "int32"), tvar("x", (3,))
    mod = IRModule({loop: Function((i, acc), body)})
    return mod.with_function("main", Function((n, x), Call(loop, (n, x))))


def loop_inputs(rng: np.random.Generator) -> list[Any]:
    return [np.asarray(rng.integers(3, 30), dtype="int32"), rand(rng, 3)]


def closures() -> IRModule:
    """Closures capturing tensors: a local closure and one returned by a global."""
    c, z = tvar("c", (4,)), tvar("z", (4,))
    make_adder = Function((c,), Function((z,), T.add(z, c)))
    x, y = tvar("x", (4,)), tvar("y", (4,))
    f, add_y, w = Var("f"), Var("add_y"), tvar("w", (4,))
    gv = GlobalVar("make_adder")
    body = Let(f, Function((w,), T.multiply(w, x)),  # captures x
               Let(add_y, Call(gv, (y,)),            # captures y inside @make_adder
                   T.add(Call(f, (y,)), Call(add_y, (Call(f, (x,)),)))))
    mod = IRModule({gv: make_adder})
    return mod.with_function("main", Function((x, y), body))


def refs() -> IRModule:
    """A ref cell written twice and read back."""
    x = tvar("x", (3,))
    r, u1, u2 = Var("r"), Var("u1"), Var("u2")
    body = Let(r, RefCreate(x),
               Let(u1, RefWrite(r, T.multiply(RefRead(r), const(2.0))),
                   Let(u2, RefWrite(r, T.add(RefRead(r), x)), RefRead(r))))
    return main_module([x], body)


def tuples_and_if() -> IRModule:
    """A tuple built, projected, and an if on a comparison of reductions."""
    x, y = tvar("x", (3, 2)), tvar("y", (3, 2))
    t = Tuple((T.add(x, y), T.subtract(x, y)))
    cond = T.greater(R.sum(x), R.sum(y))
    body = If(cond, TupleGetItem(t, 0), T.multiply(TupleGetItem(t, 1), const(2.0)))
    return main_module([x, y], Tuple((body, TupleGetItem(t, 1))))


# --- programs over the prelude's ADTs ------------------------------------------------------


def list_map_fold() -> IRModule:
    """foldl(+, zeros, map(tanh, [a, b, c])) over the prelude's List."""
    mod = IRModule().import_prelude()
    cons, nil = mod.get_constructor("Cons"), mod.get_constructor("Nil")
    map_, foldl = mod.get_global_var("map"), mod.get_global_var("foldl")
    a, b, c = tvar("a", (4,)), tvar("b", (4,)), tvar("c", (4,))
    lst = Call(cons, (a, Call(cons, (b, Call(cons, (c, Call(nil, ())))))))
    t, acc, e = tvar("t", (4,)), tvar("acc", (4,)), tvar("e", (4,))
    mapped = Call(map_, (Function((t,), T.tanh(t)), lst))
    total = Call(foldl, (Function((acc, e), T.add(acc, e)), const(np.zeros(4)), mapped))
    return mod.with_function("main", Function((a, b, c), total))


TREE_LSTM_DIMS = (3, 4)  # input size, hidden size


def tree_lstm_weights() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The TreeLSTM's input (W) and recurrent (U) weights per gate i, f, o, u."""
    d, hdim = TREE_LSTM_DIMS
    rng = np.random.default_rng(99)
    w = {g: rand(rng, hdim, d, scale=0.5) for g in "ifou"}
    u = {g: rand(rng, hdim, hdim, scale=0.5) for g in "ifou"}
    return w, u


def tree_lstm() -> IRModule:
    """A child-sum TreeLSTM cell applied recursively over a Rose tree of tensors."""
    d, hdim = TREE_LSTM_DIMS
    mod = IRModule().import_prelude()
    rose, cons, nil = (mod.get_constructor(n) for n in ("Rose", "Cons", "Nil"))
    map_, foldl = mod.get_global_var("map"), mod.get_global_var("foldl")
    w_np, u_np = tree_lstm_weights()
    w = {g: const(a) for g, a in w_np.items()}
    u = {g: const(a) for g, a in u_np.items()}
    state_t = TupleType((TensorType((1, hdim)), TensorType((1, hdim))))
    cell = GlobalVar("tree_lstm")
    tree = Var("tree")
    x, kids = tvar("x", (1, d)), Var("kids")
    states = Var("states")
    acc, s = Var("acc", TensorType((1, hdim))), Var("s", state_t)
    zero = const(np.zeros((1, hdim)))
    h_sum = Call(foldl, (Function((acc, s), T.add(acc, TupleGetItem(s, 0))), zero, states))

    def gate(g: str, h: Expr) -> Expr:
        return T.add(nn.dense(x, w[g]), nn.dense(h, u[g]))

    s2 = Var("s2", state_t)
    acc2 = Var("acc2", TensorType((1, hdim)))
    fc = T.multiply(T.sigmoid(gate("f", TupleGetItem(s2, 0))), TupleGetItem(s2, 1))
    c_kids = Call(foldl, (Function((acc2, s2), T.add(acc2, fc)), zero, states))
    hs, cnew = Var("hs"), Var("cnew")
    i_g, o_g = T.sigmoid(gate("i", hs)), T.sigmoid(gate("o", hs))
    u_g = T.tanh(gate("u", hs))
    body_rose = Let(states, Call(map_, (cell, kids)),
                    Let(hs, h_sum,
                        Let(cnew, T.add(T.multiply(i_g, u_g), c_kids),
                            Tuple((T.multiply(o_g, T.tanh(cnew)), cnew)))))
    clause = Clause(PatternConstructor(rose, (PatternVar(x), PatternVar(kids))), body_rose)
    mod = mod.with_function(cell, Function((tree,), Match(tree, (clause,)), ret_type=state_t))
    leaves = [tvar(f"x{i}", (1, d)) for i in range(4)]

    def node(v: Var, children: list[Expr]) -> Expr:
        lst: Expr = Call(nil, ())
        for ch in reversed(children):
            lst = Call(cons, (ch, lst))
        return Call(rose, (v, lst))

    t = node(leaves[0], [node(leaves[1], []), node(leaves[2], [node(leaves[3], [])])])
    return mod.with_function("main", Function(tuple(leaves), Call(cell, (t,))))


def tree_lstm_inputs(rng: np.random.Generator) -> list[Any]:
    return [rand(rng, 1, 3) for _ in range(4)]


def option_match() -> IRModule:
    """Match with wildcard and constructor patterns over the prelude's Option."""
    mod = IRModule().import_prelude()
    some, none = mod.get_constructor("Some"), mod.get_constructor("None")
    x = tvar("x", (3,))
    v = Var("v")
    opt = If(T.greater(R.sum(x), const(0.0)), Call(some, (T.exp(x),)), Call(none, ()))
    m = Match(opt, (Clause(PatternConstructor(some, (PatternVar(v),)), v),
                    Clause(PatternWildcard(), T.negative(x))))
    return mod.with_function("main", Function((x,), m))


TEXT_PROGRAM = """
def @sum_to(%n: int32, %acc: Tensor[(2,), float32]) -> Tensor[(2,), float32] {
  if (less(%n, 1)) {
    %acc
  } else {
    @sum_to(subtract(%n, 1), add(%acc, cast(%n, dtype="float32")))
  }
}

def @main(%n: int32, %x: Tensor[(2,), float32]) {
  let %f = fn (%y: Tensor[(2,), float32]) { multiply(%y, %x) };
  let %l = Cons(%f(%x), Cons(%x, Nil));
  match (%l) {
    Cons(%h, %t) => add(%h, @sum_to(%n, %x)),
    Nil => %x
  }
}
"""


def text_program() -> IRModule:
    """A program written in the text format: recursion, a closure, a list and a match."""
    from relay_ir.parser import parse

    return parse(TEXT_PROGRAM, "text_program.rly", init_module=IRModule().import_prelude())


def text_program_inputs(rng: np.random.Generator) -> list[Any]:
    return [np.asarray(rng.integers(0, 6), dtype="int32"), rand(rng, 2)]


PROGRAMS: list[TestProgram] = [
    TestProgram("mlp", mlp, mlp_inputs),
    TestProgram("mlp_dynamic", mlp_dynamic, mlp_dynamic_inputs),
    TestProgram("gradual_checked", gradual_checked, gradual_checked_inputs),
    TestProgram("dyn_reshape", dyn_reshape, dyn_reshape_inputs),
    TestProgram("dyn_strided_slice", dyn_strided_slice, dyn_strided_slice_inputs),
    TestProgram("conv_bn_relu", conv_bn_relu, conv_bn_relu_inputs, rtol=1e-4, atol=1e-4),
    TestProgram("resnet_block", resnet_block, resnet_block_inputs, rtol=1e-4, atol=1e-4),
    TestProgram("transformer_block", transformer_block, transformer_block_inputs,
                rtol=1e-4, atol=1e-4),
    TestProgram("simplifiable", simplifiable, simplifiable_inputs),
    TestProgram("let_chain", let_chain, lambda rng: one_vector(rng, 5)),
    TestProgram("inline_square", inline_square, lambda rng: one_vector(rng, 3)),
    TestProgram("loop", loop_program, loop_inputs),
    TestProgram("closures", closures, lambda rng: [rand(rng, 4), rand(rng, 4)]),
    TestProgram("refs", refs, lambda rng: one_vector(rng, 3)),
    TestProgram("tuples_and_if", tuples_and_if, lambda rng: [rand(rng, 3, 2), rand(rng, 3, 2)]),
    TestProgram("list_map_fold", list_map_fold,
                lambda rng: [rand(rng, 4), rand(rng, 4), rand(rng, 4)], uses_prelude=True),
    TestProgram("tree_lstm", tree_lstm, tree_lstm_inputs, uses_prelude=True,
                rtol=1e-4, atol=1e-5),
    TestProgram("text_program", text_program, text_program_inputs, uses_prelude=True),
    TestProgram("option_match", option_match, lambda rng: one_vector(rng, 3),
                uses_prelude=True),
]
PROGRAMS_BY_NAME = {p.name: p for p in PROGRAMS}


def assert_values_close(got: Any, want: Any, rtol: float = 1e-5, atol: float = 1e-5,
                        where: str = "result") -> None:
    """Compare interpreter values (arrays, tuples, ADT values, refs) recursively."""
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray), f"{where}: expected an array, got {got!r}"
        assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)
    elif isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), f"{where}: {got!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_values_close(g, w, rtol, atol, f"{where}[{i}]")
    elif isinstance(want, ConstructorValue):
        assert isinstance(got, ConstructorValue) and got.name == want.name, f"{where}"
        assert_values_close(got.fields, want.fields, rtol, atol, f"{where}.{want.name}")
    elif isinstance(want, RefValue):
        assert isinstance(got, RefValue), where
        assert_values_close(got.value, want.value, rtol, atol, f"{where}.ref")
    else:
        raise AssertionError(f"{where}: cannot compare {type(want).__name__}")
