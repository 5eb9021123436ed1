"""Saving and loading models built for "cuda" and "cuda -sim": the folder keeps per kernel
the CUDA C, PTX, cubin and loop IR under the manifest's hashes; a loaded simulated model
computes what the built one does (and the interpreter) without NVRTC running; damaged,
inconsistent or foreign folders are refused with a RelayError naming the file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import relay_ir
from lowering.cuda.compile import compiler
from tessel_errors import DeviceError, RelayError
from tests.relay_ir import programs as P
from tests.rng import seeded_rng

pytestmark = pytest.mark.skipif(not compiler(), reason="no CUDA compiler (NVRTC or nvcc)")

CNN = """
def @main(%x: Tensor[(1, 2, 8, 8), float32], %w: Tensor[(4, 2, 3, 3), float32]) {
  %0 = nn.conv2d(%x, %w, padding=[1, 1]);
  %1 = nn.max_pool2d(nn.relu(%0), pool_size=[2, 2], strides=[2, 2]);
  %2 = nn.softmax(reshape(nn.global_avg_pool2d(%1), newshape=[1, 4]));
  (%2, exp(negative(%1)))
}"""


def _cnn_inputs() -> list[np.ndarray]:
    rng = seeded_rng()
    return [rng.standard_normal((1, 2, 8, 8)).astype("float32"),
            rng.standard_normal((4, 2, 3, 3)).astype("float32")]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A "cuda -sim" CNN (conv, pool, softmax, injective groups) saved once."""
    d = tmp_path_factory.mktemp("cuda") / "cnn.tessel"
    relay_ir.build(relay_ir.parse(CNN), target="cuda -sim").save(str(d))
    return d


@pytest.fixture
def folder(saved: Path, tmp_path: Path) -> Path:
    d = tmp_path / "m.tessel"
    d.mkdir()
    for f in saved.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    return d


