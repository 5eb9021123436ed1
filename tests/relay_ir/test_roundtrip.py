"""parse(astext(m)) is structurally equal to m: every test program, the prelude, constants
of every dtype, and hand-built corner cases (sharing across scopes, ADTs, refs, closures)."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir as r
from relay_ir.expr import Call, Constant, Function, If, Let, Tuple, Var
from relay_ir.op.registry import get_op
from relay_ir.ty import TensorType, TupleType
from tests.relay_ir.programs import PROGRAMS
from tests.rng import seeded_rng


def assert_round_trip(mod: r.IRModule) -> str:
    text = r.astext(mod)
    again = r.parse(text)
    r.assert_structural_equal(mod, again)
    assert r.astext(again) == text  # printing is a fixed point
    return text


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_every_test_program_round_trips(program):
    assert_round_trip(program.build())


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_every_typed_test_program_round_trips(program):
    # After InferType (type arguments, run-time shape checks) the text still reads back.
    from relay_ir.transform import InferType

    assert_round_trip(InferType()(program.build()))


def test_prelude_round_trips():
    assert_round_trip(r.IRModule().import_prelude())


DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (1,), (3, 0), (2, 3, 4)])
def test_constants_round_trip_bit_exactly(dtype, shape):
    rng = seeded_rng()
    if dtype == "bool":
        data = rng.random(shape) > 0.5
    elif dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        data = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    else:
        data = (rng.standard_normal(shape) * 1e3).astype(dtype)
    mod = r.IRModule.from_expr(Function((), Tuple((Constant(data), Constant(data.copy())))))
    text = assert_round_trip(mod)
    back = r.parse(text)["main"].body.fields[0].data
    assert back.dtype == data.dtype and back.shape == data.shape
    assert back.tobytes() == data.tobytes()


def test_special_floats_round_trip():
    values = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38], dtype="float32")
    consts = tuple(Constant(np.array(v, "float32")) for v in values) + (Constant(values),)
    assert_round_trip(r.IRModule.from_expr(Function((), Tuple(consts))))


def test_sharing_across_branches_and_closures_round_trips():
    x = r.var("x", shape=(3,))
    c = r.var("c", dtype="bool")
    relu = get_op("nn.relu")
    shared = Call(relu, (x,))
    inner = Call(get_op("add"), (shared, shared))
    lam_param = Var("p")
    lam = Function((lam_param,), Call(get_op("multiply"), (lam_param, inner)))
    body = If(c, Tuple((inner, shared)), Tuple((Call(lam, (shared,)), lam)))
    mod = r.IRModule.from_expr(Function((x, c), Tuple((body, inner))))
    text = assert_round_trip(mod)
    assert text.count("nn.relu(") == 1


def test_let_bound_closure_calls_and_deep_let_chain_round_trip():
    x = r.var("x", shape=(2,))
    sb = r.ScopeBuilder()
    v = x
    for i in range(2000):
        v = sb.let(f"v{i}", Call(get_op("nn.relu"), (v,)))
    sb.ret(v)
    assert_round_trip(r.IRModule.from_expr(r.function([x], sb.get())))


def test_adts_refs_and_matches_round_trip():
    prelude = r.IRModule().import_prelude()
    text = """
    def @main(%l: List[Tensor[(2,), float32]], %o: Option[int32]) {
      let %r = ref(0);
      let %u = ref_write(%r, 1);
      let %pairs = @zip(%l, @rev(%l));
      %0 = match? (%o) { Some(%v) => add(%v, ref_read(%r)) };
      let %tree = Rose(1, Cons(Rose(2, Nil), Nil));
      (%0, @length(%pairs), @tmap(fn (%i: int32) { add(%i, 1) }, %tree))
    }
    """
    mod = r.parse(text, init_module=prelude)
    assert_round_trip(mod)


def test_call_type_args_round_trip():
    prelude = r.IRModule().import_prelude()
    f32 = TensorType((3,))
    mod = r.parse("def @main(%l: List[Tensor[(3,), float32]]) { @id(%l) }", init_module=prelude)
    call = mod["main"].body
    from dataclasses import replace

    typed = replace(call, type_args=(r.TypeCall(prelude.get_global_type_var("List"), (f32,)),))
    mod2 = mod.with_function("main", replace(mod["main"], body=typed))
    text = assert_round_trip(mod2)
    assert "@id[List[Tensor[(3,), float32]]](%l)" in text


def test_tuple_types_and_function_types_in_annotations_round_trip():
    t = TupleType((TensorType((), "int32"),))
    f = Var("f", r.FuncType((t,), TupleType(())))
    y = Var("y", t)
    mod = r.IRModule.from_expr(Function((f, y), Call(f, (y,)), ret_type=TupleType(())))
    assert_round_trip(mod)


def test_expressions_round_trip_through_parse_expr():
    a = r.var("a", shape=("n", 2))
    b = Var("b")
    e = Let(b, Call(get_op("nn.relu"), (a,)), Tuple((b, a, Constant(np.float32(2)))))
    again = r.parse_expr(r.astext(e))
    assert r.structural_equal(e, again, map_free_vars=True)
    assert again.body.fields[1].type_annotation == a.type_annotation
