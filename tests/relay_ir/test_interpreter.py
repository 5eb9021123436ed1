"""The reference interpreter on straight-line programs, closures, refs, ADTs and errors."""

from __future__ import annotations

import numpy as np
import pytest

from relay_ir import nn
from relay_ir.expr import (
    Call,
    Clause,
    Constant,
    Constructor,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from relay_ir.interpreter import Closure, ConstructorValue, RefValue, interpret
from relay_ir.module import IRModule
from relay_ir.op import reduce as R
from relay_ir.op import tensor as T
from relay_ir.ty import GlobalTypeVar, TypeCall, TypeData
from tessel_errors import RelayRuntimeError
from tests.relay_ir.programs import PROGRAMS_BY_NAME, const, tvar
from tests.rng import seeded_rng


@pytest.fixture
def rng() -> np.random.Generator:
    return seeded_rng()


def test_mlp_matches_numpy(rng):
    p = PROGRAMS_BY_NAME["mlp"]
    x, w1, b1, w2, b2 = args = p.inputs(rng)
    h = np.maximum(x @ w1.T + b1, 0)
    logits = h @ w2.T + b2
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(interpret(p.build(), *args), e / e.sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-6)


def test_keyword_arguments_bind_by_parameter_name(rng):
    x, y = tvar("x", (3,)), tvar("y", (3,))
    mod = IRModule.from_expr(Function((x, y), T.subtract(x, y)))
    a, b = rng.standard_normal(3).astype("float32"), rng.standard_normal(3).astype("float32")
    np.testing.assert_allclose(interpret(mod, y=b, x=a), a - b)


def test_tuples_and_projection(rng):
    x = tvar("x", (2,))
    t = Tuple((x, T.negative(x)))
    a = rng.standard_normal(2).astype("float32")
    out = interpret(Function((x,), Tuple((TupleGetItem(t, 1), t))), a)
    np.testing.assert_allclose(out[0], -a)
    assert isinstance(out[1], tuple) and len(out[1]) == 2


def test_if_takes_the_branch_of_the_condition(rng):
    x = tvar("x", (3,))
    fn = Function((x,), If(T.greater(R.sum(x), const(0.0)), T.exp(x), T.negative(x)))
    a = np.abs(rng.standard_normal(3)).astype("float32") + 0.1
    np.testing.assert_allclose(interpret(fn, a), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(interpret(fn, -a), a)


def test_closure_captures_tensor_at_creation(rng):
    p = PROGRAMS_BY_NAME["closures"]
    x, y = p.inputs(rng)
    # f(w) = w * x ; add_y(z) = z + y ; result f(y) + add_y(f(x))
    np.testing.assert_allclose(interpret(p.build(), x, y), y * x + (x * x + y), rtol=1e-6)


def test_closure_is_a_value_callable_from_python(rng):
    c, z = tvar("c", (2,)), tvar("z", (2,))
    fn = Function((c,), Function((z,), T.multiply(z, c)))
    a, b = rng.standard_normal(2).astype("float32"), rng.standard_normal(2).astype("float32")
    clo = interpret(fn, a)
    assert isinstance(clo, Closure)
    assert set(clo.env) == {c}  # exactly the free variable is captured
    np.testing.assert_allclose(clo(b), a * b)


def test_local_recursive_closure():
    # let %f = fn (%i) { if (%i < 1) { 0 } else { %i + %f(%i - 1) } }; %f(10)
    i, f = tvar("i", (), "int32"), Var("f")
    one = const(1, "int32")
    body = If(T.less(i, one), const(0, "int32"),
              T.add(i, Call(f, (T.subtract(i, one),))))
    prog = Let(f, Function((i,), body), Call(f, (const(10, "int32"),)))
    assert int(interpret(prog)) == 55


def test_refs_are_mutable_cells(rng):
    p = PROGRAMS_BY_NAME["refs"]
    (x,) = p.inputs(rng)
    np.testing.assert_allclose(interpret(p.build(), x), 2 * x + x, rtol=1e-6)


def test_ref_value_escapes_as_refvalue(rng):
    x = tvar("x", (2,))
    r = Var("r")
    prog = Function((x,), Let(r, RefCreate(x), Tuple((RefWrite(r, T.exp(x)), r))))
    a = rng.standard_normal(2).astype("float32")
    unit, cell = interpret(prog, a)
    assert unit == () and isinstance(cell, RefValue)
    np.testing.assert_allclose(cell.value, np.exp(a), rtol=1e-6)


def _nat() -> tuple[TypeData, Constructor, Constructor]:
    nat = GlobalTypeVar("Nat")
    z = Constructor("Z", (), nat, 0)
    s = Constructor("S", (TypeCall(nat),), nat, 1)
    return TypeData(nat, (), (z, s)), z, s


def test_match_on_constructors_binds_fields():
    td, z, s = _nat()
    n, p = Var("n"), Var("p")
    pred = Function((n,), Match(n, (Clause(PatternConstructor(z), Call(z, ())),
                                    Clause(PatternConstructor(s, (PatternVar(p),)), p))))
    two = Call(s, (Call(s, (Call(z, ()),)),))
    out = interpret(IRModule({}, {td.header: td}).with_function("main", Function((),
                                                                 Call(pred, (two,)))))
    assert isinstance(out, ConstructorValue) and out.name == "S"
    assert out.fields[0].name == "Z"


def test_match_tuple_and_wildcard_patterns(rng):
    x, y = tvar("x", (2,)), tvar("y", (2,))
    a, b = Var("a"), Var("b")
    m = Match(Tuple((x, y)), (Clause(PatternTuple((PatternVar(a), PatternWildcard())), a),))
    m2 = Match(Tuple((x, y)), (Clause(PatternTuple((PatternWildcard(), PatternVar(b))), b),))
    u, v = rng.standard_normal(2).astype("float32"), rng.standard_normal(2).astype("float32")
    out = interpret(Function((x, y), Tuple((m, m2))), u, v)
    np.testing.assert_array_equal(out[0], u)
    np.testing.assert_array_equal(out[1], v)


def test_shared_subexpression_is_evaluated_once(rng):
    # A chain where each node is used twice: without the memo this is 2**40 evaluations.
    x = tvar("x", (2,))
    e = x
    for _ in range(40):
        e = T.multiply(T.add(e, e), const(0.5))
    a = rng.standard_normal(2).astype("float32")
    np.testing.assert_allclose(interpret(Function((x,), e), a), a, rtol=1e-6)


def test_conv_bn_relu_matches_numpy(rng):
    p = PROGRAMS_BY_NAME["conv_bn_relu"]
    x, w, g, b, m, v = args = p.inputs(rng)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64)
    conv = np.zeros((1, 4, 8, 8))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 8, j:j + 8], w[:, :, i, j])
    s = (g / np.sqrt(v + 1e-5)).reshape(1, 4, 1, 1)
    want = np.maximum((conv - m.reshape(1, 4, 1, 1)) * s + b.reshape(1, 4, 1, 1), 0)
    np.testing.assert_allclose(interpret(p.build(), *args), want, rtol=1e-4, atol=1e-4)


