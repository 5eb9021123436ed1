"""Winograd (conv2d_NCHWc_winograd.x86) against the direct conv (conv2d_NCHWc.x86) at
ResNet-18's and ResNet-50's 3x3 stride-1 convs, each as a model runs it: data blocked as
the conv before writes it (relay_ir.backend.layout_plan.as_in_model), output NCHWc,
constant weights packed (transformed) once. Per shape: the direct default, the Winograd
default and the best Winograd point of a small grid (tile_m x tile_p); every kernel is
checked against numpy (float64) first, then all are timed interleaved in one process,
medians over rounds of `--number` calls each, by this thread's CPU time with --cpu-time.

    TESSEL_NUM_THREADS=1 python -m benchmarks.winograd_layers --cpu-time
    TESSEL_NUM_THREADS=1 python -m benchmarks.winograd_layers --cpu-time \\
        --target "llvm -mcpu=haswell" --shapes 64@56 128@28 --cold-weights 256

One Emerald Rapids core, CPU time, 7 rounds, load 0.6-1.1 (ResNet-50's 3x3 stride-1 convs
are ResNet-18's shapes), direct default us, Winograd default / direct, best of the grid /
direct, warm | weights cold (--cold-weights 256):

    AVX-512   64@56   962  0.43  0.42 (m=4 rows r4 p7) |  996  0.54  0.51
              128@28  941  0.44  0.44 (default)        | 1023  0.47  0.47
              256@14  981  0.63  0.62 (m=2 root p7)    | 1035  0.67  0.65
              512@7  1015  1.08  1.06 (m=2 root p8)    | 1159  1.27  1.27
    AVX2      64@56  1872  0.47  0.41 (m=4 rows r4 p14) | 1910  0.49  0.43
              128@28 1831  0.44  0.44 (default)        | 1902  0.46  0.46
              256@14 1952  0.63  0.54 (m=4 root p8)    | 1958  0.69  0.64
              512@7  2102  0.81  0.79 (m=2 root p8)    | 2300  0.92  0.88

(after that run the AVX2 default at 256@14 became m=4: 0.49 of direct, load 0.7.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import lowering
from autotune.task import Task
from lowering.kernel import num_threads
from relay_ir.backend.executor import aligned
from relay_ir.backend.layout_plan import as_in_model
from schedule.templates import constant_weight_attrs, input_packers
from schedule.templates.x86_conv2d_winograd import TILE_ROWS, TILE_SIZES
from tessel_target import Target

DIRECT, WINOGRAD = "conv2d_NCHWc.x86", "conv2d_NCHWc_winograd.x86"
# (channels, size): C = K, 3x3, stride 1, pad 1, batch 1
RESNET18 = ["64@56", "128@28", "256@14", "512@7"]
RESNET50 = ["64@56", "128@28", "256@14", "512@7"]  # the bottlenecks' 3x3 convs: the same


def model_task(template: str, c: int, size: int, target: str) -> Task:
    """The 3x3 conv C@size -> C as a model runs it under `template`."""
    specs = [((1, c, size, size), "float32"), ((c, c, 3, 3), "float32")]
    attrs = {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1]}
    found = as_in_model(DIRECT, specs, attrs, target)
    assert found is not None
    specs, attrs = found
    return Task(template, specs, constant_weight_attrs(template, attrs), target)


def with_knobs(task: Task, knobs: dict[str, Any]) -> Any:
    """The task's default config with `knobs` replaced (JSON values)."""
    default = task.default_config()
    values = json.loads(default.to_json())["knobs"]
    values.update(knobs)
    return task.space.from_json({"knobs": values})


