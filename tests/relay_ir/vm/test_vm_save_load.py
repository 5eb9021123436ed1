"""exe.save / relay_ir.vm.load: round trips of every corpus program, a `?`-dim model at two
batch sizes after loading, and damaged or forged folders refused with the file named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import relay_ir.vm as vm
from relay_ir.backend.artifact_manifest import write_manifest
from relay_ir.interpreter import interpret
from tessel_errors import RelayError, RelayRuntimeError
from tests.relay_ir.programs import PROGRAMS, PROGRAMS_BY_NAME, assert_values_close
from tests.rng import seeded_rng


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_a_loaded_executable_runs_as_the_interpreter(program, tmp_path):
    exe = vm.compile(program.build())
    exe.save(str(tmp_path))
    loaded = vm.load(str(tmp_path))
    assert str(loaded.bytecode) == str(exe.bytecode)
    args = program.inputs(seeded_rng())
    assert_values_close(vm.VirtualMachine(loaded).run(*args), interpret(program.build(), *args),
                        program.rtol, program.atol, where=program.name)


def test_a_model_with_a_batch_dim_of_question_mark_saves_and_runs_at_two_batches(tmp_path):
    p = PROGRAMS_BY_NAME["mlp_dynamic"]
    vm.compile(p.build()).save(str(tmp_path))
    machine = vm.VirtualMachine(vm.load(str(tmp_path)))
    rng = seeded_rng()
    w = (rng.standard_normal((16, 8)) * 0.3).astype("float32")
    for batch in (1, 5):
        x = rng.standard_normal((batch, 8)).astype("float32")
        got = machine.run(x, w)
        assert got.shape == (batch,)
        np.testing.assert_allclose(got, np.tanh(x @ w.T).sum(axis=1), rtol=1e-5, atol=1e-5)


def test_the_gradual_shape_check_names_the_operator_and_both_shapes():
    machine = vm.VirtualMachine(vm.compile(PROGRAMS_BY_NAME["gradual_checked"].build()))
    x = np.ones((2, 4), "float32")  # the dense's weight is (16, 3): dim 1 must be 3
    with pytest.raises(RelayRuntimeError, match=r"nn\.dense.*expected shape \(\?, 3\), got a "
                                                r"value of shape \(2, 4\)"):
        machine.run(x, np.ones((16, 3), "float32"))


def _saved(tmp_path) -> str:
    vm.compile(PROGRAMS_BY_NAME["loop"].build()).save(str(tmp_path))
    return str(tmp_path)


def test_a_damaged_file_is_refused_naming_it(tmp_path):
    path = _saved(tmp_path)
    with open(os.path.join(path, "vm.json"), "ab") as f:
        f.write(b" ")
    with pytest.raises(RelayError, match=r"vm\.json.*damaged"):
        vm.load(path)


def _forge(path: str, change) -> None:
    """Rewrite vm.json with `change` applied and re-hash the folder (as a forger would)."""
    name = os.path.join(path, "vm.json")
    with open(name) as f:
        desc = json.load(f)
    change(desc)
    with open(name, "w") as f:
        json.dump(desc, f)
    files = {n: Path(path, n).read_bytes() for n in os.listdir(path) if n != "manifest.json"}
    write_manifest(path, files, desc["target"])


def test_a_register_out_of_range_is_refused_before_running(tmp_path):
    path = _saved(tmp_path)

    def bad_register(desc):
        desc["functions"][1]["num_registers"] = 2

    _forge(path, bad_register)
    with pytest.raises(RelayError, match=r"vm\.json.*@loop: instruction \d+ .*a register "
                                         r"outside 0\.\.1"):
        vm.load(path)


def test_a_jump_outside_the_function_is_refused(tmp_path):
    path = _saved(tmp_path)

    def bad_jump(desc):
        for ins in desc["functions"][1]["instructions"]:
            if ins["op"] == "if":
                ins["ints"][2] = 1000

    _forge(path, bad_jump)
    with pytest.raises(RelayError, match=r"a jump outside the function"):
        vm.load(path)


def test_an_unknown_opcode_is_refused_by_the_schema(tmp_path):
    path = _saved(tmp_path)

    def bad_op(desc):
        desc["functions"][0]["instructions"][0]["op"] = "exec"

    _forge(path, bad_op)
    with pytest.raises(RelayError, match=r"vm\.json.*instructions\[0\]\.op"):
        vm.load(path)


def test_a_build_artifact_is_not_a_vm_executable(tmp_path):
    import relay_ir

    relay_ir.build(PROGRAMS_BY_NAME["mlp"].build()).save(str(tmp_path))
    with pytest.raises(RelayError, match=r"not a saved VM executable"):
        vm.load(str(tmp_path))
