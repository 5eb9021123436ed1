"""benchmarks.gpu's code paths at tiny sizes on the GPU simulator ("cuda -sim"), against
numpy: the GEMM kernels it tunes and times (tensor cores included), the elementwise chain
with the generic schedule and with injective.cuda, its peak kernels compiled, and the
save / load of a model. Timing needs a GPU: nothing here times anything."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from benchmarks import gpu as bench
from lowering.cuda.compile import compiler
from tests.rng import seeded_rng
from tests.unwritten import unwritten

pytestmark = pytest.mark.skipif(not compiler(), reason="no CUDA compiler (NVRTC or nvcc)")


@pytest.mark.parametrize("template, size, dtype", [("dense.cuda", 24, "float32"),
                                                   ("dense_tensorcore.cuda", 32, "float16")])
def test_the_gemm_kernels_compute_the_product(template: str, size: int, dtype: str) -> None:
    f = bench.gemm_kernel(template, size, dtype, target="cuda -sim")
    rng = seeded_rng()
    a, b = (rng.standard_normal((size, size)).astype(dtype) for _ in range(2))
    out = unwritten((size, size), dtype)
    f(a, b, out)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("template, dtype", [("conv2d_nchw_gemm.cuda", "float32"),
                                             ("conv2d_nchw_tensorcore.cuda", "float16")])
def test_the_conv_kernels_compute_the_convolution(template: str, dtype: str) -> None:
    f = bench.conv_kernel(template, 16, 4, dtype, target="cuda -sim")
    rng = seeded_rng()
    x = rng.standard_normal((1, 16, 4, 4)).astype(dtype)
    w = rng.standard_normal((16, 16, 3, 3)).astype(dtype)
    out = unwritten((1, 16, 4, 4), dtype)
    f(x, w, out)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + 4, j:j + 4],
                         w[:, :, i, j].astype(np.float64)) for i in range(3) for j in range(3))
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3, atol=5e-2)


def test_the_tuned_tensor_core_config_path_builds_from_a_config_of_its_space() -> None:
    from autotune import Task

    task = Task("dense_tensorcore.cuda", [((32, 32), "float16")] * 2, {}, "cuda")
    space = task.config_space()
    cfg = space.get(len(space) - 1)
    f = bench.gemm_kernel("dense_tensorcore.cuda", 32, "float16", cfg, target="cuda -sim")
    rng = seeded_rng()
    a, b = (rng.standard_normal((32, 32)).astype("float16") for _ in range(2))
    out = unwritten((32, 32), "float16")
    f(a, b, out)
    np.testing.assert_allclose(out.astype(np.float64),
                               a.astype(np.float64) @ b.astype(np.float64).T,
                               rtol=2e-3, atol=2e-2)


def test_the_chain_with_the_generic_and_the_injective_schedule_equals_numpy() -> None:
    n = 1024
    task = bench.injective_task(n)
    space = task.config_space()
    a = seeded_rng().standard_normal(n).astype("float32")
    for cfg in (None, space.get(0), space.get(len(space) - 1)):
        f = bench._elementwise(n, chain=True, target="cuda -sim", cfg=cfg)
        out = unwritten((n,), "float32")
        f(a, out)
        np.testing.assert_allclose(out, bench.chain_reference(a), rtol=1e-5, atol=1e-6)


def test_the_injective_task_is_the_one_build_asks_for_such_a_group() -> None:
    from autotune.extract import extract_tasks

    mod = relay_ir.parse("def @main(%x: Tensor[(4096), float32]) { "
                         "subtract(multiply(nn.relu(add(multiply(%x, 2f), 1f)), sigmoid(%x)), "
                         "0.5f) }")
    (task, _), = extract_tasks(mod, "cuda")
    assert task.workload_key == bench.injective_task(4096).workload_key


def test_the_peak_kernels_compile() -> None:
    from lowering.cuda.compile import compile_cuda

    for src, entry in ((bench.PEAK_SRC, "peak_fma"), (bench.PEAK_WMMA_SRC, "peak_wmma")):
        ptx, cubin = compile_cuda(src, "sm_90")
        assert f".entry {entry}" in ptx and cubin[:4] == b"\x7fELF"


def test_save_and_load_gives_the_same_outputs() -> None:
    from tests.relay_ir import programs as P

    lib = relay_ir.build(P.mlp(), target="cuda -sim")
    saved, loaded, diff = bench.save_and_load(lib, P.mlp_inputs(seeded_rng()))
    assert diff == 0.0 and saved >= 0 and loaded >= 0


def test_without_a_gpu_main_says_so_and_exits_2(capsys: pytest.CaptureFixture) -> None:
    from tessel_target.gpu import gpu

    if gpu() is not None:
        pytest.skip("this machine has a GPU")
    assert bench.main(["--quick"]) == 2
    assert "no NVIDIA GPU here" in capsys.readouterr().out


def test_the_peaks_a_section_writes_are_read_back_by_the_next_process(tmp_path) -> None:
    path = str(tmp_path / "peaks.json")
    assert bench._read_peaks(path) == {}  # none yet
    bench._write_peaks(path, {"flops": 5e13, "bw": 4e12, "other": 1.0})
    assert bench._read_peaks(path) == {"flops": 5e13, "bw": 4e12}
    (tmp_path / "peaks.json").write_text("{not json")
    assert bench._read_peaks(path) == {}


def test_an_unknown_section_is_refused_naming_the_known_ones(
        capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--sections", "peak,gemm_tc,nonsense"])
    assert "unknown section(s) nonsense; known: peak, peak_tensor" in capsys.readouterr().err


def test_the_device_script_without_a_gpu_says_so_and_stops(tmp_path) -> None:
    # benchmarks/gpu_check.sh dry-run: the environment written to $OUT, then a clear stop
    import os
    import subprocess
    from pathlib import Path

    from tessel_target.gpu import gpu

    if gpu() is not None:
        pytest.skip("this machine has a GPU")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "OUT": str(tmp_path), "GPU_CHECK_BUDGET": "120"}
    proc = subprocess.run(["bash", str(root / "benchmarks" / "gpu_check.sh")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no NVIDIA GPU found" in proc.stdout
    assert "CUDA compiler:" in (tmp_path / "env.txt").read_text()
    assert "no NVIDIA GPU found" in (tmp_path / "figures.txt").read_text()


def test_the_padded_layers_compute_the_layer_on_both_templates() -> None:
    # benchmarks.gpu's PADDED layers, shrunk: 1x100x40 dense, a 3-channel 7x7/2 stem on 12x12
    from tests.lowering.cuda.test_cuda_tensorcore import _conv_reference

    rng = seeded_rng()
    for name, (_, attrs, tc, plain, _) in bench.PADDED.items():
        dense = "dense" in name
        small = [((1, 40), "float16"), ((100, 40), "float16")] if dense else \
            [((1, 3, 12, 12), "float16"), ((8, 3, 7, 7), "float16")]
        x, w = (rng.standard_normal(shape).astype(dtype) for shape, dtype in small)
        want = x.astype(np.float64) @ w.astype(np.float64).T if dense else \
            _conv_reference(x, w, attrs["padding"], attrs["strides"])
        for template in (tc, plain):
            f = bench.layer_kernel(template, small, attrs, target="cuda -sim")
            out = unwritten(want.shape, "float16")
            f(x, w, out)
            np.testing.assert_allclose(out.astype(np.float64), want, rtol=4e-3, atol=4e-2)
