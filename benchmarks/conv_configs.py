"""One conv, several configs of conv2d_NCHWc.x86 side by side: each config built in the
layouts a model runs it in (data NCHW[x]c as the previous conv wrote it, packed weight,
NCHWc out; 64-byte aligned arrays), timed in interleaved rounds (the best of the rounds:
on a shared machine the fastest round is the one least disturbed), next to ONNX Runtime
on the same conv as a one-node model (NCHW in and out, its own reorders included).
Each config's output is checked against ONNX Runtime's first.

    python -m benchmarks.conv_configs 512 7 512 3 1                  # the default config
    python -m benchmarks.conv_configs 512 7 512 3 1 '{"tile_ic": [-1, 2]}' \\
        '{"acc_scope": "tile", "tile_ic": [-1, 16]}'                  # knob overrides
    python -m benchmarks.conv_configs 64 56 64 3 1 --target "llvm -mcpu=haswell" --block 8
    python -m benchmarks.conv_configs 2048 7 512 1 1 --cold-weights 256

With --cold-weights MIB each call reads another copy of the packed weight (copies
totalling MIB), as in a model whose weights outgrow the caches and stream from memory:
ResNet-50's 1x1 convs at 7x7 (4-8 MiB of weights) took 1.4x their warm-cache time inside
the model, and the same with rotated copies. ONNX Runtime then runs a session per copy
(each packs its own weight once), their pool threads not spinning (idle ones would take
the cores; a woken pool costs ONNX Runtime some microseconds per call).

Arguments: input channels, input size (square), output channels, kernel size, stride
(padding kernel // 2), then configs as JSON objects of knob values that replace the
default's. Prints GFLOP/s per config, the ratio to ONNX Runtime and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import numpy as np

import lowering
from autotune.task import Task
from benchmarks.conv_layers import conv_model
from benchmarks.models import median_seconds, ort_session, relative_error
from lowering.kernel import num_threads
from relay_ir.backend.executor import aligned
from schedule.templates import input_packers
from tessel_target import Target


def conv_task(c: int, h: int, co: int, k: int, stride: int, target: str,
              block: int) -> Task:
    """The conv as a model runs it: data blocked by `block` (NCHWxc), weight packed by
    the config, output NCHWc."""
    args = [((1, c // block, h, h, block), "float32"), ((co, c, k, k), "float32")]
    attrs = {"padding": k // 2, "strides": stride, "data_layout": "NCHWxc",
             "kernel_layout": "OIHWio", "out_layout": "NCHWc"}
    return Task("conv2d_NCHWc.x86", args, attrs, target)


def config_with(task: Task, knobs: dict[str, Any]) -> Any:
    """The task's default config with `knobs` replaced (values as a config's JSON has them)."""
    default = task.default_config()
    if default is None:
        raise SystemExit(f"{task.template}: the default is no point of the space")
    values = json.loads(default.to_json())["knobs"]
    unknown = set(knobs) - set(values)
    if unknown:
        raise SystemExit(f"unknown knobs {sorted(unknown)}; the template has {sorted(values)}")
    values.update(knobs)
    return task.space.from_json({"knobs": values})


def _rotating(kernel: Any, arrays: list[Any], weights: list[Any]) -> Any:
    """A timer of `kernel` that reads the next weight copy at each call: the median
    seconds of one pass over the copies."""
    def run() -> float:
        times = []
        for w in weights:
            t0 = time.perf_counter()
            kernel(arrays[0], w, arrays[2])
            times.append(time.perf_counter() - t0)
        return statistics.median(times)
    return run


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the comparison (see the module docstring); returns a row per config."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("channels", "size", "out_channels", "kernel", "stride"):
        ap.add_argument(name, type=int)
    ap.add_argument("configs", nargs="*", help="JSON knob overrides, one config each")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--block", type=int, default=None,
                    help="the data's channel block (default: the target's vector width)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--number", type=int, default=5, help="calls per timed round")
    ap.add_argument("--cold-weights", type=float, default=0, metavar="MIB",
                    help="rotate each call over copies of the weight totalling MIB")
    a = ap.parse_args(argv)
    target = Target.parse(a.target)
    if target.features > Target.parse("llvm").features:
        raise SystemExit(f"this host cannot run code for '{a.target}'")
    block = a.block or target.fp32_lanes
    task = conv_task(a.channels, a.size, a.out_channels, a.kernel, a.stride, a.target, block)
    oh = (a.size + 2 * (a.kernel // 2) - a.kernel) // a.stride + 1
    flop = 2.0 * a.out_channels * a.channels * a.kernel ** 2 * oh * oh
    rng = np.random.default_rng(0)
    w = rng.standard_normal((a.out_channels, a.channels, a.kernel, a.kernel)).astype("float32")
    x = rng.standard_normal((1, a.channels, a.size, a.size)).astype("float32")
    xb = aligned(np.ascontiguousarray(
        x.reshape(1, a.channels // block, block, a.size, a.size).transpose(0, 1, 3, 4, 2)))
    conv = {"input": x.shape, "weight": w.shape, "strides": (a.stride, a.stride),
            "pads": (a.kernel // 2,) * 4, "group": 1, "w": w}
    sess = ort_session(conv_model(conv), num_threads())
    want = sess.run(None, {"input": x})[0]
    runs: dict[str, Any] = {}
    for spec in ["{}", *a.configs]:
        cfg = config_with(task, json.loads(spec))
        s, ts = task.instantiate(cfg)
        kernel = lowering.build(s, ts, target=a.target)
        wk = input_packers(task.template, list(task.args), ts[:2], task.attrs)[1](w)
        out = aligned(np.empty([int(d.value) for d in ts[-1].shape], "float32"))
        arrays = [xb, aligned(wk), out]
        kernel(*arrays)  # checked against ONNX Runtime before it is timed
        got = out.transpose(0, 1, 4, 2, 3).reshape(want.shape)
        err = relative_error(got, want)
        if not err <= 1e-3:
            raise SystemExit(f"config {spec} differs from onnxruntime by {err:.1e}")
        copies = max(1, int(a.cold_weights * 2**20 // wk.nbytes))
        # wk.copy(): aligned() returns an aligned array itself, and the copies must differ
        weights = [aligned(wk.copy()) for _ in range(copies)]
        runs["default" if spec == "{}" else spec] = (
            (lambda k=kernel, arr=arrays: k.time(*arr, number=a.number, repeat=1))
            if copies == 1 else _rotating(kernel, arrays, weights))
    if a.cold_weights:  # a session per weight copy: ONNX Runtime packs its own once each
        sessions = [ort_session(conv_model(conv), num_threads(), spin=False)
                    for _ in range(max(1, int(a.cold_weights * 2**20 // w.nbytes)))]
        runs["onnxruntime"] = _rotating(lambda _x, sess, _o: sess.run(None, {"input": x}),
                                        [x, None, None], sessions)
    else:
        runs["onnxruntime"] = lambda: median_seconds(lambda: sess.run(None, {"input": x}),
                                                     a.number, 1)
    best = {k: float("inf") for k in runs}
    for _ in range(max(1, a.rounds)):
        for k, fn in runs.items():
            time.sleep(0.05)  # the other runtime's pool threads go idle
            best[k] = min(best[k], fn())
    print(f"conv {a.channels}@{a.size} -> {a.out_channels} {a.kernel}x{a.kernel} "
          f"stride {a.stride}, target '{a.target}', data block {block}, threads "
          f"{num_threads()}, load {os.getloadavg()[0]:.2f}; best of {a.rounds} rounds"
          + (f", weights cold ({a.cold_weights:g} MiB of copies)" if a.cold_weights else ""))
    rows = []
    for k, sec in best.items():
        gf = flop / sec / 1e9
        ratio = gf / (flop / best["onnxruntime"] / 1e9)
        rows.append({"config": k, "gflops": gf, "ratio": ratio})
        print(f"  {gf:7.1f} GFLOP/s  {ratio:5.2f}x onnxruntime  {k}")
    return rows


if __name__ == "__main__":
    main()
