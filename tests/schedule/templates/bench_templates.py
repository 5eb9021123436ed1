"""Measure the x86 templates' fallback schedules against numpy (not a test; run by hand).

    python -m tests.schedule.templates.bench_templates            # all
    python -m tests.schedule.templates.bench_templates dense conv

Prints GFLOP/s per template and shape next to numpy's GEMM measured in the same run, and
the load average (the machine is shared: compare ratios from one run only).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

import lowering
from schedule.templates import instantiate


def _time(k: object, arrays: list[np.ndarray]) -> float:
    return min(k.time(*arrays, number=3, repeat=3) for _ in range(2))  # type: ignore[attr-defined]


def _numpy_gemm(n: int = 1024) -> float:
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32)
    b = rng.random((n, n), dtype=np.float32)
    for _ in range(2):
        a @ b
    ts = []
    for _ in range(5):
        t = time.perf_counter()
        a @ b
        ts.append(time.perf_counter() - t)
    time.sleep(0.3)  # let OpenBLAS's spinning threads go idle before we measure
    return 2 * n ** 3 / sorted(ts)[2] / 1e9


def bench(name: str, args: list, attrs: dict, flop: float, label: str) -> None:
    s, ts = instantiate(name, args, attrs)
    k = lowering.build(s, ts)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal([int(d.value) for d in t.shape]).astype(np.float32)
              for t in ts]
    sec = _time(k, arrays)
    print(f"{label:44s} {flop / sec / 1e9:7.1f} GFLOP/s  {sec * 1e3:8.3f} ms", flush=True)


def main(which: list[str]) -> None:
    print(f"threads={os.environ.get('TESSEL_NUM_THREADS', 'all')} "
          f"load={os.getloadavg()[0]:.2f}")
    print(f"{'numpy GEMM 1024^3':44s} {_numpy_gemm():7.1f} GFLOP/s")
    if not which or "dense" in which:
        n = 1024
        bench("dense.x86", [((n, n), "float32"), ((n, n), "float32")], {}, 2 * n ** 3,
              "dense.x86 1024^3")
        bench("matmul.x86", [((n, n), "float32"), ((n, n), "float32")], {}, 2 * n ** 3,
              "matmul.x86 1024^3")
        bench("batch_matmul.x86", [((8, 256, 256), "float32"), ((8, 256, 256), "float32")],
              {}, 2 * 8 * 256 ** 3, "batch_matmul.x86 8x256^3")
    if not which or "conv" in which:
        for c, h in ((64, 56), (128, 28), (256, 14)):
            flop = 2 * c * c * 9 * h * h
            args = [((1, c, h, h), "float32"), ((c, c, 3, 3), "float32")]
            bench("conv2d_nchw.x86", args, {"padding": 1}, flop, f"conv2d_nchw.x86 {c}@{h}")
            bench("conv2d_NCHWc.x86", args, {"padding": 1}, flop,
                  f"conv2d_NCHWc.x86 {c}@{h} (NCHW in/out)")
            bn = 8
            pk = [((1, c // bn, h, h, bn), "float32"),
                  ((c // bn, c // bn, 3, 3, bn, bn), "float32")]
            bench("conv2d_NCHWc.x86", pk, {"padding": 1, "data_layout": "NCHWc",
                                           "kernel_layout": "OIHWio", "out_layout": "NCHWc"},
                  flop, f"conv2d_NCHWc.x86 {c}@{h} (packed in/out)")
    if not which or "depthwise" in which:
        c, h = 128, 56
        bench("depthwise_conv2d_nchw.x86", [((1, c, h, h), "float32"), ((c, 1, 3, 3), "float32")],
              {"padding": 1}, 2 * c * 9 * h * h, f"depthwise_conv2d_nchw.x86 {c}@{h}")


if __name__ == "__main__":
    main(sys.argv[1:])
