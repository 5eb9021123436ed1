"""GEMM benchmark: 1024^3 float32 matmul with Tessel's best hand schedule, side by side with
numpy (OpenBLAS) and, when installed, torch. Prints GFLOP/s, ratios to the peers, and the
load average (the machines are shared: compare ratios from one run only).

    python -m benchmarks.gemm                # 1024^3, all cores
    python -m benchmarks.gemm --size 512 --number 5 --repeat 5

OpenBLAS picks its kernel from CPUID at load time; on hosts whose CPUID is masked set
OPENBLAS_CORETYPE (e.g. SkylakeX) in the environment before starting Python. The value in
effect is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import lowering
import tensor_expr as te
from lowering.kernel import num_threads
from schedule import create_schedule
from tessel_target import host_features


def micro_kernel_shape() -> tuple[int, int]:
    """(rows, columns) of the register block: 6 x 32 floats on AVX-512 (12 zmm
    accumulators), 6 x 16 on AVX2 (12 ymm), leaving registers for B and the broadcast."""
    return (6, 32) if "avx512f" in host_features() else (6, 16)


def gemm(m: int, n: int, k: int, mr: int, bn: int) -> tuple[Any, list[Any]]:
    """C = A @ B as TE plus its schedule: packed B, register-blocked accumulator."""
    # --- algorithm
    A = te.placeholder((m, k), "float32", name="A")
    B = te.placeholder((k, n), "float32", name="B")
    # B packed into column panels of width bn: each k step reads bn contiguous floats
    packed = te.compute((n // bn, k, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * packed[j // bn, r, j % bn], axis=r),
                   name="C")
    # --- schedule
    # 1024^3 fp32, 6x16 block on 2 Zen 3 vCPUs (AVX2), load average 0.2: 142 GFLOP/s vs
    # numpy 134 (1.06); one thread each: 75 vs 68 (1.11). Not yet run on AVX-512 (6x32).
    s = create_schedule(C)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=mr)
    jo, ji = s[C].split(j, factor=bn)
    s[C].reorder(io, jo, ii, ji)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (kk,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kk, factor=4)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    s[C].parallel(io)
    x, _y, z = s[packed].op.axis
    s[packed].vectorize(z)
    s[packed].parallel(x)
    return s, [A, B, C]


def median_time(fn: Callable[[], Any], number: int, repeat: int) -> float:
    """Median seconds per call of `fn` over `repeat` runs of `number` calls, warmed up."""
    fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t0) / number)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Run the benchmark and print figures; returns GFLOP/s per contender."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--number", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pause", type=float, default=0.3,
                    help="seconds between libraries, so idle pools stop spinning")
    args = ap.parse_args(argv)
    n = args.size
    mr, bn = micro_kernel_shape()
    flops = 2.0 * n * n * n
    print(f"GEMM {n}x{n}x{n} float32, block {mr}x{bn}, threads "
          f"{num_threads()}, OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(auto)')}")
    print(f"load average before: {os.getloadavg()[0]:.2f}")

    s, tensors = gemm(n, n, n, mr, bn)
    t0 = time.perf_counter()
    kernel = lowering.build(s, tensors, target="llvm")
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng()
    a = rng.random((n, n), dtype="float32")
    b = rng.random((n, n), dtype="float32")
    c = np.empty((n, n), "float32")
    kernel(a, b, c)
    ref = a @ b
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-3)

    results: dict[str, float] = {}
    results["tessel"] = flops / kernel.time(a, b, c, number=args.number, repeat=args.repeat)
    time.sleep(args.pause)
    out = np.empty_like(c)
    results["numpy"] = flops / median_time(lambda: np.matmul(a, b, out=out), args.number,
                                           args.repeat)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        time.sleep(args.pause)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        tc = torch.empty((n, n), dtype=torch.float32)
        results["torch"] = flops / median_time(lambda: torch.matmul(ta, tb, out=tc),
                                               args.number, args.repeat)
    print(f"build (lower + LLVM): {build_s:.2f} s")
    for name, rate in results.items():
        line = f"{name:>7}: {rate / 1e9:8.1f} GFLOP/s"
        if name != "tessel":
            line += f"   tessel/{name} = {results['tessel'] / rate:.2f}"
        print(line)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return results


if __name__ == "__main__":
    main()
