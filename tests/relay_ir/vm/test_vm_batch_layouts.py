"""A `?`-batch model on the VM runs on its batch-1 copy's layout plan (relay_ir.vm.layouts):
each group's per-image kernel is the static model's kernel, values between convs stay
blocked, the data is packed once at the stem and unpacked once at the output, and the
results equal the interpreter's and the graph executor's at every batch. Functions the
plan cannot cover (control flow, an op without a kernel strategy, two `?` batches) keep
every value logical."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import relay_ir
import relay_ir.vm as vm
from benchmarks.vm_static import question_mark_batch
from relay_ir import transform as T
from relay_ir.backend.pipeline import bind_params
from relay_ir.frontend.onnx import from_onnx
from relay_ir.vm.dynamic import DynamicKernel
from relay_ir.vm.kernels import StaticKernel
from tests.e2e import onnx_models
from tests.rng import seeded_rng


def _resnet(batch: str = "?") -> tuple[object, dict, str]:
    m = onnx_models.resnet18(image=32, width=8, classes=10)
    mod, params = from_onnx(question_mark_batch(m) if batch == "?" else m)
    return mod, params, m.graph.input[0].name


def _specs(kernels: list) -> set[tuple]:
    return {(k.name, tuple(map(tuple, k.in_specs)), tuple(map(tuple, k.out_specs)))
            for k in kernels}


def _image_kernels(exe: vm.Executable) -> list[StaticKernel]:
    """The batch-1 kernels the executable's `?`-batch groups compiled so far."""
    return [s for k in exe.kernels if isinstance(k, DynamicKernel) for s in k.by_shape.values()]


def _blocked_groups(exe: vm.Executable) -> int:
    return sum(1 for k in exe.kernels if isinstance(k, DynamicKernel) and k.layout is not None)


def test_a_question_mark_batch_model_matches_the_interpreter_and_the_graph_executor():
    mod, params, inp = _resnet()
    exe = vm.compile(mod, params=params)
    machine = vm.VirtualMachine(exe)
    lib = relay_ir.build(mod, params=params)  # compiles per input shape at its first run
    bound = bind_params(mod, params)
    rng = seeded_rng()
    for batch in (1, 2, 3):
        x = rng.standard_normal((batch, 3, 32, 32)).astype("float32")
        got = np.asarray(machine.run(**{inp: x}))
        assert got.shape == (batch, 10)
        want = np.asarray(relay_ir.interpret(bound, **{inp: x}))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got, np.asarray(lib.run(**{inp: x})), rtol=1e-4, atol=1e-4)
        # images are independent: image b alone gives row b
        np.testing.assert_allclose(np.asarray(machine.run(**{inp: x[-1:]})), got[-1:],
                                   rtol=1e-5, atol=1e-5)
    assert _blocked_groups(exe) >= 10


def test_the_per_image_kernels_are_the_static_models_kernels():
    mod, params, inp = _resnet()
    exe = vm.compile(mod, params=params)
    vm.VirtualMachine(exe).run(**{inp: np.zeros((2, 3, 32, 32), "float32")})
    static_mod, static_params, _ = _resnet(batch="1")
    static = vm.compile(static_mod, params=static_params)
    ours = _specs(_image_kernels(exe))
    assert ours == _specs([k for k in static.kernels if isinstance(k, StaticKernel)])
    assert sum(1 for _, _, outs in ours for s, _ in outs if len(s) == 5) >= 5


def _layout_changes(kernels: list[StaticKernel]) -> tuple[int, int]:
    """(kernels taking only logical images and writing a blocked one, kernels taking a
    blocked image and writing only logical ones): where values change layout between
    kernels (a conv's own packing of a logical input, within one kernel, counts once)."""
    def blocked(specs: list) -> bool:
        return any(len(s) == 5 for s, _ in specs)

    def data(k: StaticKernel) -> list:  # the inputs but the weights packed at compile time
        return [sp for i, sp in enumerate(k.in_specs) if i not in k.group.prepack]

    packs = sum(1 for k in kernels if blocked(k.out_specs) and not blocked(data(k)))
    unpacks = sum(1 for k in kernels if blocked(data(k)) and not blocked(k.out_specs))
    return packs, unpacks


def test_the_data_changes_layout_once_at_the_input_and_once_at_the_output():
    mod, params, inp = _resnet()
    exe = vm.compile(mod, params=params)
    vm.VirtualMachine(exe).run(**{inp: np.zeros((3, 3, 32, 32), "float32")})
    assert _layout_changes(_image_kernels(exe)) == (1, 1)


