"""Each kernel of a model timed where it runs, in sequence (a timestamp after every kernel
call of whole runs, no Python between the calls but the clock), beside the same kernel
repeated alone (its data and weights in cache, as `lib.profile` sees it warm): a step
that loses in sequence loses to what the steps before it left in (or took out of) the
caches, or to the hand-off between kernels. Run at two threads and at one to tell what
two threads add. Also the whole run (`lib.run`) against the sum of `lib.profile`'s steps.

    python -m benchmarks.step_sequence --models resnet50                       # two threads
    TESSEL_NUM_THREADS=1 python -m benchmarks.step_sequence --models resnet50  # one
    python -m benchmarks.step_sequence --models resnet18 --image 32 --width 8 --runs 2

Wall time (the subject is two threads), kept only where it measures the kernels: a
sample counts only when no thread of the parallel loop (this one and the pool's workers)
waited for a CPU for more than 3% of it (their run-queue waits, /proc/self/task/*/
schedstat, read around each call: a pread each, about 0.3 us, so the steps in sequence
have a few microseconds between them, not lib.run's one), and only when each pool worker
was on a CPU for 90% of it or more (WORKER_ON_CPU_SHARE): one that slept through a step
(its spin ran out while this thread was off the CPU) waits for nothing, and this thread
then runs every chunk, a one-thread time. The table prints the share of samples kept. On
the shared 2-vCPU machine at load 2.4-2.5, while two-thread whole runs read 42-75 ms
(22 ms quiet), 80% of the samples were kept by the run-queue test and ResNet-50's steps
summed to 21.5 ms in sequence; at load 4.5 that test alone kept 44%, whose steps summed
to 52.4 ms, one thread's time.

ResNet-50, untuned, Emerald Rapids, one process per thread count (load 2.4-2.5; step
medians, 30 and 20 runs): the steps in sequence 37.56 ms on one thread, 21.52 on two (1.75x);
alone 35.51 and 18.03 (1.97x). The kernels scale; what two threads lose (3.5 ms in
sequence against alone, one thread 2.0 ms) is in the state the steps before leave, most of
it at the 14x14 and 7x7 layers, whose weights (1-9 MiB a conv) come cold: the 1024@14 ->
256 1x1 convs 1.43-1.52x in sequence (2.0x alone), 512@7 3x3 1.53-1.60x, 512@14 -> 7
stride 2 1.42x, the 2048 -> 1000 dense (8 MiB of weights, a 2048-float input: nothing but
weights streaming) 1.43x (1.97x alone); and 128@56 -> 28 stride 2 3x3 1.54x (1.92x
alone), whose 1.5 MiB input the 1x1 conv before it wrote split by rows while it reads it
split by output channels (each core reads every row, half from the other core's cache;
conv2d_NCHWc.x86's ROWS_OUTER_WITH_TAPS now splits it by rows too: 717 -> 535 us). The
hand-off between kernels is not it: a pool whose launches and workers take no mutex while
both spin (futex sleeps 2.5 -> 1.7 a run) ran the model in 21.86 ms against 21.75, quiet.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.models import _model
from lowering.kernel import num_threads


@dataclass
class StepTimes:
    """One step: its group, output shape, median microseconds in sequence and alone."""

    index: int
    group: str
    shape: tuple[int, ...]
    in_sequence_us: float
    alone_us: float


def _bound_calls(plan: Any, arrays: Sequence[np.ndarray]
                 ) -> tuple[list[tuple[Any, Any, Any]], list[Any]]:
    """(ctypes entry, pointer array, dims) per step, every address filled in once, and the
    value arrays those addresses point into (the caller keeps them alive: the outputs are
    fresh arrays of this run)."""
    env = plan.execute(arrays)
    calls = plan._calls(env)
    addr = {v: env[v].ctypes.data for v in plan._per_run}
    out = []
    for k, ptrs, patch in calls:
        for slot, v in patch:
            ptrs[slot] = addr[v]
        entry, dims = k.entry_point()
        out.append((entry, ptrs, dims))
    return out, env


def _on_cpu_ns(tid: int) -> int:
    """Nanoseconds a thread of this process has run (0 for one that has ended)."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[0])
    except FileNotFoundError:
        return 0


