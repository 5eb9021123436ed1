"""GPU benchmark: Tessel's CUDA kernels as fractions of the GPU's own peak, measured by this
script on the same GPU in the same run (CUDA events, medians of repeats after warm-up).

    python -m benchmarks.gpu                 # everything; GEMM tuned with 256 trials
    python -m benchmarks.gpu --quick         # a few minutes: 32 trials, batch 1 only
    python -m benchmarks.gpu --quick --sections peak,gemm_tc --peaks peaks.json
                                             # some sections; the peaks shared by a file
                                             # (benchmarks/gpu_check.sh runs each section
                                             # in its own process, under its own timeout)

1. peak fp32 FLOP/s: a kernel of independent FMA chains; peak bandwidth: a copy kernel;
   peak tensor-core FLOP/s: independent 16x16x16 warp matrix multiply-accumulates
   (nvcuda::wmma, float16 in, float32 accumulate: the instruction dense_tensorcore.cuda
   uses);
2. GEMM 4096^3 fp32 and fp16 (dense.cuda, tuned on this GPU; target for fp32: >= 60% of
   the measured peak), and fp16 on tensor cores (dense_tensorcore.cuda, tuned, as a
   fraction of the tensor-core peak);
3. a ResNet-18 conv layer (64 -> 64, 3x3, 56x56), untuned, as an implicit GEMM (build's
   default on a GPU) and direct, so the run shows which is faster before tuning, and in
   float16 as an implicit GEMM on tensor cores;
3b. float16 layers whose GEMM is not in tiles of 16 (the classifier's 1x1000x512 dense,
   ResNet-50's 3-channel stem), untuned, on tensor cores (padded) and with the plain
   template;
4. a fused elementwise chain over 64M floats (target >= 80% of the measured bandwidth),
   with the generic schedule and with injective.cuda tuned on this GPU;
5. ResNet-18 end to end, batch 1 and 16; at batch 1 also the model saved and loaded back
   (no NVRTC at load: the cubins), its load time and that it computes the same.

Peers in the same run, where torch with CUDA is installed (the GPU machine's image has it):
cuBLAS through torch.matmul (TF32 off) for the GEMMs, cuDNN through torch.conv2d for the
conv layer, and the same ResNet-18 ONNX graph as a torch module (benchmarks.onnx_torch) on
the GPU; each line prints Tessel's time over the peer's.

Needs an NVIDIA GPU; without one it says so and exits with status 2. The fp16 GEMM of
dense.cuda sums in fp32 on the FMA units; its fraction is of the fp32 FMA peak. The
kernels are built by functions that take the target, so tests/benchmarks/test_gpu_bench.py
runs them at tiny sizes on "cuda -sim" against numpy, on machines without a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

PEAK_SRC = r"""
extern "C" __global__ void peak_fma(float* out, int iters) {
  float a0 = threadIdx.x, a1 = a0 + 1, a2 = a0 + 2, a3 = a0 + 3;
  float a4 = a0 + 4, a5 = a0 + 5, a6 = a0 + 6, a7 = a0 + 7;
  const float b = 0.999f, c = 0.001f;
  for (int i = 0; i < iters; ++i) {
    a0 = fmaf(a0, b, c); a1 = fmaf(a1, b, c); a2 = fmaf(a2, b, c); a3 = fmaf(a3, b, c);
    a4 = fmaf(a4, b, c); a5 = fmaf(a5, b, c); a6 = fmaf(a6, b, c); a7 = fmaf(a7, b, c);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}
"""


PEAK_WMMA_SRC = r"""
#include <mma.h>
extern "C" __global__ void peak_wmma(float* out, int iters) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c[8];
  wmma::fill_fragment(a, __float2half(0.001f));
  wmma::fill_fragment(b, __float2half(0.001f));
  for (int k = 0; k < 8; ++k) wmma::fill_fragment(c[k], 0.0f);
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int k = 0; k < 8; ++k) wmma::mma_sync(c[k], a, b, c[k]);
  }
  for (int k = 1; k < 8; ++k)
    for (int e = 0; e < c[0].num_elements; ++e) c[0].x[e] += c[k].x[e];
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  wmma::store_matrix_sync(out + warp * 256, c[0], 16, wmma::mem_row_major);
}
"""


def _events(ctx: Any, work: Callable[[], None], repeat: int) -> float:
    work()
    ctx.synchronize()
    return statistics.median(ctx.elapsed(work) for _ in range(repeat))


def peak_flops(repeat: int) -> float:
    """fp32 FLOP/s of 8 independent FMA chains per thread over many blocks."""
    import ctypes

    from lowering.cuda import arch_of, driver
    from lowering.cuda.compile import compile_cuda
    from tessel_target import Target

    ctx = driver.Context.get()
    _, cubin = compile_cuda(PEAK_SRC, arch_of(Target.parse("cuda")))
    fn = ctx.function(ctx.load_module(cubin), "peak_fma")
    blocks, threads, iters = 132 * 64, 256, 4096
    out = ctx.alloc(blocks * threads * 4)
    args = [ctypes.c_uint64(out), ctypes.c_int32(iters)]
    t = _events(ctx, lambda: ctx.launch(fn, (blocks, 1, 1), (threads, 1, 1), args), repeat)
    ctx.free(out)
    return 2.0 * 8 * iters * blocks * threads / t


def peak_tensor_flops(repeat: int) -> float:
    """FLOP/s of 8 independent 16x16x16 warp matrix multiply-accumulates per warp (float16
    in, float32 accumulate) over many blocks."""
    import ctypes

    from lowering.cuda import arch_of, driver
    from lowering.cuda.compile import compile_cuda
    from tessel_target import Target

    ctx = driver.Context.get()
    _, cubin = compile_cuda(PEAK_WMMA_SRC, arch_of(Target.parse("cuda")))
    fn = ctx.function(ctx.load_module(cubin), "peak_wmma")
    blocks, threads, iters = 132 * 16, 256, 2048
    out = ctx.alloc(blocks * threads // 32 * 256 * 4)
    args = [ctypes.c_uint64(out), ctypes.c_int32(iters)]
    t = _events(ctx, lambda: ctx.launch(fn, (blocks, 1, 1), (threads, 1, 1), args), repeat)
    ctx.free(out)
    return 2.0 * 16 ** 3 * 8 * iters * blocks * (threads // 32) / t


def chain_compute(n: int, chain: bool) -> tuple[Any, Any]:
    """(A, B): the benchmark's elementwise chain over `n` floats, or a copy."""
    import tensor_expr as te

    A = te.placeholder((n,), name="A")
    if chain:
        B = te.compute((n,), lambda i: te.max(A[i] * 2.0 + 1.0, 0.0) * te.sigmoid(A[i]) - 0.5,
                       name="B")
    else:
        B = te.compute((n,), lambda i: A[i], name="B")
    return A, B


