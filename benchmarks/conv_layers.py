"""Every distinct conv of ResNet-18 or MobileNetV2 (batch 1) on its own: Tessel (default
schedules and, with --db, tuned) against ONNX Runtime on the same single-conv model in the
same run, GFLOP/s each and the ratio, medians after warm-up. Outputs are checked against
ORT first. A depthwise conv is a one-node model too (group = channels).

    python -m benchmarks.conv_layers                       # ResNet-18, 224x224, untuned
    python -m benchmarks.conv_layers --db r18.db           # also tuned
    python -m benchmarks.conv_layers --image 32 --width 8 --repeat 1   # tiny
    python -m benchmarks.conv_layers --target "llvm -mcpu=haswell"     # AVX2 code
    python -m benchmarks.conv_layers --layers 1,9 --rounds 5           # two convs only
    python -m benchmarks.conv_layers --model mobilenet_v2 --width 32   # its 3x3 stem,
                                              # depthwise 3x3 (stride 1, 2) and 1x1 convs
    python -m benchmarks.conv_layers --model mobilenet_v2 --only depthwise  # those alone

Each peer runs in its own process (benchmarks.isolated: in one process the runtimes share
their pool threads' spinning, placement and allocator); the parent checks every output
against ORT's, then times the peers
in --rounds interleaved rounds (the order rotates per round, a short pause before each
peer so that the previous one's pool threads go idle) and prints the median of the
rounds' medians, with the load average of the machine.

The one-node models take and give NCHW, so Tessel's time includes packing the input into
channel blocks and unpacking the output, which inside a model the layout plan avoids
(benchmarks.models' per-layer table times the convs as the model runs them). The same
holds for --db: a model's tuning (`tessel tune model.onnx`) times each conv in the
model's blocked layouts and records the best config there; applied here, around NCHW
packing, the config's blocks also set what the packing stages cost, so this column
understates a model-tuned database (ResNet-18 tuned in its model, one Sapphire Rapids
core, load 3.4: the 1x1 stride-2 64@56 -> 128 0.49x ONNX Runtime here, untuned 1.13x).
For tuned convs against ONNX Runtime use `benchmarks.models --db`, whose tuned per-shape
table times each conv as the tuned model runs it.
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
from benchmarks.isolated import Peer
from benchmarks.models import ort_session, relative_error
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


MODELS = ("mobilenet_v2", "resnet18")  # builders of tests.e2e.onnx_models


def conv_kind(c: dict[str, Any]) -> str:
    """The kind of conv `c`: "stem" (at most 4 input channels), "depthwise" (group =
    channels), "1x1" or "other".

        >>> conv_kind({"input": (1, 3, 8, 8), "weight": (8, 3, 3, 3), "group": 1})
        'stem'
    """
    if c["input"][1] <= 4 and c["group"] == 1:
        return "stem"
    if c["group"] > 1 and c["group"] == c["input"][1] and c["weight"][1] == 1:
        return "depthwise"
    return "1x1" if tuple(c["weight"][2:]) == (1, 1) else "other"


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
    ap.add_argument("--width", type=int, default=None,
                    help="first-stage channels (default the model's: 64, MobileNetV2 32)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tolerance", type=float, default=1e-3)
    ap.add_argument("--target", default="llvm", help="e.g. 'llvm -mcpu=haswell' (AVX2)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per conv")
    ap.add_argument("--pause", type=float, default=0.2, help="seconds before each peer")
    ap.add_argument("--layers", default="", help="conv indices to run, e.g. '1,9' (all)")
    ap.add_argument("--model", default="resnet18", choices=MODELS)
    ap.add_argument("--only", default="all", choices=["all", "stem", "depthwise", "1x1", "other"],
                    help="only the convs of this kind")
    a = ap.parse_args(argv)
    if Target.parse(a.target).features > Target.parse("llvm").features:
        raise SystemExit(f"this host cannot run code for '{a.target}'")
    from tests.e2e import onnx_models

    size = {"image": a.image, **({"width": a.width} if a.width else {})}
    convs = [c for c in distinct_convs(getattr(onnx_models, a.model)(**size))
             if a.only in ("all", conv_kind(c))]
    pick = {int(i) for i in a.layers.split(",") if i.strip()} if a.layers else None
    print(f"{a.model} {a.image}x{a.image} width {a.width or '(default)'}: {len(convs)} "
          f"distinct convs, threads {num_threads()}, target '{a.target}', "
          f"load {os.getloadavg()[0]:.2f}; GFLOP/s, ratio = tessel / onnxruntime (> 1: faster)")
    rng = np.random.default_rng(0)
    chosen = {i: c for i, c in enumerate(convs) if pick is None or i in pick}
    xs = {i: rng.standard_normal(c["input"]).astype(np.float32) for i, c in chosen.items()}
    peers = {"onnxruntime": Peer("onnxruntime", ort_setup, chosen, xs, num_threads()),
             "tessel": Peer("tessel", tessel_setup, chosen, xs, a.target, None)}
    if a.db:
        peers["tessel tuned"] = Peer("tessel tuned", tessel_setup, chosen, xs, a.target, a.db)
    try:
        return _compare(a, chosen, peers)
    finally:
        for p in peers.values():
            p.close()


def ort_setup(convs: dict[int, dict[str, Any]], xs: dict[int, np.ndarray],
              threads: int) -> dict[str, Any]:
    """In a peer process: an ONNX Runtime session per conv, run on its input."""
    runs = {}
    for i, c in convs.items():
        sess = ort_session(conv_model(c), threads)
        runs[str(i)] = lambda sess=sess, x=xs[i]: sess.run(None, {"input": x})[0]
    return runs


def tessel_setup(convs: dict[int, dict[str, Any]], xs: dict[int, np.ndarray], target: str,
                 db: str | None) -> dict[str, Any]:
    """In a peer process: each conv built by Tessel (tuned with `db` if given)."""
    runs = {}
    for i, c in convs.items():
        mod, params = from_onnx(conv_model(c))
        lib = relay_ir.build(mod, target=target, params=params, tuning_db=db)
        runs[str(i)] = lambda lib=lib, x=xs[i]: lib.run(input=x)
    return runs


def _compare(a: argparse.Namespace, convs: dict[int, dict[str, Any]],
             peers: dict[str, Peer]) -> list[dict[str, Any]]:
    rows = []
    names = list(peers)
    for i, c in convs.items():
        want = peers["onnxruntime"].run(str(i))
        for k in names[1:]:
            err = relative_error(peers[k].run(str(i)), want)
            if not err <= a.tolerance:
                raise SystemExit(f"conv {c['input']}*{c['weight']}: {k} differs from "
                                 f"onnxruntime by {err:.1e}")
        secs: dict[str, list[float]] = {k: [] for k in names}
        for r in range(max(1, a.rounds)):
            for k in names[r % len(names):] + names[:r % len(names)]:
                time.sleep(a.pause)
                secs[k].append(peers[k].time(str(i), a.repeat, a.warmup))
        gf = {k: flop(c, want.shape) / statistics.median(secs[k]) / 1e9 for k in names}
        row = {"input": c["input"], "weight": c["weight"], "stride": c["strides"][0],
               "gflops": gf}
        rows.append(row)
        print(f"{i:2d} {conv_kind(c):>9} {'x'.join(map(str, c['input'])):>14} * "
              f"{'x'.join(map(str, c['weight'])):<14} s{row['stride']}  " + "  ".join(
                  f"{k} {v:7.1f}" + (f" ({v / gf['onnxruntime']:.2f})" if k != "onnxruntime"
                                     else "") for k, v in gf.items()), flush=True)
    return rows


if __name__ == "__main__":
    main()