def parallel_threads(threads: int, run: Callable[[], Any] | None = None) -> list[int]:
    """Thread ids of the calling thread and of the `threads` - 1 other threads of the
    process that ran the longest while `run()` ran: when it calls parallel kernels, the
    pool's workers (ranked by their whole lives instead, a thread of the build or of
    onnx could outrank a worker that had slept through a loaded machine: at load 7 the
    watched thread had run 4 clock ticks, the worker 9).

        >>> parallel_threads(1) == [threading.get_native_id()]
        True
    """
    me = threading.get_native_id()
    others = [int(t) for t in os.listdir("/proc/self/task") if int(t) != me]
    before = {t: _on_cpu_ns(t) for t in others}
    if run is not None:
        run()
    others.sort(key=lambda t: _on_cpu_ns(t) - before[t], reverse=True)
    return [me] + others[:max(0, threads - 1)]


class RunQueueWait:
    """Nanoseconds that some threads have waited, runnable, for a CPU (their schedstat's
    second field), read with one pread per thread: `RunQueueWait([tid])()`."""

    field = 1

    def __init__(self, tids: Sequence[int]) -> None:
        self.fds = [os.open(f"/proc/self/task/{t}/schedstat", os.O_RDONLY) for t in tids]

    def each(self) -> list[int]:
        """The field per thread."""
        return [int(os.pread(fd, 96, 0).split()[self.field]) for fd in self.fds]

    def __call__(self) -> int:
        return sum(self.each())

    def close(self) -> None:
        """Close the files."""
        for fd in self.fds:
            os.close(fd)


class OnCpu(RunQueueWait):
    """Nanoseconds that some threads have run on a CPU (their schedstat's first field,
    current to the read for a thread running now), one per thread: `OnCpu([tid]).each()`.
    """

    field = 0


# a sample counts only where every pool worker was on a CPU for this share of the call
# or more (working or spinning for work): one asleep (its spin ran out while the caller
# was off its CPU, or it was never woken in time) waits for nothing, and the caller then
# runs every chunk, a one-thread time. On the shared 2-vCPU machine at load 5-7 the run
# queue test alone kept 44% of ResNet-50's samples, and its steps read their one-thread
# times (52.4 ms in sequence, 21.5 quiet)
WORKER_ON_CPU_SHARE = 0.9


def step_times(lib: Any, feeds: dict[str, np.ndarray], runs: int = 30,
               alone_repeat: int = 5) -> tuple[list[StepTimes], float]:
    """Median microseconds of each step over `runs` whole runs (in sequence), and over
    `alone_repeat` back-to-back calls of the step after one warm-up (alone), the two kinds
    of runs interleaved; each over the samples in which every thread of the parallel loop
    ran throughout (no more than 3% of the call waiting for a CPU, RunQueueWait, and each
    pool worker on a CPU for WORKER_ON_CPU_SHARE of it, OnCpu; nan where none did); and
    the share of the samples kept.

        >>> rows, kept = step_times(lib, feeds, runs=3)      # doctest: +SKIP
        >>> sum(r.in_sequence_us for r in rows) >= sum(r.alone_us for r in rows)  # doctest: +SKIP
        True
    """
    plan = lib.plan
    if not plan._pointer_calls:
        raise SystemExit("step_sequence times host kernels; this model has device kernels")
    calls, env = _bound_calls(plan, [feeds[n] for n, _, _ in lib.input_specs])
    clock = time.perf_counter_ns
    def run_all() -> None:
        for _ in range(3):
            for entry, ptrs, dims in calls:
                entry(ptrs, dims)

    run_all()  # wakes the pool's workers, whose CPU time in the next runs marks them
    tids = parallel_threads(num_threads(), run_all)
    waited, ran = RunQueueWait(tids), OnCpu(tids[1:])
    seq: list[list[int]] = [[] for _ in calls]
    alone: list[list[int]] = [[] for _ in calls]
    kept = [0, 0]

    def timed(entry: Any, ptrs: Any, dims: Any, into: list[int]) -> None:
        w0, r0 = waited(), ran.each()
        t0 = clock()
        entry(ptrs, dims)
        wall = clock() - t0
        r1 = ran.each()
        kept[1] += 1
        if waited() - w0 <= 0.03 * wall and \
                all(b - a >= WORKER_ON_CPU_SHARE * wall for a, b in zip(r0, r1)):
            kept[0] += 1
            into.append(wall)

    for r in range(runs + 2):
        for i, (entry, ptrs, dims) in enumerate(calls):
            timed(entry, ptrs, dims, seq[i] if r >= 2 else [])  # two warm-up runs
        if r < 2:
            continue
        for i, (entry, ptrs, dims) in enumerate(calls):
            entry(ptrs, dims)
            for _ in range(alone_repeat):
                timed(entry, ptrs, dims, alone[i])
    waited.close()
    ran.close()
    del env  # kept alive until here: the calls write into its output arrays
    rows = []
    for i, s in enumerate(plan.steps):
        shape = tuple(plan.values[s.outputs[0]].shape) if s.outputs else ()
        rows.append(StepTimes(i, s.group, shape, _median_us(seq[i]), _median_us(alone[i])))
    return rows, kept[0] / max(1, kept[1])