# --- errors ------------------------------------------------------------------------------


def test_unbound_variable_is_reported_by_name():
    x, ghost = tvar("x", (2,)), tvar("ghost", (2,))
    with pytest.raises(RelayRuntimeError, match=r"unbound variable %ghost"):
        interpret(Function((x,), T.add(x, ghost)), np.ones(2, "float32"))


def test_match_failure_names_the_value():
    td, z, s = _nat()
    p = Var("p")
    only_s = Function((), Match(Call(z, ()),
                                (Clause(PatternConstructor(s, (PatternVar(p),)), p),),
                                complete=False))
    mod = IRModule({}, {td.header: td}).with_function("main", only_s)
    with pytest.raises(RelayRuntimeError, match=r"match failure.*no clause matches the value Z"):
        interpret(mod)


def test_wrong_arity_of_a_global_call():
    y = tvar("y", (2,))
    gv = GlobalVar("double")
    mod = IRModule({gv: Function((y,), T.add(y, y))})
    x = tvar("x", (2,))
    mod = mod.with_function("main", Function((x,), Call(gv, (x, x))))
    with pytest.raises(RelayRuntimeError, match=r"@double expects 1 argument\(s\) \(%y\), got 2"):
        interpret(mod, np.ones(2, "float32"))


def test_wrong_number_of_main_arguments():
    x = tvar("x", (2,))
    with pytest.raises(RelayRuntimeError, match=r"@main is missing argument\(s\) \['x'\]"):
        interpret(IRModule.from_expr(Function((x,), x)))


