"""One compiled model run with a memory-layout switch of the graph executor on and off,
beside ONNX Runtime, interleaved in one process: the same kernels, only where the data
lie differs. --switch inplace: outputs written over a dying input where the kernel allows
it (relay_ir.backend.inplace; TESSEL_PLAN_INPLACE); --switch constants: the constants in
one arena in first-use order (executor.pack_constants; TESSEL_PACK_CONSTANTS); --switch
gaps: a value that no free block holds placed in a gap of a block held in part, rather
than in a new block (relay_ir.backend.memory_plan; TESSEL_PLAN_GAPS).

Each setting gets --arenas graph plans of its own (fresh allocations each; where an arena
lands in memory moved one model's time by about 2% here), every round times each once, in
alternating order; printed: the median per setting, its ratio to ORT's and to the setting
off, and each setting's peak bytes of intermediates.

--loaded runs the model saved and loaded again (its kernels' in-place pairs come from the
saved folder); --vm adds the VM (relay_ir.vm) compiled with its storage plan in place and
not; --steps K times every kernel inside whole runs (CPU time of the thread, the plans
interleaved) and prints the K kernels whose time changes most with the switch, with the
block and page offset of each intermediate they read and write, to tell a kernel that got
slower from a cost that moved between kernels.

    TESSEL_NUM_THREADS=1 python -m benchmarks.memory_plans --models resnet50 --cpu-time
    TESSEL_NUM_THREADS=1 python -m benchmarks.memory_plans --switch constants --cpu-time
    TESSEL_NUM_THREADS=1 python -m benchmarks.memory_plans --switch gaps --steps 5 --cpu-time
    TESSEL_NUM_THREADS=1 python -m benchmarks.memory_plans --models resnet18 --vm --cpu-time
    TESSEL_NUM_THREADS=1 python -m benchmarks.memory_plans --rounds 4 --steps 10 --cpu-time
    python -m benchmarks.memory_plans --models resnet18 --image 32 --width 8 --rounds 1
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from typing import Any

import numpy as np

import relay_ir
import relay_ir.vm as vm
from benchmarks.envvar import temporary_env
from benchmarks.models import (
    _model,
    add_model_build_options,
    median_seconds,
    ort_session,
)
from lowering.kernel import array_address, num_threads
from relay_ir.backend.executor import GraphPlan
from relay_ir.backend.memory_plan import PAGE
from relay_ir.frontend.onnx import from_onnx

PLANS = ("on", "off")
SWITCHES = {"inplace": "TESSEL_PLAN_INPLACE", "constants": "TESSEL_PACK_CONSTANTS",
            "gaps": "TESSEL_PLAN_GAPS"}


def plans_of(lib: Any, arenas: int, switch: str = "inplace") -> dict[str, list[GraphPlan]]:
    """`arenas` graph plans of `lib`'s kernels with `switch` on and off (PLANS), each with
    arenas of its own (intermediates allocated at its first run; with "constants", its own
    copy of the constants too)."""
    p = lib.plan
    out: dict[str, list[GraphPlan]] = {}
    for name in PLANS:
        with temporary_env(SWITCHES[switch], "1" if name == "on" else "0"):
            out[name] = []
            for _ in range(arenas):
                values = p.values
                if switch == "constants":  # each plan lays out constants of its own
                    values = [dataclasses.replace(v, data=None if v.data is None
                                                  else np.array(v.data)) for v in values]
                out[name].append(GraphPlan(p.kernels, values, p.steps, p.inputs, p.outputs))
    return out


def compare(name: str, args: Any) -> dict[str, float]:
    """Seconds per run of model `name` under each plan and ONNX Runtime (medians)."""
    model = _model(name, args)
    mod, params = from_onnx(model)
    lib = relay_ir.build(mod, target=args.target, params=params)
    if args.loaded:
        lib = _saved_and_loaded(lib)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in lib.input_specs}
    arrays = [feeds[n] for n, _, _ in lib.input_specs]
    plans = plans_of(lib, args.arenas, args.switch)
    sess = ort_session(model, num_threads())
    want = sess.run(None, feeds)[0]
    tol = {"rtol": 1e-3, "atol": 1e-3 * float(np.abs(want).max())}
    timed: dict[str, list[Any]] = {
        k: [lambda g=g: g.result(g.execute(arrays)) for g in plans[k]] for k in PLANS}
    machines = _vm_machines(mod, params, args.target, args.arenas) if args.vm else {}
    for k, ms in machines.items():  # each VirtualMachine makes its storage of its own
        timed[k] = [lambda m=m: m.run(*arrays) for m in ms]
    # every arena is allocated at its first run: the settings' arenas taken in turn, so
    # that neither setting gets all the earlier allocations. (This did not change what
    # the VM's storage plan in place reads here: ResNet-18, one core, 1.005-1.044x the
    # plan not in place in six runs after, 1.021-1.055x in four before; a script timing the
    # same machines the same way without the rest of this one read 0.99-1.00x, and the
    # kernels' CPU time summed over a run 0.997x: not understood.)
    for fns in zip(*timed.values()):
        for fn in fns:  # the same numbers under every setting
            np.testing.assert_allclose(np.asarray(fn()), want, **tol)
    timed["onnxruntime"] = [lambda: sess.run(None, feeds)]
    clock = time.process_time if args.cpu_time else time.perf_counter
    runs: dict[str, list[float]] = {k: [] for k in timed}
    for r in range(args.rounds):
        print(f"{name} round {r + 1}: load average {os.getloadavg()[0]:.2f}", flush=True)
        order = list(timed) if r % 2 == 0 else list(reversed(timed))
        for k in order:
            for fn in timed[k]:
                runs[k].append(median_seconds(fn, args.repeat, clock=clock))
    secs = {k: statistics.median(v) for k, v in runs.items()}
    print(f"\n{name}{' (saved and loaded)' if args.loaded else ''}: medians over "
          f"{args.rounds} rounds x {args.arenas} arenas of medians of {args.repeat}"
          + (" (CPU time)" if args.cpu_time else ""))
    env = SWITCHES[args.switch]
    for k in timed:
        if k == "onnxruntime":
            continue
        label = f"{env}={'0' if k.endswith('off') else '1'}"
        if k in PLANS:
            what, base = f"peak {plans[k][0].memory_plan.peak_bytes / 2**20:.2f} MiB", "off"
        else:
            what, base = f"temporaries {_vm_arena(machines[k][0]) / 2**20:.2f} MiB", "vm off"
        print(f"  {'tessel' if k in PLANS else 'vm    '} {label:<24} {secs[k] * 1e3:9.2f} ms  "
              f"{secs[k] / secs['onnxruntime']:5.2f}x onnxruntime  {secs[k] / secs[base]:6.3f}x "
              f"off   {what}")
    print(f"  {'onnxruntime':<31} {secs['onnxruntime'] * 1e3:9.2f} ms")
    if args.steps:
        print(step_table(plans, arrays, args.rounds, args.steps))
    return secs


def _saved_and_loaded(lib: Any) -> Any:
    """`lib` saved to a temporary folder and loaded back."""
    with tempfile.TemporaryDirectory() as d:
        lib.save(d)
        return relay_ir.load_compiled(d)


def _vm_machines(mod: Any, params: Any, target: str, n: int) -> dict[str, list[Any]]:
    """`n` VirtualMachines of the model compiled for the VM with the storage plan in place
    and not: "vm on", "vm off"."""
    out = {}
    for k in ("vm on", "vm off"):
        with temporary_env("TESSEL_PLAN_INPLACE", "0" if k.endswith("off") else "1"):
            exe = vm.compile(mod, target=target, params=params)
        out[k] = [vm.VirtualMachine(exe) for _ in range(n)]
    return out


def _vm_arena(machine: Any) -> int:
    """Bytes of the storage of @main's temporaries (its first instruction, where the
    storage plan puts it)."""
    first = machine.exe.functions[0].instructions[0]
    return first.size if isinstance(first, vm.bytecode.AllocStorage) else 0


def _step_seconds(g: GraphPlan, arrays: list[np.ndarray]) -> list[float]:
    """CPU seconds of each kernel call in one whole run of `g` (as GraphPlan.execute
    calls them)."""
    env = g.bind(arrays)
    addr = {v: array_address(env[v]) for v in g._per_run}
    out = []
    for k, ptrs, patch in g._calls(env):
        for slot, v in patch:
            ptrs[slot] = addr[v]
        t0 = time.thread_time()
        k.call_pointers(ptrs)
        out.append(time.thread_time() - t0)
    return out


def step_table(plans: dict[str, list[GraphPlan]], arrays: list[np.ndarray], rounds: int,
               top: int) -> str:
    """The `top` kernels whose median time inside whole runs changes most between the
    plans "on" and "off" (each plan's arenas interleaved, a warm-up run before each timed
    one), with the block@page-offset of every intermediate they read and write, and the
    steps' total; kernels that take turns paying one cost show as pairs of opposite sign.

        >>> print(step_table(plans_of(lib, 2), arrays, 4, 10))  # doctest: +SKIP
    """
    first = plans["on"][0]
    times: dict[str, list[list[float]]] = {k: [[] for _ in first.steps] for k in PLANS}
    for r in range(rounds):
        for k in PLANS if r % 2 == 0 else tuple(reversed(PLANS)):
            for g in plans[k]:
                _step_seconds(g, arrays)
                for i, t in enumerate(_step_seconds(g, arrays)):
                    times[k][i].append(t)
    med = {k: [statistics.median(t) * 1e6 for t in times[k]] for k in PLANS}
    at = {v: i for i, v in enumerate(first._temps)}

    def where(k: str, v: int) -> str:
        mp = plans[k][0].memory_plan
        return (f"b{mp.storage_of[at[v]]}@{mp.offsets[at[v]] % PAGE}" if v in at
                else first.values[v].kind)

    lines = [f"kernels inside whole runs, medians of {rounds} rounds (CPU time, us); "
             f"load average {os.getloadavg()[0]:.2f}",
             f"{'step':>4}  {'group':<40} {'on':>8} {'off':>8} {'on/off':>7}   "
             "intermediates read -> written (block@offset % 4096): on | off"]
    order = sorted(range(len(first.steps)), key=lambda i: -abs(med["on"][i] - med["off"][i]))
    for i in sorted(order[:top]):
        s = first.steps[i]
        io = {k: " ".join(where(k, v) for v in s.inputs if first.values[v].kind != "const")
              + " -> " + " ".join(where(k, v) for v in s.outputs) for k in PLANS}
        lines.append(f"{i:>4}  {s.group[:40]:<40} {med['on'][i]:8.1f} {med['off'][i]:8.1f} "
                     f"{med['on'][i] / med['off'][i]:7.3f}   {io['on']} | {io['off']}")
    lines.append(f"{'all':>4}  {'':<40} {sum(med['on']):8.0f} {sum(med['off']):8.0f} "
                 f"{sum(med['on']) / sum(med['off']):7.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run the comparison (see the module docstring); returns seconds per model and plan.

        >>> main(["--models", "resnet18", "--image", "32", "--width", "8",
        ...       "--rounds", "1", "--repeat", "1", "--arenas", "1"])  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50"])
    ap.add_argument("--switch", choices=sorted(SWITCHES), default="inplace")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--arenas", type=int, default=4)
    add_model_build_options(ap)
    ap.add_argument("--loaded", action="store_true",
                    help="run the model saved and loaded again")
    ap.add_argument("--vm", action="store_true",
                    help="add the VM with its storage plan in place and not (--switch inplace)")
    ap.add_argument("--steps", type=int, default=0, metavar="K",
                    help="print the K kernels whose time changes most (needs one thread)")
    args = ap.parse_args(argv)
    if (args.cpu_time or args.steps) and num_threads() != 1:
        raise SystemExit("--cpu-time and --steps measure one thread: set TESSEL_NUM_THREADS=1")
    if args.vm and args.switch != "inplace":
        raise SystemExit("--vm compares the VM's storage plan in place and not: "
                         "use it with --switch inplace")
    return {m: compare(m, args) for m in args.models}


if __name__ == "__main__":
    main()
