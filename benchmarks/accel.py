"""ResNet-18 on the simulated accelerator: every conv layer's cycles, GEMM utilisation and
DRAM bytes with virtual threads off and on, batch 1 against batch 4, and the quantized
model built for the accelerator against fp32 (top-1 agreement, relative error of the
logits).

    python -m benchmarks.accel                        # 224x224, 64 inputs (minutes)
    python -m benchmarks.accel --image 32 --width 16 --inputs 4 --calibration 2
    python -m benchmarks.accel --db tuning.db         # layers with tuned configs too
    python -m benchmarks.accel --db t.db --tune-model 32   # tune the model's tasks first

The layer table comes from the cycle model (`AccelKernel.stats()`: cycles do not depend
on the data) of the conv2d_packed.accel template's kernels, built by lowering.build: "vt
on" is the template's default config (two virtual threads over the output channel tiles
where the tiles fit half the buffers), "vt off" the same tiles with one thread. Batch 4
runs four images on the same core ("b4": the weights of a channel tile loaded once for
all four, the GEMM steps four times; the Relay paper's observation, batching helps the
memory-bound layers, not the compute-bound ones) and on the `accel -batch=4` core ("b4
x4 core": a 4x16 . 16x16 GEMM a cycle), cycles given per image. The smallest layer also
runs functionally and is checked bit for bit against numpy. The model rows: ResNet-18
(tests/e2e/onnx_models, random weights, random images) quantized (minmax, power-of-two
shifts, first conv float) and built with relay_ir.build(target="accel"), run on the
simulator, against the fp32 CPU build; the int8 CPU build is run beside it and must
agree bit for bit.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from typing import Any

import numpy as np

from benchmarks.quantize_accuracy import logit_errors
from lowering.accel.layers import config as layer_config
from lowering.accel.layers import conv2d_kernel, run_conv2d
from lowering.accel.reference import reference_conv2d
from lowering.accel.simulator import Stats

# (name, in channels, size, out channels, kernel, stride, padding): every distinct conv
LAYERS = [
    ("conv1 7x7/2 64", 3, 224, 64, 7, 2, 3),
    ("3x3 64@56", 64, 56, 64, 3, 1, 1),
    ("3x3/2 128@28", 64, 56, 128, 3, 2, 1),
    ("1x1/2 128@28", 64, 56, 128, 1, 2, 0),
    ("3x3 128@28", 128, 28, 128, 3, 1, 1),
    ("3x3/2 256@14", 128, 28, 256, 3, 2, 1),
    ("1x1/2 256@14", 128, 28, 256, 1, 2, 0),
    ("3x3 256@14", 256, 14, 256, 3, 1, 1),
    ("3x3/2 512@7", 256, 14, 512, 3, 2, 1),
    ("1x1/2 512@7", 256, 14, 512, 1, 2, 0),
    ("3x3 512@7", 512, 7, 512, 3, 1, 1),
]
TEMPLATE = "conv2d_packed.accel"


def _args(layer: tuple, batch: int) -> tuple[list, dict[str, Any]]:
    from relay_ir.op.nn import Conv2DAttrs
    from relay_ir.op.registry import get_op
    from relay_ir.strategy import strategy_of

    _, c, size, o, k, s, pad = layer
    args = [((batch, c, size, size), "int8"), ((o, c, k, k), "int8")]
    # the task attrs exactly as the model's quantized conv2d gets them from the strategy,
    # so the model's tuned records apply to this table's layers
    attrs = Conv2DAttrs(strides=(s, s), padding=(pad,) * 4, out_dtype="int32")
    picked = strategy_of(get_op("nn.conv2d")).template(args, attrs)  # type: ignore[misc]
    assert picked is not None and picked[0] == "conv2d_int8", picked
    return args, picked[1]


def layer_stats(target: str, batch: int, layer: tuple, vt: bool, db: Any = None
                ) -> Stats:
    """The cycle model's stats of one layer (the template's default config, or with `db`
    the layer's best tuned record for `target`; vt off: the same tiles, one thread)."""
    args, attrs = _args(layer, batch)
    cfg = None
    if db is not None:
        from relay_ir.backend.tuned import find_tuned

        got = find_tuned(db, TEMPLATE, args, attrs, target)
        cfg = got.config if got is not None else None
        if cfg is None:
            return None  # type: ignore[return-value]
    if cfg is None:
        cfg = layer_config(TEMPLATE, target, args, attrs) if vt else layer_config(
            TEMPLATE, target, args, attrs, oc_nthread=1, h_nthread=1)
    _, c, size, o, k, s, pad = layer
    return conv2d_kernel(target, (batch, c, size, size), (o, c, k, k), s, pad, cfg).stats()


