"""The interpreter on recursive programs: loops via recursion, deep non-tail recursion,
map/fold over the prelude's List, and a TreeLSTM cell over a Rose tree."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from relay_ir import interpreter
from relay_ir.expr import (
    Call,
    Clause,
    Constructor,
    Function,
    GlobalVar,
    If,
    Match,
    PatternConstructor,
    PatternVar,
    Var,
)
from relay_ir.interpreter import ConstructorValue, interpret
from relay_ir.module import IRModule
from relay_ir.op import tensor as T
from relay_ir.ty import GlobalTypeVar, TypeCall, TypeData
from tessel_errors import RelayRuntimeError
from tests.relay_ir.programs import (
    PROGRAMS_BY_NAME,
    TREE_LSTM_DIMS,
    const,
    loop_program,
    tree_lstm_weights,
    tvar,
)
from tests.rng import seeded_rng


@pytest.fixture
def rng() -> np.random.Generator:
    return seeded_rng()


def _loop_reference(n: int, x: np.ndarray) -> np.ndarray:
    acc = x.copy()
    for _ in range(n):
        acc = (acc * np.float32(0.9) + np.float32(0.1)).astype("float32")
    return acc


def test_loop_via_recursive_global(rng):
    p = PROGRAMS_BY_NAME["loop"]
    n, x = p.inputs(rng)
    np.testing.assert_allclose(interpret(p.build(), n, x), _loop_reference(int(n), x),
                               rtol=1e-6)


def test_two_thousand_iterations_do_not_hit_the_recursion_limit(rng):
    x = rng.standard_normal(3).astype("float32")
    limit = sys.getrecursionlimit()
    out = interpret(loop_program(), np.int32(2000), x)
    np.testing.assert_allclose(out, _loop_reference(2000, x), rtol=1e-5)
    assert sys.getrecursionlimit() == limit  # restored after the run


def _count_program(depth: int) -> IRModule:
    """@count(n) = if n < 1 { 0 } else { 1 + @count(n - 1) }: NOT a tail call."""
    n = tvar("n", (), "int32")
    gv = GlobalVar("count")
    one = const(1, "int32")
    body = If(T.less(n, one), const(0, "int32"),
              T.add(one, Call(gv, (T.subtract(n, one),))))
    mod = IRModule({gv: Function((n,), body)})
    m = tvar("m", (), "int32")
    return mod.with_function("main", Function((m,), Call(gv, (m,))))


def test_deep_non_tail_recursion(rng):
    depth = int(rng.integers(2000, 3000))
    assert int(interpret(_count_program(depth), np.int32(depth))) == depth


def test_deep_recursion_over_an_adt():
    # Build S(S(...Z)) 2500 deep by recursion and count it back down by recursion.
    nat = GlobalTypeVar("Nat")
    z, s = Constructor("Z", (), nat, 0), Constructor("S", (TypeCall(nat),), nat, 1)
    build, count = GlobalVar("build"), GlobalVar("count")
    n, k, p = tvar("n", (), "int32"), Var("k"), Var("p")
    one = const(1, "int32")
    build_fn = Function((n,), If(T.less(n, one), Call(z, ()),
                                 Call(s, (Call(build, (T.subtract(n, one),)),))))
    count_fn = Function((k,), Match(k, (
        Clause(PatternConstructor(z), const(0, "int32")),
        Clause(PatternConstructor(s, (PatternVar(p),)), T.add(one, Call(count, (p,)))),
    )))
    mod = IRModule({build: build_fn, count: count_fn}, {nat: TypeData(nat, (), (z, s))})
    m = tvar("m", (), "int32")
    mod = mod.with_function("main", Function((m,), Call(count, (Call(build, (m,)),))))
    assert int(interpret(mod, np.int32(2500))) == 2500


def test_unbounded_recursion_is_reported(monkeypatch):
    monkeypatch.setattr(interpreter, "MAX_PENDING", 50_000)  # fail fast
    n = tvar("n", (), "int32")
    gv = GlobalVar("forever")
    mod = IRModule({gv: Function((n,), T.add(n, Call(gv, (n,))))})
    mod = mod.with_function("main", Function((), Call(gv, (const(1, "int32"),))))
    with pytest.raises(RelayRuntimeError, match=r"recursed deeper than the interpreter allows"):
        interpret(mod)


# --- programs over the prelude ------------------------------------------------------------


def test_map_and_fold_over_a_list(rng):
    p = PROGRAMS_BY_NAME["list_map_fold"]
    a, b, c = p.inputs(rng)
    want = np.tanh(a) + np.tanh(b) + np.tanh(c)
    np.testing.assert_allclose(interpret(p.build(), a, b, c), want, rtol=1e-5, atol=1e-6)


def test_map_over_a_long_list(rng):
    mod = IRModule().import_prelude()
    cons, nil = mod.get_constructor("Cons"), mod.get_constructor("Nil")
    map_ = mod.get_global_var("map")
    x = tvar("x", (2,))
    t = tvar("t", (2,))
    lst = Call(nil, ())
    for i in range(1500):
        lst = Call(cons, (T.add(x, const(float(i))), lst))
    main = Function((x,), Call(map_, (Function((t,), T.negative(t)), lst)))
    a = rng.standard_normal(2).astype("float32")
    out = interpret(mod.with_function("main", main), a)
    values = []
    while isinstance(out, ConstructorValue) and out.name == "Cons":
        values.append(out.fields[0])
        out = out.fields[1]
    assert len(values) == 1500
    np.testing.assert_allclose(values[0], -(a + 1499), rtol=1e-6)
    np.testing.assert_allclose(values[-1], -a, rtol=1e-6)


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-v))


def _tree_lstm_reference(x: np.ndarray, children: list) -> tuple[np.ndarray, np.ndarray]:
    w, u = tree_lstm_weights()
    states = [_tree_lstm_reference(cx, cc) for cx, cc in children]
    hdim = TREE_LSTM_DIMS[1]
    h_sum = sum((h for h, _ in states), np.zeros((1, hdim)))

    def gate(g: str, h: np.ndarray) -> np.ndarray:
        return x @ w[g].T + h @ u[g].T

    c = _sigmoid(gate("i", h_sum)) * np.tanh(gate("u", h_sum))
    for h_k, c_k in states:
        c = c + _sigmoid(gate("f", h_k)) * c_k
    return _sigmoid(gate("o", h_sum)) * np.tanh(c), c


def test_tree_lstm_over_a_rose_tree(rng):
    p = PROGRAMS_BY_NAME["tree_lstm"]
    x0, x1, x2, x3 = args = p.inputs(rng)
    h, c = interpret(p.build(), *args)
    want_h, want_c = _tree_lstm_reference(x0, [(x1, []), (x2, [(x3, [])])])
    np.testing.assert_allclose(h, want_h, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c, want_c, rtol=1e-4, atol=1e-5)


def test_option_match_with_wildcard(rng):
    p = PROGRAMS_BY_NAME["option_match"]
    x = np.abs(rng.standard_normal(3)).astype("float32") + 0.1
    np.testing.assert_allclose(interpret(p.build(), x), np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(interpret(p.build(), -x), x)