def chain_reference(a: np.ndarray) -> np.ndarray:
    """numpy's value of the chain."""
    return np.maximum(a * 2 + 1, 0) * (1 / (1 + np.exp(-a))) - 0.5


def injective_task(n: int, target: str = "cuda") -> Any:
    """The tuning task injective.cuda gives a group of one input and one output of `n`
    floats (what relay_ir.build asks for the chain as a fused group)."""
    from autotune import Task

    return Task("injective.cuda", [((n,), "float32")], {"outputs": [[[n], "float32"]]},
                target, name="injective")


def _elementwise(n: int, chain: bool, target: str = "cuda", cfg: Any = None) -> Any:
    """The chain (or a copy) built with the generic GPU schedule, or with injective.cuda
    and `cfg` (a ConfigEntity of injective_task, or a FallbackConfig) when one is given."""
    import lowering
    from schedule import create_schedule
    from schedule.templates import get_template
    from schedule.templates.cuda_generic import schedule_gpu_generic

    A, B = chain_compute(n, chain)
    if cfg is None:
        s = schedule_gpu_generic(create_schedule(B), [B], threads=256)
    else:
        s = get_template("injective.cuda").schedule(cfg, [B])
    return lowering.build(s, [A, B], target=target)


def bandwidth(repeat: int, n: int = 64 << 20) -> float:
    """Bytes per second of a copy kernel (read + write) over `n` floats."""
    from lowering.cuda import to_device

    f = _elementwise(n, chain=False)
    a = to_device(np.ones(n, "float32"))
    b = to_device(np.zeros(n, "float32"))
    return 2 * 4 * n / f.time(a, b, number=5, repeat=repeat)