def check_functional(layer: tuple) -> str:
    """Run `layer` (with a bias/shift/ReLU/clip tail) on the simulator: bit-exact?"""
    _, c, size, o, k, s, pad = layer
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, c, size, size), dtype=np.int8)
    w = rng.integers(-128, 128, (o, c, k, k), dtype=np.int8)
    b = rng.integers(-(1 << 16), 1 << 16, o).astype(np.int32)
    y, layer_k = run_conv2d("accel", x, w, stride=s, padding=pad, bias=b, shift=8,
                            relu=True, clip=True)
    same = np.array_equal(y, reference_conv2d(x, w, s, pad, b, 8, True, True))
    model = layer_k.kernel.last_stats.as_dict() == layer_k.stats().as_dict()
    return (f"functional check of {layer[0]}: output {'equals' if same else 'DIFFERS FROM'} "
            f"numpy; run stats {'equal' if model else 'DIFFER FROM'} the cycle model's")


def layer_table(layers: list[tuple], db: Any = None) -> dict[str, float]:
    """Print the per-layer table; returns its totals (cycles per image)."""
    head = (f"{'layer':<16}{'vt':>4}{'cycles b1':>11}{'util':>6}{'read KiB':>9}"
            f"{'write KiB':>10}{'b4 cyc/img':>12}{'b4/b1':>7}{'b4 x4 core':>12}{'util':>6}"
            f"{'b4x4/b1':>8}")
    print(head)
    print("-" * len(head))
    totals: dict[str, float] = {}
    for layer in layers:
        for vt in (False, True):
            key = "on" if vt else "off"
            row = {"b1": layer_stats("accel", 1, layer, vt),
                   "b4": layer_stats("accel", 4, layer, vt),
                   "b4x4": layer_stats("accel -batch=4", 4, layer, vt)}
            per = {k: st.total_cycles / (1 if k == "b1" else 4) for k, st in row.items()}
            for k, v in per.items():
                totals[f"{k} {key}"] = totals.get(f"{k} {key}", 0) + v
            one = row["b1"]
            print(f"{layer[0]:<16}{key:>4}{one.total_cycles:>11}{one.gemm_utilisation:>6.2f}"
                  f"{one.dram_bytes_read / 1024:>9.0f}{one.dram_bytes_written / 1024:>10.0f}"
                  f"{per['b4']:>12.0f}{per['b4'] / per['b1']:>7.2f}{per['b4x4']:>12.0f}"
                  f"{row['b4x4'].gemm_utilisation:>6.2f}{per['b4x4'] / per['b1']:>8.2f}")
    for key in ("off", "on"):
        t = {k: totals[f"{k} {key}"] for k in ("b1", "b4", "b4x4")}
        print(f"{'total':<16}{key:>4}{t['b1']:>11.0f}{'':>25}{t['b4']:>12.0f}"
              f"{t['b4'] / t['b1']:>7.2f}{t['b4x4']:>12.0f}{'':>6}{t['b4x4'] / t['b1']:>8.2f}")
    print(f"virtual threads on / off, batch 1: {totals['b1 on'] / totals['b1 off']:.2f} of "
          "the cycles")
    if db is not None:
        print(f"\n{'layer':<16}{'default b1':>12}{'tuned b1':>12}{'tuned/default':>15}")
        for layer in layers:
            tuned = layer_stats("accel", 1, layer, True, db)
            default = layer_stats("accel", 1, layer, True)
            got = f"{tuned.total_cycles:>12}{tuned.total_cycles / default.total_cycles:>15.2f}" \
                if tuned is not None else f"{'(no record)':>12}"
            print(f"{layer[0]:<16}{default.total_cycles:>12}{got}")
    return totals


def tune_model(qmod: Any, db_path: str, trials: int) -> int:
    """Tune the quantized model's accelerator tasks (`trials` each, xgb, simulator cycles)
    into the database build reads; returns how many tasks."""
    from autotune.extract import extract_tasks
    from autotune.measure import LocalRunner
    from autotune.tuners import make_tuner
    from autotune.tuning import tune
    from tuning_logs import TuningDatabase

    # the float first conv's task is the host's: the accel template refuses float
    tasks = [t for t, _ in extract_tasks(qmod, "accel") if all(d == "int8" for _, d in t.args)]
    with TuningDatabase(db_path) as db, LocalRunner(timeout=60) as runner:
        for t in tasks:
            tune(t, make_tuner("xgb", t, seed=0), trials, db, runner, batch_size=8)
    return len(tasks)


def _accel_cycles(lib: Any) -> int:
    from relay_ir.backend.accel_pack import AccelKernelFn

    return sum(k.kernel.stats().total_cycles for k in (lib.plan.kernels[s.kernel]
               for s in lib.plan.steps) if isinstance(k, AccelKernelFn))


