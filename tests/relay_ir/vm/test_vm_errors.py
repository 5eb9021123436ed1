"""The VM's errors: a match with no matching clause names the function, bad arguments
are rejected as lib.run rejects them, and relay_ir.build points here."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import relay_ir.vm as vm
from tessel_errors import KernelArgumentError, RelayError, RelayRuntimeError
from tests.relay_ir.programs import PROGRAMS_BY_NAME
from tests.relay_ir.vm.helpers import prelude_main, py_list, run_vm
from tests.rng import seeded_rng


def test_a_match_without_a_matching_clause_names_the_function():
    with pytest.raises(RelayRuntimeError, match=r"match failure in @hd: no clause matches .*Nil"):
        run_vm(prelude_main("@hd(@tl(Cons(1, Nil)))"))


def test_a_non_exhaustive_match_in_main_names_main():
    mod = prelude_main("match? (Cons(%x, Nil)) { Nil => %x }", "%x: int32")
    with pytest.raises(RelayRuntimeError, match=r"match failure in @main"):
        run_vm(mod, np.int32(3))


def test_a_wrong_shape_names_the_parameter():
    p = PROGRAMS_BY_NAME["mlp"]
    machine = vm.VirtualMachine(vm.compile(p.build()))
    args = p.inputs(seeded_rng())
    args[0] = args[0][:2]
    with pytest.raises(KernelArgumentError,
                       match=r"input 'x' must have shape \(4, 16\), got \(2, 16\)"):
        machine.run(*args)


def test_a_wrong_dtype_names_the_parameter():
    p = PROGRAMS_BY_NAME["loop"]
    machine = vm.VirtualMachine(vm.compile(p.build()))
    with pytest.raises(KernelArgumentError, match=r"input 'x' must have dtype float32"):
        machine.run(np.int32(3), np.ones(3, "float64"))


def test_missing_and_unknown_arguments_are_named():
    machine = vm.VirtualMachine(vm.compile(PROGRAMS_BY_NAME["loop"].build()))
    with pytest.raises(KernelArgumentError, match=r"run\(\): missing input\(s\) x"):
        machine.run(np.int32(3))
    with pytest.raises(KernelArgumentError, match=r"run\(\): unknown input 'z'"):
        machine.run(np.int32(3), z=np.ones(3, "float32"))
    with pytest.raises(KernelArgumentError, match=r"no function @nope"):
        machine.invoke("nope")


def test_an_adt_field_of_the_wrong_shape_is_caught_before_the_kernel():
    # the list's elements are not checked at the call (only tensor parameters are); the
    # kernel that reads the head checks the shape instead of reading out of bounds
    mod = prelude_main("match (%xs) { Cons(%h, _) => negative(%h), Nil => negative(%y) }",
                       "%xs: List[Tensor[(2,), float32]], %y: Tensor[(2,), float32]")
    machine = vm.VirtualMachine(vm.compile(mod))
    xs = py_list(mod, [np.ones(3, "float32")])
    with pytest.raises(KernelArgumentError, match=r"kernel 'fused_negative': input 0 must be "
                                                  r"float32\[2\], got float32\[3\]"):
        machine.run(xs, np.ones(2, "float32"))


def test_build_points_to_the_vm_for_control_flow():
    with pytest.raises(RelayError, match=r"relay_ir\.vm\.compile"):
        relay_ir.build(PROGRAMS_BY_NAME["loop"].build())


def test_only_the_cpu_target_is_compiled():
    with pytest.raises(RelayError, match=r"compiles for the CPU"):
        vm.compile(PROGRAMS_BY_NAME["loop"].build(), target="cuda")


def test_a_closure_made_with_a_negative_function_index_is_refused():
    with pytest.raises(KernelArgumentError, match=r"VMClosure: func must be the index of a "
                                                  r"function of the executable \(an int >= 0\), "
                                                  r"got -1"):
        vm.VMClosure(-1, ())


def test_a_closure_of_a_function_the_executable_lacks_names_the_index_and_the_count():
    mod = prelude_main("@map(%f, %xs)", "%f: fn (Tensor[(2,), float32]) -> Tensor[(2,), "
                       "float32], %xs: List[Tensor[(2,), float32]]")
    exe = vm.compile(mod)
    n = len(exe.functions)
    xs = py_list(mod, [seeded_rng().standard_normal(2).astype("float32")])
    with pytest.raises(RelayRuntimeError, match=rf"@map calls a closure of function {n + 5}, "
                                                rf"but the executable has {n} functions"):
        vm.VirtualMachine(exe).run(vm.VMClosure(n + 5, ()), xs)
