"""Measuring candidates: a builder and a runner, each in worker processes that can be killed.

A candidate (`MeasureInput`: a task and one config of its space) is first built by the
builder (schedule, lowering to loop IR and LLVM code generation and optimisation into an
object file, in a pool of spawned workers, one per core by default), then loaded and timed
by the runner in one more spawned worker, one candidate at a time. A worker that crashes
(segfault, abort) or overruns its timeout is killed and replaced: the candidate gets a
`worker_crash` or `timeout` result and the tuning run goes on.

    >>> from autotune.task import Task
    >>> from autotune.measure import LocalRunner, MeasureInput
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> with LocalRunner(timeout=20) as runner:                      # doctest: +SKIP
    ...     [r.error_kind for r in runner.run([MeasureInput(t, t.config(0))])]
    [<ErrorKind.NONE: 'none'>]
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import multiprocessing as mp
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autotune.task import Task
from schedule.space import ConfigEntity
from tessel_errors import TesselError
from tuning_logs import ErrorKind

# ---------------------------------------------------------------------------------------
# Inputs and results


@dataclass(eq=False)
class MeasureInput:
    """One candidate: a task and a point of its config space."""

    task: Task
    config: ConfigEntity

    @property
    def config_json(self) -> str:
        """The config as stored in the database (ConfigEntity.to_json())."""
        return self.config.to_json()


@dataclass
class MeasureResult:
    """How a candidate measured: seconds per call for each repeat, or the error kind."""

    costs: tuple[float, ...] = ()
    error_kind: ErrorKind = ErrorKind.NONE
    error_msg: str = ""
    build_s: float = 0.0
    run_s: float = 0.0
    timestamp: float = field(default_factory=time.time)
    features: list[float] | None = None

    @property
    def ok(self) -> bool:
        """True when the candidate ran and its output was right (or not checked)."""
        return self.error_kind == ErrorKind.NONE and bool(self.costs)

    @property
    def mean(self) -> float:
        """Mean seconds per call (infinity for a failed candidate)."""
        return float(np.mean(self.costs)) if self.ok else math.inf


@dataclass
class BuildResult:
    """What the builder says about a candidate: fine, or an error kind and message."""

    error_kind: ErrorKind = ErrorKind.NONE
    error_msg: str = ""
    build_s: float = 0.0
    features: list[float] | None = None
    # the compiled candidate: object file and codegen facts (entry symbol, messages, ...;
    # "func": the lowered function as lowering.ir_json, which the object was made from)
    object_code: bytes | None = None
    generated: dict[str, Any] | None = None


# ---------------------------------------------------------------------------------------
# The worker side (runs in a spawned child process)

_TASKS: dict[str, Task] = {}
_REFS: dict[str, Any] = {}


def cached_task(d: dict[str, Any]) -> Task:
    """The task a `Task.to_dict()` result describes, made once per process (a Task caches
    its config space, which a template builds anew for every fresh Task).

        >>> d = Task("matmul.x86", [((8, 8), "float32"), ((8, 8), "float32")]).to_dict()
        >>> cached_task(d) is cached_task(dict(d))
        True
    """
    t = Task.from_dict(d)
    key = f"{t.workload_key}@{t.target}"
    if key not in _TASKS:
        _TASKS[key] = t
    return _TASKS[key]


def _random_array(rng: np.random.Generator, shape: Sequence[int], dtype: str) -> np.ndarray:
    if dtype.startswith("float"):
        return rng.standard_normal(tuple(shape)).astype(dtype)
    if dtype.startswith(("int", "uint")):
        return rng.integers(0, 8, size=tuple(shape)).astype(dtype)
    return rng.integers(0, 2, size=tuple(shape)).astype(dtype)


def _packed(task: Task, tensors: list[Any], logical: list[np.ndarray]) -> list[np.ndarray]:
    """The inputs in the layouts the instantiated kernel takes (a weight packed in the
    config's blocks: schedule.templates.input_packers), from arrays of the task's specs."""
    from schedule.templates import input_packers

    packers = input_packers(task.template, task.args, tensors[:task.num_inputs()],
                            task.attrs)
    return [packers[k](a) if k in packers else a for k, a in enumerate(logical)]


def _aligned(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The arrays at 64-byte boundaries, as a compiled model holds its values and constants
    (relay_ir.backend.executor.aligned): numpy's 16-byte aligned arrays split vector loads
    across cache lines by chance, which moved one conv's time by 15% from one allocation
    to the next (its packed weight 64-byte aligned or not), more than most configs differ."""
    from relay_ir.backend.executor import aligned

    return [aligned(a) for a in arrays]


def _zeros(tensors: Sequence[Any]) -> list[np.ndarray]:
    """Zero-filled 64-byte aligned arrays of the tensors' shapes and dtypes."""
    from relay_ir.backend.executor import aligned_empty

    outs = []
    for t in tensors:
        o = aligned_empty(tuple(int(getattr(x, "value", x)) for x in t.shape), t.dtype)
        o[...] = 0
        outs.append(o)
    return outs


def _timed_arrays(task: Task, tensors: list[Any], logical: list[np.ndarray],
                  opts: dict[str, Any]) -> list[np.ndarray]:
    """What a kernel is timed on: its inputs (packed for it) and zeroed outputs, 64-byte
    aligned; with opts["huge_pages"], all in one mapping on 2 MiB pages, as a model holds
    its weights and intermediates (relay_ir.backend.huge_pages: the page size ranked AVX2 1x1
    convs' configs otherwise)."""
    inputs, outs = _packed(task, tensors, logical), _zeros(tensors[task.num_inputs():])
    if opts.get("huge_pages"):  # placed at 64-byte boundaries there: no aligned copy first
        from relay_ir.backend.huge_pages import huge_page_arrays

        return huge_page_arrays([*inputs, *outs])
    return [*_aligned(inputs), *outs]


def _reference(task: Task, tensors: list[Any], logical: list[np.ndarray],
               inputs: list[np.ndarray], outs: list[np.ndarray], small_flop: float
               ) -> list[np.ndarray]:
    """The expected outputs: the TE evaluator on the candidate's own computation for small
    problems, else the fallback kernel (on the task's inputs in its own layouts)."""
    n_in = task.num_inputs()
    if task.flop <= small_flop:
        import tensor_expr as te

        got = te.evaluate(tensors[n_in:], dict(zip(tensors[:n_in], inputs)))
        return [np.asarray(g) for g in got]
    kernel, ref_tensors = _default_kernel(task)
    ref = _zeros(ref_tensors[n_in:])  # its own shapes: a blocked output in its own blocks
    kernel(*_packed(task, ref_tensors, logical), *ref)
    return [_as_nchw(r, o.shape) for r, o in zip(ref, outs)]


def _as_nchw(a: np.ndarray, like: tuple[int, ...]) -> np.ndarray:
    """`a` blocked NCHW[x]c as the blocking of `like` (an NCHWc output of another config's
    blocks): unblocked, then blocked again; `a` itself where the shapes agree."""
    if a.shape == tuple(like) or a.ndim != 5 or len(like) != 5 or a.size != math.prod(like):
        return a
    n, cb, h, w, b = a.shape
    nchw = a.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w)
    x = like[4]
    return np.ascontiguousarray(nchw.reshape(n, nchw.shape[1] // x, x, h, w)
                                .transpose(0, 1, 3, 4, 2))


def _default_kernel(task: Task) -> tuple[Any, list[Any]]:
    """The task's default (fallback config) kernel and its argument tensors, built once per
    worker: the reference of large problems and the control of `LocalRunner(control=True)`."""
    key = f"{task.workload_key}@{task.target}"
    if key not in _REFS:
        s, ref_tensors = task.instantiate(None)
        import lowering

        if _on_gpu(task) or _on_accel(task):
            kernel = lowering.build(s, ref_tensors, target=task.target, name="main")
        else:
            # built as the builder builds candidates (object code, loaded): the control
            # and a candidate then differ by their schedules only, not by the code path
            from lowering.build_module import compile_object, load_object

            func = lowering.lower(s, ref_tensors, name="main")
            generated, obj = compile_object(func, task.target)
            kernel = load_object(func, task.target, generated, obj)
        _REFS[key] = (kernel, ref_tensors)
    return _REFS[key]


def _on_gpu(task: Task) -> bool:
    from tessel_target import Target

    return Target.parse(task.target).kind == "cuda"


def _on_accel(task: Task) -> bool:
    from tessel_target import Target

    return Target.parse(task.target).kind == "accel"


def _accel_costs(task: Task, kernel: Any, tensors: list[Any], opts: dict[str, Any],
                 build_s: float) -> dict[str, Any]:
    """A simulated accelerator candidate's seconds: its cycles under the cycle model (they
    do not depend on the data) at the target's clock. A checked candidate of a small layer
    also runs on the functional simulator against the TE evaluator, bit for bit."""
    stats = kernel.stats()
    seconds = stats.total_cycles / (float(kernel.env.target.attrs["clock_mhz"]) * 1e6)
    if opts.get("check") and task.flop <= opts.get("small_flop", 2e7):
        rng = np.random.default_rng(opts.get("seed"))
        n_in = task.num_inputs()
        logical = [rng.integers(-128, 128, s_).astype(d) for s_, d in task.args]
        inputs = _packed(task, tensors, logical)
        outs = [np.zeros(tuple(int(x.value) for x in t.shape), t.dtype)
                for t in tensors[n_in:]]
        kernel(*inputs, *outs)
        ref = _reference(task, tensors, logical, inputs, outs, math.inf)
        if not all(np.array_equal(o, r) for o, r in zip(outs, ref)):
            return {"error": ErrorKind.WRONG_RESULT.value,
                    "msg": "the simulated output differs from the TE evaluator's"}
    return {"costs": [seconds], "build_s": build_s,
            "note": f"{stats.total_cycles} cycles (cycle model)"}


def _do_build(task: Task, cfg: ConfigEntity, opts: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    func = task.lower(cfg)
    feats = None
    if opts.get("features"):
        from autotune.features import loop_features

        feats = [float(x) for x in loop_features(func)]
    out: dict[str, Any] = {"features": feats}
    if opts.get("compile") and _on_gpu(task):
        from lowering.cuda import build as build_cuda

        build_cuda(func, task.target)  # NVRTC errors are build errors; the runner loads it
    elif opts.get("compile") and _on_accel(task):
        task.build(cfg)  # a buffer past its SRAM scope is a build error
    elif opts.get("compile"):
        from lowering.build_module import compile_object
        from lowering.ir_json import to_json

        generated, out["object_code"] = compile_object(func, task.target)
        # the lowered function rides along (a few kB): the timing worker reads it back in
        # about 1 ms instead of lowering the config again (26-35 ms a 64@56 conv candidate,
        # in the worker that measures one candidate at a time)
        out["generated"] = {**dataclasses.asdict(generated), "func": to_json(func)}
    out["build_s"] = time.perf_counter() - t0
    return out


def _kernel(task: Task, cfg: ConfigEntity, opts: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The candidate's Kernel (loaded from the builder's object code, or compiled here)."""
    import lowering

    s, tensors = task.instantiate(cfg)
    if opts.get("object_code") is None:
        return lowering.build(s, tensors, target=task.target, name="main"), tensors
    from lowering.build_module import load_object
    from lowering.ir_json import from_json
    from lowering.llvm.codegen import Generated

    generated = dict(opts["generated"])
    func = from_json(generated.pop("func"), "the builder's lowered function")
    return load_object(func, task.target, Generated(**generated), opts["object_code"]), tensors


def _do_run(task: Task, cfg: ConfigEntity, opts: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        kernel, tensors = _kernel(task, cfg, opts)
    except Exception as e:  # a compile failure is the candidate's fault, not the run's
        return {"error": ErrorKind.BUILD_ERROR.value, "msg": f"{type(e).__name__}: {e}"}
    build_s = time.perf_counter() - t0
    if _on_accel(task):
        return _accel_costs(task, kernel, tensors, opts, build_s)
    rng = np.random.default_rng(opts.get("seed"))
    n_in = task.num_inputs()
    logical = [_random_array(rng, s_, d) for s_, d in task.args]
    arrays = _timed_arrays(task, tensors, logical, opts)
    inputs, outs = arrays[:n_in], arrays[n_in:]
    t1 = time.perf_counter()
    kernel(*inputs, *outs)
    first = time.perf_counter() - t1
    if opts.get("check"):
        ref = _reference(task, tensors, logical, inputs, outs, opts.get("small_flop", 2e7))
        for k, (o, r) in enumerate(zip(outs, ref)):
            scale = float(np.max(np.abs(r))) if r.size else 0.0
            if o.shape != r.shape or not np.allclose(o, r, rtol=1e-3, atol=1e-3 * scale + 1e-6):
                err = float(np.max(np.abs(o.astype("float64") - r))) if o.shape == r.shape else -1
                return {"error": ErrorKind.WRONG_RESULT.value,
                        "msg": f"output {k} differs from the reference (max abs error {err:.3g})"}
    best_s = opts.get("best_s")
    cutoff = opts.get("slow_cutoff")
    if best_s and cutoff and first > cutoff * best_s:
        # far slower than the best so far: repeats would only refine a loser's time
        return {"costs": [first], "build_s": build_s,
                "note": f"timed once: first call {first / best_s:.0f}x the best so far"}
    min_repeat_s = opts.get("min_repeat_ms", 0) / 1000.0
    if _on_gpu(task):
        return {"costs": _gpu_costs(kernel, [*inputs, *outs], first, opts, min_repeat_s),
                "build_s": build_s}
    # a first call as long as a repeat has already warmed caches and page tables
    warm = 0 if min_repeat_s and first >= min_repeat_s else int(opts.get("warmup", 1))
    for _ in range(warm):
        kernel(*inputs, *outs)
    if opts.get("control") and not _on_accel(task):
        return {**_control_costs(task, kernel, [*inputs, *outs], logical, opts,
                                 min_repeat_s), "build_s": build_s}
    if opts.get("cache_flush"):
        return {"costs": _cold_costs(kernel, [*inputs, *outs], int(opts.get("repeat", 3)),
                                     min_repeat_s), "build_s": build_s}
    number = max(int(opts.get("number", 1)), math.ceil(min_repeat_s / max(first, 1e-9)))
    costs = []
    clock = kernel_clock()
    for _ in range(int(opts.get("repeat", 3))):
        t2 = clock()
        for _ in range(number):
            kernel(*inputs, *outs)
        costs.append((clock() - t2) / number)
    return {"costs": costs, "build_s": build_s}


def kernel_clock() -> Callable[[], float]:
    """The clock a timed slot reads: this process's CPU time where kernels run on one
    thread (`TESSEL_NUM_THREADS=1`, the setting for tuning a one-thread deployment), else
    wall time; `TESSEL_MEASURE_CLOCK=wall` or `cpu` chooses. A shared machine preempts
    the worker in bursts: on wall time the ABBA quartets then read one side slow, and
    ResNet-18's tuning at load 3.4 accepted a 64@56 3x3 config at 0.666x the default
    (noise 0.107) that re-timed quietly no faster; CPU time leaves out the time the
    worker waits for a core (what other processes do to the caches stays). With several
    threads CPU time would add the threads' times and hide a poor split, so wall time.

        >>> import os, time
        >>> os.environ["TESSEL_MEASURE_CLOCK"] = "cpu"
        >>> kernel_clock() is time.process_time
        True
        >>> del os.environ["TESSEL_MEASURE_CLOCK"]
    """
    choice = os.environ.get("TESSEL_MEASURE_CLOCK", "")
    if choice not in ("", "wall", "cpu"):
        raise TesselError(f"TESSEL_MEASURE_CLOCK must be 'wall' or 'cpu', got {choice!r}; "
                          "unset it to time on CPU with one thread and wall time otherwise")
    if choice == "cpu":
        return time.process_time
    if choice == "wall":
        return time.perf_counter
    from lowering.kernel import num_threads

    return time.process_time if num_threads() == 1 else time.perf_counter


def _slot(kernel: Any, arrays: list[np.ndarray], number: int, flush: bool) -> float:
    """Seconds per call of one timed slot: `number` calls back to back, or one call after
    a cache flush."""
    if flush:
        evict(arrays)
        number = 1
    clock = kernel_clock()
    t0 = clock()
    for _ in range(number):
        kernel(*arrays)
    return (clock() - t0) / number


_WARMED: list[bool] = []  # whether this worker has run its warm-up (see _control_costs)


def _control_costs(task: Task, kernel: Any, arrays: list[np.ndarray],
                   logical: list[np.ndarray], opts: dict[str, Any], min_repeat_s: float
                   ) -> dict[str, Any]:
    """The candidate timed against the task's default kernel in ABBA quartets (default,
    candidate, candidate, default), `repeat` of them: {"costs": candidate seconds per call,
    "control": the default's, one each per quartet}. Load that changes during the quartet
    hits both alike, so their ratio holds where either time alone swings 2x on a shared
    machine."""
    dflt, tensors = _default_kernel(task)
    d_arrays = _timed_arrays(task, tensors, logical, opts)
    # where an argument has the same shape in both (the data, the output), both kernels
    # use one array: only the code differs, not the addresses (see _aligned)
    d_arrays = [a if a.shape == d.shape and a.dtype == d.dtype else d
                for a, d in zip(arrays, d_arrays)]
    dflt(*d_arrays)  # its first call faults its pages in: not a measure of its time
    if not _WARMED:
        # a fresh worker's first quartets read 0.7-1.7x for the default against itself
        # (its thread pool starting, pages, clocks), later ones 0.97-1.02: run first
        _WARMED.append(True)
        t_end = time.perf_counter() + 0.2
        while time.perf_counter() < t_end:
            dflt(*d_arrays)
    # the calls per slot from one warm call of each (a first call can take 10x one: then
    # a slot of one or two calls, which the load of a shared machine swings 2x)
    t0 = time.perf_counter()
    dflt(*d_arrays)
    d_warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    kernel(*arrays)
    c_warm = time.perf_counter() - t0
    flush = bool(opts.get("cache_flush"))
    base = int(opts.get("number", 1))
    # short slots (a quarter of min_repeat each), many quartets: other processes' load
    # comes in bursts of tens of ms; slots close in time see the same share of it
    slot_s = min_repeat_s / 4
    n_c = max(base, math.ceil(slot_s / max(c_warm, 1e-9)))
    n_d = max(base, math.ceil(slot_s / max(d_warm, 1e-9)))
    costs: list[float] = []
    control: list[float] = []

    def quartets(n: int) -> float:
        for _ in range(n):
            d1 = _slot(dflt, d_arrays, n_d, flush)
            c1 = _slot(kernel, arrays, n_c, flush)
            c2 = _slot(kernel, arrays, n_c, flush)
            d2 = _slot(dflt, d_arrays, n_d, flush)
            costs.append((c1 + c2) / 2)
            control.append((d1 + d2) / 2)
        return control_ratio(costs, control)

    n = 3 * int(opts.get("repeat", 3))
    below = opts.get("decide_below")
    ratio = run_quartets(quartets, costs, control, n,
                         None if below is None else float(below))
    if ratio < opts.get("confirm_below", 0.0):
        # it would be the task's best: confirmed by twice as many quartets again, so the
        # best record is not the luckiest of many candidates (winner's curse)
        quartets(2 * n)
    return {"costs": costs, "control": control}


def _peak_runs(tasks: Sequence[Task], slot_s: float) -> list[tuple[str, Any, int]]:
    """Per CPU target of `tasks`: its FMA peak loop (autotune.peak) and the iterations of
    one timed slot of about `slot_s` seconds."""
    from autotune.peak import fma_loop
    from tessel_target import Target

    out = []
    for target in sorted({str(t.target) for t in tasks}):
        if Target.parse(target).kind != "llvm":
            continue
        fn = fma_loop(target)
        t0 = time.perf_counter()
        fn(10_000)
        per = max(time.perf_counter() - t0, 1e-9) / 10_000
        out.append((target, fn, max(10_000, int(slot_s / per))))
    return out


def _do_defaults(tasks: Sequence[Task], opts: dict[str, Any]) -> dict[str, Any]:
    """Each task's default kernel (as the control) timed in `rounds` rounds, the tasks in
    turn within a round, so that a change of load falls on all alike, and in each round
    one slot of each target's FMA peak loop (autotune.peak; none where opts["peaks"] is
    False): {"seconds": the fastest round per task, "peaks": {target: the fastest
    round's FLOP/s}}. What
    LocalRunner.calibrate sets the tasks' units and its peaks to: the peak read under the
    load the units were (a run calibrated 10% slower than another read the same peak
    taken apart, and the task scheduler saw room above it that was only load)."""
    rng = np.random.default_rng(0)
    slot_s = float(opts.get("min_repeat_ms", 10.0)) / 1000.0
    runs = []
    for task in tasks:
        kernel, tensors = _default_kernel(task)
        logical = [_random_array(rng, s_, d) for s_, d in task.args]
        arrays = _timed_arrays(task, tensors, logical, opts)
        kernel(*arrays)  # pages faulted in, not timed
        t0 = time.perf_counter()
        kernel(*arrays)
        runs.append((kernel, arrays, max(1, math.ceil(slot_s / max(
            time.perf_counter() - t0, 1e-9)))))
    t_end = time.perf_counter() + 0.2  # a fresh worker's thread pool and clocks (see
    while time.perf_counter() < t_end:  # _control_costs): untimed rounds first
        for kernel, arrays, _n in runs:
            kernel(*arrays)
    times: list[list[float]] = [[] for _ in tasks]
    peaks = _peak_runs(tasks, slot_s) if opts.get("peaks", True) else []
    peak_times: list[list[float]] = [[] for _ in peaks]
    clock = kernel_clock()
    for _ in range(int(opts.get("rounds", 15))):
        for k, (kernel, arrays, n) in enumerate(runs):
            times[k].append(_slot(kernel, arrays, n, bool(opts.get("cache_flush"))))
        for k, (_target, fn, iterations) in enumerate(peaks):
            t0 = clock()
            fn(iterations)
            peak_times[k].append(max(clock() - t0, 1e-12))
    # the fastest round: load only ever adds time, and bursts of other processes last
    # longer than all the rounds (medians of 7 rounds at load 3.6 read 1.4-21 ms for a
    # conv whose fastest read 2.4-2.6 in three calibrations)
    from autotune.peak import fma_flop

    return {"seconds": [float(np.min(t)) for t in times],
            "peaks": {target: fma_flop(target, iterations) / float(np.min(pt))
                      for (target, _fn, iterations), pt in zip(peaks, peak_times)}}


def _spread(costs: Sequence[float], control: Sequence[float]) -> float:
    """The interquartile range of the quartets' ratios over their median."""
    r = np.asarray(costs) / np.maximum(np.asarray(control), 1e-12)
    q1, q2, q3 = np.percentile(r, [25, 50, 75])
    return float((q3 - q1) / max(q2, 1e-12))


def run_quartets(step: Callable[[int], Any], costs: list[float], control: list[float],
                 n: int, below: float | None = None) -> float:
    """Time `n` quartets or more through `step(k)`, which times k more ABBA quartets into
    `costs` and `control`; returns their `control_ratio`. While the quartets' ratios
    spread over 10% (a burst of other work; a quiet moment keeps them within 3%), n more,
    up to 4n in all. With `below` (the ratio a win must stay under), a look every LOOK
    quartets: a verdict already clear (`settled`) ends the comparison.

        >>> costs, control = [], []
        >>> def step(k):
        ...     costs.extend([0.5] * k); control.extend([1.0] * k)
        >>> run_quartets(step, costs, control, 30, below=0.995), len(costs)
        (0.5, 10)
    """
    goal = n
    while True:
        step(min(LOOK, goal - len(costs)) if below is not None else goal - len(costs))
        if below is not None and settled(costs, control, below):
            break
        if len(costs) < goal:
            continue
        if _spread(costs, control) <= 0.1 or goal >= 4 * n:
            break
        goal += n
    return control_ratio(costs, control)


def ratio_noise(costs: Sequence[float], control: Sequence[float]) -> tuple[float, float]:
    """The candidate's time over the default's (`control_ratio`) and its noise: two
    standard errors of the median of the per-quartet ratios, from their interquartile
    range (sigma ~ IQR / 1.349 for a normal spread, the median's standard error ~ 1.2533
    sigma / sqrt(n)).

        >>> r, noise = ratio_noise([0.9, 0.91, 0.89, 0.9], [1.0, 1.0, 1.01, 0.99])
        >>> round(r, 3), noise < 0.02
        (0.9, True)
    """
    r = np.asarray(costs, float) / np.maximum(np.asarray(control, float), 1e-12)
    q1, q3 = np.percentile(r, [25, 75])
    noise = 2 * 1.2533 * float(q3 - q1) / 1.349 / math.sqrt(len(r))
    return control_ratio(costs, control), noise


# A comparison with a threshold (LocalRunner.compare's `decide_below`) looks at its verdict
# every LOOK quartets, from the first LOOK on
LOOK = 10


def settled(costs: Sequence[float], control: Sequence[float], below: float) -> bool:
    """Whether quartets so far decide "is the candidate's ratio to the default below
    `below`" by twice the margin autotune.confirm.judge asks at the end (four standard
    errors, not two), so that stopping at the first clear look seldom gives another
    verdict than the full count would. Of 380 verdicts in ResNet-18 tuning databases,
    most were ratios of 0.70-0.95 with a noise of 0.01-0.02 after 30 quartets: clear
    after 10.

        >>> settled([0.8] * 9 + [0.82], [1.0] * 10, 0.995)
        True
        >>> settled([0.99, 1.0, 1.01, 0.98] * 3, [1.0] * 12, 0.995)
        False
    """
    if len(costs) < LOOK:
        return False
    r, noise = ratio_noise(costs, control)
    return r + 2 * noise < below or r - 2 * noise > below


def control_ratio(costs: Sequence[float], control: Sequence[float]) -> float:
    """The candidate's time over the default's: the median of its quartets over the median
    of the default's. A burst of load inflates some slots of either; the medians pass over
    them (on ResNet-18's 256@14 conv at load 3.4, groups of 8 quartets gave 1.104-1.117
    this way, 0.99-1.02 for the default against itself; the median of per-quartet ratios
    spread 2x wider).

        >>> control_ratio([2.0, 2.2, 9.0], [1.0, 1.1, 1.0])  # a burst in the third
        2.2
    """
    return float(np.median(costs)) / max(float(np.median(control)), 1e-12)


def _gpu_costs(kernel: Any, arrays: list[np.ndarray], first: float, opts: dict[str, Any],
               min_repeat_s: float) -> list[float]:
    """Seconds per call timed with CUDA events on device-resident copies of `arrays` (no
    host copies inside the timed calls)."""
    from lowering.cuda import to_device

    dev = [to_device(a) for a in arrays]
    number = max(int(opts.get("number", 1)), math.ceil(min_repeat_s / max(first, 1e-9)))
    return [kernel.time(*dev, number=number, repeat=1, warmup=int(opts.get("warmup", 1)))
            for _ in range(int(opts.get("repeat", 3)))]


_FLUSH: list[np.ndarray] = []


def _flush_buffer() -> np.ndarray:
    """Bytes enough to push everything out of the caches: twice the last-level cache (for
    hosts without clflush only: see evict)."""
    if not _FLUSH:
        size = 32 << 20
        try:
            text = open("/sys/devices/system/cpu/cpu0/cache/index3/size").read().strip()
            size = int(text.rstrip("KMG")) << {"K": 10, "M": 20, "G": 30}.get(text[-1], 0)
        except (OSError, ValueError):
            pass
        _FLUSH.append(np.ones(2 * max(size, 8 << 20), np.uint8))
    return _FLUSH[0]


def evict(arrays: list[Any]) -> None:
    """Make a kernel's call cold as inside a model: every argument but the first (the data
    its producer has just written) evicted from the caches, line by line (TVM's
    cache_flush_cpu_non_first_arg). Where clflush is missing, a buffer of twice the
    last-level cache is written instead (evicting the data too): on a VM that reports a
    480 MiB L3 that cost about 100 ms a call, clflush of a conv's weights and output 1-15
    ms."""
    from lowering.llvm.cache_flush import flush_arrays

    if not flush_arrays(arrays[1:]):
        _flush_buffer()[:] += 1


def _cold_costs(kernel: Any, arrays: list[np.ndarray], repeat: int, min_repeat_s: float
                ) -> list[float]:
    """Seconds of single calls, each after `evict` (as in a model, where the layers before
    have evicted this one's weights); at least `repeat` calls and `min_repeat_s` of kernel
    time, in `repeat` groups averaged."""
    calls: list[float] = []
    clock = kernel_clock()
    while len(calls) < repeat or (sum(calls) < min_repeat_s and len(calls) < 10 * repeat):
        evict(arrays)
        t0 = clock()
        kernel(*arrays)
        calls.append(clock() - t0)
    groups = np.array_split(np.asarray(calls), repeat)
    return [float(g.mean()) for g in groups]


def default_memory_limit() -> int:
    """Address space each measurement worker may take: half the machine's memory, at least
    4 GiB (a worker's own libraries and per-thread malloc arenas take some of it)."""
    from tessel_target import host_memory_bytes

    return max(host_memory_bytes() // 2, 4 << 30)


def _limit_memory(limit: int | None) -> None:
    # A candidate that allocates without bound then fails its allocation (MemoryError, or
    # the kernel's "out of memory" check) and costs one error record, instead of pushing
    # the machine into the OOM killer, which may pick the tuning process itself.
    if not limit:
        return
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _worker_main(conn: Any, imports: Sequence[str], memory_limit: int | None = None
                 ) -> None:
    """The loop of a worker process: import, say ready, then serve jobs until told to stop."""
    _limit_memory(memory_limit)
    for m in imports:
        importlib.import_module(m)
    import schedule.templates  # noqa: F401  (fill the template registry before the first job)

    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        kind, task_d, cfg_json, opts = msg
        if kind == "defaults":
            try:
                conn.send(("ok", _do_defaults([cached_task(d) for d in task_d], opts)))
            except Exception as e:
                conn.send(("error", {"error": ErrorKind.RUNTIME_ERROR.value,
                                     "msg": f"{type(e).__name__}: {e}"}))
            continue
        try:
            task = cached_task(task_d)
            cfg = task.config_from_json(cfg_json)
            out = _do_build(task, cfg, opts) if kind == "build" else _do_run(task, cfg, opts)
            conn.send(("ok", out))
        except Exception as e:
            tb = traceback.format_exc(limit=3).strip().splitlines()[-1]
            err = ErrorKind.BUILD_ERROR if kind == "build" else ErrorKind.RUNTIME_ERROR
            conn.send(("error", {"error": err.value, "msg": f"{type(e).__name__}: {e} ({tb})"}))


_MAIN_LOCK = threading.Lock()


@contextlib.contextmanager
def _main_not_rerun() -> Iterator[None]:
    """While a spawned child starts, __main__ looks interactive (no file, no spec): spawn
    then does not re-run the parent's main script in the child."""
    # multiprocessing's spawn re-runs the parent's main script in each child (as
    # __mp_main__) when __main__ has a file or a module spec; it reads them in
    # Process.start, so hiding them around start() is enough, and the lock keeps two
    # builder lanes starting workers at once from restoring each other's state.
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    with _MAIN_LOCK:
        saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
        main.__dict__.pop("__file__", None)
        main.__spec__ = None
        try:
            yield
        finally:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)


class Worker:
    """A spawned child process that serves build / run jobs; killed and replaced on a crash
    or a timeout. `Worker(imports=["my_templates"])` imports modules first (to register
    templates that live outside Tessel). Its address space is capped at `memory_limit`
    bytes (default `default_memory_limit()`; 0 for no cap).

    As multiprocessing's spawn does, the child first re-runs the parent's main script (as
    `__mp_main__`), so templates a script registers reach it; `rerun_main=False` skips
    that where the main script is someone else's: a Ray slot's is Ray's worker script,
    and re-running it imported Ray into each worker (0.3 s of CPU and 55 MB a start; see
    benchmarks/cluster.py).

        >>> w = Worker(rerun_main=False)  # started by its first call
        >>> w.rerun_main
        False
    """

    def __init__(self, imports: Sequence[str] = (), start_timeout: float = 120.0,
                 memory_limit: int | None = None, rerun_main: bool = True) -> None:
        self.imports = list(imports)
        self.start_timeout = start_timeout
        self.memory_limit = default_memory_limit() if memory_limit is None else memory_limit
        self.rerun_main = rerun_main
        self._proc: Any = None
        self._conn: Any = None

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker_main,
                                 args=(child, self.imports, self.memory_limit), daemon=True)
        with contextlib.nullcontext() if self.rerun_main else _main_not_rerun():
            self._proc.start()
        child.close()
        self._conn = parent
        if not parent.poll(self.start_timeout):
            self.kill()
            raise TesselError(f"a measurement worker did not start in "
                              f"{self.start_timeout:.0f} s")
        try:
            parent.recv()
        except EOFError:
            self._proc.join(5)
            code = self._proc.exitcode
            self.kill()
            script = getattr(sys.modules.get("__main__"), "__file__", None)
            rerun = (f"; it re-ran {script} first, as multiprocessing's spawn does (so "
                     "templates a script registers reach it): a script that starts a "
                     "runner must do so under `if __name__ == \"__main__\":`, or pass "
                     "rerun_main=False") if self.rerun_main and script else ""
            raise TesselError(f"a measurement worker exited while starting (exit code {code}); "
                              f"does each of its imports {self.imports} import in a fresh "
                              f"python?{rerun}") from None

    def kill(self) -> None:
        """Kill the process now (the next job starts a fresh one)."""
        if self._proc is not None and self._proc.pid is not None:  # None: never started
            self._proc.kill()
            self._proc.join(5)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def close(self) -> None:
        """Ask the process to exit, then make sure it did."""
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(2)
            except (OSError, BrokenPipeError):
                pass
        self.kill()

    def call(self, msg: Any, timeout: float) -> tuple[str, dict[str, Any]]:
        """Send one job; ("ok", payload), ("error", {error, msg}), crash or timeout."""
        if self._proc is None or not self._proc.is_alive():
            self._start()
        try:
            self._conn.send(msg)
            if not self._conn.poll(timeout):
                self.kill()
                return "error", {"error": ErrorKind.TIMEOUT.value,
                                 "msg": f"no answer within {timeout:g} s; worker killed"}
            return self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            code = self._proc.exitcode if self._proc is not None else None
            if self._proc is not None:
                self._proc.join(2)
                code = self._proc.exitcode
            self.kill()
            return "error", {"error": ErrorKind.WORKER_CRASH.value,
                             "msg": f"the worker process died (exit code {code})"}


# ---------------------------------------------------------------------------------------
# Builder and runners


def default_build_workers() -> int:
    """One build worker per usable core (building is done before a batch is timed)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class LocalBuilder:
    """Builds candidates in `n_parallel` spawned workers (default: one per core): schedule,
    lowering and, with `compile` (default), LLVM code generation and O3 into object code
    that the runner loads. A candidate whose build overruns `timeout` is killed.
    `rerun_main`: see `Worker`."""

    def __init__(self, n_parallel: int | None = None, timeout: float = 10.0,
                 imports: Sequence[str] = (), features: bool = False,
                 compile: bool = True, rerun_main: bool = True) -> None:
        self.timeout = timeout
        self.features = features
        self.compile = compile
        n = default_build_workers() if n_parallel is None else n_parallel
        self.workers = [Worker(imports, rerun_main=rerun_main) for _ in range(max(1, n))]

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """One BuildResult per input, in order."""
        def one(k: int) -> BuildResult:
            w = self.workers[k % len(self.workers)]
            inp = inputs[k]
            t0 = time.perf_counter()
            status, out = w.call(("build", inp.task.to_dict(), inp.config_json,
                                  {"features": self.features, "compile": self.compile}),
                                 self.timeout)
            if status == "ok":
                return BuildResult(build_s=out["build_s"], features=out["features"],
                                   object_code=out.get("object_code"),
                                   generated=out.get("generated"))
            return BuildResult(ErrorKind(out["error"]), out["msg"], time.perf_counter() - t0)

        if len(self.workers) == 1:
            return [one(k) for k in range(len(inputs))]
        results: list[BuildResult | None] = [None] * len(inputs)
        with ThreadPoolExecutor(len(self.workers)) as ex:
            # worker k serves inputs k, k + n, ...: one job at a time per worker
            def lane(w: int) -> None:
                for k in range(w, len(inputs), len(self.workers)):
                    results[k] = one(k)

            list(ex.map(lane, range(len(self.workers))))
        return [r for r in results if r is not None]

    def close(self) -> None:
        """Stop the workers."""
        for w in self.workers:
            w.close()


def timed_as(task: Task, model_layout: bool) -> Task:
    """The task as a runner builds and times it: with `model_layout`, an NCHWc conv in the
    blocked layouts a model runs it in (relay_ir.backend.layout_plan.as_in_model; the
    config space is the same), else the task itself.

        >>> t = Task("matmul.x86", [((8, 8), "float32"), ((8, 8), "float32")])
        >>> timed_as(t, model_layout=True) is t
        True
    """
    if not model_layout:
        return task
    from relay_ir.backend.layout_plan import as_in_model

    got = as_in_model(task.template, task.args, task.attrs, task.target)
    return task if got is None else Task(task.template, got[0], got[1], task.target,
                                         task.name)


class LocalRunner:
    """Compiles and times built candidates in one killable worker; checks the output of
    the first `check_trials` candidates of each task against a reference.

    `number` calls per repeat (more if one repeat would take under `min_repeat_ms`),
    `repeat` repeats, `warmup` untimed calls (none when the first call already took
    `min_repeat_ms`); fresh random inputs per candidate. A candidate whose first call takes
    over `slow_cutoff` times the best mean this runner has measured for the task is timed
    once (its record says so): repeats would only refine the time of a loser. With
    `cache_flush`, every timed call follows `evict` (every argument but the first out of
    the caches, as TVM's enable_cpu_cache_flush): the time a layer takes inside a model,
    whose other layers have evicted its weights, rather than with everything hot (in
    ResNet-18 the hot and cold times of one conv differ up to 2x, and do not rank configs
    alike). The timing worker's address space is capped at `memory_limit` bytes (see
    `Worker`): a candidate that allocates without bound costs an error record.

    With `control` (CPU tasks), each candidate is timed beside the task's default config in
    ABBA quartets (default, candidate, candidate, default; 3 x `repeat` quartets of slots
    of min_repeat_ms / 4, the two kernels on the same data and output arrays) and recorded
    as its time relative to the default's, in the default's units: one cost,
    `control_ratio` x the default's time at this runner's first control of the task (the
    note gives the ratio and the spread of the quartets). On a shared machine the load
    changes between two candidates, less within a quartet: a config is recorded faster
    than another only when it was faster beside the same control, and the default config
    itself, when measured, records about that first time, so a config slower than the
    default does not win by a lucky moment (measured on ResNet-18: timed alone with cache
    flushes, 6 of 11 convs recorded a "best" that re-measured slower than the default). A
    candidate that would be the task's best (a ratio below the runner's best so far, or
    below 1) is timed for twice as many quartets again before it is recorded, so the best
    record is less often the luckiest of many draws; quartets whose ratios still spread
    over 10% after 4x as many are credited their upper quartile (a win only where 3 of 4
    quartets show one). Still the best of many candidates is often a lucky one: `compare`
    times one again beside the default for many quartets, for autotune.confirm to decide
    whether a build may apply it. All arrays are 64-byte aligned, as a compiled model's
    (see `_aligned`).
    With `model_layout`, an NCHWc conv is built and timed in the blocked layouts a model
    runs it in (`timed_task`); its records stay the logical task's. With `huge_pages`,
    a CPU kernel's arguments lie on 2 MiB pages, as a model's arenas hold them
    (relay_ir.backend.huge_pages: on 4 KiB pages AVX2 ResNet-50's 1x1 convs at 14x14 kept configs
    that won 8-10% alone and lost 3-13% in the model). `rerun_main`: whether its workers
    re-run the main script (see `Worker`).
    """

    def __init__(self, timeout: float = 10.0, number: int = 1, repeat: int = 3,
                 min_repeat_ms: float = 0.0, warmup: int = 1, check_trials: int = 3,
                 n_parallel_build: int | None = None, imports: Sequence[str] = (),
                 ref_timeout: float = 120.0, builder: LocalBuilder | None = None,
                 slow_cutoff: float | None = 10.0, cache_flush: bool = False,
                 memory_limit: int | None = None, control: bool = False,
                 model_layout: bool = False, rerun_main: bool = True,
                 huge_pages: bool = False) -> None:
        kernel_clock()  # a bad TESSEL_MEASURE_CLOCK fails here, not in every measurement
        self.timeout = timeout
        self.slow_cutoff = slow_cutoff
        self._best: dict[str, float] = {}
        self.opts = {"number": number, "repeat": repeat, "min_repeat_ms": min_repeat_ms,
                     "warmup": warmup, "cache_flush": cache_flush, "control": control,
                     "huge_pages": huge_pages}
        self._control: dict[str, float] = {}  # the default's seconds per task (first control)
        self._peaks: dict[str, float] = {}  # FMA peak FLOP/s per target (calibrate's)
        self._best_ratio: dict[str, float] = {}  # the best control ratio per task so far
        self.model_layout = model_layout
        self.check_trials = check_trials
        self.ref_timeout = ref_timeout
        self.builder = builder or LocalBuilder(n_parallel_build, timeout, imports,
                                               rerun_main=rerun_main)
        self.worker = Worker(imports, memory_limit=memory_limit, rerun_main=rerun_main)
        self._checked: dict[str, int] = {}
        self._seed = 0

    def timed_task(self, task: Task) -> Task:
        """The task as this runner builds and times it (see `timed_as`)."""
        return timed_as(task, self.model_layout)

    def run(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        """One MeasureResult per input, in order."""
        logical = inputs
        inputs = [MeasureInput(self.timed_task(i.task), i.config) for i in inputs]
        built = self.builder.build(inputs)
        out = []
        for inp, b in zip(logical, built):
            if b.error_kind != ErrorKind.NONE:
                out.append(MeasureResult((), b.error_kind, b.error_msg, b.build_s))
                continue
            key = f"{inp.task.workload_key}@{inp.task.target}"
            check = self._checked.get(key, 0) < self.check_trials
            self._checked[key] = self._checked.get(key, 0) + 1
            self._seed += 1
            opts = dict(self.opts, check=check, seed=self._seed,
                        best_s=self._best.get(key), slow_cutoff=self.slow_cutoff,
                        object_code=b.object_code, generated=b.generated,
                        confirm_below=self._best_ratio.get(key, 1.0))
            t0 = time.perf_counter()
            limit = self.timeout + (self.ref_timeout if check else 0.0)
            timed = self.timed_task(inp.task)
            status, res = self.worker.call(("run", timed.to_dict(), inp.config_json, opts),
                                           limit)
            run_s = time.perf_counter() - t0
            if status == "ok" and "error" not in res:
                costs, note = res["costs"], res.get("note", "")
                if "control" in res:
                    costs, note = self._relative(key, costs, res["control"])
                r = MeasureResult(tuple(costs), ErrorKind.NONE, note,
                                  b.build_s + res["build_s"], run_s, features=b.features)
                self._best[key] = min(self._best.get(key, math.inf), r.mean)
                out.append(r)
            else:
                out.append(MeasureResult((), ErrorKind(res["error"]), res["msg"], b.build_s,
                                         run_s))
        return out

    def compare(self, task: Task, config: ConfigEntity, quartets: int = 30,
                decide_below: float | None = None) -> tuple[list[float], list[float]]:
        """The candidate timed beside the task's default kernel (as the runner times it:
        `timed_task`) in `quartets` ABBA quartets or more (more while their ratios spread
        over 10%): (candidate seconds, default seconds), one each per quartet, raw. What
        `autotune.confirm` decides on; raises TesselError if the candidate fails. With
        `decide_below` (the ratio a win must stay under), it stops at the first look
        (every LOOK quartets) at which the verdict is clear (see `settled`).

            >>> with LocalRunner() as r:                                   # doctest: +SKIP
            ...     costs, control = r.compare(task, task.config(7), quartets=30)
        """
        timed = self.timed_task(task)
        [b] = self.builder.build([MeasureInput(timed, config)])
        if b.error_kind != ErrorKind.NONE:
            raise TesselError(f"compare: config {config.index} of {task.name or task.template}"
                              f" does not build ({b.error_kind.value}): {b.error_msg[:200]}")
        self._seed += 1
        opts = dict(self.opts, control=True, repeat=max(1, math.ceil(quartets / 3)),
                    min_repeat_ms=max(float(self.opts["min_repeat_ms"]), 10.0),
                    check=False, seed=self._seed, best_s=None, slow_cutoff=None,
                    object_code=b.object_code, generated=b.generated, confirm_below=0.0,
                    decide_below=decide_below)
        status, res = self.worker.call(("run", timed.to_dict(), config.to_json(), opts),
                                       self.timeout * 4)
        if status != "ok" or "error" in res:
            raise TesselError(f"compare: config {config.index} of "
                              f"{task.name or task.template} failed to run: {res.get('msg')}")
        if "control" not in res:
            raise TesselError(f"compare: {task.target} kernels are not timed beside a "
                              "control (CPU targets only)")
        return list(res["costs"]), list(res["control"])

    def calibrate(self, tasks: Sequence[Task], rounds: int = 15, peaks: bool = True
                  ) -> dict[str, float]:
        """Set the units of the tasks' records (see the class doc) to their default
        kernels timed together, the fastest of `rounds` interleaved rounds, instead of each task's
        first control: taken at different moments of a shared machine, those differed up
        to 4x between runs, and the task scheduler, which weighs tasks by their times,
        gave its budget to whichever task was first timed under load. CPU tasks only;
        returns {workload@target: seconds}. With `peaks`, each round also times one
        slot of each target's FMA peak loop (`peak_flops` then gives the fastest); the
        task scheduler asks for it only where it caps by the peak.

            >>> with LocalRunner(control=True) as r:                     # doctest: +SKIP
            ...     r.calibrate([task])
        """
        from tessel_target import Target

        cpu = [t for t in tasks if Target.parse(t.target).kind == "llvm"]
        if not cpu:
            return {}
        status, res = self.worker.call(
            ("defaults", [self.timed_task(t).to_dict() for t in cpu], "",
             {**self.opts, "rounds": rounds, "peaks": peaks,
              "min_repeat_ms": max(float(self.opts["min_repeat_ms"]), 10.0) / 4}),
            self.timeout * len(cpu) + self.ref_timeout)
        if status != "ok" or "error" in res:
            raise TesselError(f"calibrate: timing the default kernels failed: "
                              f"{res.get('msg')}")
        got = {f"{t.workload_key}@{t.target}": s_ for t, s_ in zip(cpu, res["seconds"])}
        self._control.update(got)
        self._peaks.update(res.get("peaks", {}))
        return got

    def peak_flops(self, task: Task) -> float:
        """One core's FMA peak (FLOP/s) for the task's target where this runner times:
        the one `calibrate` read in the rounds it timed the defaults in (the same load as
        the records' units), else measured now (autotune.peak.measure_peak)."""
        target = str(task.target)
        if target not in self._peaks:
            from autotune.peak import measure_peak

            self._peaks[target] = measure_peak(target)
        return self._peaks[target]

    def use_units(self, units: Mapping[str, float]) -> None:
        """Record units ({workload@target: seconds}, as `calibrate` returns them) taken
        by another runner: the slots of one device kind on a cluster share one
        calibration (autotune.cluster.RayRunner.calibrate), so their records compare.

            >>> with LocalRunner(control=True) as r:                     # doctest: +SKIP
            ...     r.use_units({"mm|...@llvm": 0.002})
        """
        self._control.update({k: float(v) for k, v in units.items()})

    def unit(self, task: Task) -> float | None:
        """The seconds this runner's records of the task are in (its calibrated or first
        control time of the default), or None before either."""
        return self._control.get(f"{task.workload_key}@{task.target}")

    def _relative(self, key: str, costs: Sequence[float], control: Sequence[float]
                  ) -> tuple[list[float], str]:
        """Costs in the units of the task's default time (see the class doc), and a note."""
        ratios = [c / max(d, 1e-12) for c, d in zip(costs, control)]
        unit = self._control.setdefault(key, float(np.median(control)))
        ratio = control_ratio(costs, control)
        q1, q3 = np.percentile(ratios, [25, 75])
        unsettled = ""
        if _spread(costs, control) > 0.1 and ratio < 1.0:
            # the quartets never settled (a machine busy throughout): the median's win is
            # as likely noise as not (ResNet-18 at load 6.5: a 512@7 conv read 0.74 here,
            # 0.98 in-process when quiet); credited is only what 3 of 4 quartets show, a
            # loss if they show one (capped at 1.0, such records tied the unit and beat
            # the default's own record whenever that read over 1.0: at load 4-5, 5 of
            # ResNet-18's 12 tasks applied one, the model 12% slower than untuned)
            got = max(ratio, float(q3))
            unsettled = f", unsettled: measured {ratio:.3f}, recorded the upper quartile"
            ratio = got
        self._best_ratio[key] = min(self._best_ratio.get(key, 1.0), ratio)
        return [ratio * unit], (
            f"control: {ratio:.3f} x the default config timed alternately (ABBA), in units "
            f"of its {unit * 1e3:.4g} ms ({len(ratios)} quartets, their ratios' quartiles "
            f"{q1:.3f} {q3:.3f}{unsettled}); timed alone {float(np.median(costs)) * 1e3:.4g} ms")

    def close(self) -> None:
        """Stop the builder's and the runner's workers."""
        self.builder.close()
        self.worker.close()

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FakeRunner:
    """A runner for tests: `cost(task, config) -> seconds | ErrorKind` decides each result.

    `FakeRunner(lambda t, c: 1.0 + c.index % 7)`; every input it saw is in `.seen`. With
    `model_layout`, it stands for a runner that times NCHWc convs in a model's layouts
    (`timed_task`, as LocalRunner's), though the cost function still sees the task given.
    """

    def __init__(self, cost: Callable[[Task, ConfigEntity], float | ErrorKind],
                 model_layout: bool = False) -> None:
        self.cost = cost
        self.seen: list[MeasureInput] = []
        self.model_layout = model_layout

    def timed_task(self, task: Task) -> Task:
        """The task as a real runner would build and time it (see `timed_as`)."""
        return timed_as(task, self.model_layout)

    def run(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        """One MeasureResult per input from the cost function."""
        out = []
        for inp in inputs:
            self.seen.append(inp)
            c = self.cost(inp.task, inp.config)
            if isinstance(c, ErrorKind):
                out.append(MeasureResult((), c, f"fake {c.value}"))
            else:
                out.append(MeasureResult((float(c),)))
        return out

    def compare(self, task: Task, config: ConfigEntity, quartets: int = 30,
                decide_below: float | None = None) -> tuple[list[float], list[float]]:
        """As LocalRunner.compare: the cost function's seconds for the config and for the
        task's default, alternately, quartet by quartet as LocalRunner's worker times them
        (`run_quartets`: `quartets` of them, more while they spread, fewer with
        `decide_below` once the verdict is clear); a cost function with noise or outliers
        draws anew per call. Every call is in `.seen` too."""
        default = task.default_config()
        if default is None:
            raise TesselError(f"compare: {task.name or task.template} has no default config")
        costs: list[float] = []
        control: list[float] = []

        def step(k: int) -> None:
            for _ in range(k):
                for cfg, into in ((default, control), (config, costs)):
                    self.seen.append(MeasureInput(task, cfg))
                    c = self.cost(task, cfg)
                    if isinstance(c, ErrorKind):
                        raise TesselError(f"compare: config {cfg.index} failed ({c.value})")
                    into.append(float(c))

        run_quartets(step, costs, control, quartets, decide_below)
        return costs, control

    def close(self) -> None:
        """Nothing to stop."""

    def __enter__(self) -> FakeRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
