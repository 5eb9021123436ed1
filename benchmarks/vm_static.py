"""What a model costs on the VM against the graph executor and ONNX Runtime, interleaved in
one process: the model with static shapes on the VM (relay_ir.vm.compile: build's
kernels, layout plan and constant arena, relay_ir.vm.layouts), the same model with a `?`
batch on the VM (each group's batch-1 kernel run per image, relay_ir.vm.batch_split, on
the layout plan of the model's batch-1 copy), and the static model built by
relay_ir.build. Every round times each system once (medians of --repeat calls), in
alternating order; printed: each system's median over the rounds and its ratio to the
graph executor's and to ORT's. Outputs are checked against ORT first.

    TESSEL_NUM_THREADS=1 python -m benchmarks.vm_static --models resnet18 --cpu-time
    python -m benchmarks.vm_static --models resnet18 --image 32 --width 8 --rounds 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import numpy as np

import relay_ir
import relay_ir.vm as vm
from benchmarks.models import (
    _model,
    add_model_build_options,
    check_cpu_time,
    median_seconds,
    ort_session,
)
from lowering.kernel import num_threads
from relay_ir.frontend.onnx import from_onnx


def question_mark_batch(model: Any) -> Any:
    """A copy of an ONNX model whose inputs' and outputs' batch dims are `?` ("N"); the
    weights' dims stay."""
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(model)
    weights = {t.name for t in out.graph.initializer}  # light_resnet50 lists them as inputs
    for v in (*out.graph.input, *out.graph.output):
        if v.name in weights or not v.type.tensor_type.shape.dim:
            continue  # a weight, or a value of unknown shape: no batch to mark
        dim = v.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_value")
        dim.dim_param = "N"
    return out


def compare(name: str, args: Any) -> dict[str, float]:
    """Seconds per run of model `name` on each system (medians over the rounds)."""
    model = _model(name, args)
    mod, params = from_onnx(model)
    lib = relay_ir.build(mod, target=args.target, params=params)
    dmod, dparams = from_onnx(question_mark_batch(model))
    machines = {"vm static": vm.VirtualMachine(vm.compile(mod, args.target, params)),
                "vm ?-batch": vm.VirtualMachine(vm.compile(dmod, args.target, dparams))}
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in lib.input_specs}
    arrays = [feeds[n] for n, _, _ in lib.input_specs]
    sess = ort_session(model, num_threads())
    want = sess.run(None, feeds)[0]
    timed = {"graph": lambda: lib.run(*arrays),
             **{k: (lambda m=m: m.run(*arrays)) for k, m in machines.items()},
             "onnxruntime": lambda: sess.run(None, feeds)}
    tol = {"rtol": 1e-3, "atol": 1e-3 * float(np.abs(want).max())}
    for k in ("graph", *machines):
        got = timed[k]()
        np.testing.assert_allclose(np.asarray(got[0] if isinstance(got, list) else got), want,
                                   **tol, err_msg=k)
    clock = time.process_time if args.cpu_time else time.perf_counter
    runs: dict[str, list[float]] = {k: [] for k in timed}
    for r in range(args.rounds):
        print(f"{name} round {r + 1}: load average {os.getloadavg()[0]:.2f}", flush=True)
        for k in (list(timed) if r % 2 == 0 else list(reversed(timed))):
            runs[k].append(median_seconds(timed[k], args.repeat, clock=clock))
    secs = {k: statistics.median(v) for k, v in runs.items()}
    print(f"\n{name}: medians over {args.rounds} rounds of medians of {args.repeat}"
          + (" (CPU time)" if args.cpu_time else ""))
    for k, s in secs.items():
        print(f"  {k:<12} {s * 1e3:9.2f} ms  {s / secs['graph']:6.3f}x graph  "
              f"{s / secs['onnxruntime']:5.2f}x onnxruntime")
    return secs


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run the comparison (see the module docstring); returns seconds per model and system.

        >>> main(["--models", "resnet18", "--image", "32", "--width", "8",
        ...       "--rounds", "1", "--repeat", "1"])  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet18"])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    add_model_build_options(ap)
    args = ap.parse_args(argv)
    check_cpu_time(args)
    return {m: compare(m, args) for m in args.models}


if __name__ == "__main__":
    main()
