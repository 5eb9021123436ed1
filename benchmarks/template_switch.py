"""A schedule template's module switch on and off inside whole models, both builds in one
process, interleaved: each conv timed in the model's order (layer_profile.primed_convs,
"none": the cache state a model run leaves it), summed per distinct conv, and the whole
model timed, the two builds taking turns every round. A switch is a module-level constant
that a template reads when it schedules (conv2d_NCHWc.x86's PREFETCH_1X1_WEIGHTS,
PREFETCH_WEIGHTS, PAD_GUARD); the build with it flipped is the "off" side whatever the
constant's own value, so "on" is always the checkout's default.

    TESSEL_NUM_THREADS=1 python -m benchmarks.template_switch --models resnet50 --cpu-time
    TESSEL_NUM_THREADS=1 python -m benchmarks.template_switch --switch PAD_GUARD --cpu-time
    TESSEL_NUM_THREADS=1 python -m benchmarks.template_switch --switch PREFETCH_ROWS_OC \
        --db tuned.db --cpu-time
    python -m benchmarks.template_switch --models resnet18 --image 32 --width 8 --rounds 1

Per conv the least disturbed round counts (the minimum; on a machine shared with other
jobs a preempted conv comes back to cold caches and reads 1.5-2x its time), per whole model
the median and the minimum. PREFETCH_1X1_WEIGHTS on one Sapphire Rapids core, CPU time,
9 rounds of 5 (load 3.7-4.6), off -> on: ResNet-50's convs in order 52.30 -> 50.10 ms,
the model 57.07 -> 54.68 (median), 54.57 -> 51.66 (minimum); 1024@14 -> 2048 stride 2
2001 -> 1639 us, 512@7 -> 2048 (three) 2548 -> 2290, 256@14 -> 1024 (six) 3985 -> 3733,
1024@14 -> 256 (five) 3444 -> 3208. MobileNetV2's convs 5.33 -> 4.99 ms (160@7 -> 960,
three, 432 -> 336 us), the model 4.99 -> 4.98 (median), 4.73 -> 4.67 (minimum).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import relay_ir
from benchmarks.layer_profile import LayerTime, primed_convs
from benchmarks.models import _model, add_model_build_options, check_cpu_time, relative_error
from relay_ir.frontend.onnx import from_onnx

DEFAULT_MODULE = "schedule.templates.x86_conv2d_nchwc"
SIDES = ("on", "off")


def resolve_switch(name: str) -> tuple[Any, str]:
    """(module, attribute) of a switch: `NAME` in conv2d_NCHWc.x86's module or
    `package.module.NAME`; a clear error for a name that is no boolean constant there.

        >>> resolve_switch("PAD_GUARD")[1]
        'PAD_GUARD'
    """
    mod_name, _, attr = name.rpartition(".")
    module = importlib.import_module(mod_name or DEFAULT_MODULE)
    if not isinstance(getattr(module, attr, None), bool):
        known = sorted(k for k, v in vars(module).items() if isinstance(v, bool) and k.isupper())
        raise SystemExit(f"switch {name!r}: {module.__name__} has no boolean constant {attr!r}; "
                         f"its switches: {', '.join(known) or '(none)'}")
    return module, attr


@contextmanager
def flipped(module: Any, attr: str, on: bool) -> Iterator[None]:
    """The switch at its default (`on`) or flipped inside the block; afterwards as it was."""
    before = getattr(module, attr)
    setattr(module, attr, before if on else not before)
    try:
        yield
    finally:
        setattr(module, attr, before)


def switched_builds(mod: Any, params: Any, target: str, module: Any, attr: str,
                    db: str | None = None) -> dict[str, Any]:
    """The model built with the switch at its default ("on") and flipped ("off"), with the
    configs of tuning database `db` where it has them."""
    libs = {}
    for side in SIDES:
        with flipped(module, attr, side == "on"):
            libs[side] = relay_ir.build(mod, target=target, params=params, tuning_db=db)
    return libs


def interleaved(libs: dict[str, Any], feeds: dict[str, Any], rounds: int, whole: int,
                clock: Callable[[], float] = time.perf_counter
                ) -> tuple[dict[str, list[list[LayerTime]]], dict[str, list[float]]]:
    """Per side, each round's convs in model order (primed_convs "none") and `whole` timed
    model runs per round (seconds by `clock`); the sides take turns, their order swapped
    every round."""
    convs: dict[str, list[list[LayerTime]]] = {k: [] for k in libs}
    runs: dict[str, list[float]] = {k: [] for k in libs}
    sides = list(libs)
    for r in range(rounds):
        for side in sides if r % 2 == 0 else sides[::-1]:
            lib = libs[side]
            convs[side].append(primed_convs(lib, feeds, "none", 1))
            lib.run(**feeds)
            for _ in range(whole):
                t0 = clock()
                lib.run(**feeds)
                runs[side].append(clock() - t0)
    return convs, runs


def shape_rows(convs: dict[str, list[list[LayerTime]]]
               ) -> dict[tuple[int, int, int], dict[str, float]]:
    """Per distinct conv (key: output, weight, input sizes) and side, the least disturbed
    round's time (its minimum, us) summed over the conv's occurrences; "n": occurrences."""
    rows: dict[tuple[int, int, int], dict[str, float]] = {}
    for side, per_round in convs.items():
        for k, first in enumerate(per_round[0]):
            row = rows.setdefault(first.key, {"n": 0.0})
            row[side] = row.get(side, 0.0) + min(r[k].us for r in per_round)
            if side == SIDES[0]:
                row["n"] += 1
    return rows


def table(rows: dict[tuple[int, int, int], dict[str, float]], runs: dict[str, list[float]],
          top: int = 12) -> str:
    """The `top` distinct convs by |on - off|, all convs summed, the whole model's median
    and minimum (ms).

        >>> rows = {(8, 9, 7): {"n": 2.0, "on": 90.0, "off": 100.0}}
        >>> print(table(rows, {"on": [0.001], "off": [0.002]}))  # doctest: +NORMALIZE_WHITESPACE
        conv (out, weight, in)     n      on us     off us   on/off
        (8, 9, 7)                  2       90.0      100.0    0.900
        all convs in order                 90.0      100.0    0.900
        whole model, median ms             1.00       2.00    0.500
        whole model, minimum ms            1.00       2.00    0.500
    """
    head = f"{'conv (out, weight, in)':<26} {'n':>2} {'on us':>10} {'off us':>10} {'on/off':>8}"
    lines = [head]
    ranked = sorted(rows.items(), key=lambda kv: -abs(kv[1]["on"] - kv[1]["off"]))
    for key, r in ranked[:top]:
        lines.append(f"{str(key):<26} {int(r['n']):>2} {r['on']:>10.1f} {r['off']:>10.1f} "
                     f"{r['on'] / r['off']:>8.3f}")
    on, off = (sum(r[s] for r in rows.values()) for s in SIDES)
    lines.append(f"{'all convs in order':<29} {on:>10.1f} {off:>10.1f} {on / off:>8.3f}")
    for label, stat in (("median", statistics.median), ("minimum", min)):
        a, b = stat(runs["on"]) * 1e3, stat(runs["off"]) * 1e3
        lines.append(f"{'whole model, ' + label + ' ms':<29} {a:>10.2f} {b:>10.2f} "
                     f"{a / b:>8.3f}")
    return "\n".join(lines)


def compare(name: str, args: Any) -> str:
    """Build model `name` both ways, check they agree, time them interleaved; the table."""
    module, attr = resolve_switch(args.switch)
    mod, params = from_onnx(_model(name, args))
    libs = switched_builds(mod, params, args.target, module, attr, args.db)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in libs["on"].input_specs}
    want = np.asarray(libs["off"].run(**feeds)).copy()
    err = relative_error(np.asarray(libs["on"].run(**feeds)), want)
    if not err <= 1e-4:
        raise SystemExit(f"{name}: the builds with {attr} on and off differ by {err:.1e}")
    clock = time.process_time if args.cpu_time else time.perf_counter
    print(f"{name}: {attr} (default {getattr(module, attr)}) on / flipped"
          + (f", tuned ({args.db})" if args.db else "")
          + f", load average {os.getloadavg()[0]:.2f}", flush=True)
    convs, runs = interleaved(libs, feeds, args.rounds, args.whole, clock)
    text = table(shape_rows(convs), runs, args.top)
    print(text + f"\nload average {os.getloadavg()[0]:.2f}"
          + (" (CPU time)" if args.cpu_time else ""), flush=True)
    return text


def main(argv: list[str] | None = None) -> dict[str, str]:
    """Run the comparison (see the module docstring); returns the table per model.

        >>> main(["--models", "resnet18", "--image", "32", "--width", "8",
        ...       "--rounds", "1", "--whole", "1"])  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50"])
    ap.add_argument("--switch", default="PREFETCH_1X1_WEIGHTS",
                    help=f"a boolean constant of {DEFAULT_MODULE}, or module.NAME")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--whole", type=int, default=5, help="whole-model runs per round")
    ap.add_argument("--top", type=int, default=12)
    add_model_build_options(ap)
    ap.add_argument("--db", default=None, help="tuning database: both builds use its configs")
    args = ap.parse_args(argv)
    check_cpu_time(args)
    return {m: compare(m, args) for m in args.models}


if __name__ == "__main__":
    main()
