"""A schedule template's module switch on and off inside whole models, all builds in one
process, interleaved: each conv timed in the model's order (layer_profile.primed_convs,
"none": the cache state a model run leaves it), summed per distinct conv, and the whole
model timed, every build once a round in a shuffled order. Each side has --builds builds
(2 by default): a side's figure is its builds' mean, and the table's "same side" column,
what two builds of one side differ by, is the control an on/off figure must clear (one
build a side let a build that ran slow as a whole pass for the switch). ResNet-50,
PREFETCH_1X1_WEIGHTS, 9 rounds, one Emerald Rapids core (load 2.1-2.3): same side 1.017
for the whole model and 1.019 for all convs, 1.003-1.075 per distinct conv (the
minimum of 9 single runs), against on/off 0.915 and 0.931: a conv's on/off within 8% of
1 needs more rounds before it says anything.

A switch is a module-level constant that a template reads when it schedules
(conv2d_NCHWc.x86's PREFETCH_1X1_WEIGHTS, PREFETCH_WEIGHTS, PAD_GUARD); the builds with
it flipped are the "off" side whatever the constant's own value, so "on" is always the
checkout's default.

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
import random
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


def side_of(label: str) -> str:
    """The side of a build's label: `side_of("off#2") == "off"`."""
    return label.split("#")[0]


def switched_builds(mod: Any, params: Any, target: str, module: Any, attr: str,
                    db: str | None = None, per_side: int = 2) -> dict[str, Any]:
    """`per_side` builds of the model with the switch at its default (side "on") and
    flipped ("off"), with the configs of tuning database `db` where it has them; labelled
    "on#1", "off#1", "off#2", "on#2", ... and built in that order (neither side's builds
    all first). Two builds of one side are the control: what they differ by is what the
    same side differs from itself by, beside what the switch does."""
    labels = []
    for k in range(per_side):
        labels += [f"{side}#{k + 1}" for side in (SIDES if k % 2 == 0 else SIDES[::-1])]
    libs = {}
    for label in labels:
        with flipped(module, attr, side_of(label) == "on"):
            libs[label] = relay_ir.build(mod, target=target, params=params, tuning_db=db)
    return libs


def interleaved(libs: dict[str, Any], feeds: dict[str, Any], rounds: int, whole: int,
                clock: Callable[[], float] = time.perf_counter, seed: int = 0
                ) -> tuple[dict[str, list[list[LayerTime]]], dict[str, list[float]]]:
    """Per build, each round's convs in model order (primed_convs "none") and `whole`
    timed model runs per round (both by `clock`); every round times each build once, in
    a shuffled (seeded) order."""
    convs: dict[str, list[list[LayerTime]]] = {k: [] for k in libs}
    runs: dict[str, list[float]] = {k: [] for k in libs}
    order = list(libs)
    shuffle = random.Random(seed).shuffle
    for _ in range(rounds):
        shuffle(order)
        for label in order:
            lib = libs[label]
            convs[label].append(primed_convs(lib, feeds, "none", 1, clock))
            lib.run(**feeds)
            for _ in range(whole):
                t0 = clock()
                lib.run(**feeds)
                runs[label].append(clock() - t0)
    return convs, runs


def shape_rows(convs: dict[str, list[list[LayerTime]]]
               ) -> dict[tuple[int, int, int], dict[str, float]]:
    """Per distinct conv (key: output, weight, input sizes) and build label, the least
    disturbed round's time (its minimum, us) summed over the conv's occurrences; "n":
    occurrences."""
    rows: dict[tuple[int, int, int], dict[str, float]] = {}
    first_label = next(iter(convs))
    for label, per_round in convs.items():
        for k, first in enumerate(per_round[0]):
            row = rows.setdefault(first.key, {"n": 0.0})
            row[label] = row.get(label, 0.0) + min(r[k].us for r in per_round)
            if label == first_label:
                row["n"] += 1
    return rows


