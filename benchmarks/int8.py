"""int8 on the CPU: every distinct conv of ResNet-18 (batch 1) in int8 against Tessel's
fp32 conv and ONNX Runtime's int8 and fp32 convs, then the quantized ResNet-18 end to end
against the fp32 build and ONNX Runtime fp32, all in one run; medians of interleaved
rounds after warm-up, ratios printed.

    python -m benchmarks.int8                                    # 224x224
    python -m benchmarks.int8 --image 32 --width 8 --repeat 1 --rounds 1   # tiny

Per conv, the weights are the model's quantized per tensor to int8 (w / max|w| * 127,
rounded) and the activations random int8; both systems get the same ones:
- "tessel int8": conv2d int8 x int8 -> int32 then the requantize the quantizer emits
  (add half, arithmetic shift right, clip, cast to int8), NCHW int8 in and out, built by
  relay_ir.build (the conv2d_int8.x86 template; vpdpbusd where the host has VNNI);
- "ort int8": ONNX Runtime's QLinearConv on uint8 activations (zero point 128, the same
  values) and the same int8 weights, requantized by a scale of 2^-shift to uint8 (its
  fast u8s8 path; int8 activations take a slower one);
- "tessel fp32" / "ort fp32": the float conv on the same values;
- "tessel int8 NCHWc": the int8 conv as it runs inside the quantized model, int8 data
  NCHW16c in and NCHW[oc_bn]c out (the layout plan keeps values between convs blocked),
  the same requantize fused.
Before timing, Tessel's int32 sums are checked bit for bit against ONNX Runtime's
ConvInteger on the same operands, and the requantized outputs within 1 of QLinearConv's
(which rounds half to even where the shift rounds half up).

End to end: the model quantized by relay_ir.quantize (minmax calibration on --calibration
random images, power-of-two shift requantization, the first conv kept float) and built
for the CPU, the fp32 build, and ONNX Runtime fp32 on the ONNX model; the int8 model's
top-1 agreement with fp32 on the timed image is printed beside, and with --check the
int8 build is checked bit for bit against relay_ir.interpret first. --int8-first-conv adds
the model with every conv int8 (TVM's quantize keeps the first float, as ours does);
--target builds Tessel's kernels for another CPU (e.g. 'llvm -mcpu=haswell': vpmaddwd).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import relay_ir
from benchmarks.conv_layers import conv_model, distinct_convs
from benchmarks.models import median_seconds, ort_session, relative_error
from lowering.kernel import num_threads
from relay_ir import nn
from relay_ir.frontend.onnx import from_onnx

# a pause between runtimes, so that one's spinning worker threads do not steal the cores
# of the next (FACTS.md: numpy read 11-41 GFLOP/s instead of 260 without it)
_PAUSE = 0.3


def quantize_weight(w: np.ndarray) -> np.ndarray:
    """Per-tensor symmetric int8: w / max|w| * 127, rounded.

        >>> quantize_weight(np.array([0.5, -1.0, 0.25])).tolist()
        [64, -127, 32]
    """
    return np.round(w / max(float(np.abs(w).max()), 1e-30) * 127).astype(np.int8)


def _model(nodes: list[Any], x: tuple[str, int, tuple[int, ...]], y: tuple[str, int],
           inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "int8", [helper.make_tensor_value_info(x[0], x[1], list(x[2]))],
        [helper.make_tensor_value_info(y[0], y[1], None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def _conv_attrs(c: dict[str, Any]) -> dict[str, Any]:
    return {"kernel_shape": list(c["weight"][2:]), "strides": list(c["strides"]),
            "pads": list(c["pads"]), "group": c["group"]}


def ort_conv_integer(c: dict[str, Any], wq: np.ndarray) -> onnx.ModelProto:
    """ConvInteger on uint8 activations with zero point 128: the exact int32 sums."""
    node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], **_conv_attrs(c))
    return _model([node], ("x", TensorProto.UINT8, c["input"]), ("y", TensorProto.INT32),
                  {"w": wq, "xz": np.array(128, np.uint8)})


def ort_qlinear_conv(c: dict[str, Any], wq: np.ndarray, shift: int) -> onnx.ModelProto:
    """QLinearConv, uint8 activations (zero point 128), int8 weights, output scale 2^shift
    times the input scales: round(sum / 2^shift) + 128, saturated to uint8."""
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                            ["y"], **_conv_attrs(c))
    one = np.array(1.0, np.float32)
    return _model([node], ("x", TensorProto.UINT8, c["input"]), ("y", TensorProto.UINT8),
                  {"xs": one, "xz": np.array(128, np.uint8), "w": wq, "ws": one,
                   "wz": np.array(0, np.int8), "ys": np.array(2.0 ** shift, np.float32),
                   "yz": np.array(128, np.uint8)})


def tessel_int8_conv(c: dict[str, Any], wq: np.ndarray, shift: int | None,
                     target: str = "llvm") -> Any:
    """relay_ir.build of the int8 conv (int32 out), with the shift requantize to int8
    after it unless `shift` is None."""
    x = relay_ir.var("x", relay_ir.TensorType(tuple(c["input"]), "int8"))
    p = c["pads"]
    acc = nn.conv2d(x, relay_ir.Constant(wq), strides=tuple(c["strides"]),
                    padding=(p[0], p[1], p[2], p[3]), groups=c["group"], out_dtype="int32")
    if shift is not None:
        half = relay_ir.Constant(np.array(1 << (shift - 1) if shift else 0, np.int32))
        acc = relay_ir.right_shift(relay_ir.add(acc, half),
                                   relay_ir.Constant(np.array(shift, np.int32)))
        acc = relay_ir.cast(relay_ir.clip(acc, -128, 127), "int8")
    return relay_ir.build(relay_ir.IRModule.from_expr(relay_ir.Function([x], acc)),
                          target=target)


def tessel_int8_blocked(c: dict[str, Any], wq: np.ndarray, shift: int, target: str
                        ) -> tuple[Callable[[np.ndarray], np.ndarray], int]:
    """The conv as the model's layout plan runs it: int8 data NCHW16c in, the template's
    NCHW[oc_bn]c int8 out, the same requantize fused (conv2d_int8.x86 with an epilogue).
    Returns run(blocked data) -> blocked output, and the output block."""
    import lowering
    import tensor_expr as te
    from schedule.templates import input_packers, instantiate
    from tensor_expr.intrin import shift_right

    n, ch, h, w = c["input"]
    args = [((n, ch // 16, h, w, 16), "int8"), (tuple(wq.shape), "int8")]
    attrs = {"strides": tuple(c["strides"]), "padding": tuple(c["pads"]), "groups": 1,
             "out_dtype": "int32", "kernel_layout": "packed", "data_layout": "NCHWxc",
             "out_layout": "NCHWc"}
    half = (1 << (shift - 1)) if shift else 0

    def requantize(acc: Any) -> tuple[list[Any], Any]:
        return [], te.compute(acc.shape, lambda *i: te.cast(te.min(te.max(shift_right(
            acc[i] + half, shift), -128), 127), "int8"), name="requantize")

    s, tensors = instantiate("conv2d_int8.x86", args, attrs, epilogue=requantize,
                             target=target)
    kernel = lowering.build(s, tensors, target=target)
    wp = input_packers("conv2d_int8.x86", args, tensors[:2], attrs)[1](wq)
    out = np.empty(tuple(int(d.value) for d in tensors[-1].shape), np.int8)

    def run(xb: np.ndarray) -> np.ndarray:
        kernel(xb, wp, out)
        return out

    return run, out.shape[4]


def timed(runs: dict[str, Callable[[], Any]], repeat: int, warmup: int, rounds: int
          ) -> dict[str, float]:
    """Seconds per call of each run: the median over `rounds` interleaved rounds of each
    round's median, a pause between runtimes."""
    per: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for k, fn in runs.items():
            time.sleep(_PAUSE)
            per[k].append(median_seconds(fn, repeat, warmup))
    return {k: statistics.median(v) for k, v in per.items()}


