"""Build-to-build latency spread: build one model N times (fresh builds), time each, and
print the spread (max / min of the builds' medians), with the memory plan's block skew on
and off (TESSEL_PLAN_SKEW, see relay_ir.backend.memory_plan), plus each build's block
offsets modulo the 4 KiB page.

    python -m benchmarks.stable_latency                      # ResNet-18 224, 5 builds each
    python -m benchmarks.stable_latency --image 32 --width 8 --builds 2 --repeat 1  # tiny
"""

from __future__ import annotations

import argparse

import numpy as np

import relay_ir
from benchmarks.envvar import temporary_env
from benchmarks.models import median_seconds
from relay_ir.backend.memory_plan import PAGE
from relay_ir.frontend.onnx import from_onnx


def spread(mod: object, params: object, builds: int, repeat: int, skew: bool
           ) -> list[tuple[float, list[int]]]:
    """(median seconds per inference, block offsets % 4096) of `builds` fresh builds,
    under skew on or off."""
    out = []
    for k in range(builds):
        with temporary_env("TESSEL_PLAN_SKEW", "1" if skew else "0"):
            lib = relay_ir.build(mod, params=params)
        rng = np.random.default_rng(k)
        feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in lib.input_specs}
        secs = median_seconds(lambda lib=lib, feeds=feeds: lib.run(**feeds), repeat)
        pages = [o % PAGE for o in lib.memory_plan.block_offsets]
        out.append((secs, pages))
        print(f"  skew {'on ' if skew else 'off'} build {k}: {secs * 1e3:8.2f} ms, "
              f"block offsets % 4096 {pages}", flush=True)
    return out


def main(argv: list[str] | None = None) -> dict[str, list[tuple[float, list[int]]]]:
    """Run the builds (see the module docstring); returns spread()'s rows per setting."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--builds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args(argv)
    from tests.e2e.onnx_models import resnet18

    mod, params = from_onnx(resnet18(image=a.image, width=a.width))
    res = {}
    for skew in (False, True):
        res["on" if skew else "off"] = rows = spread(mod, params, a.builds, a.repeat, skew)
        ts = [t for t, _ in rows]
        print(f"skew {'on' if skew else 'off'}: spread max/min {max(ts) / min(ts):.3f}")
    return res


if __name__ == "__main__":
    main()