def _median_us(ns: list[int]) -> float:
    return statistics.median(ns) / 1e3 if ns else float("nan")


def format_table(rows: Sequence[StepTimes]) -> str:
    """The steps, one a line, then the totals."""
    lines = [f"{'step':>4}  {'group':<28} {'shape':<22} {'in seq us':>9} {'alone us':>9} "
             f"{'diff':>7}"]
    for r in rows:
        lines.append(f"{r.index:>4}  {r.group[:28]:<28} {str(r.shape):<22} "
                     f"{r.in_sequence_us:>9.1f} {r.alone_us:>9.1f} "
                     f"{r.in_sequence_us - r.alone_us:>7.1f}")
    seq = sum(r.in_sequence_us for r in rows)
    alone = sum(r.alone_us for r in rows)
    lines.append(f"{'':>4}  {'total':<28} {'':<22} {seq:>9.1f} {alone:>9.1f} "
                 f"{seq - alone:>7.1f}")
    return "\n".join(lines)


def run_against_profile(lib: Any, feeds: dict[str, np.ndarray], rounds: int = 10
                        ) -> tuple[float, float]:
    """(median seconds of `lib.run`, median of `lib.profile`'s total), in turns."""
    runs, profiles = [], []
    for _ in range(rounds):
        for _ in range(3):
            t0 = time.perf_counter()
            lib.run(**feeds)
            runs.append(time.perf_counter() - t0)
        profiles.append(lib.profile(**feeds, repeat=3).total)
    return statistics.median(runs), statistics.median(profiles)


def main(argv: list[str] | None = None) -> dict[str, list[StepTimes]]:
    """Print each model's step table; returns the rows per model.

        >>> main(["--models", "resnet18", "--image", "32", "--width", "8", "--runs", "1"])
        ... # doctest: +SKIP
    """
    import relay_ir
    from relay_ir.frontend.onnx import from_onnx

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50"])
    ap.add_argument("--runs", type=int, default=30, help="whole runs timed step by step")
    ap.add_argument("--image", type=int, default=224, help="input side (not resnet50)")
    ap.add_argument("--width", type=int, default=None, help="first-stage channels")
    ap.add_argument("--target", default="llvm")
    args = ap.parse_args(argv)
    out = {}
    for name in args.models:
        mod, params = from_onnx(_model(name, args))
        lib = relay_ir.build(mod, target=args.target, params=params)
        rng = np.random.default_rng(0)
        feeds = {n: rng.standard_normal(s).astype(dt) for n, s, dt in lib.input_specs}
        rows, kept = step_times(lib, feeds, runs=args.runs)
        run_s, profile_s = run_against_profile(lib, feeds, rounds=max(1, args.runs // 3))
        print(f"\n{name}: {num_threads()} threads, load average "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, samples kept "
              f"{kept:.0%}")
        print(format_table(rows))
        print(f"lib.run {run_s * 1e3:.2f} ms, lib.profile's steps {profile_s * 1e3:.2f} ms")
        out[name] = rows
    return out


if __name__ == "__main__":
    main()