def model_rows(image: int, width: int, calibration: int, inputs: int,
               db_path: str | None = None, tune_trials: int = 0) -> dict[str, float]:
    """Quantized ResNet-18 on the accelerator against fp32; prints and returns the row."""
    import relay_ir
    from relay_ir.frontend.onnx import from_onnx
    from relay_ir.quantize import quantize
    from tests.e2e.onnx_models import resnet18

    mod, params = from_onnx(resnet18(image=image, width=width))
    (name,) = [p.name_hint for p in mod["main"].params if p.name_hint not in params]
    rng = np.random.default_rng(0)

    def images(n: int) -> list[dict[str, np.ndarray]]:
        return [{name: rng.standard_normal((1, 3, image, image)).astype("float32")}
                for _ in range(n)]

    cal, tests = images(calibration), images(inputs)
    fp32 = relay_ir.build(mod, params=params)
    qmod = quantize(mod, params, dataset=cal, calibrate="minmax", requantize="shift")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib = relay_ir.build(qmod, target="accel")
    cpu8 = relay_ir.build(qmod)
    convs = [p for p in lib.placement if "conv2d" in p.group or "dense" in p.group]
    on_accel = [p for p in convs if p.device == "accel"]
    cycles = _accel_cycles(lib)
    tuned_cycles = None
    if db_path is not None:
        if tune_trials:
            n = tune_model(qmod, db_path, tune_trials)
            print(f"tuned the model's {n} int8 accelerator tasks, {tune_trials} trials each")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tuned = relay_ir.build(qmod, target="accel", tuning_db=db_path)
        tuned_cycles = _accel_cycles(tuned)
        probe = tests[0] if tests else cal[0]
        if not np.array_equal(tuned.run(**probe), lib.run(**probe)):
            print("the tuned build DIFFERS FROM the default build")
    print(f"\nResNet-18 {image}x{image} width {width}, random weights, int8 (minmax, shifts, "
          f"first conv float) built for 'accel': {len(on_accel)} of {len(convs)} conv2d/"
          f"dense groups on the accelerator, {len(lib.layout_changes)} layout changes "
          f"(pack/unpack), accelerator cycles {cycles / 1e6:.2f} M per image "
          f"({cycles / 100e6 * 1e3:.1f} ms at 100 MHz)"
          + (f"; with the database's records {tuned_cycles / 1e6:.2f} M "
             f"({tuned_cycles / cycles:.2f} of the default)" if tuned_cycles else ""))
    for p in convs:
        if p.device == "cpu":
            print(f"  on the host: {p.group}: {p.why}")
    want, got = [], []
    t0 = time.perf_counter()
    same = True
    for k, s in enumerate(tests):
        want.append(fp32.run(**s).reshape(-1))
        y = lib.run(**s)
        same = same and (k > 0 or np.array_equal(y, cpu8.run(**s)))
        got.append(y.reshape(-1))
    sim_s = (time.perf_counter() - t0) / len(tests)
    agree, mean, worst = logit_errors(got, want)
    print(f"{'model':<34}{'inputs':>7}{'top-1 agree':>12}{'rel err mean':>13}"
          f"{'rel err max':>12}{'sim s/img':>10}")
    print(f"{'int8 on accel vs fp32 (CPU)':<34}{len(tests):>7}{agree:>12.3f}{mean:>13.4f}"
          f"{worst:>12.4f}{sim_s:>10.1f}")
    print(f"int8 accel build {'equals' if same else 'DIFFERS FROM'} the int8 CPU build bit "
          f"for bit (first input); {len(caught)} warning(s) at build")
    return {"top1_agreement": agree, "rel_err_mean": mean, "rel_err_max": worst,
            "accel_groups": len(on_accel), "groups": len(convs), "cycles": cycles,
            "tuned_cycles": tuned_cycles or 0, "bit_exact": float(same)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--width", type=int, default=64, help="channels of the first stage")
    ap.add_argument("--calibration", type=int, default=16)
    ap.add_argument("--inputs", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="leave out the 7x7 first layer")
    ap.add_argument("--no-model", action="store_true", help="the layer table only")
    ap.add_argument("--db", help="a tuning database: tuned configs beside the defaults")
    ap.add_argument("--tune-model", type=int, default=0, metavar="TRIALS",
                    help="first tune the quantized model's accelerator tasks into --db")
    args = ap.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} (cycle counts do not depend on it)")
    scale = args.image / 224
    layers = [(n, c if k == 7 else max(1, int(c * args.width / 64)), max(1, int(size * scale)),
               max(1, int(o * args.width / 64)), k, s, p) for n, c, size, o, k, s, p in LAYERS]
    if args.quick:
        layers = layers[1:]
    db = None
    if args.db:
        from tuning_logs import TuningDatabase

        db = TuningDatabase(args.db)
    out: dict[str, Any] = {}
    model_first = not args.no_model and args.tune_model > 0
    if model_first:  # the layer table then shows the records tuned here
        out["model"] = model_rows(args.image, args.width, args.calibration, args.inputs,
                                  args.db, args.tune_model)
    out["layers"] = layer_table(layers, db)
    print(check_functional(layers[-2]))
    if not args.no_model and not model_first:
        out["model"] = model_rows(args.image, args.width, args.calibration, args.inputs,
                                  args.db, args.tune_model)
    return out


if __name__ == "__main__":
    main()
