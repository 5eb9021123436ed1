"""What the VM computes with and hands back: closures capturing tensors, references,
ADT values and tuples as arguments and results, and `invoke` of any global."""

from __future__ import annotations

import numpy as np

import relay_ir.vm as vm
from relay_ir.expr import Call, Function, GlobalVar, Let, RefCreate, RefRead, RefWrite, Tuple, Var
from relay_ir.interpreter import RefValue, interpret
from relay_ir.module import IRModule
from relay_ir.op import tensor as T
from relay_ir.ty import TensorType, TupleType
from tests.relay_ir.programs import assert_values_close, tvar
from tests.relay_ir.vm.helpers import prelude_main, py_list, run_vm, to_list
from tests.rng import seeded_rng


def test_a_returned_closure_keeps_the_tensor_it_captured():
    # @scale(s) = fn (v) { v * s }; main(a, b, x) = (@scale(a)(x), @scale(b)(x))
    s, v = tvar("s", (4,)), tvar("v", (4,))
    scale = GlobalVar("scale")
    a, b, x = tvar("a", (4,)), tvar("b", (4,)), tvar("x", (4,))
    mod = IRModule({scale: Function((s,), Function((v,), T.multiply(v, s)))})
    body = Tuple((Call(Call(scale, (a,)), (x,)), Call(Call(scale, (b,)), (x,))))
    mod = mod.with_function("main", Function((a, b, x), body))
    rng = seeded_rng()
    av, bv, xv = (rng.standard_normal(4).astype("float32") for _ in range(3))
    got_a, got_b = run_vm(mod, av, bv, xv)
    np.testing.assert_allclose(got_a, xv * av, rtol=1e-6)
    np.testing.assert_allclose(got_b, xv * bv, rtol=1e-6)


def test_a_reference_is_shared_by_the_closures_that_capture_it():
    # r = ref(x); bump = fn () { r := r! + 1 }; bump(); bump(); r!
    x = tvar("x", (3,))
    r, bump, u1, u2 = Var("r"), Var("bump"), Var("u1"), Var("u2")
    bump_fn = Function((), RefWrite(r, T.add(RefRead(r), np_const(1.0))))
    body = Let(r, RefCreate(x), Let(bump, bump_fn, Let(u1, Call(bump, ()),
                                                          Let(u2, Call(bump, ()), RefRead(r)))))
    mod = IRModule().with_function("main", Function((x,), body))
    xv = seeded_rng().standard_normal(3).astype("float32")
    np.testing.assert_allclose(run_vm(mod, xv), xv + 2, rtol=1e-6)


def np_const(value: float):
    from tests.relay_ir.programs import const

    return const(value)


def test_a_reference_returned_is_the_interpreters_ref_value():
    x = tvar("x", (2,))
    mod = IRModule().with_function("main", Function((x,), RefCreate(T.negative(x))))
    xv = seeded_rng().standard_normal(2).astype("float32")
    got = run_vm(mod, xv)
    assert isinstance(got, RefValue)
    assert_values_close(got, interpret(mod, xv))


def test_invoke_runs_a_global_on_a_list_value():
    mod = prelude_main("0")
    exe = vm.compile(mod)
    xs = py_list(mod, [np.float32(i) for i in range(7)])
    assert int(vm.VirtualMachine(exe).invoke("length", xs)) == 7
    rev = vm.VirtualMachine(exe).invoke("rev", xs)
    assert [float(v) for v in to_list(rev)] == [6, 5, 4, 3, 2, 1, 0]


def test_a_tuple_argument_and_keyword_arguments():
    pair = Var("pair", TupleType((TensorType((2,)), TensorType((2,)))))
    y = tvar("y", (2,))
    from relay_ir.expr import TupleGetItem

    body = T.subtract(TupleGetItem(pair, 0), T.multiply(TupleGetItem(pair, 1), y))
    mod = IRModule().with_function("main", Function((pair, y), body))
    rng = seeded_rng()
    a, b, c = (rng.standard_normal(2).astype("float32") for _ in range(3))
    machine = vm.VirtualMachine(vm.compile(mod))
    np.testing.assert_allclose(machine.run([a, b], y=c), a - b * c, rtol=1e-6)


def test_a_result_tensor_does_not_alias_a_later_runs_result():
    x = tvar("x", (3,))
    mod = IRModule().with_function("main", Function((x,), T.exp(x)))
    machine = vm.VirtualMachine(vm.compile(mod))
    first = machine.run(np.zeros(3, "float32"))
    machine.run(np.ones(3, "float32"))
    np.testing.assert_array_equal(first, np.ones(3, "float32"))
