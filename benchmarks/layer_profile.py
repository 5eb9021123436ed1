"""Per-conv times of Tessel against ONNX Runtime: ORT's profiling JSON parsed into
(node, op type, microseconds), Tessel's per-kernel profile, the convolutions of both
matched, and the largest gaps.

    >>> rows = conv_gaps(lib, sess_profile_path, feeds)        # doctest: +SKIP
    >>> print(gap_table(rows, top=10))                         # doctest: +SKIP

Matching: both runtimes fuse differently (ORT folds batch norm into the conv and may run
it in its NCHWc domain; Tessel fuses the adds and activations and runs blocked layouts),
so a conv is keyed by (elements of its output, of its weight, of its data input), which
neither layouts nor fusion change, and the k-th conv with a key on one side is matched to
the k-th with that key on the other (both run in a topological order of the same graph).
The data input tells apart convs whose output and weight sizes agree by chance
(MobileNetV2's 144->24 1x1 conv at 56x56 and its 384-channel depthwise 3x3 at 14x14:
75264 and 3456 both). A conv whose key has no partner (channels padded to a block, say)
is reported unmatched.

Each conv alone (`warm_convs`: one kernel run again and again on the arrays of one model
run, its weights, data and output in cache) beside its time in the model tells the kernel
from the model's memory traffic: `shape_table` sums both per distinct conv (ResNet-50 runs
each of its 23 shapes 1-6 times) and ranks the shapes by the gap to ORT summed over their
occurrences. ResNet-50 on one Sapphire Rapids core (load 2.5-3.8): Tessel's convs took 58
ms in the model, 50 ms each alone and warm, ORT's 52 ms in its model; a conv whose warm
time is at ORT's but whose model time is not waits on memory (cold weights of the 14x14
and 7x7 convs, 1-9 MiB each; 3 MiB activations at 56x56), not on its micro-kernel.

    >>> print(shape_table(match(ours, theirs), warm_convs(lib, feeds)))  # doctest: +SKIP

Which memory (`primed_convs`: each conv after the steps before it, as in a model run, with
its weights or its data and output read just before it, or nothing): ResNet-50 on one
Sapphire Rapids core (load 2.6-3.2), its 53 convs 59.1 ms in order (58.6 in the model's
profile), 51.4 with their weights read first, 54.6 with their data, 48.8 alone, ORT's 54.6
in its model: weights coming from memory are most of the gap (the 14x14 and 7x7 convs'
1-9 MiB), the activations the rest. Again with the input and the output primed apart
(load 0.7-1.3; one core streams 9.8 GB/s from memory, numpy's sum of 64 MiB): the 53
convs 55.4 ms in order, weights 49.7, data 53.7, input 54.0, output 55.1, alone 46.6,
ORT 54.1; per call, 1024@14 -> 256 (1 MiB of weights, 784 KiB in, 196 KiB out) 763 us in
order, 660 weights, 689 input, 725 output, 579 alone, ORT 646: its weights cost their
whole streaming time (107 us), no compute overlapping them (the conv template's
PREFETCH_1X1_WEIGHTS, since, spreads them over the rows); 128@28 -> 512 (256 KiB of
weights, 392 KiB in, 1.5 MiB out and as much residual) 680 in order, 647 weights, 637
input, 745 output, 605 alone, ORT 621: no single array is its gap. With the 1x1 convs'
prefetch of the next chunk (one core, load 2.5-2.7, minimum of 5 rounds interleaved), the
53 convs 46.66 ms in order, 46.43 with only the first oc chunk of their weights read first
("first_chunk": the burst nothing prefetches, a few hundred us at most, within the noise),
43.42 with all their weights: what stays is the 3x3 convs' (256@14 3x3, five, 6285 ->
5388 us; they do not prefetch) and the 7x7 1x1 convs' (2048@7 -> 512, three, 2075 ->
1846, though they prefetch).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from relay_ir.backend.profile import bound_steps


@dataclass(frozen=True)
class LayerTime:
    """One conv call: its name, output and weight element counts, microseconds, and the
    element count of its data input (0: not known)."""

    name: str
    out_elems: int
    weight_elems: int
    us: float
    in_elems: int = 0

    @property
    def key(self) -> tuple[int, int, int]:
        """What matches a conv of one runtime to one of the other."""
        return self.out_elems, self.weight_elems, self.in_elems


def ort_convs(profile_path: str) -> list[LayerTime]:
    """The conv nodes of an ORT profile (SessionOptions.enable_profiling; the path that
    end_profiling returns), in run order, each with its median duration over the runs."""
    with open(profile_path) as f:
        events = json.load(f)
    durs: dict[str, list[float]] = {}
    keys: dict[str, tuple[int, int, int]] = {}
    for e in events:
        args = e.get("args", {})
        if e.get("cat") != "Node" or "Conv" not in args.get("op_name", ""):
            continue
        shapes = [next(iter(s.values())) for s in args.get("input_type_shape", [])]
        outs = [next(iter(s.values())) for s in args.get("output_type_shape", [])]
        if len(shapes) < 2 or not outs:
            continue
        keys[e["name"]] = (math.prod(outs[0]), math.prod(shapes[1]), math.prod(shapes[0]))
        durs.setdefault(e["name"], []).append(float(e["dur"]))
    return [LayerTime(n, keys[n][0], keys[n][1], statistics.median(d), keys[n][2])
            for n, d in durs.items()]


def _logical_weight(workload_key: str) -> int:
    """The elements of the OIHW weight of the task a step names (0: none): a Winograd conv
    holds its weight transformed, alpha x alpha x O x I, not 3 x 3 x O x I, so the stored
    constant does not match ORT's node."""
    if not workload_key:
        return 0
    from autotune.task import Task

    args = Task.from_workload_key(workload_key).args
    return math.prod(args[1][0]) if len(args) > 1 else 0


