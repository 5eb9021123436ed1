"""Measuring candidates on a Ray cluster: `RayRunner`, a runner like LocalRunner whose
candidates are built and timed on the cluster's measuring slots.

A measuring slot is a Ray actor holding a LocalRunner (so a candidate that crashes or
hangs still kills only an isolated worker process of that node). A node advertises the
device kinds it can measure as Ray resources, `device_resource(key)` one unit per slot;
a candidate of a task is measured only by a slot of the task's device key, so a farm of
several device kinds measures each kind's tasks on its own nodes. The driver deals the
candidates of a batch one at a time to whichever slot of the right kind is free, and
keeps the one SQLite database itself (the tuning loop writes what `run` returns): workers
send back results, never write. What crosses the cluster is a task's JSON description, a
config's JSON and the numbers measured.

Faults are data: a slot whose node dies (or whose process is killed) mid-measurement
fails its call; its candidate is dealt again to another slot, and after `retries` such
losses it is a `worker_crash` result naming the lost nodes. A node that joins mid-run
gets slots at the next batch. Stopping the driver loses at most the batch in flight: the
tuning loop has stored every batch before it, and a restart resumes from the database.

    >>> from autotune.cluster import RayRunner
    >>> with RayRunner("auto", device_keys=[task.device_key]) as runner:  # doctest: +SKIP
    ...     tune(task, make_tuner("xgb", task), 256, db, runner)

`RayRunner("auto")` starts a Ray instance on this machine (127.0.0.1, no dashboard) with
`slots` measuring slots; `RayRunner("HOST:PORT")` (or "ray://HOST:PORT") joins a running
cluster whose nodes were started with `tessel worker --address HOST:PORT`.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.measure import MeasureInput, MeasureResult, cached_task, timed_as
from autotune.task import Task
from tessel_errors import DeviceError, TesselError
from tuning_logs import ErrorKind

RESOURCE_PREFIX = "tessel-device-"

# Ray starts its worker processes at nice 15 (its `worker_niceness`), so where other work
# shares a node, a measuring slot and the build and timing workers it spawns get a small
# share of the cores, and its timings every preemption: on this 2-core host with another
# job's tests running, 1-slot Ray took 5.2 s a candidate against the local runner's 0.5 s
# (matmul 128^3; 325 against 196 ms in a second run). A measuring node's Ray runs its
# workers at the priority it was started with (RAY_worker_niceness, read by each raylet;
# a value set in the environment is kept).
WORKER_ENV = {"RAY_worker_niceness": "0"}


def device_resource(device_key: str) -> str:
    """The Ray resource name a node advertises for a device key (keys hold spaces and
    bars, resource names should not).

        >>> device_resource("llvm -mcpu=znver4|AMD EPYC|0a1b2c3d").startswith(RESOURCE_PREFIX)
        True
    """
    return RESOURCE_PREFIX + hashlib.sha256(device_key.encode()).hexdigest()[:16]


def _ray() -> Any:
    try:
        import ray
    except ImportError:  # pragma: no cover - ray is a dependency
        raise DeviceError("measuring on a cluster needs the 'ray' package: "
                          "pip install ray") from None
    return ray


class MeasureSlot:
    """The body of a measuring slot actor: one LocalRunner, one candidate at a time.

    Its workers do not re-run the actor's main script, Ray's worker (LocalRunner's
    `rerun_main`: that imported Ray into every build and timing worker, 0.3 s of CPU a
    start, and builds ran about 3% slower in the larger process); a slot gets templates
    from outside Tessel through `imports`. A task arrives as its dict with each candidate
    and is made once per slot (measure.cached_task): made afresh, its config space was built
    again for every candidate (6 ms each, matmul 128^3).
    """

    def __init__(self, options: dict[str, Any]) -> None:
        from autotune.measure import LocalRunner

        self.runner = LocalRunner(**{"rerun_main": False, **options})

    def pid(self) -> int:
        """The actor's process id (tests kill it to play a lost node)."""
        return os.getpid()

    def node(self) -> str:
        """The Ray node this slot runs on."""
        return _ray().get_runtime_context().get_node_id()

    def measure(self, task: dict[str, Any], config: str) -> dict[str, Any]:
        """Build and time one candidate; the result as plain data."""
        t = cached_task(task)
        [r] = self.runner.run([MeasureInput(t, t.config_from_json(config))])
        return {"costs": list(r.costs), "error_kind": r.error_kind.value,
                "error_msg": r.error_msg, "build_s": r.build_s, "run_s": r.run_s,
                "timestamp": r.timestamp}

    def compare(self, task: dict[str, Any], config: str, quartets: int,
                decide_below: float | None = None) -> dict[str, Any]:
        """LocalRunner.compare on this slot: {"costs", "control"} or {"error"}."""
        t = cached_task(task)
        try:
            costs, control = self.runner.compare(t, t.config_from_json(config), quartets,
                                                 decide_below)
        except TesselError as e:
            return {"error": str(e)}
        return {"costs": costs, "control": control}

    def calibrate(self, tasks: list[dict[str, Any]], rounds: int, peaks: bool = True
                  ) -> dict[str, float]:
        """LocalRunner.calibrate on this slot: {workload@target: seconds}."""
        return self.runner.calibrate([cached_task(t) for t in tasks], rounds, peaks)

    def peak_flops(self, task: dict[str, Any]) -> float:
        """LocalRunner.peak_flops on this slot (calibrate's, or measured now)."""
        return self.runner.peak_flops(cached_task(task))

    def use_units(self, units: dict[str, float]) -> None:
        """LocalRunner.use_units on this slot (its kind's calibration, taken elsewhere)."""
        self.runner.use_units(units)

    def close(self) -> None:
        """Stop the slot's worker processes."""
        self.runner.close()


