"""Recursion on the VM: tail calls in one frame, deep non-tail recursion on the heap,
mutual recursion, local recursive closures, and runaway recursion reported."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir.vm as vm
from relay_ir import vm as vm_pkg
from relay_ir.expr import Call, Function, GlobalVar, If, Let, Var
from relay_ir.module import IRModule
from relay_ir.op import tensor as T
from relay_ir.ty import TensorType
from relay_ir.vm import bytecode as B
from tessel_errors import RelayRuntimeError
from tests.relay_ir.programs import const, loop_program, tvar
from tests.relay_ir.test_interpreter_recursion import _count_program
from tests.relay_ir.vm.helpers import run_vm
from tests.rng import seeded_rng


def _loop_reference(n: int, x: np.ndarray) -> np.ndarray:
    acc = x.copy()
    for _ in range(n):
        acc = (acc * np.float32(0.9) + np.float32(0.1)).astype("float32")
    return acc


def test_tail_recursion_ten_to_the_five_deep_runs_in_one_frame():
    x = seeded_rng().standard_normal(3).astype("float32")
    out = run_vm(loop_program(), np.int32(100_000), x)
    np.testing.assert_allclose(out, _loop_reference(100_000, x), rtol=1e-4)


def test_a_call_in_tail_position_is_marked_tail():
    exe = vm.compile(loop_program())
    loop = exe.functions[exe.function_index["loop"]]
    calls = [i for i in loop.instructions if isinstance(i, B.Invoke)]
    assert [c.tail for c in calls] == [True]


def test_non_tail_recursion_ten_to_the_four_deep_keeps_frames_on_the_heap():
    assert int(run_vm(_count_program(10_000), np.int32(10_000))) == 10_000


def test_mutual_recursion_even_odd():
    n = tvar("n", (), "int32")
    m = tvar("m", (), "int32")
    even, odd = GlobalVar("even"), GlobalVar("odd")
    one, zero = const(1, "int32"), const(0, "int32")
    even_fn = Function((n,), If(T.equal(n, zero), const(True, "bool"),
                                Call(odd, (T.subtract(n, one),))))
    odd_fn = Function((m,), If(T.equal(m, zero), const(False, "bool"),
                               Call(even, (T.subtract(m, one),))))
    k = tvar("k", (), "int32")
    mod = IRModule({even: even_fn, odd: odd_fn})
    mod = mod.with_function("main", Function((k,), Call(even, (k,))))
    machine = vm.VirtualMachine(vm.compile(mod))
    for value in (0, 7, 20_001, 30_000):
        assert bool(machine.run(np.int32(value))) == (value % 2 == 0)


def test_a_local_recursive_closure_counts_down():
    # let %f = fn (%i) { if (i < 1) { acc } else { %f(i - 1) } } capturing %x
    i, n, x = tvar("i", (), "int32"), tvar("n", (), "int32"), tvar("x", (3,))
    f = Var("f")
    one = const(1, "int32")
    f_fn = Function((i,), If(T.less(i, one), x,
                             T.add(const(1.0), Call(f, (T.subtract(i, one),)))))
    mod = IRModule().with_function("main", Function((n, x), Let(f, f_fn, Call(f, (n,)))))
    x_val = seeded_rng().standard_normal(3).astype("float32")
    np.testing.assert_allclose(run_vm(mod, np.int32(50), x_val), x_val + 50, rtol=1e-5)


def test_unbounded_recursion_is_reported(monkeypatch):
    monkeypatch.setattr(vm_pkg.vm, "MAX_FRAMES", 5_000)  # fail fast
    n = tvar("n", (), "int32")
    gv = GlobalVar("forever")
    mod = IRModule({gv: Function((n,), T.add(n, Call(gv, (n,))), TensorType((), "int32"))})
    mod = mod.with_function("main", Function((), Call(gv, (const(1, "int32"),))))
    with pytest.raises(RelayRuntimeError, match=r"recursed deeper than the VM allows.*@forever"):
        run_vm(mod)


def test_recursion_ten_to_the_four_deep_needs_only_a_bounded_python_stack():
    # direct Python calls nest at most translate.DEPTH deep; deeper, the frame loop holds
    # the frames, so the run fits in a recursion limit a few hundred frames above here
    import inspect
    import sys

    from relay_ir.vm.translate import DEPTH

    machine = vm.VirtualMachine(vm.compile(_count_program(10_000)))
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + DEPTH + 100)
    try:
        assert int(machine.run(np.int32(10_000))) == 10_000
    finally:
        sys.setrecursionlimit(old)
