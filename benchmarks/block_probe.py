"""Would another channel block between convs pay in the whole model (the choice TVM's
graph tuner makes)? Untuned builds with the default output block of chosen convs
overridden, beside the default, all in one process and timed interleaved
(template_switch's rounds and table: side "on" is the default, "off" the override).

An override `CO@OW=BLOCK` makes every conv2d_NCHWc.x86 and stem conv with CO output
channels and OW output columns write blocks of BLOCK: its fallback then takes reg_n for
that block (pick_blocks' and stem_blocks' `oc_fixed`), the layout plan keeps the block
for the next convs (relay_ir.backend.layout_plan), and a depthwise conv reading the
value keeps it too. The two sides of a residual add come out of convs of one CO and OW,
so one override per stage keeps them in one block. Experiment only: the override wraps
the two functions inside `overridden` and nowhere else; builds are untuned (a record's
tile_oc would write the default block again).

    TESSEL_NUM_THREADS=1 python -m benchmarks.block_probe resnet18 --list
    TESSEL_NUM_THREADS=1 python -m benchmarks.block_probe resnet18 \\
        --override 256@14=16 --cpu-time --rounds 9
    TESSEL_NUM_THREADS=1 python -m benchmarks.avx2_host benchmarks.block_probe MODEL.onnx \\
        --target "llvm -mcpu=haswell" --override 64@56=16 --cpu-time

Figures (session 17, one Emerald Rapids core, CPU time, 9-15 rounds, load 1-4.8; "all
convs in order" default/override, below 1: the default is faster): AVX-512 (default 32;
16 or 64 per stage) ResNet-18 0.907-0.994, ResNet-50 0.898-1.004, MobileNetV2 0.940-1.020
(its repeats: whole model 0.979-1.000); AVX2 (default 8; 16 or 32) ResNet-18
0.919-0.989, ResNet-50 0.952-1.003, MobileNetV2 0.982-1.013; every stage at the other
block: ResNet-18 AVX2 0.842, ResNet-50 AVX-512 (wide stages at 64) 0.846. No stage paid
beyond its same-side spread; the convs that ran faster in the other block (those reading
it) gained under 0.6% of ResNet-18's and ResNet-50's convs.
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import relay_ir
from benchmarks.models import _model, add_model_build_options, check_cpu_time, relative_error
from benchmarks.template_switch import interleaved, shape_rows, table
from relay_ir.frontend.onnx import from_onnx
from schedule.templates import x86_conv2d_nchwc as nchwc
from schedule.templates import x86_conv2d_stem as stem

Overrides = dict[tuple[int, int], int]
_ITEM = re.compile(r"^(\d+)@(\d+)=(\d+)$")


def parse_overrides(items: list[str]) -> Overrides:
    """`["64@56=32"]` -> {(64, 56): 32}; a clear error for anything else.

        >>> parse_overrides(["64@56=32", "512@7=16"])
        {(64, 56): 32, (512, 7): 16}
    """
    out: Overrides = {}
    for item in items:
        m = _ITEM.match(item)
        if not m:
            raise SystemExit(f"--override {item!r}: expected CO@OW=BLOCK, e.g. 64@56=32 "
                             "(output channels @ output columns = channel block)")
        co, ow, block = map(int, m.groups())
        if block <= 0 or co % block:
            raise SystemExit(f"--override {item!r}: the block {block} does not divide the "
                             f"{co} output channels")
        out[(co, ow)] = block
    return out


@contextmanager
def overridden(blocks: Overrides) -> Iterator[list[tuple[str, int, int, int]]]:
    """Inside the block, convs with (CO, OW) in `blocks` default to writing that block;
    yields a list that fills with (template, CO, OW, block) for each default asked for.
    Afterwards the templates are as they were."""
    pick, stem_pick = nchwc.pick_blocks, stem.stem_blocks
    seen: list[tuple[str, int, int, int]] = []

    def pick_blocks(C: int, CO: int, OW: int, oc_fixed: int | None = None,
                    target: Any = None) -> tuple[int, int, int]:
        got = pick(C, CO, OW, oc_fixed or blocks.get((CO, OW)), target)
        seen.append(("conv2d_NCHWc", CO, OW, got[1]))
        return got

    def stem_blocks(CO: int, OW: int, target: Any, oc_fixed: int | None = None
                    ) -> tuple[int, int]:
        got = stem_pick(CO, OW, target, oc_fixed or blocks.get((CO, OW)))
        seen.append(("conv2d_stem", CO, OW, got[0]))
        return got

    nchwc.pick_blocks, stem.stem_blocks = pick_blocks, stem_blocks
    try:
        yield seen
    finally:
        nchwc.pick_blocks, stem.stem_blocks = pick, stem_pick


def probe_builds(mod: Any, params: Any, target: str, blocks: Overrides, per_side: int = 2
                 ) -> dict[str, Any]:
    """`per_side` untuned builds a side, labelled and ordered as template_switch's
    ("on#1", "off#1", "off#2", "on#2"): "on" the default blocks, "off" with `blocks`."""
    labels: list[str] = []
    for k in range(per_side):
        labels += [f"{s}#{k + 1}" for s in (("on", "off") if k % 2 == 0 else ("off", "on"))]
    libs = {}
    for label in labels:
        with overridden(blocks if label.startswith("off") else {}):
            libs[label] = relay_ir.build(mod, target=target, params=params)
    return libs


def _load(model: str, args: argparse.Namespace) -> tuple[Any, Any]:
    import onnx

    return from_onnx(onnx.load(model) if model.endswith(".onnx") else _model(model, args))


def main(argv: list[str] | None = None) -> str:
    """Run the probe (see the module docstring); returns the table (or the list)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="resnet18, resnet50, mobilenet_v2, resnext26 or an .onnx")
    ap.add_argument("--override", nargs="*", default=[], metavar="CO@OW=BLOCK")
    ap.add_argument("--list", action="store_true",
                    help="print the block each conv writes (with the overrides) and stop")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--whole", type=int, default=5, help="whole-model runs per round")
    ap.add_argument("--builds", type=int, default=2, help="builds per side")
    ap.add_argument("--top", type=int, default=12)
    add_model_build_options(ap)
    args = ap.parse_args(argv)
    check_cpu_time(args)
    blocks = parse_overrides(args.override)
    mod, params = _load(args.model, args)
    if args.list:
        with overridden(blocks) as seen:
            relay_ir.build(mod, target=args.target, params=params)
        text = "\n".join(f"{tpl:<14} {co:>5}@{ow:<4} block {b}"
                         for tpl, co, ow, b in dict.fromkeys(seen))
        print(text)
        return text
    if not blocks:
        ap.error("give --override CO@OW=BLOCK (see --list for the convs)")
    t0 = time.perf_counter()
    libs = probe_builds(mod, params, args.target, blocks, args.builds)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in libs["on#1"].input_specs}
    want = np.asarray(libs["on#1"].run(**feeds)).copy()
    for label, lib in libs.items():
        err = relative_error(np.asarray(lib.run(**feeds)), want)
        if not err <= 1e-4:
            raise SystemExit(f"build {label} differs from on#1 by {err:.1e}")
    clock = time.process_time if args.cpu_time else time.perf_counter
    print(f"{os.path.basename(args.model)} '{args.target}': default (on) / override (off) "
          f"{' '.join(args.override)}, builds {time.perf_counter() - t0:.0f} s, load "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    convs, runs = interleaved(libs, feeds, args.rounds, args.whole, clock)
    text = table(shape_rows(convs), runs, args.top)
    print(text + f"\nload average {os.getloadavg()[0]:.2f}"
          + (" (CPU time)" if args.cpu_time else ""), flush=True)
    return text


if __name__ == "__main__":
    main()