def fused_chain(repeat: int, n: int = 64 << 20, cfg: Any = None) -> float:
    """Bytes per second of a fused max/sigmoid/arith chain (one read, one write), with the
    generic schedule or injective.cuda at `cfg`."""
    from lowering.cuda import to_device

    f = _elementwise(n, chain=True, cfg=cfg)
    a = to_device(np.random.default_rng(0).standard_normal(n).astype("float32"))
    b = to_device(np.zeros(n, "float32"))
    return 2 * 4 * n / f.time(a, b, number=5, repeat=repeat)


def tune_best(task: Any, trials: int) -> Any:
    """The best config of `task` after `trials` measurements on this GPU (XGBoost tuner, a
    throwaway database), or None when no candidate ran."""
    import tempfile

    from autotune import LocalRunner, XGBTuner, tune
    from tuning_logs import TuningDatabase

    with tempfile.TemporaryDirectory() as tmp, TuningDatabase(f"{tmp}/gpu.db") as db:
        with LocalRunner(timeout=30, check_trials=2) as runner:
            tune(task, XGBTuner(task), trials, db, runner, early_stopping=max(32, trials // 2))
        found = db.best(task.workload_key, task.target, task.device_key)
    return task.config_from_json(found[0].config) if found else None


def gemm_kernel(template: str, size: int, dtype: str, cfg: Any = None,
                target: str = "cuda") -> Any:
    """`template` (dense.cuda, dense_tensorcore.cuda) built at size^3 for `target`, with
    `cfg` (None: its fallback)."""
    import lowering
    from schedule.templates import instantiate

    args = [((size, size), dtype), ((size, size), dtype)]
    s, tensors = instantiate(template, args, cfg=cfg, target="cuda")
    return lowering.build(s, tensors, target=target)


def tuned_gemm(size: int, trials: int, repeat: int, dtype: str = "float32",
               template: str = "dense.cuda") -> tuple[float, str]:
    """FLOP/s of `template` at size^3 after `trials` measurements, and the best config."""
    from autotune import Task
    from lowering.cuda import to_device

    task = Task(template, [((size, size), dtype), ((size, size), dtype)], {}, "cuda")
    cfg = tune_best(task, trials)
    f = gemm_kernel(template, size, dtype, cfg)
    rng = np.random.default_rng(0)
    dev = [to_device(rng.standard_normal((size, size)).astype(dtype)) for _ in range(2)]
    dev.append(to_device(np.zeros((size, size), dtype)))
    t = f.time(*dev, number=3, repeat=repeat)
    return 2.0 * size ** 3 / t, str(cfg.to_json() if cfg is not None else "fallback")


def conv_kernel(template: str, channels: int, size: int, dtype: str = "float32",
                target: str = "cuda") -> Any:
    """`template` built for a channels -> channels 3x3 conv (padding 1, batch 1) on a
    size x size image, default config, for `target`."""
    import lowering
    from schedule.templates import instantiate

    args = [((1, channels, size, size), dtype), ((channels, channels, 3, 3), dtype)]
    s, tensors = instantiate(template, args, {"padding": 1}, target="cuda")
    return lowering.build(s, tensors, target=target)


def conv_layer(repeat: int, template: str, dtype: str = "float32") -> float:
    """FLOP/s of ResNet-18's 64->64 3x3 conv at 56x56 (batch 1) through `template`
    (conv2d_nchw_gemm.cuda, the implicit GEMM build uses by default, conv2d_nchw.cuda,
    direct, or conv2d_nchw_tensorcore.cuda in float16), default config."""
    from lowering.cuda import to_device

    kernel = conv_kernel(template, 64, 56, dtype)
    rng = np.random.default_rng(0)
    dev = [to_device(rng.standard_normal(shape).astype(dtype))
           for shape in ((1, 64, 56, 56), (64, 64, 3, 3))]
    dev.append(to_device(np.zeros((1, 64, 56, 56), dtype)))
    t = kernel.time(*dev, number=5, repeat=repeat)
    return 2.0 * 64 * 56 * 56 * 64 * 9 / t


# float16 layers whose GEMM is not in tiles of 16, which the tensor-core templates pad:
# name -> (args, attrs, tensor-core template, plain template, FLOP)
PADDED = {
    "classifier dense 1x1000x512": ([((1, 512), "float16"), ((1000, 512), "float16")], {},
                                    "dense_tensorcore.cuda", "dense.cuda",
                                    2.0 * 1000 * 512),
    "ResNet-50 stem conv 3->64 7x7/2 @224": (
        [((1, 3, 224, 224), "float16"), ((64, 3, 7, 7), "float16")],
        {"padding": 3, "strides": 2}, "conv2d_nchw_tensorcore.cuda", "conv2d_nchw_gemm.cuda",
        2.0 * 64 * 112 * 112 * 3 * 49),
}


def layer_kernel(template: str, args: list[Any], attrs: dict[str, Any],
                 target: str = "cuda") -> Any:
    """`template` built for these args and attrs, default config, for `target`."""
    import lowering
    from schedule.templates import instantiate

    s, tensors = instantiate(template, args, attrs, target="cuda")
    return lowering.build(s, tensors, target=target)


def padded_layers(repeat: int) -> str:
    """Each PADDED layer on tensor cores (padded to tiles of 16) and with the plain
    template, untuned: microseconds and the plain one's time over the tensor cores'."""
    from lowering.cuda import to_device

    parts = []
    rng = np.random.default_rng(0)
    for name, (args, attrs, tc, plain, flop) in PADDED.items():
        times = {}
        for template in (tc, plain):
            f = layer_kernel(template, args, attrs)
            dev = [to_device(rng.standard_normal(shape).astype(dtype)) for shape, dtype in args]
            out = f.func.params[-1]
            dev.append(to_device(np.zeros(tuple(int(d.value) for d in out.shape),
                                          out.dtype)))
            times[template] = f.time(*dev, number=5, repeat=repeat)
        parts.append(f"{name}: tensor cores {times[tc] * 1e6:.1f} us "
                     f"({flop / times[tc] / 1e12:.2f} TFLOP/s), {plain} "
                     f"{times[plain] * 1e6:.1f} us, plain / tensor cores = "
                     f"{times[plain] / times[tc]:.2f}")
    return " | ".join(parts)


def torch_cuda() -> Any:
    """torch, when it is installed and sees a GPU; else None (the peers are then skipped)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def torch_seconds(fn: Callable[[], Any], repeat: int, number: int = 3) -> float:
    """Median seconds of `fn` on the GPU, by CUDA events around `number` calls."""
    torch = torch_cuda()
    fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        runs.append(start.elapsed_time(end) / 1e3 / number)
    return statistics.median(runs)


def torch_gemm(size: int, repeat: int, dtype: str = "float32") -> float | None:
    """FLOP/s of cuBLAS (torch.matmul, TF32 off) at size^3, or None without torch."""
    torch = torch_cuda()
    if torch is None:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(size, size, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn(size, size, device="cuda", dtype=getattr(torch, dtype))
    return 2.0 * size ** 3 / torch_seconds(lambda: torch.matmul(a, b.T), repeat)


def torch_conv(repeat: int) -> float | None:
    """FLOP/s of cuDNN on the benchmark's conv layer (TF32 off), or None without torch."""
    torch = torch_cuda()
    if torch is None:
        return None
    torch.backends.cudnn.allow_tf32 = False
    x = torch.randn(1, 64, 56, 56, device="cuda")
    w = torch.randn(64, 64, 3, 3, device="cuda")
    t = torch_seconds(lambda: torch.nn.functional.conv2d(x, w, padding=1), repeat)
    return 2.0 * 64 * 56 * 56 * 64 * 9 / t


def torch_resnet18(batch: int, repeat: int) -> float | None:
    """torch's seconds per batch for the same ResNet-18 graph on the GPU, timed as Tessel's
    is (wall clock around input in, run, output out), or None without torch."""
    torch = torch_cuda()
    if torch is None:
        return None
    from benchmarks.onnx_torch import to_torch
    from tests.e2e import onnx_models

    net = to_torch(onnx_models.resnet18()).cuda().eval()
    x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224)).astype("float32")

    def run() -> np.ndarray:
        with torch.inference_mode():
            return net(torch.from_numpy(x).cuda()).cpu().numpy()

    run()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def _versus(mine: float, peer: float | None, what: str) -> str:
    """' (x.xx of <peer>)' — Tessel's throughput over the peer's — or why there is none."""
    if peer is None:
        return f"; no {what} figure (torch with CUDA not installed)"
    return f"; {what} {peer / 1e12:.2f} TFLOP/s, Tessel / {what} = {mine / peer:.2f}"