def test_argument_shape_is_checked_against_the_annotation():
    x = tvar("x", (None, 3))
    mod = IRModule.from_expr(Function((x,), x))
    assert interpret(mod, np.ones((5, 3), "float32")).shape == (5, 3)  # ? accepts any
    with pytest.raises(RelayRuntimeError, match=r"argument %x of @main has shape \(5, 4\)"):
        interpret(mod, np.ones((5, 4), "float32"))


def test_argument_dtype_mismatch_says_how_to_fix():
    x = tvar("x", (2,))
    with pytest.raises(RelayRuntimeError, match=r"dtype float64.*astype\('float32'\)"):
        interpret(IRModule.from_expr(Function((x,), x)), np.ones(2))


def test_op_failure_names_the_op_and_shapes():
    x, y = tvar("x", (None,)), tvar("y", (None,))
    fn = Function((x, y), T.add(x, y))
    msg = r"op 'add' failed on \(float32\[2\], float32\[3\]\)"
    with pytest.raises(RelayRuntimeError, match=msg):
        interpret(fn, np.ones(2, "float32"), np.ones(3, "float32"))


def test_calling_a_tensor_is_an_error():
    x = tvar("x", (2,))
    with pytest.raises(RelayRuntimeError, match=r"cannot call a tensor of shape \(2,\)"):
        interpret(Function((x,), Call(x, ())), np.ones(2, "float32"))


def test_if_condition_must_be_a_scalar():
    x = tvar("x", (2,))
    with pytest.raises(RelayRuntimeError, match=r"if condition must be a bool scalar"):
        interpret(Function((x,), If(T.greater(x, const(0.0)), x, x)), np.ones(2, "float32"))


def test_ref_read_of_a_non_reference():
    x = tvar("x", (2,))
    with pytest.raises(RelayRuntimeError, match=r"ref_read expects a reference"):
        interpret(Function((x,), RefRead(x)), np.ones(2, "float32"))


def test_dense_via_nn_builder_runs(rng):
    x, w = tvar("x", (2, 3)), tvar("w", (4, 3))
    a, b = rng.standard_normal((2, 3)).astype("float32"), rng.standard_normal((4, 3)).astype(
        "float32")
    np.testing.assert_allclose(interpret(Function((x, w), nn.dense(x, w)), a, b), a @ b.T,
                               rtol=1e-5, atol=1e-6)


def test_constant_expression_without_function():
    assert float(interpret(T.add(const(2.0), Constant(np.float32(3.0))))) == 5.0


def test_inserted_run_time_shape_check_fails_with_its_message():
    from relay_ir.typing import infer_type

    mod = infer_type(PROGRAMS_BY_NAME["gradual_checked"].build())
    ok = interpret(mod, np.ones((3, 3), "float32"), np.ones((16, 3), "float32"))
    assert ok.shape == (3, 16)
    with pytest.raises(RelayRuntimeError, match=r"%x: dim 1 must be 3 \(required by nn.dense\)"):
        interpret(mod, np.ones((3, 5), "float32"), np.ones((16, 3), "float32"))


def test_program_written_in_text(rng):
    p = PROGRAMS_BY_NAME["text_program"]
    n, x = p.inputs(rng)
    want = x * x + x + np.float32(int(n) * (int(n) + 1) / 2)
    np.testing.assert_allclose(interpret(p.build(), n, x), want, rtol=1e-6)


def test_run_time_errors_point_at_the_source():
    from relay_ir.parser import parse

    text = """def @main(%x: Tensor[(2,), float32]) {
  let %l = Nil;
  match? (%l) {
    Cons(%h, %t) => %h
  }
}
"""
    mod = parse(text, "prog.rly", init_module=IRModule().import_prelude())
    with pytest.raises(RelayRuntimeError,
                       match=r"match failure at prog.rly:3:3: no clause matches the value Nil"):
        interpret(mod, np.ones(2, "float32"))


def test_results_cannot_write_into_the_program_constants():
    c = Constant(np.arange(3, dtype="float32"))
    out = interpret(Function((), c))
    with pytest.raises(ValueError):
        out[0] = 7.0
    assert c.data[0] == 0.0
