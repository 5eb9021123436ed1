"""A dense layer with a constant weight: packed once at build (what relay_ir.build does
now) against packed at every call (before), beside numpy's `x @ w.T`, in one run.
Medians of repeats after warm-up; ratios printed.

    python -m benchmarks.constant_weights                 # 512 -> 1000, batch 1 and 16
    python -m benchmarks.constant_weights --batches 1 64 --repeat 9
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import relay_ir
from schedule.templates import TEMPLATES


def _median_us(fn: Callable[[], Any], repeat: int, number: int = 50) -> float:
    for _ in range(20):
        fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t0) / number)
    return statistics.median(runs) * 1e6


def bench(batch: int, k: int, n: int, repeat: int) -> dict[str, float]:
    """Microseconds per call of the three ways, for x [batch, k] and w [n, k]."""
    mod = relay_ir.parse(f"def @main(%x: Tensor[({batch}, {k}), float32], "
                         f"%w: Tensor[({n}, {k}), float32]) {{ nn.dense(%x, %w) }}")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((n, k)).astype("float32")
    x = rng.standard_normal((batch, k)).astype("float32")
    out: dict[str, float] = {}
    packed_once = TEMPLATES["dense.x86"]
    per_call = dataclasses.replace(packed_once, constant_weight_attrs=())
    try:
        for label, tpl in (("packed once", packed_once), ("packed per call", per_call)):
            TEMPLATES["dense.x86"] = tpl
            lib = relay_ir.build(mod, params={"w": w})
            np.testing.assert_allclose(lib.run(x), x @ w.T, rtol=1e-4, atol=1e-3)
            out[label] = _median_us(lambda lib=lib: lib.run(x), repeat)
    finally:
        TEMPLATES["dense.x86"] = packed_once
    out["numpy"] = _median_us(lambda: x @ w.T, repeat)
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the three times and their ratios per batch."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--k", type=int, default=512)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=7)
    opts = ap.parse_args(argv)
    print(f"dense {opts.k} -> {opts.n}, load average {os.getloadavg()[0]:.2f}")
    for batch in opts.batches:
        t = bench(batch, opts.k, opts.n, opts.repeat)
        print(f"batch {batch:3d}: packed once {t['packed once']:7.1f} us, per call "
              f"{t['packed per call']:7.1f} us, numpy {t['numpy']:7.1f} us; per call / once "
              f"{t['packed per call'] / t['packed once']:.2f}, once / numpy "
              f"{t['packed once'] / t['numpy']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