def resnet18(batch: int, repeat: int) -> tuple[float, Any, np.ndarray]:
    """Tessel's seconds per batch for ResNet-18 (inputs copied in, outputs out, per run),
    the compiled model and the input it ran."""
    import relay_ir
    from relay_ir.frontend.onnx import from_onnx
    from tests.e2e import onnx_models

    model = onnx_models.resnet18()
    mod, params = from_onnx(model, shape={model.graph.input[0].name: (batch, 3, 224, 224)})
    lib = relay_ir.build(mod, target="cuda", params=params)
    x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224)).astype("float32")
    lib.run(x)
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        lib.run(x)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs), lib, x


def save_and_load(lib: Any, inputs: list[np.ndarray]) -> tuple[float, float, float]:
    """(seconds to save, seconds to load back, the largest difference between the loaded
    model's outputs and the built one's) for a compiled model, through a throwaway
    folder."""
    import tempfile

    import relay_ir

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        lib.save(f"{tmp}/model.tessel")
        t1 = time.perf_counter()
        loaded = relay_ir.load_compiled(f"{tmp}/model.tessel")
        t2 = time.perf_counter()
    want, got = lib.run(*inputs), loaded.run(*inputs)
    pairs = zip(want, got) if isinstance(want, tuple) else [(want, got)]
    diff = max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
               for a, b in pairs)
    return t1 - t0, t2 - t1, diff


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark sections; each prints its figures or why it failed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="32 tuning trials, batch 1 only")
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--gemm-size", type=int, default=4096)
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help=f"which sections, comma-separated, in this order: {','.join(SECTIONS)}")
    ap.add_argument("--peaks", metavar="JSON",
                    help="a file the peak sections write their figures to and the others "
                         "read them from (for runs of one section per process)")
    ap.add_argument("--figures", metavar="FILE",
                    help="also append each section's line to this file")
    opts = ap.parse_args(argv)
    wanted = [w.strip() for w in opts.sections.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    from tessel_target.gpu import gpu

    found = gpu()
    if found is None:
        print("benchmarks.gpu: no NVIDIA GPU here (no libcuda or no device); nothing to "
              "measure. The CUDA code itself is checked in CI by the simulator.")
        return 2
    trials = 32 if opts.quick else opts.trials
    print(f"GPU: {found.name} ({found.arch}), driver {found.driver_version}")
    results: dict[str, float] = _read_peaks(opts.peaks)

    def section(name: str, fn: Callable[[], str]) -> None:
        t0 = time.perf_counter()
        try:
            line = f"{name}: {fn()}  [{time.perf_counter() - t0:.0f} s]"
        except Exception as e:  # one failing section must not hide the others' figures
            line = f"{name}: FAILED {type(e).__name__}: {e}"
            traceback.print_exc(limit=3)
        print(line, flush=True)
        if opts.figures:
            with open(opts.figures, "a") as f:
                f.write(line + "\n")

    def peak() -> str:
        results["flops"] = peak_flops(opts.repeat)
        results["bw"] = bandwidth(opts.repeat)
        _write_peaks(opts.peaks, results)
        return (f"{results['flops'] / 1e12:.1f} TFLOP/s fp32, "
                f"{results['bw'] / 1e9:.0f} GB/s copy")

    def peak_tensor() -> str:
        results["tensor"] = peak_tensor_flops(opts.repeat)
        _write_peaks(opts.peaks, results)
        return f"{results['tensor'] / 1e12:.1f} TFLOP/s fp16 x fp16 + fp32 (wmma mma_sync)"

    def gemm() -> str:
        flops, cfg = tuned_gemm(opts.gemm_size, trials, opts.repeat)
        frac = flops / results["flops"] if "flops" in results else float("nan")
        return (f"{opts.gemm_size}^3 {flops / 1e12:.2f} TFLOP/s = {frac:.0%} of peak "
                f"(target >= 60%) after {trials} trials"
                + _versus(flops, torch_gemm(opts.gemm_size, opts.repeat), "cuBLAS")
                + f"; best config {cfg}")

    def gemm16() -> str:
        flops, cfg = tuned_gemm(opts.gemm_size, trials, opts.repeat, "float16")
        frac = flops / results["flops"] if "flops" in results else float("nan")
        return (f"{opts.gemm_size}^3 {flops / 1e12:.2f} TFLOP/s = {frac:.0%} of the fp32 "
                f"FMA peak after {trials} trials"
                + _versus(flops, torch_gemm(opts.gemm_size, opts.repeat, "float16"),
                          "cuBLAS fp16")
                + f"; best config {cfg}")

    def gemm_tc() -> str:
        flops, cfg = tuned_gemm(opts.gemm_size, trials, opts.repeat, "float16",
                                "dense_tensorcore.cuda")
        frac = flops / results["tensor"] if "tensor" in results else float("nan")
        return (f"{opts.gemm_size}^3 {flops / 1e12:.2f} TFLOP/s = {frac:.0%} of the "
                f"tensor-core peak after {trials} trials"
                + _versus(flops, torch_gemm(opts.gemm_size, opts.repeat, "float16"),
                          "cuBLAS fp16")
                + f"; best config {cfg}")

    def conv() -> str:
        peer = torch_conv(opts.repeat)
        parts = []
        for template in ("conv2d_nchw_gemm.cuda", "conv2d_nchw.cuda"):
            flops = conv_layer(opts.repeat, template)
            frac = flops / results["flops"] if "flops" in results else float("nan")
            parts.append(f"{template} untuned {flops / 1e12:.3f} TFLOP/s = {frac:.1%} of "
                         "peak" + _versus(flops, peer, "cuDNN"))
        flops = conv_layer(opts.repeat, "conv2d_nchw_tensorcore.cuda", "float16")
        frac = flops / results["tensor"] if "tensor" in results else float("nan")
        parts.append(f"float16 conv2d_nchw_tensorcore.cuda untuned {flops / 1e12:.3f} "
                     f"TFLOP/s = {frac:.1%} of the tensor-core peak")
        return " | ".join(parts)

    def chain() -> str:
        bw = fused_chain(opts.repeat)
        frac = bw / results["bw"] if "bw" in results else float("nan")
        n = 64 << 20
        cfg = tune_best(injective_task(n), min(trials, 64))
        tuned = fused_chain(opts.repeat, n, cfg) if cfg is not None else float("nan")
        tfrac = tuned / results["bw"] if "bw" in results else float("nan")
        return (f"generic {bw / 1e9:.0f} GB/s = {frac:.0%} of copy bandwidth; injective.cuda "
                f"tuned ({min(trials, 64)} trials) {tuned / 1e9:.0f} GB/s = {tfrac:.0%} "
                f"(target >= 80%), config {cfg.to_json() if cfg is not None else None}")

    def model(batch: int) -> str:
        mine, lib, x = resnet18(batch, opts.repeat)
        peer = torch_resnet18(batch, opts.repeat)
        versus = ("; no torch figure (torch with CUDA not installed)" if peer is None else
                  f"; torch eager {peer * 1e3:.2f} ms, Tessel / torch = {mine / peer:.2f}")
        if batch == 1:
            saved, loaded, diff = save_and_load(lib, [x])
            versus += (f"; saved in {saved:.1f} s, loaded in {loaded:.2f} s (no NVRTC), "
                       f"max |loaded - built| = {diff:.1e}")
        return f"{mine * 1e3:.1f} ms" + versus

    runs = {"peak": ("peak", peak), "peak_tensor": ("peak tensor cores", peak_tensor),
            "gemm": ("GEMM fp32", gemm), "gemm16": ("GEMM fp16 (fp32 accumulation)", gemm16),
            "gemm_tc": ("GEMM fp16 on tensor cores", gemm_tc),
            "conv": ("ResNet-18 conv 64x64x3x3 @56", conv),
            "padded": ("float16 layers padded to tensor-core tiles, untuned",
                       lambda: padded_layers(opts.repeat)),
            "chain": ("fused elementwise chain", chain),
            "resnet18": ("ResNet-18 batch 1", lambda: model(1)),
            "resnet18_16": ("ResNet-18 batch 16", lambda: model(16))}
    for key in wanted:
        if key == "resnet18_16" and opts.quick:
            continue
        section(*runs[key])
    return 0


# the sections of main, in their order (--sections picks some)
SECTIONS = ("peak", "peak_tensor", "gemm", "gemm16", "gemm_tc", "conv", "padded", "chain",
            "resnet18", "resnet18_16")


def _read_peaks(path: str | None) -> dict[str, float]:
    """The peak figures an earlier run wrote to `path` (none when absent or unreadable)."""
    import json
    import os

    if not path or not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if k in ("flops", "bw", "tensor")} \
        if isinstance(data, dict) else {}


def _write_peaks(path: str | None, results: dict[str, float]) -> None:
    import json

    if path:
        with open(path, "w") as f:
            json.dump({k: results[k] for k in ("flops", "bw", "tensor") if k in results}, f)


if __name__ == "__main__":
    sys.exit(main())