@dataclass
class Placement:
    """Where a candidate was measured: its index in the batch, the slot, the attempts."""

    index: int
    resource: str
    slot: int
    attempts: int


class RayRunner:
    """A runner (as LocalRunner: `run(inputs) -> results`, a context manager) measuring on
    a Ray cluster's slots; see the module docstring.

    `cluster`: "auto" (a local Ray instance with `slots` slots of each of `device_keys`,
    default: the host's llvm key) or an address. `retries`: how many lost slots a
    candidate survives. Other keyword arguments go to each slot's LocalRunner (timeout,
    number, repeat, min_repeat_ms, cache_flush, ...). `on_dispatch(index, slot)` is
    called as each candidate is sent (tests use it to kill a slot mid-measurement).
    """

    def __init__(self, cluster: str = "auto", slots: int = 1,
                 device_keys: Sequence[str] | None = None, retries: int = 1,
                 on_dispatch: Callable[[int, Any], None] | None = None,
                 **runner_options: Any) -> None:
        ray = _ray()
        self.retries = retries
        self.on_dispatch = on_dispatch
        self.options = {"n_parallel_build": 1, **runner_options}
        self._started = False
        self._slots: dict[str, list[Any]] = {}
        self._dead: set[int] = set()
        self._units: dict[str, dict[str, float]] = {}  # per device key, from calibrate
        self.placements: list[Placement] = []
        if cluster == "auto":
            if not ray.is_initialized():
                start_local_cluster(device_keys, slots)
                self._started = True
        elif not ray.is_initialized():
            try:
                ray.init(address=cluster, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise DeviceError(f"cannot join the Ray cluster at {cluster!r}: {e}; start "
                                  "it with `ray start --head` and measuring nodes with "
                                  "`tessel worker --address HOST:PORT`") from None
            self._started = True

    def timed_task(self, task: Task) -> Task:
        """The task as this runner's slots build and time it (autotune.measure.timed_as)."""
        return timed_as(task, bool(self.options.get("model_layout", False)))

    # -- slots -------------------------------------------------------------------------

    def _capacity(self, resource: str) -> int:
        return int(_ray().cluster_resources().get(resource, 0))

    def slots_for(self, device_key: str) -> list[Any]:
        """The live slots of a device kind, topped up to what the cluster advertises now
        (a node that joined since the last batch gets its slots here)."""
        ray = _ray()
        res = device_resource(device_key)
        live = [s for s in self._slots.get(res, []) if id(s) not in self._dead]
        want = self._capacity(res)
        actor_cls = ray.remote(num_cpus=0, resources={res: 1}, max_restarts=0)(MeasureSlot)
        while len(live) < want:
            live.append(actor_cls.remote(self.options))
            if self._units.get(device_key):  # a slot joining: its kind's units (the
                live[-1].use_units.remote(self._units[device_key])  # actor's next call)
        self._slots[res] = live
        if not live:
            raise DeviceError(
                f"no node of the Ray cluster measures device {device_key!r} (resource "
                f"{res}); start one there with `tessel worker --address HOST:PORT`, or "
                "tune for a device the cluster has")
        return live

    # -- measuring ---------------------------------------------------------------------

    def run(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        """One MeasureResult per input, in order; each candidate measured once."""
        ray = _ray()
        results: list[MeasureResult | None] = [None] * len(inputs)
        lost: dict[int, list[str]] = {}
        pending: dict[str, list[int]] = {}
        for k, inp in enumerate(inputs):
            pending.setdefault(inp.task.device_key, []).append(k)
        free: dict[str, list[Any]] = {key: list(self.slots_for(key)) for key in pending}
        in_flight: dict[Any, tuple[int, str, Any]] = {}
        self.placements = []

        def deal() -> None:
            for key, queue in pending.items():
                while queue and free[key]:
                    k, slot = queue.pop(0), free[key].pop(0)
                    inp = inputs[k]
                    ref = slot.measure.remote(inp.task.to_dict(), inp.config_json)
                    in_flight[ref] = (k, key, slot)
                    if self.on_dispatch is not None:
                        self.on_dispatch(k, slot)

        deal()
        while in_flight:
            done, _ = ray.wait(list(in_flight), num_returns=1)
            ref = done[0]
            k, key, slot = in_flight.pop(ref)
            try:
                out = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                    ray.exceptions.NodeDiedError) as e:
                self._dead.add(id(slot))
                lost.setdefault(k, []).append(type(e).__name__)
                if len(lost[k]) > self.retries:
                    results[k] = MeasureResult(
                        (), ErrorKind.WORKER_CRASH,
                        f"the measuring slot was lost {len(lost[k])} times "
                        f"({', '.join(lost[k])}); the candidate was not measured")
                else:
                    pending[key].insert(0, k)
                busy = {id(v[2]) for v in in_flight.values()}
                known = busy | {id(s) for s in free[key]}
                try:  # a replacement where the cluster still has the capacity
                    free[key] += [s for s in self.slots_for(key) if id(s) not in known]
                except DeviceError:
                    pass
                if not free[key] and not any(v[1] == key for v in in_flight.values()):
                    for j in pending[key]:  # no slot of this kind is left
                        results[j] = MeasureResult(
                            (), ErrorKind.WORKER_CRASH, "every measuring slot of "
                            f"device {key!r} was lost; the candidate was not measured")
                    pending[key] = []
                deal()
                continue
            except ray.exceptions.RayTaskError as e:  # a bug in the slot, not a lost node
                results[k] = MeasureResult((), ErrorKind.RUNTIME_ERROR,
                                           f"measuring slot failed: {e}")
            else:
                results[k] = MeasureResult(tuple(out["costs"]), ErrorKind(out["error_kind"]),
                                           out["error_msg"], out["build_s"], out["run_s"],
                                           out["timestamp"])
            slots = self._slots[device_resource(key)]
            self.placements.append(Placement(k, device_resource(key), _index(slots, slot),
                                             len(lost.get(k, [])) + 1))
            free[key].append(slot)
            deal()
        assert all(r is not None for r in results), "a candidate was neither measured nor lost"
        return [r for r in results if r is not None]

    def _ask(self, slot: Any, what: str, ref: Any) -> Any:
        """The answer of one call `ref` on `slot`, for calls a run cannot go on without
        (compare, calibrate): a lost slot is marked dead (the next slots_for replaces it)
        and, like a failure inside it, a TesselError that says `what` failed."""
        ray = _ray()
        try:
            return ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                ray.exceptions.NodeDiedError) as e:
            self._dead.add(id(slot))
            raise TesselError(f"{what}: the measuring slot was lost ({type(e).__name__})"
                              ) from None
        except ray.exceptions.RayTaskError as e:
            raise TesselError(f"{what}: a measuring slot failed: "
                              f"{e.cause if e.cause is not None else e}") from None

    def compare(self, task: Task, config: Any, quartets: int = 30,
                decide_below: float | None = None) -> tuple[list[float], list[float]]:
        """LocalRunner.compare on a slot of the task's device kind (autotune.confirm):
        the candidate and the default timed in one slot, in ABBA quartets; TesselError
        if it fails or the slot is lost."""
        slot = self.slots_for(task.device_key)[0]
        out = self._ask(slot, "compare", slot.compare.remote(
            task.to_dict(), config.to_json(), quartets, decide_below))
        if "error" in out:
            raise TesselError(out["error"])
        return out["costs"], out["control"]

    def peak_flops(self, task: Task) -> float:
        """One core's FMA peak (FLOP/s) for the task's target, measured on a slot of its
        device kind, where its candidates are timed (the task scheduler's cap,
        autotune.task_scheduler.measure_peaks); TesselError if the slot fails."""
        slot = self.slots_for(task.device_key)[0]
        return float(self._ask(slot, f"peak ({task.device_key!r})",
                               slot.peak_flops.remote(task.to_dict())))

    def calibrate(self, tasks: Sequence[Task], rounds: int = 15, peaks: bool = True
                  ) -> dict[str, float]:
        """LocalRunner.calibrate on the cluster: the defaults of each device kind's tasks
        timed together on one slot of that kind (CPU tasks only; with `peaks`, its FMA
        peak too), and those units given to every slot of the kind, a slot that joins
        later too, so that all the kind's records are in one unit and the task scheduler
        weighs tasks by times taken together. Returns {workload@target: seconds};
        TesselError if a slot fails.

            >>> with RayRunner("auto", control=True) as r:              # doctest: +SKIP
            ...     r.calibrate([task])
        """
        ray = _ray()
        by_kind: dict[str, list[Task]] = {}
        for t in tasks:
            by_kind.setdefault(t.device_key, []).append(t)
        got: dict[str, float] = {}
        for key, group in by_kind.items():
            slot = self.slots_for(key)[0]
            units = self._ask(slot, f"calibrate ({key!r})",
                              slot.calibrate.remote([t.to_dict() for t in group], rounds,
                                                    peaks))
            if units:
                self._units.setdefault(key, {}).update(units)
                ray.get([s.use_units.remote(units) for s in self.slots_for(key)])
            got.update(units)
        return got

    def unit(self, task: Task) -> float | None:
        """The seconds the slots' records of the task are in, once calibrated (see
        `calibrate`; LocalRunner.unit), else None."""
        return self._units.get(task.device_key, {}).get(f"{task.workload_key}@{task.target}")

    def close(self) -> None:
        """Stop the slots (and the local Ray instance this runner started)."""
        ray = _ray()
        for slots in self._slots.values():
            for s in slots:
                if id(s) not in self._dead:
                    try:
                        ray.get(s.close.remote(), timeout=30)
                    except Exception:  # noqa: BLE001 - a slot already gone is fine here
                        pass
                    ray.kill(s)
        self._slots = {}
        if self._started:
            ray.shutdown()
            self._started = False

    def __enter__(self) -> RayRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_local_cluster(device_keys: Sequence[str] | None = None, slots: int = 1,
                        num_cpus: int | None = None) -> None:
    """Start a Ray instance on this machine only (127.0.0.1, no dashboard) whose node has
    `slots` measuring slots of each device key (default: the host's llvm key); stop it
    with `ray.shutdown()`.

        >>> start_local_cluster(slots=2)  # doctest: +SKIP
    """
    if device_keys is None:
        from tessel_target import device_key

        device_keys = [device_key("llvm")]
    resources = {device_resource(k): float(slots) for k in device_keys}
    for name, value in WORKER_ENV.items():  # the raylet this starts reads them
        os.environ.setdefault(name, value)
    _ray().init(address="local", num_cpus=num_cpus or max(1, os.cpu_count() or 1),
                resources=resources, include_dashboard=False, _node_ip_address="127.0.0.1",
                log_to_driver=False, configure_logging=False)