def tessel_convs(lib: Any, feeds: dict[str, Any], repeat: int = 10) -> list[LayerTime]:
    """The conv kernels of a compiled model in run order, from lib.profile (medians); the
    weight is a step's largest constant input, the data its first other input."""
    table = lib.profile(**feeds, repeat=repeat)
    plan = lib.plan
    out = []
    for k, (step, row) in enumerate(zip(plan.steps, table.rows)):
        if "conv" not in step.group:
            continue
        consts = [math.prod(plan.values[v].shape) for v in step.inputs
                  if plan.values[v].kind == "const"]
        data = [math.prod(plan.values[v].shape) for v in step.inputs
                if plan.values[v].kind != "const"]
        weight = _logical_weight(step.workload_key) or max(consts, default=0)
        out.append(LayerTime(f"{k}:{step.group}", math.prod(row.shape), weight,
                             row.seconds * 1e6, data[0] if data else 0))
    return out


def warm_convs(lib: Any, feeds: dict[str, Any], repeat: int = 10) -> list[LayerTime]:
    """The conv kernels of a compiled model as tessel_convs lists them, each timed alone:
    `repeat` calls in a row (after one) on the arrays of one model run, so that its weight,
    data and output are as warm as the caches hold them (median seconds, in us).

    As warm as they get: on a Sapphire Rapids core the second call of a conv right after
    another kernel ran 12% slower (ResNet-50's 53 convs summed; 25% for the 7x7 convs with
    4 MiB of weights) than its third and later calls, as if the last-level cache kept a
    line of weights only once it had been read twice; in a model every weight is read
    once per run, so "alone" is a bound the model does not reach. A conv that writes its
    output over its residual input (relay_ir.backend.inplace) reads its own last output
    as the residual on the repeats: the same work on other numbers."""
    plan = lib.plan
    calls = bound_steps(plan, [feeds[name] for name, _, _ in lib.input_specs])
    times = []
    for step, (fn, args) in zip(plan.steps, calls):
        if "conv" not in step.group:
            continue
        fn(args)
        runs = []
        for _ in range(max(1, repeat)):
            t0 = time.perf_counter()
            fn(args)
            runs.append(time.perf_counter() - t0)
        times.append(statistics.median(runs))
    return [dataclasses.replace(t, us=sec * 1e6)
            for t, sec in zip(tessel_convs(lib, feeds, 1), times, strict=True)]