def test_alter_op_layout_disabled_keeps_a_question_mark_batch_model_logical():
    mod, params, inp = _resnet()
    with T.PassContext(opt_level=3, disabled_pass=["AlterOpLayout"]):
        exe = vm.compile(mod, params=params)
    x = seeded_rng().standard_normal((2, 3, 32, 32)).astype("float32")
    got = vm.VirtualMachine(exe).run(**{inp: x})
    assert _blocked_groups(exe) == 0
    assert _layout_changes(_image_kernels(exe)) == (0, 0)
    want = relay_ir.interpret(bind_params(mod, params), **{inp: x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_saved_question_mark_batch_model_keeps_its_layouts(tmp_path: Path):
    mod, params, inp = _resnet()
    exe = vm.compile(mod, params=params)
    exe.save(str(tmp_path / "m"))
    loaded = vm.load(str(tmp_path / "m"))
    assert _blocked_groups(loaded) == _blocked_groups(exe) >= 10
    x = seeded_rng().standard_normal((2, 3, 32, 32)).astype("float32")
    np.testing.assert_array_equal(vm.VirtualMachine(loaded).run(**{inp: x}),
                                  vm.VirtualMachine(exe).run(**{inp: x}))


def _check_logical(text: str, args: dict, batches=(1, 2, 3), **params):
    """Compile `text` with `params` bound; no group is blocked, and every batch's result
    is the interpreter's."""
    mod = relay_ir.parse(text)
    exe = vm.compile(mod, params=params)
    assert _blocked_groups(exe) == 0
    machine = vm.VirtualMachine(exe)
    rng = seeded_rng()
    for batch in batches:
        feeds = {k: rng.standard_normal((batch, *shape)).astype("float32")
                 for k, shape in args.items()}
        want = relay_ir.interpret(bind_params(mod, params), **feeds)
        np.testing.assert_allclose(machine.run(**feeds), want, rtol=1e-4, atol=1e-4)


def _weight() -> np.ndarray:
    return (seeded_rng().standard_normal((32, 32, 3, 3)) * 0.1).astype("float32")


def test_a_question_mark_batch_function_with_control_flow_keeps_every_value_logical():
    text = """
def @main(%x: Tensor[(?, 32, 6, 6), float32], %w: Tensor[(32, 32, 3, 3), float32]) {
  %0 = nn.relu(nn.conv2d(%x, %w, padding=[1, 1]));
  %1 = nn.relu(nn.conv2d(%0, %w, padding=[1, 1]));
  if (less(sum(%1), 0f)) { negative(%1) } else { nn.relu(nn.conv2d(%1, %w, padding=[1, 1])) }
}
"""
    _check_logical(text, {"x": (32, 6, 6)}, w=_weight())


def test_a_question_mark_batch_group_without_a_kernel_strategy_keeps_every_value_logical():
    # with SimplifyInference off, nn.batch_norm (no kernel strategy) is an interpreted
    # group: a blocked value must not reach it, so the function is not planned
    text = """
def @main(%x: Tensor[(?, 32, 6, 6), float32], %w: Tensor[(32, 32, 3, 3), float32],
          %g: Tensor[(32,), float32]) {
  %0 = nn.relu(nn.conv2d(%x, %w, padding=[1, 1]));
  %1 = nn.relu(nn.conv2d(%0, %w, padding=[1, 1]));
  %2 = nn.batch_norm(%1, %g, %g, %g, add(%g, 2f));
  nn.relu(nn.conv2d(%2.0, %w, padding=[1, 1]))
}
"""
    g = seeded_rng().random(32).astype("float32")
    with T.PassContext(disabled_pass=["SimplifyInference"]):
        _check_logical(text, {"x": (32, 6, 6)}, w=_weight(), g=g)


def test_two_question_mark_batch_inputs_keep_every_value_logical():
    # two `?` batches may differ at run time (one of them 1, broadcast): no batch-1 plan
    text = """
def @main(%x: Tensor[(?, 32, 6, 6), float32], %y: Tensor[(?, 32, 6, 6), float32],
          %w: Tensor[(32, 32, 3, 3), float32]) {
  %0 = nn.relu(nn.conv2d(%x, %w, padding=[1, 1]));
  nn.relu(nn.conv2d(add(%0, %y), %w, padding=[1, 1]))
}
"""
    _check_logical(text, {"x": (32, 6, 6), "y": (32, 6, 6)}, batches=(1, 2), w=_weight())


@pytest.mark.parametrize("batch", [0, 2])
def test_a_blocked_question_mark_batch_conv_chain_matches_the_interpreter(batch: int):
    text = """
def @main(%x: Tensor[(?, 32, 6, 6), float32], %w: Tensor[(32, 32, 3, 3), float32]) {
  %0 = nn.relu(nn.conv2d(%x, %w, padding=[1, 1]));
  %1 = nn.relu(nn.conv2d(%0, %w, padding=[1, 1]));
  add(nn.conv2d(%1, %w, padding=[1, 1]), %0)
}
"""
    mod, w = relay_ir.parse(text), _weight()
    exe = vm.compile(mod, params={"w": w})
    assert _blocked_groups(exe) >= 2
    x = seeded_rng().standard_normal((batch, 32, 6, 6)).astype("float32")
    got = vm.VirtualMachine(exe).run(x=x)
    assert got.shape == (batch, 32, 6, 6)
    if batch:
        want = relay_ir.interpret(bind_params(mod, {"w": w}), x=x)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_blocked_group_with_its_per_image_run_off_says_to_disable_alter_op_layout():
    from tessel_errors import RelayRuntimeError

    mod, params, inp = _resnet()
    machine = vm.VirtualMachine(vm.compile(mod, params=params))
    for k in machine.exe.kernels:
        if isinstance(k, DynamicKernel):
            k.per_image = False  # symbolic-extent kernels read NCHW, not the blocked plan
    x = seeded_rng().standard_normal((2, 3, 32, 32)).astype("float32")
    with pytest.raises(RelayRuntimeError, match="per_image = False.*AlterOpLayout disabled"):
        machine.run(**{inp: x})
