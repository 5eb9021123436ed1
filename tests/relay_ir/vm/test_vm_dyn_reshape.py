"""dyn.reshape on the VM: compiled to ReshapeTensor in a dyn mode (no kernel; the same data
under the new shape), the 0s and -1 resolved and checked when it runs, with the error
naming the op and both shapes; a static reshape with `?` dims is the same instruction; the
mode survives save and load, and a forged one is refused."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import relay_ir.vm as vm
from relay_ir.interpreter import interpret
from relay_ir.vm import bytecode as B
from tessel_errors import RelayError, RelayRuntimeError
from tests.relay_ir.vm.test_vm_save_load import _forge
from tests.rng import seeded_rng

# the new shape is another tensor's, known when run: a kernel before and after the view
LIKE = """
def @main(%x: Tensor[(?, 6), float32], %y: Tensor[(?, ?), float32]) {
  exp(dyn.reshape(negative(%x), shape_of(%y)))
}
"""
GIVEN = """
def @main(%x: Tensor[(?, 6), float32], %s: Tensor[(3,), int64]) {
  dyn.reshape(%x, %s, allowzero=ALLOWZERO)
}
"""


def _given(allowzero: int = 0) -> relay_ir.IRModule:
    return relay_ir.parse(GIVEN.replace("ALLOWZERO", str(allowzero)))


def _reshape_tensors(exe) -> list[B.ReshapeTensor]:
    return [i for f in exe.functions for i in f.instructions if isinstance(i, B.ReshapeTensor)]


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


def test_dyn_reshape_compiles_to_reshape_tensor_in_the_dyn_mode_and_no_kernel():
    exe = vm.compile(relay_ir.parse(LIKE))
    assert [i.mode for i in _reshape_tensors(exe)] == ["dyn"]
    assert not any("reshape" in k.name for k in exe.kernels)
    assert "mode='dyn'" in str(exe.bytecode)
    assert [i.mode for i in _reshape_tensors(vm.compile(_given(1)))] == ["dyn_allowzero"]


def test_a_shape_read_from_another_tensor_matches_the_interpreter_at_two_shapes():
    machine = vm.VirtualMachine(vm.compile(relay_ir.parse(LIKE)))
    rng = seeded_rng()
    for batch, like in ((2, (3, 4)), (5, (10, 3))):
        x, y = _rand(rng, batch, 6), _rand(rng, *like)
        got = machine.run(x, y)
        np.testing.assert_allclose(got, interpret(relay_ir.parse(LIKE), x, y), rtol=1e-6)
        np.testing.assert_allclose(got, np.exp(-x).reshape(like), rtol=1e-6)


@pytest.mark.parametrize("allowzero", [0, 1])
def test_zeros_and_minus_1_resolve_as_the_interpreter_resolves_them(allowzero):
    machine = vm.VirtualMachine(vm.compile(_given(allowzero)))
    rng = seeded_rng()
    for batch, shape in ((4, (0, -1, 3)), (2, (3, 2, -1)), (0, (0, 3, 2))):
        if allowzero and 0 in shape and -1 in shape:
            continue  # an error under allowzero (tested below)
        x, s = _rand(rng, batch, 6), np.array(shape, "int64")
        got = machine.run(x, s)
        want = interpret(_given(allowzero), x, s)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_the_result_is_the_same_data_under_the_new_shape_not_a_copy():
    x = _rand(seeded_rng(), 4, 6)
    got = vm.VirtualMachine(vm.compile(_given())).run(x, np.array([2, 3, -1], "int64"))
    assert got.shape == (2, 3, 4) and np.shares_memory(got, x)


@pytest.mark.parametrize("shape, why", [
    ((5, 5, -1), r"newshape \[5, 5, -1\]: 24 is not a multiple of 25"),
    ((-1, 2, -1), r"newshape \[-1, 2, -1\]: more than one -1"),
    ((2, 2, 2), r"newshape \[2, 2, 2\]: the new shape holds 8 elements"),
])
def test_a_new_shape_that_does_not_fit_is_a_runtime_error_naming_dyn_reshape(shape, why):
    machine = vm.VirtualMachine(vm.compile(_given()))
    with pytest.raises(RelayRuntimeError, match=r"^dyn.reshape: cannot reshape data of shape "
                                                 r"\(4, 6\) \(24 elements\) to " + why):
        machine.run(_rand(seeded_rng(), 4, 6), np.array(shape, "int64"))


def test_a_static_reshape_with_question_mark_dims_is_a_reshape_tensor_too():
    text = ("def @main(%x: Tensor[(?, 2, 3), float32]) {"
            " exp(reshape(negative(%x), newshape=[0, -1])) }")
    with relay_ir.transform.PassContext(opt_level=0):  # one op a group: the reshape alone
        exe = vm.compile(relay_ir.parse(text))
    assert [i.mode for i in _reshape_tensors(exe)] == ["dyn"]
    assert not any("reshape" in k.name for k in exe.kernels)
    machine = vm.VirtualMachine(exe)
    rng = seeded_rng()
    for batch in (1, 4):
        x = _rand(rng, batch, 2, 3)
        np.testing.assert_allclose(machine.run(x), np.exp(-x).reshape(batch, 6), rtol=1e-6)


def test_a_saved_dyn_reshape_keeps_its_mode_and_runs_after_loading(tmp_path):
    exe = vm.compile(relay_ir.parse(LIKE))
    exe.save(str(tmp_path))
    loaded = vm.load(str(tmp_path))
    assert loaded.functions == exe.functions
    machine = vm.VirtualMachine(loaded)
    rng = seeded_rng()
    for batch, like in ((3, (9, 2)), (1, (2, 3))):
        x, y = _rand(rng, batch, 6), _rand(rng, *like)
        np.testing.assert_allclose(machine.run(x, y), np.exp(-x).reshape(like), rtol=1e-6)
    with pytest.raises(RelayRuntimeError, match=r"dyn.reshape: cannot reshape data of shape "
                                                 r"\(3, 6\)"):
        machine.run(_rand(rng, 3, 6), _rand(rng, 4, 4))


def test_a_forged_reshape_mode_is_refused_at_load(tmp_path):
    vm.compile(relay_ir.parse(LIKE)).save(str(tmp_path))

    def other_mode(desc):
        for fn in desc["functions"]:
            for ins in fn["instructions"]:
                if ins["op"] == "reshape_tensor":
                    ins["text"] = "numpy"

    _forge(str(tmp_path), other_mode)
    with pytest.raises(RelayError, match=r"\(reshape_tensor\): mode 'numpy' is not one of "
                                         r"'', 'dyn', 'dyn_allowzero'"):
        vm.load(str(tmp_path))
