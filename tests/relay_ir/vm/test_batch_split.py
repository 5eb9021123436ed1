"""relay_ir.vm.batch_split: which `?`-batch groups run once per image with the batch-1
kernel, and that doing so gives the symbolic kernel's results."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import relay_ir.vm as vm
from relay_ir.transform.infer_type import InferType
from relay_ir.vm.batch_split import per_image
from tests.rng import seeded_rng


def _main(text: str):
    return InferType()(relay_ir.parse(text))["main"]


@pytest.mark.parametrize("body, expected", [
    ("nn.softmax(%x, axis=1)", True),
    ("nn.softmax(%x, axis=0)", False),
    ("sum(%x, axis=[1])", True),
    ("sum(%x, axis=[0])", False),
    ("nn.relu(add(%x, %x))", True),
    ("reshape(%x, newshape=[-1])", False),
    ("reshape(%x, newshape=[0, 2, 2])", True),
    ("reshape(%x, newshape=[-1, 2])", False),
])
def test_an_op_runs_per_image_only_when_it_keeps_images_apart(body, expected):
    fn = _main(f"def @main(%x: Tensor[(?, 4), float32]) {{ {body} }}")
    assert per_image(fn) is expected


def test_a_group_with_a_question_mark_past_the_batch_is_not_split():
    fn = _main("def @main(%x: Tensor[(2, ?), float32]) { exp(%x) }")
    assert not per_image(fn)


def test_a_question_mark_batch_cnn_on_the_vm_matches_build_at_several_batches():
    text = """
def @main(%x: Tensor[(B, 3, 8, 8), float32], %w: Tensor[(8, 3, 3, 3), float32],
          %d: Tensor[(5, 8), float32]) {
  let %a = nn.relu(nn.conv2d(%x, %w, padding=[1, 1], channels=8, kernel_size=[3, 3]));
  nn.dense(mean(%a, axis=[2, 3]), %d)
}
"""
    rng = seeded_rng()
    params = {"w": rng.standard_normal((8, 3, 3, 3)).astype("float32"),
              "d": rng.standard_normal((5, 8)).astype("float32")}
    machine = vm.VirtualMachine(vm.compile(relay_ir.parse(text.replace("B", "?")),
                                           params=params))
    for batch in (1, 3, 0):
        x = rng.standard_normal((batch, 3, 8, 8)).astype("float32")
        lib = relay_ir.build(relay_ir.parse(text.replace("B", str(batch))), params=params) \
            if batch else None
        got = machine.run(x)
        assert got.shape == (batch, 5)
        if lib is not None:
            np.testing.assert_allclose(got, lib.run(x=x), rtol=1e-5, atol=1e-5)


def test_equal_groups_with_weights_of_their_own_each_use_their_own_weight():
    # the two convs are one group (structurally equal) and so share one kernel; each
    # call's weight is a different constant, packed for it alone (a ResNet stage's convs)
    text = """
def @main(%x: Tensor[(?, 8, 6, 6), float32], %w1: Tensor[(8, 8, 3, 3), float32],
          %w2: Tensor[(8, 8, 3, 3), float32]) {
  %0 = nn.relu(nn.conv2d(%x, %w1, padding=[1, 1]));
  nn.relu(nn.conv2d(%0, %w2, padding=[1, 1]))
}
"""
    from relay_ir.backend.pipeline import bind_params

    rng = seeded_rng()
    params = {k: (rng.standard_normal((8, 8, 3, 3)) * 0.2).astype("float32")
              for k in ("w1", "w2")}
    mod = relay_ir.parse(text)
    machine = vm.VirtualMachine(vm.compile(mod, params=params))
    for batch in (2, 1, 2):
        x = rng.standard_normal((batch, 8, 6, 6)).astype("float32")
        want = relay_ir.interpret(bind_params(mod, params), x=x)
        np.testing.assert_allclose(machine.run(x), want, rtol=1e-4, atol=1e-4)


def test_one_per_image_plan_serves_every_batch_size():
    text = "def @main(%x: Tensor[(?, 8, 6, 6), float32]) { nn.relu(nn.max_pool2d(%x)) }"
    exe = vm.compile(relay_ir.parse(text))
    machine = vm.VirtualMachine(exe)
    rng = seeded_rng()
    for batch in (1, 3, 2, 0):
        x = rng.standard_normal((batch, 8, 6, 6)).astype("float32")
        np.testing.assert_array_equal(machine.run(x), np.maximum(x, 0))
    (kernel,) = [k for k in exe.kernels if k.per_image]
    assert len(kernel.plans) == 1 and len(kernel.by_shape) == 1


@pytest.mark.filterwarnings("ignore:fused group fused_add_exp compiles per input shape")
def test_a_batch_of_one_broadcast_against_a_larger_batch_runs_the_symbolic_kernel():
    # the per-image plan made for equal batches must not run on unequal ones
    text = """
def @main(%x: Tensor[(?, 3), float32], %y: Tensor[(?, 3), float32]) { exp(add(%x, %y)) }
"""
    machine = vm.VirtualMachine(vm.compile(relay_ir.parse(text)))
    rng = seeded_rng()
    for bx, by in ((4, 4), (1, 4), (4, 1), (2, 2)):
        x = rng.standard_normal((bx, 3)).astype("float32")
        y = rng.standard_normal((by, 3)).astype("float32")
        np.testing.assert_allclose(machine.run(x, y), np.exp(x + y), rtol=1e-5, atol=1e-6)


def test_a_strided_input_runs_per_image_as_a_contiguous_copy_would():
    text = "def @main(%x: Tensor[(?, 3), float32]) { exp(%x) }"
    machine = vm.VirtualMachine(vm.compile(relay_ir.parse(text)))
    x = seeded_rng().standard_normal((4, 6)).astype("float32")
    np.testing.assert_allclose(machine.run(x[:, ::2]), np.exp(x[:, ::2]), rtol=1e-6)
    np.testing.assert_allclose(machine.run(x[::2, :3]), np.exp(x[::2, :3]), rtol=1e-6)


def test_a_shared_per_image_kernel_called_on_a_memmap_uses_each_calls_weight(tmp_path):
    # a memmap (an ndarray subclass) has no plan signature of its own: were plans keyed
    # by "no signature", the second weight's call would run with the first one's packing
    from relay_ir.vm.dynamic import DynamicKernel

    text = """
def @main(%x: Tensor[(?, 8, 6, 6), float32], %w: Tensor[(8, 8, 3, 3), float32]) {
  nn.conv2d(%x, %w, padding=[1, 1])
}
"""
    rng = seeded_rng()
    w1, w2 = ((rng.standard_normal((8, 8, 3, 3)) * 0.2).astype("float32") for _ in "12")
    exe = vm.compile(relay_ir.parse(text), params={"w": w1})
    (kernel,) = [k for k in exe.kernels if isinstance(k, DynamicKernel)]
    x = rng.standard_normal((2, 8, 6, 6)).astype("float32")
    mapped = np.lib.format.open_memmap(str(tmp_path / "x.npy"), "w+", "float32", x.shape)
    mapped[:] = x
    known = {id(w): w.ctypes.data for w in (w1, w2)}  # both the executable's constants
    for w in (w1, w2, w1):
        (got,) = kernel([mapped, w, None], known)
        want = relay_ir.interpret(relay_ir.parse(text), x=x, w=w)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