def _index(slots: list[Any], slot: Any) -> int:
    return next((n for n, s in enumerate(slots) if s is slot), -1)


def worker_command(address: str, slots: int = 1, targets: Sequence[str] = ("llvm",),
                   block: bool = True, node_ip: str | None = None) -> list[str]:
    """The `ray start` command line of a measuring node joining `address` with `slots`
    slots for the device key of each target (`node_ip`: the address it registers, e.g.
    127.0.0.1 for a second node on this machine).

        >>> worker_command("10.0.0.5:6379")[-4:-1]
        ['start', '--address=10.0.0.5:6379', '--resources={"tessel-device-...": 1}']
    """
    import json
    import sys

    from tessel_target import device_key

    resources = {device_resource(device_key(t)): slots for t in targets}
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", f"--address={address}",
           f"--resources={json.dumps(resources)}"]
    if node_ip is not None:
        cmd.append(f"--node-ip-address={node_ip}")
    if block:
        cmd.append("--block")
    return cmd


def start_worker(address: str, slots: int = 1, targets: Sequence[str] = ("llvm",),
                 block: bool = True) -> int:
    """Join this machine to the Ray cluster at `address` as a measuring node with `slots`
    slots for the device key of each target (what `tessel worker` runs), its workers at
    this process's priority (WORKER_ENV); returns the exit status of `ray start`.

        >>> start_worker("10.0.0.5:6379", slots=1)  # doctest: +SKIP
    """
    import subprocess

    from tessel_target import device_key

    cmd = worker_command(address, slots, targets, block)
    for t in targets:
        print(f"measuring node for {device_key(t)!r}: {slots} slot(s)", flush=True)
    try:
        return subprocess.call(cmd, env={**WORKER_ENV, **os.environ})
    except KeyboardInterrupt:
        return 130


def wait_for_resource(resource: str, count: int, timeout: float = 60.0) -> None:
    """Block until the cluster advertises `count` of `resource` (a node that is joining)."""
    t0 = time.monotonic()
    while int(_ray().cluster_resources().get(resource, 0)) < count:
        if time.monotonic() - t0 > timeout:
            raise TesselError(f"the cluster did not advertise {count} x {resource} within "
                              f"{timeout:.0f} s")
        time.sleep(0.2)