@pytest.fixture
def no_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVRTC and nvcc must not run: loading uses what was saved."""
    from lowering.cuda import compile as C

    def refuse(*_a, **_k):
        raise AssertionError("the CUDA compiler ran while loading")
    monkeypatch.setattr(C, "_with_nvrtc", refuse)
    monkeypatch.setattr(C, "_with_nvcc", refuse)
    C.compile_cuda.cache_clear()


def _rehash(folder: Path) -> None:
    manifest = json.loads((folder / "manifest.json").read_text())
    for name in manifest["files"]:
        data = (folder / name).read_bytes()
        manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(),
                                   "size": len(data)}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _load_fails(folder: Path, match: str) -> None:
    with pytest.raises(RelayError, match=match):
        relay_ir.load_compiled(str(folder))


def _agree(a, b) -> None:
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)


def test_a_loaded_simulated_model_computes_what_the_built_one_does(
        saved: Path, no_compiler: None) -> None:
    mod = relay_ir.parse(CNN)
    ins = _cnn_inputs()
    lib = relay_ir.load_compiled(str(saved))
    assert lib.target == "cuda -sim"
    _agree(lib.run(*ins), relay_ir.interpret(mod, *ins))
    assert dict(lib.group_schedules)["fused_max_pool2d"] == "pool2d.cuda"


@pytest.mark.parametrize("name", ["mlp", "transformer_block"])
def test_models_round_trip_on_the_simulator(name: str, tmp_path: Path) -> None:
    mod = getattr(P, name)()
    ins = getattr(P, name + "_inputs")(seeded_rng())
    lib = relay_ir.build(mod, target="cuda -sim")
    lib.save(str(tmp_path / "m.tessel"))
    np.testing.assert_array_equal(relay_ir.load_compiled(str(tmp_path / "m.tessel")).run(*ins),
                                  lib.run(*ins))


def test_the_folder_holds_cuda_c_ptx_cubin_and_loop_ir_under_the_manifests_hashes(
        saved: Path) -> None:
    manifest = json.loads((saved / "manifest.json").read_text())
    model = json.loads((saved / "model.json").read_text())
    assert manifest["target"] == model["target"] == "cuda -sim"
    for k, kd in enumerate(model["kernels"]):
        assert (kd["source"], kd["ptx"], kd["cubin"], kd["loop_ir"]) == (
            f"kernel_{k}.cu", f"kernel_{k}.ptx", f"kernel_{k}.cubin", f"kernel_{k}.ir.json")
        assert kd["arch"] == "sm_90"
        for key in ("source", "ptx", "cubin", "loop_ir"):
            data = (saved / kd[key]).read_bytes()
            assert manifest["files"][kd[key]]["sha256"] == hashlib.sha256(data).hexdigest()
        assert 'extern "C" __global__' in (saved / kd["source"]).read_text()
        assert ".target sm_90" in (saved / kd["ptx"]).read_text()
        assert (saved / kd["cubin"]).read_bytes()[:4] == b"\x7fELF"


def test_a_model_for_the_gpu_loads_without_compiling_and_needs_a_gpu_to_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lowering.cuda import driver

    mod = relay_ir.parse(CNN)
    lib = relay_ir.build(mod, target="cuda -arch=sm_80")
    lib.save(str(tmp_path / "gpu.tessel"))
    from lowering.cuda import compile as C

    monkeypatch.setattr(C, "_with_nvrtc", lambda *a: pytest.fail("NVRTC ran at load"))
    monkeypatch.setattr(C, "_with_nvcc", lambda *a: pytest.fail("nvcc ran at load"))
    C.compile_cuda.cache_clear()
    monkeypatch.setattr(driver, "gpu", lambda: None)
    loaded = relay_ir.load_compiled(str(tmp_path / "gpu.tessel"))
    for a, b in zip(lib.plan.kernels, loaded.plan.kernels):
        assert (a.kernel.source, a.kernel.ptx, a.kernel.cubin) == \
            (b.kernel.source, b.kernel.ptx, b.kernel.cubin)
        assert b.kernel.program.arch == "sm_80"
    with pytest.raises(DeviceError, match="cuda -sim"):
        loaded.run(*_cnn_inputs())


def test_a_gpu_older_than_the_code_is_refused_at_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lowering.cuda import driver
    from tessel_target.gpu import Gpu

    relay_ir.build(P.mlp(), target="cuda -arch=sm_90").save(str(tmp_path / "m.tessel"))
    monkeypatch.setattr(driver, "gpu", lambda: Gpu(0, "Old GPU", (7, 5), 12000))
    _load_fails(tmp_path / "m.tessel", r"holds GPU code for sm_90; this GPU \(Old GPU\) is "
                                       r"sm_75: compile the model for it")


def test_the_gpu_image_is_the_cubin_of_its_arch_else_the_ptx(saved: Path) -> None:
    k = relay_ir.load_compiled(str(saved)).plan.kernels[0].kernel
    assert k.module_image("sm_90") == k.cubin
    assert k.module_image("sm_100") == k.ptx.encode() + b"\0"


# --- damaged and inconsistent folders ---------------------------------------------------

def test_cuda_c_with_a_flipped_byte_is_refused_by_its_hash(folder: Path) -> None:
    data = bytearray((folder / "kernel_0.cu").read_bytes())
    data[100] ^= 1
    (folder / "kernel_0.cu").write_bytes(bytes(data))
    _load_fails(folder, r"kernel_0\.cu' is damaged: its SHA-256 differs")


def test_rehashed_cuda_c_unlike_the_loop_ir_is_refused(folder: Path) -> None:
    src = (folder / "kernel_0.cu").read_text()
    (folder / "kernel_0.cu").write_text(src.replace("threadIdx.x", "threadIdx.y", 1))
    _rehash(folder)
    _load_fails(folder, r"kernel_0\.cu' differs from the CUDA C generated from "
                        r"kernel_0\.ir\.json")


def test_rehashed_ptx_of_another_kernel_is_refused(folder: Path) -> None:
    (folder / "kernel_0.ptx").write_bytes((folder / "kernel_1.ptx").read_bytes())
    _rehash(folder)
    _load_fails(folder, r"kernel_0\.ptx': the PTX defines no kernel '\w+', which the loop "
                        "IR launches")


def test_rehashed_ptx_for_another_architecture_is_refused(folder: Path) -> None:
    ptx = (folder / "kernel_0.ptx").read_text()
    (folder / "kernel_0.ptx").write_text(ptx.replace(".target sm_90", ".target sm_80"))
    _rehash(folder)
    _load_fails(folder, r"PTX for sm_80, the kernel is for sm_90")


def test_rehashed_cubin_that_is_not_elf_is_refused(folder: Path) -> None:
    (folder / "kernel_1.cubin").write_bytes(b"not a cubin")
    _rehash(folder)
    _load_fails(folder, r"kernel_1\.cubin' is not a cubin")


def test_rehashed_loop_ir_with_a_wrong_reference_is_refused_naming_the_node(
        folder: Path) -> None:
    doc = json.loads((folder / "kernel_0.ir.json").read_text())
    k = next(k for k, row in enumerate(doc["nodes"]) if row[0] == "BufferStore")
    doc["nodes"][k][2] = k  # the stored value: the store itself, not an expression
    (folder / "kernel_0.ir.json").write_text(json.dumps(doc))
    _rehash(folder)
    _load_fails(folder, rf"kernel_0\.ir\.json': node {k} \(BufferStore\.value\): expected "
                        "the index of an earlier node")


def test_rehashed_loop_ir_with_an_unknown_class_is_refused(folder: Path) -> None:
    doc = json.loads((folder / "kernel_0.ir.json").read_text())
    doc["nodes"][0][0] = "os.system"
    (folder / "kernel_0.ir.json").write_text(json.dumps(doc))
    _rehash(folder)
    _load_fails(folder, r"node 0: unknown node class 'os.system'")


def test_rehashed_loop_ir_with_other_parameter_shapes_is_refused(folder: Path) -> None:
    model = json.loads((folder / "model.json").read_text())
    model["kernels"][0]["loop_ir"], model["kernels"][1]["loop_ir"] = \
        model["kernels"][1]["loop_ir"], model["kernels"][0]["loop_ir"]
    (folder / "model.json").write_text(json.dumps(model))
    _rehash(folder)
    _load_fails(folder, r"the kernel's parameters are .*; model.json calls it with")


def test_rehashed_model_json_naming_a_missing_kernel_file_is_refused(folder: Path) -> None:
    model = json.loads((folder / "model.json").read_text())
    model["kernels"][0]["ptx"] = "kernel_9.ptx"
    (folder / "model.json").write_text(json.dumps(model))
    _rehash(folder)
    _load_fails(folder, r"kernels\[0\]\.ptx 'kernel_9\.ptx' is not a kernel file the "
                        "manifest lists")


def test_rehashed_model_json_with_a_cpu_kernel_entry_is_refused_by_the_schema(
        folder: Path) -> None:
    model = json.loads((folder / "model.json").read_text())
    model["kernels"][0] = {"name": "k", "entry": "k", "object": "kernel_0.o",
                           "num_threads_symbol": "a", "launch_symbol": "b", "messages": [],
                           "specs": []}
    (folder / "model.json").write_text(json.dumps(model))
    _rehash(folder)
    _load_fails(folder, r"kernels\[0\]: missing key\(s\) 'arch', 'source', 'ptx', 'loop_ir'")


def test_rehashed_kernel_arch_unlike_the_targets_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "m.tessel"
    relay_ir.build(P.mlp(), target="cuda -arch=sm_90 -sim").save(str(d))
    model = json.loads((d / "model.json").read_text())
    model["kernels"][0]["arch"] = "sm_80"
    (d / "model.json").write_text(json.dumps(model))
    _rehash(d)
    _load_fails(d, r"kernels\[0\] is for sm_80, the target says sm_90")
