"""The VM against the interpreter: every program of the relay_ir corpus and programs over
every prelude function give the interpreter's result on fresh seeded random inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import relay_ir.vm as vm
from relay_ir.interpreter import ConstructorValue, interpret
from tests.relay_ir.programs import PROGRAMS, assert_values_close
from tests.relay_ir.vm.helpers import prelude_main, py_list
from tests.rng import seeded_rng


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_corpus_program_runs_as_in_the_interpreter(program):
    rng = seeded_rng()
    machine = vm.VirtualMachine(vm.compile(program.build()))
    for _ in range(2):  # two fresh input sets through one executable
        args = program.inputs(rng)
        assert_values_close(machine.run(*args), interpret(program.build(), *args),
                            program.rtol, program.atol, where=program.name)


F32 = "Tensor[(2, 2), float32]"
LIST = "Cons(%a, Cons(%b, Cons(%c, Nil)))"
ABC = f"%a: {F32}, %b: {F32}, %c: {F32}"


def _three(rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.standard_normal((2, 2)).astype("float32") for _ in range(3)]


def _ints(rng: np.random.Generator) -> list[np.ndarray]:
    return [np.asarray(rng.integers(-5, 5), "int32") for _ in range(3)]


INTS = "%a: int32, %b: int32, %c: int32"
# (name, body of @main, its params, inputs): one program per prelude function at least
PRELUDE_PROGRAMS: list[tuple[str, str, str, Callable[[np.random.Generator], list[Any]]]] = [
    ("map", f"@map(fn (%t: {F32}) {{ tanh(%t) }}, {LIST})", ABC, _three),
    ("foldl", f"@foldl(fn (%x: {F32}, %y: {F32}) {{ subtract(%x, %y) }}, %a, "
              "Cons(%b, Cons(%c, Nil)))", ABC, _three),
    ("foldr", f"@foldr(fn (%x: {F32}, %y: {F32}) {{ subtract(%x, %y) }}, %c, "
              "Cons(%a, Cons(%b, Nil)))", ABC, _three),
    ("length", f"@length({LIST})", ABC, _three),
    ("nth", f"@nth({LIST}, 2)", ABC, _three),
    ("sum", "@sum(Cons(%a, Cons(%b, Cons(%c, Nil))))",
     "%a: Tensor[(?, ?), float32], %b: Tensor[(?, ?), float32], "
     "%c: Tensor[(?, ?), float32]", _three),
    ("hd_tl", "(@hd(Cons(%a, Cons(%b, Nil))), @tl(Cons(%a, Cons(%b, Nil))))", INTS, _ints),
    ("rev_concat", "(@rev(Cons(%a, Cons(%b, Cons(%c, Nil)))), "
                   "@concat(Cons(%a, Nil), Cons(%b, Cons(%c, Nil))))", INTS, _ints),
    ("filter", "@filter(fn (%i: int32) { greater(%i, 0) }, Cons(%a, Cons(%b, Cons(%c, Nil))))",
     INTS, _ints),
    ("zip", "@zip(Cons(%a, Cons(%b, Cons(%c, Nil))), Cons(greater(%a, %b), Nil))", INTS,
     _ints),
    ("id_compose", "(@id(%a), @compose(fn (%i: int32) { multiply(%i, 10) }, "
                   "fn (%j: int32) { add(%j, %b) })(%c))", INTS, _ints),
    ("tmap", "@tmap(fn (%i: int32) { multiply(%i, %c) }, Rose(%a, Cons(Rose(%b, Nil), "
             "Cons(Rose(%c, Cons(Rose(%a, Nil), Nil)), Nil))))", INTS, _ints),
    ("constructor_as_value", "@foldr(Cons, Nil, Cons(%a, Cons(%b, Nil)))", INTS, _ints),
]


@pytest.mark.parametrize("name, body, params, inputs", PRELUDE_PROGRAMS,
                         ids=[p[0] for p in PRELUDE_PROGRAMS])
def test_prelude_function_runs_as_in_the_interpreter(name, body, params, inputs):
    rng = seeded_rng()
    args = inputs(rng)
    got = vm.VirtualMachine(vm.compile(prelude_main(body, params))).run(*args)
    assert_values_close(got, interpret(prelude_main(body, params), *args), where=name)


def test_a_group_with_an_op_without_kernel_strategy_runs_through_the_references(tmp_path):
    # with SimplifyInference off, nn.batch_norm (no kernel strategy) stays in a group
    from relay_ir.transform import PassContext
    from tests.relay_ir.programs import PROGRAMS_BY_NAME

    p = PROGRAMS_BY_NAME["conv_bn_relu"]
    with PassContext(disabled_pass=["SimplifyInference"]):
        exe = vm.compile(p.build())
    assert any(k.name.endswith("(interpreted)") for k in exe.kernels)
    exe.save(str(tmp_path))
    args = p.inputs(seeded_rng())
    want = interpret(p.build(), *args)
    for e in (exe, vm.load(str(tmp_path))):
        assert_values_close(vm.VirtualMachine(e).run(*args), want, p.rtol, p.atol)



NESTED = """
match (%l) {
  Cons(Some(%a), Cons(Some(%b), _)) => add(%a, %b),
  Cons(Some(%a), Cons(None, _)) => negative(%a),
  Cons(None, Cons(_, Cons(Some(%c), _))) => multiply(%c, 3),
  Cons(Some(%a), Nil) => %a,
  _ => 0,
}
"""


@pytest.mark.parametrize("items", [[], [4], [3, None], [3, 5], [None, 2, 7], [None, None],
                                   [None, 1, None], [6, 8, None]],
                         ids=lambda items: "-".join(map(str, items)) or "empty")
def test_nested_constructor_patterns_pick_the_interpreters_clause(items):
    # Options inside a List: the first clause that matches at every depth wins
    mod = prelude_main(NESTED, "%l: List[Option[int32]]")
    some, none = mod.get_constructor("Some"), mod.get_constructor("None")
    values = [ConstructorValue(none, ()) if v is None else
              ConstructorValue(some, (np.asarray(v, "int32"),)) for v in items]
    got = vm.VirtualMachine(vm.compile(mod)).run(py_list(mod, values))
    assert_values_close(got, interpret(mod, py_list(mod, values)))