def _by_side(values: dict[str, float]) -> dict[str, list[float]]:
    """A row's (or the whole model's) figures by side, one per build; "n" left out."""
    out: dict[str, list[float]] = {side: [] for side in SIDES}
    for label, v in values.items():
        if side_of(label) in out:
            out[side_of(label)].append(v)
    return out


def _apart(by_side: dict[str, list[float]]) -> float:
    """The largest max / min among one side's builds (1.0 with one build a side)."""
    return max(max(v) / min(v) for v in by_side.values())


def table(rows: dict[tuple[int, int, int], dict[str, float]], runs: dict[str, list[float]],
          top: int = 12) -> str:
    """The `top` distinct convs by |on - off|, all convs summed, the whole model's median
    and minimum (ms): each side the mean of its builds, "same side" the larger of the two
    sides' spread (max / min) between their own builds, the control for on/off.

        >>> rows = {(8, 9, 7): {"n": 2.0, "on#1": 90.0, "off#1": 100.0, "on#2": 92.0,
        ...                     "off#2": 100.0}}
        >>> runs = {"on#1": [0.001], "off#1": [0.002], "on#2": [0.001], "off#2": [0.002]}
        >>> print(table(rows, runs))  # doctest: +NORMALIZE_WHITESPACE
        conv (out, weight, in)     n      on us     off us   on/off  same side
        (8, 9, 7)                  2       91.0      100.0    0.910      1.022
        all convs in order                 91.0      100.0    0.910      1.022
        whole model, median ms             1.00       2.00    0.500      1.000
        whole model, minimum ms            1.00       2.00    0.500      1.000
    """
    head = (f"{'conv (out, weight, in)':<26} {'n':>2} {'on us':>10} {'off us':>10} "
            f"{'on/off':>8} {'same side':>10}")
    lines = [head]

    def line(label: str, by_side: dict[str, list[float]], fmt: str) -> str:
        on, off = (statistics.fmean(by_side[s]) for s in SIDES)
        return (f"{label:<29} {on:>10{fmt}} {off:>10{fmt}} {on / off:>8.3f} "
                f"{_apart(by_side):>10.3f}")

    ranked = sorted(rows.items(), key=lambda kv: -abs(
        statistics.fmean(_by_side(kv[1])["on"]) - statistics.fmean(_by_side(kv[1])["off"])))
    for key, r in ranked[:top]:
        lines.append(line(f"{str(key):<26} {int(r['n']):>2}", _by_side(r), ".1f"))
    labels = [k for k in next(iter(rows.values())) if k != "n"]
    summed = _by_side({b: sum(r[b] for r in rows.values()) for b in labels})
    lines.append(line("all convs in order", summed, ".1f"))
    for name, stat in (("median", statistics.median), ("minimum", min)):
        whole = _by_side({b: stat(t) * 1e3 for b, t in runs.items()})
        lines.append(line(f"whole model, {name} ms", whole, ".2f"))
    return "\n".join(lines)


def compare(name: str, args: Any) -> str:
    """Build model `name` both ways, check they agree, time them interleaved; the table."""
    module, attr = resolve_switch(args.switch)
    mod, params = from_onnx(_model(name, args))
    libs = switched_builds(mod, params, args.target, module, attr, args.db, args.builds)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in libs["on#1"].input_specs}
    want = np.asarray(libs["off#1"].run(**feeds)).copy()
    for label, lib in libs.items():
        err = relative_error(np.asarray(lib.run(**feeds)), want)
        if not err <= 1e-4:
            raise SystemExit(f"{name}: build {label} ({attr} {side_of(label)}) differs from "
                             f"off#1 by {err:.1e}")
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
    ap.add_argument("--builds", type=int, default=2,
                    help="builds per side (2 or more: the same side's builds are the control)")
    add_model_build_options(ap)
    ap.add_argument("--db", default=None, help="tuning database: both builds use its configs")
    args = ap.parse_args(argv)
    check_cpu_time(args)
    if args.builds < 1:
        ap.error("--builds needs 1 or more")
    return {m: compare(m, args) for m in args.models}


if __name__ == "__main__":
    main()
