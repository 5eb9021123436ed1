"""Quantized ResNet-18 against fp32: top-1 agreement and relative error of the logits over
the test inputs, and seconds per inference of the fp32 and int8 CPU builds, printed as a
table for each calibration (minmax, kl) and requantization (shift: power-of-two scales,
what the accelerator's ALU does; float: per-channel scales, CPU only).

    python -m benchmarks.quantize_accuracy                  # 224x224, 16 calibration, 64 test
    python -m benchmarks.quantize_accuracy --image 64 --calibration 4 --inputs 16 --repeat 3

The model is tests/e2e/onnx_models.resnet18 imported through the ONNX frontend, with
random weights, and the inputs are random images (standard normal), calibration and test
inputs drawn alike. Random weights make the class decisions meaningless, but the
agreement of the int8 model with the fp32 one, and the relative error of its logits,
still measure the noise that quantization adds; the first conv2d stays float
(skip_conv_layers=[0], TVM's default).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import relay_ir
from benchmarks.models import median_seconds
from lowering.kernel import num_threads
from relay_ir.frontend.onnx import from_onnx
from relay_ir.quantize import quantize

MODES = ("minmax/shift", "kl/shift", "minmax/float", "kl/float")


def logit_errors(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float, float]:
    """(top-1 agreement, mean and max of ||got - want|| / ||want|| per input).

        >>> logit_errors([np.array([1.0, 2.1])], [np.array([1.0, 2.0])])  # doctest: +ELLIPSIS
        (1.0, 0.044..., 0.044...)
    """
    agree = np.mean([np.argmax(g) == np.argmax(w) for g, w in zip(got, want)])
    rel = [np.linalg.norm(g - w) / np.linalg.norm(w) for g, w in zip(got, want)]
    return float(agree), float(np.mean(rel)), float(np.max(rel))


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run the comparison and print the table; returns its figures per mode."""
    from tests.e2e.onnx_models import resnet18

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--width", type=int, default=64, help="channels of the first stage")
    ap.add_argument("--calibration", type=int, default=16, help="calibration inputs")
    ap.add_argument("--inputs", type=int, default=64, help="test inputs")
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per build")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    args = ap.parse_args(argv)

    mod, params = from_onnx(resnet18(image=args.image, width=args.width))
    (name,) = [p.name_hint for p in mod["main"].params if p.name_hint not in params]
    rng = np.random.default_rng(0)
    shape = (1, 3, args.image, args.image)

    def images(n: int) -> list[dict[str, np.ndarray]]:
        return [{name: rng.standard_normal(shape).astype("float32")} for _ in range(n)]

    calibration, tests = images(args.calibration), images(args.inputs)
    print(f"ResNet-18 {args.image}x{args.image} width {args.width}, random weights; "
          f"{args.calibration} calibration inputs, {args.inputs} test inputs; threads "
          f"{num_threads()}, load average {os.getloadavg()[0]:.2f}")
    t0 = time.perf_counter()
    fp32 = relay_ir.build(mod, params=params)
    print(f"  fp32 build {time.perf_counter() - t0:.1f} s")
    want = [fp32.run(**s) for s in tests]
    fp32_s = median_seconds(lambda: fp32.run(**tests[0]), args.repeat)
    rows: dict[str, dict[str, float]] = {}
    for mode in args.modes:
        calibrate, requantize = mode.split("/")
        t0 = time.perf_counter()
        qmod = quantize(mod, params, dataset=calibration, calibrate=calibrate,
                        requantize=requantize)
        t1 = time.perf_counter()
        lib = relay_ir.build(qmod)
        print(f"  {mode}: quantize (calibration in the interpreter) {t1 - t0:.1f} s, int8 "
              f"build {time.perf_counter() - t1:.1f} s")
        agree, mean, worst = logit_errors([lib.run(**s) for s in tests], want)
        seconds = median_seconds(lambda lib=lib: lib.run(**tests[0]), args.repeat)
        rows[mode] = {"top1_agreement": agree, "rel_err_mean": mean, "rel_err_max": worst,
                      "seconds": seconds}
    _print_table(rows, fp32_s)
    rows["fp32"] = {"seconds": fp32_s}
    return rows


def _print_table(rows: dict[str, dict[str, float]], fp32_s: float) -> None:
    print(f"\n{'mode':<14}{'top-1 agree':>12}{'rel err mean':>14}{'rel err max':>13}"
          f"{'ms/inference':>14}{'fp32 / int8':>13}")
    print(f"{'fp32':<14}{'-':>12}{'-':>14}{'-':>13}{fp32_s * 1e3:>14.2f}{1.0:>13.2f}")
    for mode, r in rows.items():
        print(f"{mode:<14}{r['top1_agreement']:>12.3f}{r['rel_err_mean']:>14.4f}"
              f"{r['rel_err_max']:>13.4f}{r['seconds'] * 1e3:>14.2f}"
              f"{fp32_s / r['seconds']:>13.2f}")


if __name__ == "__main__":
    main()
