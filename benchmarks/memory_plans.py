"""One compiled model run with a memory-layout switch of the graph executor on and off,
beside ONNX Runtime, interleaved in one process: the same kernels, only where the data
lie differs. --switch inplace: outputs written over a dying input where the kernel allows
it (relay_ir.backend.inplace; TESSEL_PLAN_INPLACE); --switch constants: the constants in
one arena in first-use order (executor.pack_constants; TESSEL_PACK_CONSTANTS).

Each setting gets --arenas graph plans of its own (fresh allocations each; where an arena
lands in memory moved one model's time by about 2% here), every round times each once, in
alternating order; printed: the median per setting, its ratio to ORT's and to the setting
off, and each setting's peak bytes of intermediates.

    TESSEL_NUM_THREADS=1 python -m benchmarks.memory_plans --models resnet50 --cpu-time
    TESSEL_NUM_THREADS=1 python -m benchmarks.memory_plans --switch constants --cpu-time
    python -m benchmarks.memory_plans --models resnet18 --image 32 --width 8 --rounds 1
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from typing import Any

import numpy as np

import relay_ir
from benchmarks.envvar import temporary_env
from benchmarks.models import _model, median_seconds, ort_session
from lowering.kernel import num_threads
from relay_ir.backend.executor import GraphPlan
from relay_ir.frontend.onnx import from_onnx

PLANS = ("on", "off")
SWITCHES = {"inplace": "TESSEL_PLAN_INPLACE", "constants": "TESSEL_PACK_CONSTANTS"}


def plans_of(lib: Any, arenas: int, switch: str = "inplace") -> dict[str, list[GraphPlan]]:
    """`arenas` graph plans of `lib`'s kernels with `switch` on and off (PLANS), each with
    arenas of its own (intermediates allocated at its first run; with "constants", its own
    copy of the constants too)."""
    p = lib.plan
    out: dict[str, list[GraphPlan]] = {}
    for name in PLANS:
        with temporary_env(SWITCHES[switch], "1" if name == "on" else "0"):
            out[name] = []
            for _ in range(arenas):
                values = p.values
                if switch == "constants":  # each plan lays out constants of its own
                    values = [dataclasses.replace(v, data=None if v.data is None
                                                  else np.array(v.data)) for v in values]
                out[name].append(GraphPlan(p.kernels, values, p.steps, p.inputs, p.outputs))
    return out


def compare(name: str, args: Any) -> dict[str, float]:
    """Seconds per run of model `name` under each plan and ONNX Runtime (medians)."""
    model = _model(name, args)
    mod, params = from_onnx(model)
    lib = relay_ir.build(mod, target=args.target, params=params)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in lib.input_specs}
    arrays = [feeds[n] for n, _, _ in lib.input_specs]
    plans = plans_of(lib, args.arenas, args.switch)
    sess = ort_session(model, num_threads())
    want = sess.run(None, feeds)[0]
    for ps in plans.values():  # the same numbers under either plan
        got = np.asarray(ps[0].result(ps[0].execute(arrays)))
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.abs(want).max()))
    clock = time.process_time if args.cpu_time else time.perf_counter
    runs: dict[str, list[float]] = {k: [] for k in (*PLANS, "onnxruntime")}
    for r in range(args.rounds):
        print(f"{name} round {r + 1}: load average {os.getloadavg()[0]:.2f}", flush=True)
        order = list(PLANS) if r % 2 == 0 else list(reversed(PLANS))
        for k in order:
            for g in plans[k]:
                runs[k].append(median_seconds(lambda g=g: g.execute(arrays), args.repeat,
                                              clock=clock))
        runs["onnxruntime"].append(median_seconds(lambda: sess.run(None, feeds), args.repeat,
                                                  clock=clock))
    secs = {k: statistics.median(v) for k, v in runs.items()}
    print(f"\n{name}: medians over {args.rounds} rounds x {args.arenas} arenas of medians of "
          f"{args.repeat}" + (" (CPU time)" if args.cpu_time else ""))
    env = SWITCHES[args.switch]
    for k in PLANS:
        peak = plans[k][0].memory_plan.peak_bytes / 2**20
        label = f"{env}={'1' if k == 'on' else '0'}"
        print(f"  tessel {label:<24} {secs[k] * 1e3:9.2f} ms  "
              f"{secs[k] / secs['onnxruntime']:5.2f}x onnxruntime  {secs[k] / secs['off']:6.3f}x "
              f"off   peak {peak:.2f} MiB")
    print(f"  {'onnxruntime':<31} {secs['onnxruntime'] * 1e3:9.2f} ms")
    return secs


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run the comparison (see the module docstring); returns seconds per model and plan.

        >>> main(["--models", "resnet18", "--image", "32", "--width", "8",
        ...       "--rounds", "1", "--repeat", "1", "--arenas", "1"])  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50"])
    ap.add_argument("--switch", choices=sorted(SWITCHES), default="inplace")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--arenas", type=int, default=4)
    ap.add_argument("--image", type=int, default=224, help="input side (not resnet50)")
    ap.add_argument("--width", type=int, default=None, help="first-stage channels")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time by the process's CPU time (needs TESSEL_NUM_THREADS=1)")
    args = ap.parse_args(argv)
    if args.cpu_time and num_threads() != 1:
        raise SystemExit("--cpu-time measures one thread: set TESSEL_NUM_THREADS=1")
    return {m: compare(m, args) for m in args.models}


if __name__ == "__main__":
    main()
