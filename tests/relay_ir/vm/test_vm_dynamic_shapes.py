"""Groups with `?` dims on the VM: one kernel with symbolic extents serves every batch,
output shapes come from the shape functions, and a wrong run-time shape is caught."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import relay_ir.vm as vm
from relay_ir.vm.dynamic import DynamicKernel
from tessel_errors import RelayRuntimeError
from tests.relay_ir.programs import PROGRAMS_BY_NAME
from tests.rng import seeded_rng


def test_one_symbolic_kernel_per_group_serves_every_batch():
    exe = vm.compile(PROGRAMS_BY_NAME["mlp_dynamic"].build())
    machine = vm.VirtualMachine(exe)
    rng = seeded_rng()
    w = (rng.standard_normal((16, 8)) * 0.3).astype("float32")
    for batch in (1, 3, 8):
        x = rng.standard_normal((batch, 8)).astype("float32")
        got = machine.run(x, w)
        np.testing.assert_allclose(got, np.tanh(x @ w.T).sum(axis=1), rtol=1e-5, atol=1e-5)
    dynamic = [k for k in exe.kernels if isinstance(k, DynamicKernel)]
    assert dynamic, "the ?-batch groups should be dynamic kernels"
    for k in dynamic:
        if k.per_image:  # one batch-1 kernel, run per image (relay_ir.vm.batch_split)
            assert len(k.by_shape) == 1 and not k.by_pattern
        else:
            assert len(k.by_pattern) == 1 and None not in k.by_pattern.values()
            assert not k.by_shape  # nothing compiled for a concrete shape


def _two_batches():
    return vm.VirtualMachine(vm.compile(relay_ir.parse(
        "def @main(%x: Tensor[(?, 3), float32], %y: Tensor[(?, 3), float32]) {"
        " sum(exp(add(%x, %y)), axis=[0]) }")))


def test_two_question_mark_dims_of_one_value_share_a_kernel():
    machine = _two_batches()
    rng = seeded_rng()
    for batch in (2, 6):
        x, y = (rng.standard_normal((batch, 3)).astype("float32") for _ in range(2))
        np.testing.assert_allclose(machine.run(x, y), np.exp(x + y).sum(axis=0), rtol=1e-5)


def test_a_wrong_run_time_shape_names_the_operator_and_the_two_shapes():
    machine = _two_batches()
    x, y = np.ones((4, 3), "float32"), np.ones((5, 3), "float32")
    with pytest.raises(RelayRuntimeError, match=r"add: .*shapes \(4, 3\), \(5, 3\) do not "
                                                r"broadcast"):
        machine.run(x, y)