# what primed_convs reads just before a conv: nothing, its constant inputs, its other inputs
# and its output, its other inputs alone, its output alone, the first oc chunk of its packed
# (6-D) weights alone (what a previous kernel could prefetch for it)
PRIMES = ("none", "weights", "data", "input", "output", "first_chunk")


def primed_convs(lib: Any, feeds: dict[str, Any], prime: str = "none", repeat: int = 3,
                 clock: Callable[[], float] = time.perf_counter) -> list[LayerTime]:
    """The conv kernels of a compiled model as tessel_convs lists them, each timed in the
    cache state a model run leaves it: the steps before it run first, in order (so its
    weights were last read a whole model run ago), then `prime` reads, twice, the conv's
    constant inputs ("weights") or its other inputs and its output ("data"; "input" the
    other inputs alone, "output" the output alone; "first_chunk" the first oc chunk of
    its packed weights) or nothing ("none"), then the conv runs
    once, timed by `clock` (median of `repeat`, in us; time.process_time for one
    thread's CPU time). "none" is the conv's time in the model; what
    the others take off it is what those arrays' coming from memory costs it there. Runs
    about len(steps) / 2 model runs per prime and repeat.

        >>> cold = primed_convs(lib, feeds, "weights")     # doctest: +SKIP
    """
    if prime not in PRIMES:
        raise ValueError(f"prime must be one of {', '.join(PRIMES)}, got {prime!r}")
    plan = lib.plan
    calls = bound_steps(plan, [feeds[name] for name, _, _ in lib.input_specs])
    convs = [k for k, s in enumerate(plan.steps) if "conv" in s.group]
    runs: dict[int, list[float]] = {k: [] for k in convs}
    for _ in range(max(1, repeat)):
        for k in convs:
            for fn, args in calls[:k]:
                fn(args)
            s = plan.steps[k]
            kinds = ["weights" if plan.values[v].kind == "const" else "input"
                     for v in s.inputs] + ["output"] * len(s.outputs)
            wanted = {"none": (), "data": ("input", "output"),
                      "first_chunk": ("weights",)}.get(prime, (prime,))
            touched = [a for a, kind in zip(calls[k][1], kinds) if kind in wanted]
            if prime == "first_chunk":
                touched = [a[0] for a in touched if a.ndim == 6]
            for _ in range(2):
                for a in touched:
                    a.sum()  # reads every line of the array
            fn, args = calls[k]
            t0 = clock()
            fn(args)
            runs[k].append(clock() - t0)
    return [dataclasses.replace(t, us=statistics.median(runs[k]) * 1e6)
            for t, k in zip(tessel_convs(lib, feeds, 1), convs, strict=True)]


def match(tessel: list[LayerTime], ort: list[LayerTime]
          ) -> list[tuple[LayerTime | None, LayerTime | None]]:
    """Pairs (tessel, ort) matched by key and order (see the module docstring); an
    unmatched conv is paired with None."""
    pending: dict[tuple[int, int, int], list[LayerTime]] = {}
    for o in ort:
        pending.setdefault(o.key, []).append(o)
    pairs: list[tuple[LayerTime | None, LayerTime | None]] = []
    for t in tessel:
        q = pending.get(t.key)
        pairs.append((t, q.pop(0) if q else None))
    pairs += [(None, o) for q in pending.values() for o in q]
    return pairs


