"""One tuning job measured three ways in one run: LocalRunner (one build worker, as one
slot), and a local Ray cluster with 1 and with 2 measuring slots; wall time, records per
second, CPU time by role (this driver, the build and timing workers, Ray's slot actors,
Ray's own processes: raylet, GCS, agents, idle workers), and Ray's overhead per candidate
(1-slot Ray against the local runner) in wall and CPU time. Every runner measures one
candidate outside the grid before the clock, so its workers are started untimed.

    python -m benchmarks.cluster                       # matmul 64^3, 24 candidates
    python -m benchmarks.cluster --op matmul:128x128x128 --candidates 48

More slots than cores only share the cores: on a machine of C cores, N slots of separate
machines would measure N at a time; the printed per-candidate cost and Ray overhead give
the wall time for N nodes as about candidates x (build + run) / N + overhead x candidates.

Measured (2 vCPU Intel Xeon, shared, load 6; matmul 128^3, 48 candidates): local runner
13.5 s (3.55 records/s, 282 ms a candidate), Ray 1 slot 13.6 s, 2 slots 13.2 s; Ray's
overhead 1.4 ms a candidate; 2 slots / 1 slot 0.97 (2 slots share 2 busy cores here). On
paper, N nodes of one device kind: about 48 x 0.28 / N + 48 x 0.0014 s.

Again (same command, shared, two runs a minute apart): at load 3.0, local 8.17 s (5.87
records/s, 170 ms a candidate), Ray 1 slot 9.31 s, 2 slots 9.80 s (2 / 1: 1.05); at load
2.1, local 7.73 s (6.21/s, 161 ms), Ray 1 slot 8.90 s, 2 slots 5.68 s (8.45/s; 2 / 1:
0.64). Ray's overhead read 23.6 and 24.3 ms a candidate in both (1.4 ms in the run
above): N nodes, about 48 x 0.17 / N + 48 x 0.024 s; two slots on 2 shared cores gain
only when the other jobs leave a core free.

Why 24 ms (and worse): Ray starts its worker processes at nice 15 (`worker_niceness`), so
a measuring slot and the build and timing workers it spawns yield to every other process
of the node. Per candidate, matmul 128^3, 8 candidates, local runner against 1 Ray slot,
with three busy loops beside (two meant, one left over from the run before; load
2.7-5.2): at nice 15 Ray 7.08 and 6.16 s against the local runner's 0.72 and 0.66 s (its
builds 6.3 and 4.8 s against 0.63 and 0.59); with RAY_worker_niceness=0 (now set where
Tessel starts a Ray node, autotune.cluster.WORKER_ENV) Ray 0.67 and 0.66 s against 0.63
and 0.64 (18-39 ms of overhead). With one busy loop beside, neither setting lost much (a
slot at nice 15 still finds a core). With a core free (no busy loop, load about 2) both
read 178-182 ms against 161-170: 8-20 ms, most of it as slower builds in the slot's
worker (148-152 ms against 136-143); a bare round trip to the slot is 0.7-0.9 ms.

The slower builds, found: multiprocessing's spawn re-runs the parent's main script in each
child, and a slot's main is Ray's worker script, so every build and timing worker of a
slot imported Ray (846 modules against 148, 70 MB resident against 16, 59k objects for
the GC against 14k). That cost 0.3 s of CPU a worker start (0.65 against 0.36 s, three
starts each), paid at a slot's first candidate and after every crash or timeout, and
builds ran about 3.5% longer in the larger process (thread CPU time of a build, median of
96: 134.0 against 129.5 ms in the slot; 133.5 against 129.1 ms with Ray imported into a
local worker). In the old form of this benchmark, the workers started inside the clock,
the two starts alone were 12 ms a candidate. A slot's workers no longer re-run it
(LocalRunner's `rerun_main`), and a slot makes each task once instead of once a
candidate (its config space was built again each time: 2 ms of the slot's CPU a
candidate). Same command, the benchmark as now (workers started before the clock) run
against main before and after the fix, alternating, seven rounds each, load 3.7-6.3 (the
other helper's jobs; wall times swing by 50 ms a candidate with them, so CPU time is the
figure): Ray's CPU overhead per candidate read 9.8, 13.1, 6.0, 23.3, 13.3, 19.4, 13.7 ms
before (median 13.3), 1.9, 7.5, -2.9, 12.5, 14.2, -6.9, 16.0 after (median 7.5). By role:
the slot actor's own CPU 4.8-5.8 ms before, 2.7-3.3 after (the task made once); the
measuring workers' against the local runner's, median +1.3 ms before, -2.1 after (the
builds' 3.5%, within this noise of +-10 ms); the driver and Ray's own processes alike.

What is left, on paper (CPU a candidate, 1 slot against the local runner): the driver
+1.0-1.7 ms (submitting a call, waiting, the result), the slot actor 2.7-3.3 ms (Ray
running the call, the LocalRunner around the workers), Ray's own processes 4.2-7.3 ms. A
bare call to a slot (300 `pid()` calls, load 4.3) takes 0.9 ms there and back and 0.5 ms
of CPU on each side; the rest of the slot's is the LocalRunner and its share of Ray's
background.
That last is Ray's background at about 3% of one core whatever the work (idle, a node
with one slot: raylet 0.7%, an idle worker 0.5%, GCS 0.4%, the slot 0.4%, the driver
0.3%, agents 0.1%; 2.4% in all), so it shrinks as a share of longer candidates and is
spread over a node's cores; it is Ray's, out of our reach but for fewer processes. On a
cluster, only the driver's part is serial: about 3 ms of its CPU a candidate (1.2 of it
the tuning loop's, as with the local runner) bounds it near 300 candidates a second, so
N nodes of one kind measure about candidates x (build + run + 1 ms) / N for N well past
50 at 150 ms a candidate; a round trip to a slot (0.7-0.9 ms bare) adds to each
candidate's latency, not to a node's CPU.

On a quiet machine (session 11, after the fixes above and nothing else running, load
0.7-1.1), the same command twice: local runner 6.72 and 7.03 s (140 and 146 ms a
candidate), Ray 1 slot 6.89 and 7.18 s, 2 slots 3.90 and 3.73 s: 2 slots / 1 slot 0.57
and 0.52, Ray's overhead 3.6 and 3.2 ms of wall time a candidate (7.1 and 7.9 ms of CPU).
Two slots of one device kind measure in close to half the time where each has a core.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from autotune import make_tuner, parse_op_spec, tune
from autotune.measure import LocalRunner, MeasureInput
from tuning_logs import TuningDatabase

ROLES = ("driver", "workers", "slots", "ray")  # where the CPU time of a job goes


def _role(pid: int, cmdline: bytes) -> str:
    if pid == os.getpid():
        return "driver"
    if b"spawn_main" in cmdline or b"resource_tracker" in cmdline:
        return "workers"  # build and timing workers (and multiprocessing's tracker)
    if cmdline.startswith(b"ray::MeasureSlot"):
        return "slots"
    return "ray"  # raylet, GCS, Ray's agents and idle workers


def tree_cpu_s() -> dict[str, float]:
    """CPU seconds used so far by this process and each of its descendants alive now, by
    role (ROLES: this driver, measuring workers, Ray's slot actors, Ray's own processes);
    {} without /proc.

        >>> set(tree_cpu_s()) <= set(ROLES)
        True
    """
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, float, bytes]] = {}
    for p in Path("/proc").glob("[0-9]*"):
        try:
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (p / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        procs[int(p.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick,
                              cmdline)
    me, out = os.getpid(), {}
    for pid, (_, cpu, cmdline) in procs.items():
        q = pid
        while q in procs and q != me:
            q = procs[q][0]
        if q == me:
            role = _role(pid, cmdline)
            out[role] = out.get(role, 0.0) + cpu
    return out


def _job(runner: object, task: object, n: int, folder: Path, name: str
         ) -> tuple[float, dict[str, float], int]:
    with TuningDatabase(folder / f"{name}.db") as db:
        c0, t0 = tree_cpu_s(), time.perf_counter()
        tune(task, make_tuner("grid", task), n, db, runner, batch_size=8)
        wall, c1 = time.perf_counter() - t0, tree_cpu_s()
        cpu = {r: c1.get(r, 0.0) - c0.get(r, 0.0) for r in ROLES}
        # the configs measured (the tasks view: a retried timeout is one trial, not two)
        trials = sum(t.trials for t in db.tasks() if t.workload_key == task.workload_key)
        return wall, cpu, trials


def main(argv: list[str] | None = None) -> int:
    """Print the table of wall and CPU times and the overhead per candidate."""
    from autotune.cluster import RayRunner, start_local_cluster

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--op", default="matmul:64x64x64")
    ap.add_argument("--candidates", type=int, default=24)
    opts = ap.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    task = parse_op_spec(opts.op, "llvm")
    # one candidate the grid does not reach, measured before the clock: every runner's
    # build and timing workers are started (and its first output checks done) untimed
    warm = [MeasureInput(task, task.config(len(task.space) - 1))]
    options = {"timeout": 30, "repeat": 3, "min_repeat_ms": 5.0}
    rows = []
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        with LocalRunner(n_parallel_build=1, **options) as local:
            local.run(warm)
            rows.append(("local runner, 1 build worker", *_job(local, task, opts.candidates,
                                                               folder, "local")))
        import ray

        for slots in (1, 2):
            start_local_cluster([task.device_key], slots=slots)
            with RayRunner("auto", **options) as runner:
                runner.run(warm * slots)  # one to each slot
                rows.append((f"ray, {slots} slot(s)", *_job(runner, task, opts.candidates,
                                                            folder, f"ray{slots}")))
            ray.shutdown()
    print(f"{opts.op}, {opts.candidates} candidates, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}")
    for name, wall, cpu, n in rows:
        total = sum(cpu.values())
        print(f"{name:32s} {wall:7.2f} s  {n / wall:6.2f} records/s  {wall / n * 1e3:7.1f} "
              f"ms/candidate  CPU {total / n * 1e3:6.1f} ms/candidate (" + ", ".join(
                  f"{r} {cpu[r] / n * 1e3:.1f}" for r in ROLES) + ")")
    (_, local_wall, local_cpu, _), (_, ray1_wall, ray1_cpu, _) = rows[0], rows[1]
    extra = {r: (ray1_cpu[r] - local_cpu[r]) / opts.candidates * 1e3 for r in ROLES}
    print(f"Ray overhead per candidate (1 slot vs local): wall "
          f"{(ray1_wall - local_wall) / opts.candidates * 1e3:.1f} ms, CPU "
          f"{sum(extra.values()):.1f} ms (" + ", ".join(f"{r} {v:+.1f}" for r, v in
                                                extra.items()) + "); 2 slots / 1 slot wall "
          f"time {rows[2][1] / ray1_wall:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