def conv_rows(a: argparse.Namespace) -> list[dict[str, Any]]:
    """The per-conv table: times and checks of each distinct conv (see the docstring)."""
    from tests.e2e.onnx_models import resnet18

    convs = [c for c in distinct_convs(resnet18(image=a.image, width=a.width))
             if c["group"] == 1]
    threads = num_threads()
    print(f"ResNet-18 {a.image}x{a.image} width {a.width}: {len(convs)} distinct convs, "
          f"batch 1, target '{a.target}', threads {threads}, load average "
          f"{os.getloadavg()[0]:.2f}; ms per conv (GOP/s); ratios > 1: tessel int8 faster")
    cols = ["tessel int8", "tessel int8 NCHWc", "ort int8", "tessel fp32", "ort fp32"]
    print(f"  {'conv':<36}" + "".join(f"{k:>19}" for k in cols)
          + f"{'ort int8/int8':>15}{'/NCHWc':>8}{'fp32/int8':>11}")
    rng = np.random.default_rng(0)
    rows = []
    for c in convs:
        row = _conv_row(c, rng, threads, a)
        rows.append(row)
        secs, gops = row["seconds"], row["gops"]
        name = (f"{'x'.join(map(str, c['input']))} * {'x'.join(map(str, c['weight']))} "
                f"s{row['stride']}")
        cells = [f"{secs[k] * 1e3:9.3f} ({gops[k]:5.0f})" if k in secs else "-"
                 for k in cols]
        blocked = secs.get("tessel int8 NCHWc")
        print(f"  {name:<36}" + "".join(f"{x:>19}" for x in cells)
              + f"{secs['ort int8'] / secs['tessel int8']:15.2f}"
              + (f"{secs['ort int8'] / blocked:8.2f}" if blocked else f"{'-':>8}")
              + f"{secs['tessel fp32'] / secs['tessel int8']:11.2f}", flush=True)
    return rows


