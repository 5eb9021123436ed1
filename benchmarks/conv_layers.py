"""Every distinct conv of ResNet-18 (batch 1) on its own: Tessel (default schedules and,
with --db, tuned) against ONNX Runtime on the same single-conv model in the same run,
GFLOP/s each and the ratio, medians after warm-up. Outputs are checked against ORT first.

    python -m benchmarks.conv_layers                       # 224x224, untuned
    python -m benchmarks.conv_layers --db r18.db           # also tuned
    python -m benchmarks.conv_layers --image 32 --width 8 --repeat 1   # tiny
    python -m benchmarks.conv_layers --target "llvm -mcpu=haswell"     # AVX2 code
    python -m benchmarks.conv_layers --layers 1,9 --rounds 5           # two convs only

Each conv's peers are timed in --rounds interleaved rounds, a short pause before each
peer (a runtime's idle pool threads spin for a while and take a core from the next one),
and the median of the rounds' medians is printed, with the load average of the machine.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

import relay_ir
from benchmarks.models import median_seconds, ort_session, relative_error
from lowering.kernel import num_threads
from relay_ir.frontend.onnx import from_onnx
from tessel_target import Target


def distinct_convs(model: onnx.ModelProto) -> list[dict[str, Any]]:
    """The model's convs with distinct (input shape, weight shape, strides, pads, group),
    in graph order: each a dict of those and the weight array."""
    inferred = shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in [*inferred.graph.value_info, *inferred.graph.input]}
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    seen, out = set(), []
    for n in model.graph.node:
        if n.op_type != "Conv":
            continue
        at = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        w = inits[n.input[1]]
        conv = {"input": tuple(shapes[n.input[0]]), "weight": w.shape,
                "strides": tuple(at.get("strides", [1, 1])),
                "pads": tuple(at.get("pads", [0, 0, 0, 0])), "group": int(at.get("group", 1))}
        key = tuple(conv.values())
        if key not in seen:
            seen.add(key)
            out.append({**conv, "w": w})
    return out


def conv_model(c: dict[str, Any]) -> onnx.ModelProto:
    """A one-node ONNX model of conv `c` (its weight as an initializer)."""
    node = helper.make_node("Conv", ["input", "w"], ["y"], kernel_shape=list(c["weight"][2:]),
                            strides=list(c["strides"]), pads=list(c["pads"]), group=c["group"])
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                       list(c["input"]))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(c["w"].astype(np.float32), "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def flop(c: dict[str, Any], out_shape: tuple[int, ...]) -> int:
    """Multiply-adds x 2 of conv `c` producing `out_shape`."""
    return 2 * math.prod(out_shape) * math.prod(c["weight"][1:])


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark (see the module docstring); returns a row per distinct conv."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="tuning database: adds 'tessel tuned'")
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=1e-3)
    ap.add_argument("--target", default="llvm", help="e.g. 'llvm -mcpu=haswell' (AVX2)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per conv")
    ap.add_argument("--pause", type=float, default=0.2, help="seconds before each peer")
    ap.add_argument("--layers", default="", help="conv indices to run, e.g. '1,9' (all)")
    a = ap.parse_args(argv)
    if Target.parse(a.target).features > Target.parse("llvm").features:
        raise SystemExit(f"this host cannot run code for '{a.target}'")
    from tests.e2e.onnx_models import resnet18

    convs = distinct_convs(resnet18(image=a.image, width=a.width))
    pick = {int(i) for i in a.layers.split(",") if i.strip()} if a.layers else None
    print(f"ResNet-18 {a.image}x{a.image} width {a.width}: {len(convs)} distinct convs, "
          f"threads {num_threads()}, target '{a.target}', load {os.getloadavg()[0]:.2f}; "
          "GFLOP/s, ratio = tessel / onnxruntime (> 1: faster)")
    rng = np.random.default_rng(0)
    rows = []
    for i, c in enumerate(convs):
        if pick is not None and i not in pick:
            continue
        model = conv_model(c)
        mod, params = from_onnx(model)
        libs = {"tessel": relay_ir.build(mod, target=a.target, params=params)}
        if a.db:
            libs["tessel tuned"] = relay_ir.build(mod, target=a.target, params=params,
                                                  tuning_db=a.db)
        x = rng.standard_normal(c["input"]).astype(np.float32)
        sess = ort_session(model, num_threads())
        want = sess.run(None, {"input": x})[0]
        runs = {"onnxruntime": lambda sess=sess, x=x: sess.run(None, {"input": x})}
        for k, lib in libs.items():
            err = relative_error(lib.run(input=x), want)
            if not err <= a.tolerance:
                raise SystemExit(f"conv {c['input']}*{c['weight']}: {k} differs from "
                                 f"onnxruntime by {err:.1e}")
            runs[k] = lambda lib=lib, x=x: lib.run(input=x)
        secs: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(max(1, a.rounds)):
            for k, fn in runs.items():
                time.sleep(a.pause)
                secs[k].append(median_seconds(fn, a.repeat, a.warmup))
        gf = {k: flop(c, want.shape) / statistics.median(v) / 1e9 for k, v in secs.items()}
        row = {"input": c["input"], "weight": c["weight"], "stride": c["strides"][0],
               "gflops": gf}
        rows.append(row)
        print(f"{i:2d}{'x'.join(map(str, c['input'])):>14} * "
              f"{'x'.join(map(str, c['weight'])):<14}"
              f" s{row['stride']}  " + "  ".join(
                  f"{k} {v:7.1f}" + (f" ({v / gf['onnxruntime']:.2f})" if k != "onnxruntime"
                                     else "") for k, v in gf.items()), flush=True)
    return rows


if __name__ == "__main__":
    main()
