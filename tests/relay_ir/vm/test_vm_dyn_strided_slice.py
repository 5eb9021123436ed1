"""dyn.strided_slice on the VM: left outside every fused group, it is an InvokePacked of a
host-side kernel (the op's reference: the slices resolved against the data's shape when
run, then one copy of the strided view), between compiled kernels with `?` dims; results
equal the interpreter's and ONNX's clamping on random bounds, one executable for every
shape; a stride of 0 fails naming the op; save and load keep it."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import relay_ir.vm as vm
from relay_ir.interpreter import interpret
from relay_ir.vm import bytecode as B
from relay_ir.vm.kernels import OpKernel
from tessel_errors import RelayRuntimeError
from tests.relay_ir.test_op_dyn_strided_slice import INT64_MAX, INT64_MIN, onnx_slice
from tests.rng import seeded_rng

# bounds given when run, kernels with `?` dims before and after the slice
TEXT = """
def @main(%x: Tensor[(?, 6), float32], %b: Tensor[(2,), int64], %e: Tensor[(2,), int64],
          %s: Tensor[(2,), int64]) {
  exp(dyn.strided_slice(negative(%x), %b, %e, %s, axes=[1, 0]))
}
"""


def _bound(rng: np.random.Generator) -> int:
    return int(rng.choice([INT64_MAX, INT64_MIN])) if rng.random() < 0.2 else \
        int(rng.integers(-9, 10))


def _case(rng: np.random.Generator) -> list[np.ndarray]:
    x = rng.standard_normal((int(rng.integers(1, 6)), 6)).astype("float32")
    steps = [int(rng.choice([-3, -2, -1, 1, 2, 3])) for _ in range(2)]
    return [x, np.array([_bound(rng), _bound(rng)]), np.array([_bound(rng), _bound(rng)]),
            np.array(steps)]


def test_it_is_a_host_side_op_kernel_between_compiled_kernels():
    exe = vm.compile(relay_ir.parse(TEXT))
    ops = [k for k in exe.kernels if isinstance(k, OpKernel)]
    assert [k.name for k in ops] == ["dyn.strided_slice"]
    assert "# dyn.strided_slice" in str(exe.bytecode)
    assert sum(isinstance(i, B.InvokePacked) for f in exe.functions
               for i in f.instructions) == 3  # negative, the slice, exp


def test_random_bounds_give_the_interpreters_result_and_onnx_clamping_from_one_executable():
    mod = relay_ir.parse(TEXT)
    machine = vm.VirtualMachine(vm.compile(mod))
    rng = seeded_rng()
    for _ in range(25):
        x, b, e, s = _case(rng)
        got = machine.run(x, b, e, s)
        np.testing.assert_allclose(got, interpret(mod, x, b, e, s), rtol=1e-6)
        np.testing.assert_allclose(got, np.exp(-onnx_slice(x, b, e, s, [1, 0])), rtol=1e-6)


def test_a_stride_of_0_on_the_vm_is_a_runtime_error_naming_the_op():
    machine = vm.VirtualMachine(vm.compile(relay_ir.parse(TEXT)))
    x = seeded_rng().standard_normal((3, 6)).astype("float32")
    with pytest.raises(RelayRuntimeError, match=r"dyn.strided_slice: a stride of 0 \(strides "
                                                 r"\[1, 0\]\) on data of shape \(3, 6\)"):
        machine.run(x, np.array([0, 0]), np.array([6, 3]), np.array([1, 0]))


def test_a_saved_executable_runs_the_slice_after_loading(tmp_path):
    mod = relay_ir.parse(TEXT)
    vm.compile(mod).save(str(tmp_path))
    machine = vm.VirtualMachine(vm.load(str(tmp_path)))
    rng = seeded_rng()
    for _ in range(3):
        args = _case(rng)
        np.testing.assert_allclose(machine.run(*args), interpret(mod, *args), rtol=1e-6)