def _conv_row(c: dict[str, Any], rng: np.random.Generator, threads: int,
              a: argparse.Namespace) -> dict[str, Any]:
    """One conv: build, check and time the systems."""
    wq = quantize_weight(c["w"])
    x8 = rng.integers(-128, 128, c["input"]).astype(np.int8)
    xu8 = (x8.astype(np.int16) + 128).astype(np.uint8)
    exact = ort_session(ort_conv_integer(c, wq), threads).run(None, {"x": xu8})[0]
    raw = tessel_int8_conv(c, wq, None, a.target).run(x=x8)
    if not np.array_equal(raw, exact):
        raise SystemExit(f"conv {c['input']}*{c['weight']}: tessel's int32 sums differ from "
                         "onnxruntime ConvInteger's")
    shift = max(0, math.ceil(math.log2(max(1, int(np.abs(exact).max())) / 127)))
    lib8 = tessel_int8_conv(c, wq, shift, a.target)
    sess8 = ort_session(ort_qlinear_conv(c, wq, shift), threads)
    got8 = lib8.run(x=x8).astype(np.int16)
    ort8 = sess8.run(None, {"x": xu8})[0].astype(np.int16) - 128
    if np.abs(got8 - ort8).max() > 1:
        raise SystemExit(f"conv {c['input']}*{c['weight']}: requantized outputs differ from "
                         "QLinearConv's by more than 1")
    xf = x8.astype(np.float32)
    wf = {**c, "w": wq.astype(np.float32)}
    mod, params = from_onnx(conv_model(wf))
    lib32 = relay_ir.build(mod, params=params, target=a.target)
    sess32 = ort_session(conv_model(wf), threads)
    err = relative_error(lib32.run(input=xf), sess32.run(None, {"input": xf})[0])
    if not err <= 1e-4:
        raise SystemExit(f"conv {c['input']}*{c['weight']}: fp32 differs by {err:.1e}")
    runs = {"tessel int8": lambda: lib8.run(x=x8),
            "ort int8": lambda: sess8.run(None, {"x": xu8}),
            "tessel fp32": lambda: lib32.run(input=xf),
            "ort fp32": lambda: sess32.run(None, {"input": xf})}
    n, ch, h, w = c["input"]
    if ch % 16 == 0:  # the stem's 3 channels are not held blocked in the model
        blocked, ob = tessel_int8_blocked(c, wq, shift, a.target)
        xb = np.ascontiguousarray(x8.reshape(n, ch // 16, 16, h, w).transpose(0, 1, 3, 4, 2))
        yb = blocked(xb)
        logical = yb.transpose(0, 1, 4, 2, 3).reshape(n, -1, *yb.shape[2:4])
        if not np.array_equal(logical, got8):
            raise SystemExit(f"conv {c['input']}*{c['weight']}: the blocked int8 conv "
                             "differs from the NCHW one")
        runs["tessel int8 NCHWc"] = lambda: blocked(xb)
    secs = timed(runs, a.repeat, a.warmup, a.rounds)
    gop = 2 * exact.size * math.prod(c["weight"][1:]) / 1e9
    return {"input": c["input"], "weight": c["weight"], "stride": c["strides"][0],
            "seconds": secs, "gops": {k: gop / v for k, v in secs.items()}}


def model_row(a: argparse.Namespace) -> dict[str, Any]:
    """Quantized ResNet-18 end to end against the fp32 build and ONNX Runtime fp32."""
    from relay_ir.quantize import quantize
    from tests.e2e.onnx_models import resnet18

    model = resnet18(image=a.image, width=a.width)
    mod, params = from_onnx(model)
    (name,) = [p.name_hint for p in mod["main"].params if p.name_hint not in params]
    rng = np.random.default_rng(1)
    shape = (1, 3, a.image, a.image)
    images = [{name: rng.standard_normal(shape).astype(np.float32)}
              for _ in range(a.calibration + 1)]
    feeds = images[-1]
    t0 = time.perf_counter()
    qmods = {"tessel int8": quantize(mod, params, dataset=images[:-1], calibrate="minmax",
                                     requantize="shift")}
    if a.int8_first_conv:
        qmods["tessel int8 all"] = quantize(mod, params, dataset=images[:-1],
                                            calibrate="minmax", requantize="shift",
                                            skip_conv_layers=[])
    t1 = time.perf_counter()
    libs = {k: relay_ir.build(q, target=a.target) for k, q in qmods.items()}
    t2 = time.perf_counter()
    lib32 = relay_ir.build(mod, params=params, target=a.target)
    sess = ort_session(model, num_threads())
    print(f"\nquantized ResNet-18 {a.image}x{a.image} width {a.width}: quantize "
          f"{t1 - t0:.1f} s (calibration in the interpreter), int8 build {t2 - t1:.1f} s; "
          f"target '{a.target}', threads {num_threads()}, load average "
          f"{os.getloadavg()[0]:.2f}")
    want = sess.run(None, feeds)[0]
    err = relative_error(lib32.run(**feeds), want)
    if not err <= 1e-3:
        raise SystemExit(f"the fp32 build differs from onnxruntime by {err:.1e}")
    got = {k: lib.run(**feeds) for k, lib in libs.items()}
    for k, q in qmods.items():
        if a.check and not np.array_equal(got[k], relay_ir.interpret(q, **feeds)):
            raise SystemExit(f"{k}: the int8 build differs from relay_ir.interpret")
    runs: dict[str, Callable[[], Any]] = {k: (lambda lib=lib: lib.run(**feeds))
                                          for k, lib in libs.items()}
    runs["tessel fp32"] = lambda: lib32.run(**feeds)
    runs["ort fp32"] = lambda: sess.run(None, feeds)
    secs = timed(runs, a.repeat, a.warmup, a.rounds)
    agree = {k: bool(np.argmax(g) == np.argmax(want)) for k, g in got.items()}
    print("  " + "  ".join(f"{k} {v * 1e3:8.2f} ms" for k, v in secs.items()))
    for k in libs:
        print(f"  {k}: tessel fp32 / int8 {secs['tessel fp32'] / secs[k]:.2f}, ort fp32 / "
              f"int8 {secs['ort fp32'] / secs[k]:.2f}, top-1 as fp32: {agree[k]}")
    return {"seconds": secs, "top1_agrees": agree}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run both parts (see the module docstring); returns their rows."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--width", type=int, default=64, help="channels of the first stage")
    ap.add_argument("--repeat", type=int, default=20, help="timed calls per round")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--calibration", type=int, default=2, help="calibration images")
    ap.add_argument("--check", action="store_true",
                    help="check the int8 model against relay_ir.interpret (slow at 224)")
    ap.add_argument("--skip-model", action="store_true", help="the per-conv table only")
    ap.add_argument("--skip-convs", action="store_true", help="the model only")
    ap.add_argument("--int8-first-conv", action="store_true",
                    help="also the model with its first conv int8 (quantize keeps it float)")
    ap.add_argument("--target", default="llvm",
                    help="Tessel's target, e.g. 'llvm -mcpu=haswell' for the AVX2 code")
    a = ap.parse_args(argv)
    out: dict[str, Any] = {"convs": [] if a.skip_convs else conv_rows(a)}
    if not a.skip_model:
        out["model"] = model_row(a)
    return out


if __name__ == "__main__":
    main()
