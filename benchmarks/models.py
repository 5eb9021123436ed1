"""Batch-1 latency of ResNet-18, ResNet-50, MobileNetV2 and ResNeXt-26 (grouped convs)
with Tessel's default schedules (relay_ir.build, no tuning; also with layout propagation
off, "tessel NCHW") beside ONNX Runtime (and torch if installed): medians of repeats after
warm-up, ratios printed, the load average before each model.

    python -m benchmarks.models                      # all four at 224x224
    python -m benchmarks.models --models resnet18 --repeat 5

ResNet-18 and MobileNetV2 are built with onnx.helper and random weights
(tests/e2e/onnx_models.py); ResNet-50 is the onnx wheel's light_resnet50 graph with
random weights in place of its constant ones.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import relay_ir
from lowering.kernel import num_threads
from relay_ir.frontend.onnx import from_onnx


def _model(name: str) -> Any:
    import onnx

    from tests.e2e import onnx_models

    if name == "resnet18":
        return onnx_models.resnet18()
    if name == "mobilenet_v2":
        return onnx_models.mobilenet_v2()
    if name == "resnext26":  # the grouped-conv model: 32 groups in every 3x3 conv
        return onnx_models.resnext26()
    if name == "resnet50":
        path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data",
                            "light", "light_resnet50.onnx")
        return onnx_models.randomize_constant_weights(onnx.load(path))
    raise SystemExit(f"unknown model {name!r}; choose resnet18, resnet50, mobilenet_v2, "
                     "resnext26")


def median_seconds(fn: Callable[[], Any], repeat: int, warmup: int = 2) -> float:
    """Median wall time of `fn()` over `repeat` calls after `warmup` calls."""
    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def ort_session(model: Any, threads: int) -> Any:
    """An ONNX Runtime CPU session of `model` on `threads` intra-op threads, run sequentially.

        >>> sess = ort_session(onnx_model, 2); y = sess.run(None, feeds)[0]  # doctest: +SKIP
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want|.

        >>> relative_error(np.array([1.0, 2.1]), np.array([1.0, 2.0]))  # doctest: +ELLIPSIS
        0.05...
    """
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def bench(name: str, repeat: int, pause: float) -> dict[str, float]:
    """Seconds per inference of one model with Tessel, ONNX Runtime (and torch)."""
    model = _model(name)
    print(f"\n{name}: load average {os.getloadavg()[0]:.2f}")
    t0 = time.perf_counter()
    mod, params = from_onnx(model)
    lib = relay_ir.build(mod, params=params)
    print(f"  tessel build: {time.perf_counter() - t0:.1f} s, {len(lib.plan.steps)} kernel "
          f"calls, {lib.kernels_compiled} kernels compiled, memory plan peak "
          f"{lib.memory_plan.peak_bytes / 2**20:.1f} MiB of "
          f"{lib.memory_plan.total_bytes / 2**20:.1f} MiB intermediates")
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in lib.input_specs}
    with relay_ir.transform.PassContext(disabled_pass=["AlterOpLayout"]):
        nchw = relay_ir.build(mod, params=params)
    print(f"  layout changes: {len(lib.layout_changes)} (NCHW between convs: "
          f"{len(nchw.layout_changes)})")
    out: dict[str, float] = {}
    out["tessel"] = median_seconds(lambda: lib.run(**feeds), repeat)
    out["tessel NCHW"] = median_seconds(lambda: nchw.run(**feeds), repeat)
    time.sleep(pause)  # let the other runtime's idle workers settle (FACTS.md)
    sess = ort_session(model, num_threads())
    out["onnxruntime"] = median_seconds(lambda: sess.run(None, feeds), repeat)
    want = sess.run(None, feeds)[0]
    got = lib.run(**feeds)
    err = relative_error(got, want)
    print(f"  relative error vs onnxruntime: {err:.2e}")
    try:
        import torch  # noqa: F401
        print("  torch is installed but this benchmark has no torch port of the models yet")
    except ImportError:
        print("  torch: not installed")
    for k, v in out.items():
        ratio = v / out["onnxruntime"]
        print(f"  {k:<12} {v * 1e3:8.2f} ms   {ratio:5.2f}x onnxruntime")
    return out


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run the benchmark and print figures; returns seconds per model and runtime."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+",
                    default=["resnet18", "resnet50", "mobilenet_v2", "resnext26"])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--pause", type=float, default=0.3)
    args = ap.parse_args(argv)
    print(f"batch 1, 224x224, threads {num_threads()}")
    return {m: bench(m, args.repeat, args.pause) for m in args.models}


if __name__ == "__main__":
    main()