def grid(task: Task) -> list[dict[str, Any]]:
    """The Winograd points timed per shape: each tile size, each place of the stages
    (fuse "root", or "rows" / "gemm" in chunks of 1, 2 or 4 rows of tiles), register tiles
    over P (tile_p) of 4 to 14 tiles that fit beside the weight vectors and a broadcast."""
    t = Target.parse(task.target)
    kb = json.loads(task.default_config().to_json())["knobs"]["tile_oc"][-1]
    vecs = max(1, kb // t.fp32_lanes)
    fits = [d for d in (4, 7, 8, 14) if d * vecs <= t.vector_registers - vecs - 1]
    places = [{"fuse": "root"}] + [{"fuse": f, "tile_rows": r} for f in ("rows", "gemm")
                                   for r in TILE_ROWS]
    return [{"tile_m": m, **place, "tile_p": d} for m in TILE_SIZES for place in places
            for d in fits]


def build(task: Task, cfg: Any, x: np.ndarray, w: np.ndarray, want: np.ndarray,
          cold_mib: float = 0) -> Callable[[], None]:
    """A call of the task's kernel at `cfg` on x (NCHW) and w (OIHW), checked against
    `want` (NCHW, float64); with `cold_mib`, each call reads the next of as many copies of
    its packed weight as make that many MiB (weights not in L2, as in a model)."""
    s, ts = task.instantiate(cfg)
    kernel = lowering.build(s, ts, target=task.target)
    block = task.args[0][0][4] if len(task.args[0][0]) == 5 else 0
    xb = x if not block else np.ascontiguousarray(
        x.reshape(1, x.shape[1] // block, block, *x.shape[2:]).transpose(0, 1, 3, 4, 2))
    packers = input_packers(task.template, list(task.args), ts[:2], task.attrs)
    wk = packers[1](w) if 1 in packers else w
    out = aligned(np.full([int(d.value) for d in ts[-1].shape], np.nan, "float32"))
    arrays = [aligned(xb), aligned(wk), out]
    kernel(*arrays)
    got = out.transpose(0, 1, 4, 2, 3).reshape(want.shape) if out.ndim == 5 else out
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    if not err <= 1e-4:
        raise SystemExit(f"{task.template} {cfg} differs from numpy by {err:.1e}")
    if not cold_mib:
        return lambda: kernel(*arrays)
    # copy(): aligned() returns an aligned array itself, and the copies must differ
    copies = [aligned(wk.copy()) for _ in range(max(1, int(cold_mib * 2**20 // wk.nbytes)))]
    turn = iter(range(1 << 62))

    def call() -> None:
        kernel(arrays[0], copies[next(turn) % len(copies)], out)
    return call


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """3x3, stride 1, pad 1 in float64."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, wd = x.shape[2:]
    cols = np.stack([xp[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], 2)
    return np.einsum("nckhw,ock->nohw", cols, w.reshape(w.shape[0], w.shape[1], 9))


def timed(fns: dict[str, Callable[[], None]], rounds: int, number: int,
          clock: Callable[[], float]) -> dict[str, float]:
    """Each kernel's median seconds a call over `rounds` rounds, the kernels in turn."""
    for fn in fns.values():
        fn()
    runs: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = clock()
            for _ in range(number):
                fn()
            runs[k].append((clock() - t0) / number)
    return {k: statistics.median(v) for k, v in runs.items()}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--shapes", nargs="*", default=None, help="C@SIZE, e.g. 64@56")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--number", type=int, default=5)
    ap.add_argument("--cpu-time", action="store_true", help="this thread's CPU time")
    ap.add_argument("--no-grid", action="store_true", help="the two defaults only")
    ap.add_argument("--cold-weights", type=float, default=0, metavar="MIB",
                    help="each call reads the next of copies of its weight totalling MIB")
    a = ap.parse_args(argv)
    if a.cpu_time and num_threads() != 1:
        raise SystemExit("--cpu-time measures one thread: set TESSEL_NUM_THREADS=1")
    target = str(Target.parse(a.target))
    clock = time.thread_time if a.cpu_time else time.perf_counter
    shapes = a.shapes or list(dict.fromkeys(RESNET18 + RESNET50))
    rows = []
    for shape in shapes:
        c, size = (int(v) for v in shape.split("@"))
        rng = np.random.default_rng(0)
        x = rng.standard_normal((1, c, size, size)).astype("float32")
        w = rng.standard_normal((c, c, 3, 3)).astype("float32")
        want = reference(x, w)
        direct, wino = model_task(DIRECT, c, size, target), model_task(WINOGRAD, c, size,
                                                                       target)
        fns = {"direct": build(direct, direct.default_config(), x, w, want, a.cold_weights),
               "winograd": build(wino, wino.default_config(), x, w, want, a.cold_weights)}
        points = [] if a.no_grid else grid(wino)
        for p in points:
            fns[json.dumps(p)] = build(wino, with_knobs(wino, p), x, w, want, a.cold_weights)
        sec = timed(fns, a.rounds, a.number, clock)
        best = min((k for k in sec if k != "direct"), key=sec.get)
        load = os.getloadavg()
        print(f"{shape} target '{a.target}' data {direct.args[0][0]}: direct "
              f"{sec['direct'] * 1e6:.0f} us, winograd default "
              f"{sec['winograd'] * 1e6:.0f} us ({sec['winograd'] / sec['direct']:.3f}), best "
              f"{best} {sec[best] * 1e6:.0f} us ({sec[best] / sec['direct']:.3f})"
              + (f", weights cold ({a.cold_weights:g} MiB of copies)" if a.cold_weights else "")
              + "; "
              f"load {load[0]:.2f}", flush=True)
        if len(points) > 0:
            for k, v in sec.items():
                print(f"    {v * 1e6:8.0f} us  {v / sec['direct']:.3f}  {k}")
        rows.append({"shape": shape, **{k: v for k, v in sec.items()}})
    return rows


if __name__ == "__main__":
    main()