def gap_table(pairs: list[tuple[LayerTime | None, LayerTime | None]], top: int = 10) -> str:
    """The `top` matched convs with the largest Tessel - ORT time, and the unmatched count."""
    both = [(t, o) for t, o in pairs if t is not None and o is not None]
    both.sort(key=lambda p: p[1].us - p[0].us)
    lines = [f"{'tessel kernel':<44} {'ort node':<42} {'out':>8} {'weight':>8} "
             f"{'tessel us':>9} {'ort us':>8} {'gap us':>8} {'ratio':>6}"]
    for t, o in both[:top]:
        lines.append(f"{t.name:<44} {o.name:<42} {t.out_elems:>8} {t.weight_elems:>8} "
                     f"{t.us:>9.1f} {o.us:>8.1f} {t.us - o.us:>8.1f} "
                     f"{t.us / max(o.us, 1e-9):>6.2f}")
    lost = len(pairs) - len(both)
    lines.append(f"{len(both)} convs matched, {lost} unmatched")
    return "\n".join(lines)


def shape_table(pairs: list[tuple[LayerTime | None, LayerTime | None]],
                warm: list[LayerTime] | None = None, top: int = 10,
                columns: dict[str, list[LayerTime]] | None = None) -> str:
    """The matched convs summed per distinct conv (key: output, weight, input sizes), the
    `top` with the largest Tessel - ORT time over all their occurrences first; with
    `warm` (warm_convs of the same model), each shape's time alone beside it; each of
    `columns` (a heading: times of the same convs, e.g. primed_convs) summed the same way
    after it. Its last line: every matched conv together.

        >>> a = [(LayerTime("t1", 8, 9, 30.0), LayerTime("o1", 8, 9, 20.0)),
        ...      (LayerTime("t2", 8, 9, 30.0), LayerTime("o2", 8, 9, 20.0)),
        ...      (LayerTime("t3", 4, 9, 5.0), LayerTime("o3", 4, 9, 10.0))]
        >>> print(shape_table(a, top=1))  # doctest: +NORMALIZE_WHITESPACE
        conv (out, weight, in)  n   tessel us  ort us  gap us  ratio
        (8, 9, 0)               2        60.0    40.0    20.0   1.50
        all 3 convs                      65.0    50.0    15.0   1.30
    """
    columns = columns or {}
    named = [{t.name: t.us for t in warm or []}] + [
        {t.name: t.us for t in ts} for ts in columns.values()]
    rows: dict[tuple[int, int, int], list[float]] = {}
    for t, o in pairs:
        if t is None or o is None:
            continue
        r = rows.setdefault(t.key, [0, 0.0, 0.0] + [0.0] * len(named))
        r[0] += 1
        r[1] += t.us
        r[2] += o.us
        for c, times in enumerate(named):
            r[3 + c] += times.get(t.name, math.nan)
    w = bool(warm)
    head = (f"{'conv (out, weight, in)':<30} {'n':>2} {'tessel us':>10} {'ort us':>9} "
            f"{'gap us':>8} {'ratio':>6}")
    lines = [head + (f" {'alone us':>9} {'alone/ort':>9}" if w else "")
             + "".join(f" {name:>14}" for name in columns)]

    def line(label: str, n: str, r: list[float]) -> str:
        text = (f"{label:<30} {n:>2} {r[1]:>10.1f} {r[2]:>9.1f} {r[1] - r[2]:>8.1f} "
                f"{r[1] / max(r[2], 1e-9):>6.2f}")
        text += f" {r[3]:>9.1f} {r[3] / max(r[2], 1e-9):>9.2f}" if w else ""
        return text + "".join(f" {x:>14.1f}" for x in r[4:])

    ranked = sorted(rows.items(), key=lambda kv: kv[1][2] - kv[1][1])
    for key, r in ranked[:top]:
        lines.append(line(str(key), str(int(r[0])), r))
    total = [sum(r[k] for r in rows.values()) for k in range(3 + len(named))]
    lines.append(line(f"all {int(total[0])} convs", "", total))
    return "\n".join(lines)


__all__ = ["LayerTime", "gap_table", "match", "ort_convs", "primed_convs", "shape_table",
           "tessel_convs", "warm_convs"]
