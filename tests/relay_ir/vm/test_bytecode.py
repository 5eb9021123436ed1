"""The executable's bytecode: readable text, kernels shared between identical groups, and
a profile naming kernels and functions."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import relay_ir
import relay_ir.vm as vm
from relay_ir.vm import bytecode as B
from tests.relay_ir.programs import PROGRAMS_BY_NAME
from tests.relay_ir.vm.helpers import prelude_main
from tests.rng import seeded_rng


def test_printed_bytecode_shows_every_function_one_instruction_a_line():
    exe = vm.compile(PROGRAMS_BY_NAME["loop"].build())
    text = str(exe.bytecode)
    assert text.splitlines()[0] == "fn @main(%0, %1) [3 registers]"
    assert "  0: invoke func=1 args=(%0, %1) dst=%2 tail  # @loop" in text
    loop = exe.functions[exe.function_index["loop"]]
    assert len([ln for ln in str(loop).splitlines() if ":" in ln]) == len(loop.instructions)
    assert "invoke_packed kernel=" in text and "# fused_less" in text


def test_a_match_compiles_to_tag_tests_and_field_reads():
    exe = vm.compile(prelude_main("0"))
    length = exe.functions[exe.function_index["length"]]
    kinds = {type(i) for i in length.instructions}
    assert {B.GetTag, B.LoadConsti, B.If, B.GetField, B.Fatal} <= kinds


def test_identical_groups_compile_to_one_kernel():
    # three tanh over tensors of one shape: one kernel called three times
    mod = prelude_main("(tanh(%a), tanh(%b), tanh(add(%a, %b)))",
                       "%a: Tensor[(4,), float32], %b: Tensor[(4,), float32]")
    exe = vm.compile(mod)
    calls = [i.kernel for f in exe.functions for i in f.instructions
             if isinstance(i, B.InvokePacked)]
    names = [exe.kernels[k].name for k in calls]
    assert names.count("fused_tanh") == 2
    assert len({k for k, n in zip(calls, names) if n == "fused_tanh"}) == 1


def test_instructions_are_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        B.Move(0, 1).dst = 2  # type: ignore[misc]


def test_profile_times_every_kernel_and_function():
    exe = vm.compile(PROGRAMS_BY_NAME["loop"].build())
    prof = vm.VirtualMachine(exe).profile(np.int32(5), np.ones(3, "float32"))
    assert {r.group for r in prof.kernels.rows} == {"fused_less", "fused_subtract",
                                                    "fused_multiply_add"}
    assert {r.group for r in prof.functions.rows} == {"main", "loop"}
    assert prof.calls == {"main": 1, "loop": 6}
    assert "fused_multiply_add" in str(prof)


def test_profile_counts_every_executed_instruction():
    exe = vm.compile(relay_ir.parse("def @main(%x: Tensor[(3,), float32]) {"
                                    " exp(negative(%x)) }"))
    straight_line = len(exe.functions[exe.function_index["main"]].instructions)
    prof = vm.VirtualMachine(exe).profile(np.ones(3, "float32"))
    assert prof.instructions == straight_line


def test_a_group_that_only_reshapes_is_a_reshape_tensor_of_the_same_data():
    mod = relay_ir.parse("def @main(%x: Tensor[(2, 3, 4), float32], %w: Tensor[(5, 12), "
                         "float32]) { nn.dense(reshape(%x, newshape=[2, 12]), %w) }")
    exe = vm.compile(mod)
    kinds = [type(i) for i in exe.functions[0].instructions]
    assert B.ReshapeTensor in kinds
    assert [exe.kernels[i.kernel].name for i in exe.functions[0].instructions
            if isinstance(i, B.InvokePacked)] == ["fused_dense"]
    rng = seeded_rng()
    x, w = rng.standard_normal((2, 3, 4)).astype("float32"), \
        rng.standard_normal((5, 12)).astype("float32")
    np.testing.assert_allclose(vm.VirtualMachine(exe).run(x, w), x.reshape(2, 12) @ w.T,
                               rtol=1e-5, atol=1e-5)


def test_shape_of_and_reshape_tensor_run_as_written():
    # a hand-written function: a view to a shape held in a register (the compiler's
    # ReshapeTensors read constant shapes)
    from relay_ir.vm.compiler import Executable

    code = (B.ShapeOf(0, 1), B.LoadConst(0, 2), B.ReshapeTensor(0, 2, 3),
            B.AllocADT(B.TUPLE_TAG, (1, 3), 4), B.Ret(4))
    fn = B.Function("main", 1, code, 5)
    exe = Executable(B.Bytecode((fn,)), [np.asarray([3, 2], "int64")], [], [],
                     {"main": [("x", "tensor", (None, None), "float32")]}, "llvm",
                     {"main": 0})
    x = seeded_rng().standard_normal((2, 3)).astype("float32")
    shape, y = vm.VirtualMachine(exe).run(x)
    np.testing.assert_array_equal(shape, np.asarray([2, 3], "int64"))
    np.testing.assert_array_equal(y, x.reshape(3, 2))
