"""One ONNX model built untuned and with each of several tuning databases, run in turn in
one process: the median over rounds of each build's median run, and its ratio to the
untuned build. What `tessel tune MODEL`'s model confirmation (autotune.model_confirm) is
for: a database before it and a copy after it, against the untuned model.

    TESSEL_NUM_THREADS=1 python -m benchmarks.tuned_ab resnet18.onnx before.db after.db \\
        --cpu-time --rounds 7 --repeat 5
    TESSEL_NUM_THREADS=1 python -m benchmarks.avx2_host benchmarks.tuned_ab resnet18.onnx \\
        avx2.db --target "llvm -mcpu=haswell" --ort --cpu-time     # AVX2, beside AVX2 ORT

--ort takes ONNX Runtime in turn with the builds, and prints each build's per-round ratio
to it as well: the paired form of benchmarks.models' ratio, whose systems run their
repeats one after another while this machine's speed drifts.

--cpu-time times each run by the process's CPU time (one thread: TESSEL_NUM_THREADS=1),
which a loaded machine moves less than wall time (benchmarks.models).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

import numpy as np
import onnx

import relay_ir
from benchmarks.models import median_seconds, ort_session, relative_error
from lowering.kernel import num_threads
from relay_ir.frontend.onnx import from_onnx


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    """Run the comparison; returns each build's per-round medians (seconds), by name.

        >>> main(["resnet18.onnx", "before.db", "after.db", "--rounds", "3"])  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="an ONNX file")
    ap.add_argument("dbs", nargs="+", help="tuning databases, each one tuned build")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=5, help="runs of each build per round")
    ap.add_argument("--cpu-time", action="store_true", help="time by the process's CPU time")
    ap.add_argument("--target", default="llvm", help="Tessel's target (the databases' too)")
    ap.add_argument("--ort", action="store_true",
                    help="ONNX Runtime in turn with the builds; ratios to it per round")
    args = ap.parse_args(argv)
    if args.cpu_time and num_threads() != 1:
        ap.error("--cpu-time needs TESSEL_NUM_THREADS=1 (several threads' CPU times add up)")
    clock = time.process_time if args.cpu_time else time.perf_counter
    mod, params = from_onnx(args.model)
    names = ["untuned", *args.dbs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        libs = [relay_ir.build(mod, target=args.target, params=params)] + [
            relay_ir.build(mod, target=args.target, params=params, tuning_db=db)
            for db in args.dbs]
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(d) for n, s, d in libs[0].input_specs}
    want = libs[0].run(**feeds)
    runs = [lambda lib=lib: lib.run(**feeds) for lib in libs]
    if args.ort:
        sess = ort_session(onnx.load(args.model), num_threads())
        runs.append(lambda: sess.run(None, feeds)[0])
        names.append("onnxruntime")
    for name, run in zip(names[1:], runs[1:]):
        # random weights give outputs of 1e4 and more: compared to the output's scale
        err = relative_error(np.asarray(run()), np.asarray(want))
        if err > 1e-4:
            raise SystemExit(f"the build with {name} computes otherwise: an error of "
                             f"{err:.2g} of the output's largest value")
    medians: list[list[float]] = [[] for _ in runs]
    for r in range(args.rounds):
        for k in range(len(runs)) if r % 2 == 0 else reversed(range(len(runs))):
            # one untimed run first: the state a run of the same model leaves
            medians[k].append(median_seconds(runs[k], args.repeat, warmup=1, clock=clock))
    base = statistics.median(medians[0])
    print(f"{args.model}: {args.rounds} rounds x {args.repeat} runs, "
          f"{'CPU' if args.cpu_time else 'wall'} time, load {os.getloadavg()[0]:.2f}")
    for name, m in zip(names, medians):
        # paired by round: the machine's speed drifts over seconds, a round's pair shares it
        ratios = [a / b for a, b in zip(m, medians[0])]
        print(f"{name:<40} {statistics.median(m) * 1e3:8.2f} ms  "
              f"x{statistics.median(m) / base:.3f} of untuned (per round: median "
              f"{statistics.median(ratios):.3f}, {min(ratios):.3f}-{max(ratios):.3f}, "
              f"below 1 in {sum(x < 1 for x in ratios)} of {len(ratios)})")
    if args.ort:
        for name, m in zip(names[:-1], medians[:-1]):
            ratios = [a / b for a, b in zip(m, medians[-1])]
            print(f"{name:<40} x{statistics.median(ratios):.3f} of onnxruntime per round "
                  f"({min(ratios):.3f}-{max(ratios):.3f}, below 1 in "
                  f"{sum(x < 1 for x in ratios)} of {len(ratios)})")
    return dict(zip(names, medians))


if __name__ == "__main__":
    main()
