"""A static model on the VM runs the graph executor's kernels (relay_ir.vm.layouts): the
same groups in the same blocked layouts, results equal to the interpreter's and build's;
functions with control flow, and the PassContext turning AlterOpLayout off, keep every
value logical; its constants lie in one arena in the order the code loads them, as
build's do (relay_ir.backend.executor.pack_constants)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import relay_ir
import relay_ir.vm as vm
from relay_ir import transform as T
from relay_ir.backend.pipeline import bind_params, compile_static
from relay_ir.frontend.onnx import from_onnx
from relay_ir.vm import bytecode as B
from relay_ir.vm.kernels import StaticKernel
from tests.e2e import onnx_models
from tests.rng import seeded_rng


def _onnx(name: str) -> tuple[object, dict, str, tuple[int, ...]]:
    builders = {"resnet18": lambda: onnx_models.resnet18(image=32, width=8, classes=10),
                "mobilenet_v2": lambda: onnx_models.mobilenet_v2(image=32, width=8, classes=10)}
    m = builders[name]()
    mod, params = from_onnx(m)
    inp = m.graph.input[0]
    return mod, params, inp.name, tuple(d.dim_value for d in inp.type.tensor_type.shape.dim)


def _kernel_specs(kernels: list) -> set[tuple]:
    return {(k.name, tuple(map(tuple, k.in_specs)), tuple(map(tuple, k.out_specs)))
            for k in kernels}


def _blocked_outputs(exe: vm.Executable) -> int:
    return sum(1 for k in exe.kernels if isinstance(k, StaticKernel)
               for s, _ in k.out_specs if len(s) == 5)


def _first(y: object) -> np.ndarray:
    return np.asarray(y[0] if isinstance(y, (list, tuple)) else y)


@pytest.mark.parametrize("name", ["resnet18", pytest.param("mobilenet_v2",
                                                            marks=pytest.mark.slow)])
def test_a_static_model_runs_the_graph_executors_kernels(name: str, tmp_path: Path) -> None:
    mod, params, inp, shape = _onnx(name)
    exe = vm.compile(mod, params=params)
    _, planner = compile_static(bind_params(mod, params), "llvm")
    graph = _kernel_specs(planner.group_kernels)
    ours = _kernel_specs([k for k in exe.kernels if isinstance(k, StaticKernel)])
    assert ours <= graph, sorted(ours - graph)
    assert _blocked_outputs(exe) >= 5  # the convs' values between them stay blocked

    x = seeded_rng().standard_normal(shape).astype("float32")
    got = _first(vm.VirtualMachine(exe).run(**{inp: x}))
    want = _first(relay_ir.interpret(bind_params(mod, params), **{inp: x}))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got, _first(relay_ir.build(mod, params=params).run(
        **{inp: x})))
    exe.save(str(tmp_path / "m"))  # the blocked kernels' specs and packed weights saved
    loaded = vm.VirtualMachine(vm.load(str(tmp_path / "m")))
    np.testing.assert_array_equal(_first(loaded.run(**{inp: x})), got)


def test_alter_op_layout_disabled_keeps_the_vms_values_logical() -> None:
    mod, params, inp, shape = _onnx("resnet18")
    with T.PassContext(opt_level=3, disabled_pass=["AlterOpLayout"]):
        exe = vm.compile(mod, params=params)
    assert _blocked_outputs(exe) == 0
    x = seeded_rng().standard_normal(shape).astype("float32")
    want = _first(relay_ir.interpret(bind_params(mod, params), **{inp: x}))
    np.testing.assert_allclose(_first(vm.VirtualMachine(exe).run(**{inp: x})), want,
                               rtol=1e-4, atol=1e-4)


def _conv_case(text: str) -> tuple[object, np.ndarray, np.ndarray, vm.Executable]:
    """The module, a fresh input, a fresh weight, and the module compiled with it bound."""
    mod = relay_ir.parse(text)
    rng = seeded_rng()
    x = rng.standard_normal((1, 32, 6, 6)).astype("float32")
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype("float32")
    return mod, x, w, vm.compile(mod, params={"w": w})


_CONV_THEN_FLATTEN = """
def @main(%x: Tensor[(1, 32, 6, 6), float32], %w: Tensor[(32, 32, 3, 3), float32]) {
  %0 = nn.relu(nn.conv2d(%x, %w, padding=[1, 1]));
  %1 = nn.relu(nn.conv2d(%0, %w, padding=[1, 1]));
  reshape(%1, newshape=[1, -1])
}
"""


def test_a_reshape_of_a_blocked_value_reads_it_logically() -> None:
    # the reshape group may take the conv's blocked output (it reads through a logical
    # view): the VM must run its kernel, not reshape the blocked data in place
    mod, x, w, exe = _conv_case(_CONV_THEN_FLATTEN)
    assert _blocked_outputs(exe) >= 1
    want = relay_ir.interpret(bind_params(mod, {"w": w}), x=x)
    np.testing.assert_allclose(vm.VirtualMachine(exe).run(x=x), want, rtol=1e-4, atol=1e-4)


_CONV_IN_A_BRANCH = """
def @main(%x: Tensor[(1, 32, 6, 6), float32], %w: Tensor[(32, 32, 3, 3), float32],
          %n: int32) {
  %0 = nn.relu(nn.conv2d(%x, %w, padding=[1, 1]));
  if (less(%n, 1)) { nn.relu(nn.conv2d(%0, %w, padding=[1, 1])) } else { negative(%0) }
}
"""


def test_a_function_with_control_flow_keeps_every_value_logical() -> None:
    mod, x, w, exe = _conv_case(_CONV_IN_A_BRANCH)
    assert _blocked_outputs(exe) == 0
    machine = vm.VirtualMachine(exe)
    for n in (0, 1):
        want = relay_ir.interpret(bind_params(mod, {"w": w}), x=x, n=np.int32(n))
        np.testing.assert_allclose(machine.run(x=x, n=np.int32(n)), want, rtol=1e-4,
                                   atol=1e-4)


def _in_one_arena_in_load_order(exe: vm.Executable) -> bool:
    order = list(dict.fromkeys(ins.index for f in exe.functions for ins in f.instructions
                               if isinstance(ins, B.LoadConst)))
    addr = [exe.constants[i].ctypes.data for i in order]
    ends = [a + exe.constants[i].nbytes for a, i in zip(addr, order)]
    return all(b == -(-e // 64) * 64 for e, b in zip(ends, addr[1:]))


def test_a_static_models_constants_lie_in_one_arena_in_load_order(tmp_path: Path) -> None:
    mod, params, inp, shape = _onnx("resnet18")
    exe = vm.compile(mod, params=params)
    assert len(exe.constants) > 10 and _in_one_arena_in_load_order(exe)
    assert not any(c.flags.writeable for c in exe.constants)
    exe.save(str(tmp_path / "m"))
    loaded = vm.load(str(tmp_path / "m"))
    assert _in_one_arena_in_load_order(loaded)
    x = seeded_rng().standard_normal(shape).astype("float32")
    np.testing.assert_array_equal(_first(vm.VirtualMachine(loaded).run(**{inp: x})),
                                  _first(vm.VirtualMachine(exe).run(**{inp: x})))
