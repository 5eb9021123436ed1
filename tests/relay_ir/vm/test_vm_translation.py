"""The bytecode as the VM runs it (relay_ir.vm.translate): temporaries reused only while
no call can re-enter, which functions run as plain Python calls, and the same results with
the Python argument checks as with the native ones, from several threads at once."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import relay_ir.vm as vm
from relay_ir.expr import Call, Function, GlobalVar, If, Let, Var
from relay_ir.interpreter import interpret
from relay_ir.module import IRModule
from relay_ir.op import tensor as T
from relay_ir.vm import bytecode as B
from relay_ir.vm import native
from relay_ir.vm.analysis import FunctionInfo, plain_functions
from tests.relay_ir.programs import PROGRAMS_BY_NAME, assert_values_close, const, tvar
from tests.relay_ir.test_interpreter_recursion import _count_program
from tests.relay_ir.vm.helpers import prelude_main, py_list
from tests.rng import seeded_rng


def _kept_across_the_call() -> IRModule:
    """@f(n, x) = if n < 1 { x } else { let t = x * 2; t + @f(n - 1, t + 1) }: the
    product is computed before the recursive call and read after it."""
    n, x = tvar("n", (), "int32"), tvar("x", (3,))
    t = Var("t")
    f = GlobalVar("f")
    one = const(1, "int32")
    rec = Call(f, (T.subtract(n, one), T.add(t, const(1.0))))
    body = If(T.less(n, one), x, Let(t, T.multiply(x, const(2.0)), T.add(t, rec)))
    mod = IRModule({f: Function((n, x), body)})
    m, y = tvar("m", (), "int32"), tvar("y", (3,))
    return mod.with_function("main", Function((m, y), Call(f, (m, y))))


def test_a_tensor_read_after_a_recursive_call_is_not_a_reused_temporary():
    mod = _kept_across_the_call()
    x = seeded_rng().standard_normal(3).astype("float32")
    got = vm.VirtualMachine(vm.compile(mod)).run(np.int32(6), x)
    np.testing.assert_allclose(got, interpret(mod, np.int32(6), x), rtol=1e-5)


def test_only_temporaries_that_die_before_every_call_get_a_buffer_of_their_own():
    exe = vm.compile(_kept_across_the_call())
    fn = exe.functions[exe.function_index["f"]]
    code = fn.instructions
    static = FunctionInfo(fn, lambda k: not exe.kernels[k].dynamic).static_storages()
    static_tensors = {code[t].dst for s in static.values() for t in s.tensors}

    def output_of(op: str) -> int:
        return next(i.args[-1] for i in code if isinstance(i, B.InvokePacked) and
                    op in exe.kernels[i.kernel].name)

    # the n < 1 test dies at the If: a temporary; the product is read after the
    # recursive call and the sum is returned: fresh allocations
    assert output_of("less") in static_tensors
    assert output_of("multiply") not in static_tensors
    ret = next(i.result for i in code if isinstance(i, B.Ret) and i.result != 1)
    assert ret not in static_tensors


def test_loops_and_their_plain_callees_are_plain_functions_and_recursion_is_not():
    for mod, name, plain in [(PROGRAMS_BY_NAME["loop"].build(), "loop", True),
                             (_count_program(5), "count", False),
                             (_kept_across_the_call(), "f", False)]:
        exe = vm.compile(mod)
        infos = [FunctionInfo(f, lambda k, exe=exe: not exe.kernels[k].dynamic)
                 for f in exe.functions]
        assert plain_functions(infos)[exe.function_index[name]] is plain, name


def test_a_strided_list_element_is_copied_by_the_python_check_and_computes_the_same():
    mod = prelude_main("@map(fn (%t: Tensor[(2, 3), float32]) { tanh(%t) }, %xs)",
                       "%xs: List[Tensor[(2, 3), float32]]")
    rng = seeded_rng()
    wide = rng.standard_normal((2, 6)).astype("float32")
    items = [wide[:, ::2], rng.standard_normal((2, 3)).astype("float32")]
    assert not items[0].flags.c_contiguous
    got = vm.VirtualMachine(vm.compile(mod)).run(py_list(mod, items))
    assert_values_close(got, interpret(mod, py_list(mod, items)))


@pytest.mark.parametrize("program", ["tree_lstm", "list_map_fold", "closures", "refs"])
def test_the_python_argument_path_gives_the_native_paths_results(program, monkeypatch):
    p = PROGRAMS_BY_NAME[program]
    args = p.inputs(seeded_rng())
    exe = vm.compile(p.build())
    want = vm.VirtualMachine(exe).run(*args)
    monkeypatch.setattr(native, "available", lambda: False)
    machine = vm.VirtualMachine(exe)
    assert not machine.translation().native
    assert_values_close(machine.run(*args), want, p.rtol, p.atol)


def test_native_checks_refuse_a_wrong_dim_dtype_or_layout():
    import ctypes

    assert native.available(), "the probe of numpy's array header failed"

    seen = []

    @ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
    def kernel(slots, dims):
        seen.append(ctypes.cast(slots, ctypes.POINTER(ctypes.c_void_p))[0])
        return 0

    table = native.Table([(0, True, (4, 5), np.dtype("float32"),
                           native.C_CONTIGUOUS | native.ALIGNED)])
    good = seeded_rng().standard_normal((4, 5)).astype("float32")
    call = native.caller()
    fn = ctypes.cast(kernel, ctypes.c_void_p).value
    for value, rc in [(good, 0), (good.T.copy(), -1), (good.astype("float64"), -1),
                      (np.zeros((4, 10), "float32")[:, ::2], -1), ([1.0] * 20, -1)]:
        slots = (ctypes.c_void_p * 1)(id(value))
        assert call(fn, slots, None, table.array, table.rows) == rc
    assert seen == [good.ctypes.data]


def test_threads_running_one_vm_at_once_get_their_own_results():
    p = PROGRAMS_BY_NAME["tree_lstm"]
    machine = vm.VirtualMachine(vm.compile(p.build()))
    inputs = [p.inputs(seeded_rng()) for _ in range(4)]
    want = [interpret(p.build(), *a) for a in inputs]
    got: dict[int, list] = {}

    def work(k: int) -> None:
        got[k] = [machine.run(*inputs[k]) for _ in range(20)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        for value in got[k]:
            assert_values_close(value, want[k], p.rtol, p.atol)


def test_closures_over_a_list_longer_than_the_direct_call_depth_match_the_interpreter():
    # map recurses once per element: past translate.DEPTH its calls (and the closure
    # calls inside) run as generators under the frame loop
    from relay_ir.vm.translate import DEPTH

    mod = prelude_main(
        "let %m = @map(fn (%t: Tensor[(2,), float32]) { tanh(multiply(%t, %s)) }, %xs);"
        "(@foldl(fn (%a: Tensor[(2,), float32], %t: Tensor[(2,), float32]) "
        "{ add(%a, %t) }, %s, %m), @length(%m))",
        "%xs: List[Tensor[(2,), float32]], %s: Tensor[(2,), float32]")
    rng = seeded_rng()
    items = [rng.standard_normal(2).astype("float32") for _ in range(DEPTH + 150)]
    s = rng.standard_normal(2).astype("float32")
    got = vm.VirtualMachine(vm.compile(mod)).run(py_list(mod, items), s)
    assert_values_close(got, interpret(mod, py_list(mod, items), s), 1e-4, 1e-4)
