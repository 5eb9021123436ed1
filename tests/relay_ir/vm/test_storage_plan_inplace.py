"""In-place outputs in the VM's storage plan (relay_ir.vm.storage_plan, `inplace`): a
static kernel's output takes the bytes of an input temporary read there for the last
time where the kernel's loop IR allows it (relay_ir.backend.inplace), never otherwise; a
ResNet run by the VM so equals the graph executor and the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import relay_ir.vm as vm
from relay_ir.backend.pipeline import bind_params
from relay_ir.frontend.onnx import from_onnx
from relay_ir.vm import bytecode as B
from relay_ir.vm.storage_plan import plan_storage
from tests.e2e import onnx_models
from tests.rng import seeded_rng


def _tensor_of(fn: B.Function) -> dict[int, tuple[int, int]]:
    """(storage register, offset) of every AllocTensor's register."""
    return {i.dst: (i.storage, i.offset) for i in fn.instructions
            if isinstance(i, B.AllocTensor)}


def _arena_bytes(fn: B.Function) -> int:
    return fn.instructions[0].size


@pytest.fixture(scope="module")
def resnet():
    m = onnx_models.resnet18(image=32, width=8, classes=10)
    mod, params = from_onnx(m)
    return mod, params, m.graph.input[0].name


def test_residual_convs_write_over_their_residual_and_equal_the_graph_executor(
        resnet, monkeypatch: pytest.MonkeyPatch) -> None:
    mod, params, name = resnet
    exe = vm.compile(mod, params=params)
    fn = exe.functions[0]
    where = _tensor_of(fn)
    residual = [i for i in fn.instructions if isinstance(i, B.InvokePacked)
                and exe.kernels[i.kernel].name.endswith("add_add_relu")]
    assert len(residual) == 8  # two per stage
    # each writes its output at the bytes of its residual input (the next-to-last slot)
    assert all(where[i.args[-2]] == where[i.args[-1]] for i in residual)

    x = seeded_rng().standard_normal((1, 3, 32, 32)).astype("float32")
    machine = vm.VirtualMachine(exe)
    got = machine.run(x)
    want = relay_ir.interpret(bind_params(mod, params), **{name: x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    lib = relay_ir.build(mod, target="llvm", params=params)
    np.testing.assert_allclose(got, lib.run(**{name: x}), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(machine.run(x), got)  # a second run: the same

    monkeypatch.setenv("TESSEL_PLAN_INPLACE", "0")
    apart = vm.compile(mod, params=params)
    assert _arena_bytes(apart.functions[0]) > _arena_bytes(fn)
    np.testing.assert_array_equal(vm.VirtualMachine(apart).run(x), got)


def _chain(extra: tuple[B.Instruction, ...] = (), twice: bool = False) -> B.Function:
    """Two kernel calls over 64-byte tensors: %2 = k(%0), %4 = k(%2[, %2]), then `extra`,
    then %4 returned."""
    args = (2, 2, 4) if twice else (2, 4)
    code = (B.AllocStorage(64, 64, 1), B.AllocTensor(1, 0, (16,), "float32", 2),
            B.InvokePacked(0, 2, 1, (0, 2)),
            B.AllocStorage(64, 64, 3), B.AllocTensor(3, 0, (16,), "float32", 4),
            B.InvokePacked(1, len(args), 1, args), *extra,
            B.AllocStorage(64, 64, 5), B.AllocTensor(5, 0, (16,), "float32", 6),
            B.InvokePacked(0, 2, 1, (4, 6)), B.Ret(6))
    return B.Function("f", 1, code, 8)


def _shares(fn: B.Function, pairs) -> bool:
    where = _tensor_of(plan_storage(fn, lambda k: True, inplace=lambda k: pairs))
    return where[2] == where[4]


def test_an_output_takes_a_dying_input_s_bytes_only_where_the_kernel_allows_it() -> None:
    assert _shares(_chain(), [(0, 1)])
    assert not _shares(_chain(), [])
    assert not _shares(_chain(), None)  # unknown (a dynamic or interpreted kernel)
    assert not _shares(_chain(), [(1, 0)])  # not (input, output)


def test_an_input_read_again_later_or_twice_by_the_kernel_is_not_written_over() -> None:
    later = (B.AllocStorage(64, 64, 7), B.AllocTensor(7, 0, (16,), "float32", 7),
             B.InvokePacked(0, 2, 1, (2, 7)))
    assert not _shares(_chain(later), [(0, 1)])
    assert not _shares(_chain(twice=True), [(0, 2), (1, 2)])


def test_an_input_of_another_shape_is_not_written_over() -> None:
    fn = _chain()
    code = list(fn.instructions)
    code[1] = B.AllocTensor(1, 0, (4, 4), "float32", 2)  # 64 bytes, another shape
    assert not _shares(B.Function("f", 1, tuple(code), 8), [(0, 1)])


BRANCHES = """def @main(%x: Tensor[(4, 16), float32], %w: Tensor[(16, 16), float32], %n: int32) {
  let %r = nn.relu(nn.dense(%x, %w));
  let %a = nn.dense(%r, %w);
  if (less(%n, 1)) {
    let %b = nn.relu(add(nn.dense(%a, %w), %r));
    nn.dense(%b, %w)
  } else {
    let %c = negative(%a);
    let %d = add(nn.dense(%c, %w), %r);
    nn.dense(%d, %w)
  }
}"""


def test_residuals_in_either_branch_of_an_if_are_written_over_and_equal_the_interpreter():
    mod = relay_ir.parse(BRANCHES)
    exe = vm.compile(mod)
    fn = exe.functions[0]
    where = _tensor_of(fn)
    # the dense + add of each branch over its residual %r, the negative over its input
    over = [i for i in fn.instructions if isinstance(i, B.InvokePacked)
            and where.get(i.args[-1]) is not None
            and any(where.get(a) == where[i.args[-1]] for a in i.args[:-1])]
    assert sorted(exe.kernels[i.kernel].name for i in over) == \
        ["fused_dense_add", "fused_dense_add_relu", "fused_negative"]
    rng = seeded_rng()
    x = rng.standard_normal((4, 16)).astype("float32")
    w = (rng.standard_normal((16, 16)) * 0.3).astype("float32")
    machine = vm.VirtualMachine(exe)
    for n in (0, 1):
        want = relay_ir.interpret(mod, x, w, np.int32(n))
        np.testing.assert_allclose(machine.run(x, w, np.int32(n)), want, rtol=1e-4, atol=1e-5)
