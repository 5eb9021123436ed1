"""One model built with FoldScaleAxis and without (PassContext disabled_pass), beside ONNX
Runtime, interleaved in one process: the same tuning records (a task is keyed by its
anchor's shapes, not its weights), only whether a batch norm's scale is a multiply in the
conv's epilogue or folded into the conv's weight.

Each round takes --repeat calls of each system in turn (a call of each, then the next turn:
the machine's speed changes over seconds), the two builds' order swapped every round;
printed: the median over rounds of each round's median per build, its ratio to ORT's,
folded / unfolded (also the median and range of the rounds' own ratios), and each build's
count of multiply in its fused groups' names.

    TESSEL_NUM_THREADS=1 python -m benchmarks.fold_scale_axis --models resnet50 --cpu-time
    TESSEL_NUM_THREADS=1 python -m benchmarks.fold_scale_axis --db tune.db --cpu-time
    python -m benchmarks.fold_scale_axis --models resnet18 --image 32 --width 8 --rounds 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import numpy as np

import relay_ir
from benchmarks.models import (
    _model,
    add_model_build_options,
    alternating_medians,
    check_cpu_time,
    ort_session,
    relative_error,
)
from lowering.kernel import num_threads
from relay_ir.frontend.onnx import from_onnx

BUILDS = {"fold": (), "no fold": ("FoldScaleAxis",)}


def compare(name: str, args: Any) -> dict[str, float]:
    """Seconds per run of model `name` folded, unfolded and in ONNX Runtime (medians)."""
    model = _model(name, args)
    mod, params = from_onnx(model)
    libs = {}
    for k, off in BUILDS.items():
        with relay_ir.transform.PassContext(disabled_pass=off):
            libs[k] = relay_ir.build(mod, target=args.target, params=params,
                                     tuning_db=args.db)
    lib = libs["fold"]
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in lib.input_specs}
    sess = ort_session(model, num_threads())
    want = sess.run(None, feeds)[0]
    for k, b in libs.items():
        err = relative_error(np.asarray(b.run(**feeds)), want)
        if not err <= args.tolerance:
            raise SystemExit(f"{name} ({k}): differs from onnxruntime by {err:.1e}")
    clock = time.process_time if args.cpu_time else time.perf_counter
    runs: dict[str, list[float]] = {k: [] for k in (*BUILDS, "onnxruntime")}
    systems = {k: (lambda b=b: b.run(**feeds)) for k, b in libs.items()}
    systems["onnxruntime"] = lambda: sess.run(None, feeds)
    for r in range(args.rounds):
        print(f"{name} round {r + 1}: load average {os.getloadavg()[0]:.2f}", flush=True)
        # the systems' calls in turn, the two builds' order swapped every round
        order = list(BUILDS) if r % 2 == 0 else list(reversed(BUILDS))
        got = alternating_medians({k: systems[k] for k in (*order, "onnxruntime")},
                                  args.repeat, 0.0, clock=clock)
        for k, sec in got.items():
            runs[k].append(sec)
    secs = {k: statistics.median(v) for k, v in runs.items()}
    print(f"\n{name}: medians over {args.rounds} rounds of medians of {args.repeat}"
          + (" (CPU time)" if args.cpu_time else "") + (f", tuned with {args.db}"
                                                         if args.db else ""))
    for k, b in libs.items():
        multiplies = sum(g.count("multiply") for g, _ in b.group_schedules)
        print(f"  tessel {k:<9} {secs[k] * 1e3:9.2f} ms  {secs[k] / secs['onnxruntime']:5.3f}x "
              f"onnxruntime  {secs[k] / secs['no fold']:6.3f}x no fold  "
              f"({multiplies} multiply in its groups, {len(b.plan.steps)} kernel calls)")
    print(f"  {'onnxruntime':<16} {secs['onnxruntime'] * 1e3:9.2f} ms")
    paired = sorted(a / b for a, b in zip(runs["fold"], runs["no fold"]))
    print(f"  fold / no fold, round by round: median {statistics.median(paired):.3f}, "
          f"range {paired[0]:.3f}-{paired[-1]:.3f}")
    return secs


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run the comparison (see the module docstring); returns seconds per model and build.

        >>> main(["--models", "resnet18", "--image", "32", "--width", "8",
        ...       "--rounds", "1", "--repeat", "1"])  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50", "resnet18", "mobilenet_v2"])
    ap.add_argument("--db", default=None, help="tuning database for both builds")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=20)
    add_model_build_options(ap)
    ap.add_argument("--tolerance", type=float, default=1e-3)
    args = ap.parse_args(argv)
    check_cpu_time(args)
    return {m: compare(m, args) for m in args.models}


if __name__ == "__main__":
    main()
