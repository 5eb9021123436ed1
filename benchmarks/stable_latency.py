"""Build-to-build latency spread: one model built N times (fresh builds), the builds timed
interleaved in rounds (round r times every build once, in a shuffled order, so the
machine's drift over seconds touches every build alike), with the memory plan's block
skew on and off (TESSEL_PLAN_SKEW, see relay_ir.backend.memory_plan) as builds of their
own in the same rounds. Per build: the median over rounds of its per-round medians, and
where its memory lies (the intermediates' arena and the constants' arena: address modulo
the page and the 2 MiB huge page, and how much of each is backed by huge pages). Per
setting: the spread (max / min of the builds' medians) beside a noise figure, the largest
spread of a build against itself (its even rounds' median against its odd rounds').

    TESSEL_NUM_THREADS=1 python -m benchmarks.stable_latency /path/resnet50.onnx --cpu-time
    TESSEL_NUM_THREADS=1 python -m benchmarks.stable_latency resnet18.onnx --cpu-time \\
        --processes                       # a fresh process per build, timed in turn
    TESSEL_NUM_THREADS=1 python -m benchmarks.stable_latency resnet50.onnx --cpu-time \\
        --target "llvm -mcpu=haswell" --skew on
    python -m benchmarks.stable_latency resnet18 --image 32 --width 8 --builds 2 --rounds 2

--processes builds each model in a process of its own (multiprocessing's spawn: its own
address space layout, heap and JIT code placement, as a user's separate runs get) and
the parent asks the processes for their rounds in turn; each times its own runs. A
script that calls main(["--processes", ...]) needs the `if __name__ == "__main__":`
guard: spawn imports the script again in every child.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import relay_ir
from benchmarks.envvar import temporary_env
from benchmarks.models import _model, median_seconds
from lowering.kernel import array_address, num_threads
from relay_ir.backend.huge_pages import HUGE_PAGE, mapping_field
from relay_ir.backend.memory_plan import PAGE
from relay_ir.frontend.onnx import from_onnx


@dataclass
class Build:
    """One build's label (its skew setting and index), where its memory lies, and its
    per-round median times (seconds)."""

    skew: str
    index: int
    layout: dict[str, int]
    rounds: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.rounds)


def relative_rounds(builds: Sequence[Build]) -> list[list[float]]:
    """Each build's time per round over the median of all builds in that round: the
    machine's state (another job on the core's sibling or the shared cache moved one
    thread's CPU time by 1.5x for seconds at a time) divides out, what is the build's
    own stays.

        >>> relative_rounds([Build("on", 0, {}, [1.0, 2.0]), Build("on", 1, {}, [1.1, 2.2]),
        ...                  Build("on", 2, {}, [1.2, 2.4])])[2]
        [1.0909090909090908, 1.0909090909090908]
    """
    refs = [statistics.median(r) for r in zip(*(b.rounds for b in builds))]
    return [[t / ref for t, ref in zip(b.rounds, refs)] for b in builds]


def halves_spread(xs: Sequence[float]) -> float:
    """The even entries' median against the odd entries' (max / min): what one build's
    figure moves by between two halves of the same run, noise.

        >>> halves_spread([1.0, 1.2, 1.0, 1.2])
        1.2
    """
    halves = [statistics.median(xs[0::2]), statistics.median(xs[1::2])]
    return max(halves) / min(halves)


def load(model: str, image: int = 224, width: int | None = None) -> tuple[Any, Any]:
    """The model as (mod, params): an ONNX file, or a name benchmarks.models knows
    (resnet18 and mobilenet_v2 at `image` and `width`, resnet50, resnext26)."""
    if model.endswith(".onnx"):
        if not os.path.exists(model):
            raise SystemExit(f"{model}: no such ONNX file")
        return from_onnx(model)
    return from_onnx(_model(model, argparse.Namespace(image=image, width=width)))


def huge_kib(address: int) -> int:
    """KiB of huge pages (AnonHugePages in /proc/self/smaps) backing the mapping that
    holds `address`; 0 where none or no smaps (not Linux)."""
    words = mapping_field(address, "AnonHugePages:")
    return int(words[0]) if words else 0


def layout(lib: Any) -> dict[str, int]:
    """Where a built (and run once) model's memory lies: its plan's blocks and how many
    distinct page offsets they start at; the intermediates' arena ("temps") and the
    lowest constant ("consts": the start of the packed constants' arena), each's address
    modulo the page and the huge page, and the KiB of huge pages in the mapping that
    holds it (smaps counts per mapping: other allocations in it count too)."""
    plan = lib.plan
    views = plan._temp_views()
    blocks = plan.memory_plan.block_offsets
    out: dict[str, int] = {"blocks": len(blocks),
                           "at distinct % 4K": len({o % PAGE for o in blocks})}
    temps = [array_address(views[v]) - plan.memory_plan.offsets[i]
             for i, v in enumerate(plan._temps)][:1]
    consts = [min((array_address(val.data) for val in plan.values
                   if val.kind == "const" and val.data is not None and val.data.nbytes),
                  default=None)]
    consts = [c for c in consts if c is not None]
    for name, where in (("temps", temps), ("consts", consts)):
        if where:
            out[f"{name} % 4K"] = where[0] % PAGE
            out[f"{name} % 2M"] = where[0] % HUGE_PAGE
            out[f"{name} huge KiB"] = huge_kib(where[0])
    return out


def build_one(mod: Any, params: Any, target: str, skew: bool) -> tuple[Any, dict, Callable]:
    """A fresh build under the skew setting, run once: (lib, feeds, run)."""
    with temporary_env("TESSEL_PLAN_SKEW", "1" if skew else "0"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = relay_ir.build(mod, target=target, params=params)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in lib.input_specs}
    lib.run(**feeds)
    return lib, feeds, lambda: lib.run(**feeds)


def _worker(conn: Any, model: str, image: int, width: int | None, target: str, skew: bool,
            repeat: int, cpu_time: bool) -> None:
    """A build in a process of its own: sends its layout and first output, then one
    round's median per "round" message until "stop"."""
    mod, params = load(model, image, width)
    lib, feeds, run = build_one(mod, params, target, skew)
    clock = time.process_time if cpu_time else time.perf_counter
    conn.send((layout(lib), np.asarray(run()).copy()))
    while conn.recv() == "round":
        conn.send(median_seconds(run, repeat, warmup=1, clock=clock))
    conn.close()


def time_in_rounds(rounders: Sequence[Callable[[], float]], rounds: int, seed: int = 0
                   ) -> list[list[float]]:
    """Each rounder's result per round; round r calls every rounder once, in a shuffled
    order (seeded), so no build always follows the same one.

        >>> time_in_rounds([lambda: 1.0, lambda: 2.0], 3)
        [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    """
    out: list[list[float]] = [[] for _ in rounders]
    order = list(range(len(rounders)))
    shuffle = random.Random(seed).shuffle
    for _ in range(rounds):
        shuffle(order)
        for k in order:
            out[k].append(rounders[k]())
    return out


def spread_lines(builds: Sequence[Build]) -> list[str]:
    """Per build: its median and minimum time over rounds, its relative time (the median
    over rounds of relative_rounds) and that figure's halves_spread (self). Per skew
    setting: the spread (max / min) of the builds' median times, of their relative times,
    and the noise (the largest self); with both settings, skew on against off.

        >>> b = [Build("on", 0, {}, [1.0, 2.0]), Build("on", 1, {}, [1.1, 2.2])]
        >>> spread_lines(b)[-1]
        'skew on : spread max/min of medians 1.100, of relative times 1.100, noise 1.000'
    """
    rel = [statistics.median(r) for r in relative_rounds(builds)]
    noise = [halves_spread(r) for r in relative_rounds(builds)]
    lines = []
    for b, r, n in zip(builds, rel, noise):
        where = ", ".join(f"{k} {v}" for k, v in b.layout.items())
        lines.append(f"  skew {b.skew:<3} build {b.index}: median {b.median * 1e3:8.3f} ms, "
                     f"min {min(b.rounds) * 1e3:8.3f}, relative {r:.3f} (self {n:.3f})  "
                     f"{where}")
    settings = list(dict.fromkeys(b.skew for b in builds))
    for skew in settings:
        mine = [k for k, b in enumerate(builds) if b.skew == skew]
        ms, rs = [builds[k].median for k in mine], [rel[k] for k in mine]
        lines.append(f"skew {skew:<3}: spread max/min of medians {max(ms) / min(ms):.3f}, "
                     f"of relative times {max(rs) / min(rs):.3f}, "
                     f"noise {max(noise[k] for k in mine):.3f}")
    if len(settings) == 2:
        on, off = (statistics.median(r for b, r in zip(builds, rel) if b.skew == s)
                   for s in ("on", "off"))
        lines.append(f"skew on / off (median relative times): {on / off:.3f}")
    return lines


def _check_agree(outputs: Sequence[np.ndarray]) -> None:
    want = outputs[0]
    scale = float(np.abs(want).max()) or 1.0
    for k, got in enumerate(outputs[1:], 1):
        err = float(np.abs(got - want).max()) / scale
        if not err <= 1e-4:
            raise SystemExit(f"build {k} computes otherwise than build 0: an error of "
                             f"{err:.2g} of the output's largest value")


def run_in_process(a: argparse.Namespace, skews: Sequence[bool]) -> list[Build]:
    """All builds in this process, timed in rounds."""
    mod, params = load(a.model, a.image, a.width)
    clock = time.process_time if a.cpu_time else time.perf_counter
    labels, rounders, layouts, outputs = [], [], [], []
    for skew in skews:
        for k in range(a.builds):
            lib, _, run = build_one(mod, params, a.target, skew)
            labels.append(("on" if skew else "off", k))
            layouts.append(layout(lib))
            outputs.append(np.asarray(run()).copy())
            rounders.append(lambda run=run: median_seconds(run, a.repeat, 1, clock))
    _check_agree(outputs)
    times = time_in_rounds(rounders, a.rounds, a.seed)
    return [Build(s, k, lay, t) for (s, k), lay, t in zip(labels, layouts, times)]


def run_in_processes(a: argparse.Namespace, skews: Sequence[bool]) -> list[Build]:
    """A process per build (built one after another), timed in rounds."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    labels, conns, procs, layouts, outputs = [], [], [], [], []
    try:
        for skew in skews:
            for k in range(a.builds):
                mine, theirs = ctx.Pipe()
                p = ctx.Process(target=_worker, args=(theirs, a.model, a.image, a.width,
                                                      a.target, skew, a.repeat, a.cpu_time))
                p.start()
                theirs.close()  # the child's end: a child that dies ends our recv()
                procs.append(p)
                conns.append(mine)
                try:
                    lay, out = mine.recv()  # built: the next build starts on a quiet machine
                except EOFError:
                    raise SystemExit(f"the process of build {k} (skew {skew}) ended before "
                                     "it was built: see its error above") from None
                labels.append(("on" if skew else "off", k))
                layouts.append(lay)
                outputs.append(out)
        _check_agree(outputs)

        def rounder(conn: Any) -> Callable[[], float]:
            def one() -> float:
                conn.send("round")
                return float(conn.recv())
            return one

        times = time_in_rounds([rounder(c) for c in conns], a.rounds, a.seed)
    finally:
        for c in conns:
            try:
                c.send("stop")
            except OSError:
                pass
        for p in procs:
            p.join(timeout=30)
    return [Build(s, k, lay, t) for (s, k), lay, t in zip(labels, layouts, times)]


def main(argv: list[str] | None = None) -> list[Build]:
    """Build, time and print (see the module docstring); returns the builds.

        >>> main(["resnet18", "--image", "32", "--width", "8", "--builds", "2",
        ...       "--rounds", "2"])  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="an ONNX file, or resnet18, resnet50, mobilenet_v2, resnext26")
    ap.add_argument("--image", type=int, default=224, help="input side (named models)")
    ap.add_argument("--width", type=int, default=None, help="first-stage channels (named)")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--builds", type=int, default=6, help="builds per skew setting")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--repeat", type=int, default=5, help="runs of a build per round")
    ap.add_argument("--skew", choices=("both", "on", "off"), default="both")
    ap.add_argument("--processes", action="store_true", help="a fresh process per build")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time by the process's CPU time (needs TESSEL_NUM_THREADS=1)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the rounds' shuffled orders")
    ap.add_argument("--show-rounds", action="store_true", help="print every round's median")
    a = ap.parse_args(argv)
    if a.cpu_time and num_threads() != 1:
        ap.error("--cpu-time needs TESSEL_NUM_THREADS=1 (several threads' CPU times add up)")
    if a.builds < 1 or a.rounds < 2:
        ap.error("--builds needs 1 or more, --rounds 2 or more (the noise splits them)")
    skews = {"both": (False, True), "on": (True,), "off": (False,)}[a.skew]
    builds = (run_in_processes if a.processes else run_in_process)(a, skews)
    print(f"{a.model} ({a.target}): {a.builds} builds per setting "
          f"{'in processes of their own' if a.processes else 'in one process'}, "
          f"{a.rounds} rounds x {a.repeat} runs, {'CPU' if a.cpu_time else 'wall'} time, "
          f"load {os.getloadavg()[0]:.2f}")
    print("\n".join(spread_lines(builds)), flush=True)
    if a.show_rounds:
        for b in builds:
            print(f"  skew {b.skew:<3} build {b.index} rounds (ms): "
                  + " ".join(f"{t * 1e3:.1f}" for t in b.rounds))
    return builds


if __name__ == "__main__":
    main()
