"""shape_of on the VM: compiled to the ShapeOf instruction (no kernel), and programs that
compute with a `?` dim's extent (a scale by the batch size, a loop whose trip count is
the batch) give the interpreter's results at two batch sizes, also after save and load."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import relay_ir.vm as vm
from relay_ir.interpreter import interpret
from relay_ir.vm import bytecode as B
from tessel_errors import RelayError
from tests.relay_ir.programs import assert_values_close
from tests.relay_ir.vm.test_vm_save_load import _forge
from tests.rng import seeded_rng

SCALED = """
def @main(%x: Tensor[(?, 3), float32]) {
  let %n = take(shape_of(%x), 0);
  (multiply(%x, cast(%n, dtype="float32")), shape_of(%x, dtype="int32"))
}
"""

# a loop over the rows of %x: its trip count is the batch, read with shape_of
ROWS = """
def @rows(%i: int64, %n: int64, %acc: Tensor[(3,), float32],
          %x: Tensor[(?, 3), float32]) -> Tensor[(3,), float32] {
  if (less(%i, %n)) {
    @rows(add(%i, 1i64), %n, add(multiply(%acc, 0.5f), take(%x, %i, axis=0)), %x)
  } else {
    %acc
  }
}
def @main(%x: Tensor[(?, 3), float32], %a: Tensor[(3,), float32]) {
  @rows(0i64, take(shape_of(%x), 0), %a, %x)
}
"""


def _rows_reference(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    acc = a
    for row in x:
        acc = acc * 0.5 + row
    return acc


def test_shape_of_compiles_to_the_shape_of_instruction():
    exe = vm.compile(relay_ir.parse(SCALED))
    code = exe.functions[exe.function_index["main"]].instructions
    shapes = [i for i in code if isinstance(i, B.ShapeOf)]
    assert [i.dtype for i in shapes] == ["int64", "int32"]
    assert not any("shape_of" in k.name for k in exe.kernels)
    assert "shape_of tensor=%0 dst=" in str(exe.bytecode)


def test_a_program_scaling_by_the_batch_size_matches_the_interpreter_at_two_batches():
    machine = vm.VirtualMachine(vm.compile(relay_ir.parse(SCALED)))
    rng = seeded_rng()
    for batch in (2, 7):
        x = rng.standard_normal((batch, 3)).astype("float32")
        got = machine.run(x)
        assert_values_close(got, interpret(relay_ir.parse(SCALED), x), 1e-6, 1e-6)
        np.testing.assert_array_equal(got[1], np.asarray([batch, 3], "int32"))


def test_a_loop_whose_trip_count_is_the_batch_matches_the_interpreter_at_two_batches():
    machine = vm.VirtualMachine(vm.compile(relay_ir.parse(ROWS)))
    rng = seeded_rng()
    a = rng.standard_normal(3).astype("float32")
    for batch in (3, 8):
        x = rng.standard_normal((batch, 3)).astype("float32")
        got = machine.run(x, a)
        np.testing.assert_allclose(got, interpret(relay_ir.parse(ROWS), x, a), rtol=1e-6)
        np.testing.assert_allclose(got, _rows_reference(x, a), rtol=1e-5, atol=1e-6)


def test_a_saved_shape_of_program_runs_at_two_batches_after_loading(tmp_path):
    vm.compile(relay_ir.parse(ROWS)).save(str(tmp_path))
    machine = vm.VirtualMachine(vm.load(str(tmp_path)))
    rng = seeded_rng()
    a = rng.standard_normal(3).astype("float32")
    for batch in (1, 4):
        x = rng.standard_normal((batch, 3)).astype("float32")
        np.testing.assert_allclose(machine.run(x, a), _rows_reference(x, a), rtol=1e-5,
                                   atol=1e-6)


def test_a_saved_shape_of_keeps_its_dtype(tmp_path):
    exe = vm.compile(relay_ir.parse(SCALED))
    exe.save(str(tmp_path))
    assert vm.load(str(tmp_path)).functions == exe.functions


def test_a_forged_shape_of_dtype_is_refused_at_load(tmp_path):
    vm.compile(relay_ir.parse(SCALED)).save(str(tmp_path))

    def float_shape(desc):
        for fn in desc["functions"]:
            for ins in fn["instructions"]:
                if ins["op"] == "shape_of":
                    ins["text"] = "float32"

    _forge(str(tmp_path), float_shape)
    with pytest.raises(RelayError, match=r"instruction 0 \(shape_of\): dtype 'float32' is not "
                                         r"one of int32, int64"):
        vm.load(str(tmp_path))
