"""Measuring on a Ray cluster (autotune.cluster): a local Ray instance on 127.0.0.1 with two
device kinds of one slot each stands in for a farm; slots are killed to play lost nodes, a
second node joins through `ray start` (autotune.cluster.worker_command) and leaves on
SIGTERM, and a KeyboardInterrupt raised as a candidate is dealt plays Ctrl-C."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from autotune import Task, make_tuner, tune  # noqa: E402
from autotune.cluster import RayRunner, device_resource, start_local_cluster  # noqa: E402
from autotune.measure import LocalRunner, MeasureInput  # noqa: E402
from tessel_errors import DeviceError, TesselError  # noqa: E402
from tuning_logs import ErrorKind, TuningDatabase  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray instance and real measuring workers

ARGS = [((32, 32), "float32"), ((32, 32), "float32")]
HOST = Task("matmul.x86", ARGS)
# code for an older CPU runs on any AVX2 host: a second device kind on one machine
OTHER = Task("matmul.x86", ARGS, target="llvm -mcpu=haswell")
OPTIONS = {"timeout": 30, "repeat": 1, "check_trials": 1}


@pytest.fixture(scope="module", autouse=True)
def cluster():
    if not {"avx2", "fma"} <= __import__("tessel_target").Target.parse("llvm").features:
        pytest.skip("the host cannot run haswell code")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    start_local_cluster([HOST.device_key, OTHER.device_key], slots=1, num_cpus=2)
    yield
    ray.shutdown()


def _inputs(task: Task, n: int, start: int = 0) -> list[MeasureInput]:
    return [MeasureInput(task, task.config(start + k)) for k in range(n)]


def test_each_candidate_is_measured_once_by_a_slot_of_its_device_kind() -> None:
    inputs = _inputs(HOST, 3) + _inputs(OTHER, 3)
    with RayRunner("auto", **OPTIONS) as runner:
        results = runner.run(inputs)
        placements = runner.placements
    assert [r.error_kind for r in results] == [ErrorKind.NONE] * 6
    assert sorted(p.index for p in placements) == list(range(6))
    for p in placements:
        assert p.resource == device_resource(inputs[p.index].task.device_key)


def _killer(runner: RayRunner, killed: list[int]):
    """An on_dispatch that kills the first slot given a candidate, as the call arrives."""
    pids = {id(s): ray.get(s.pid.remote()) for s in runner.slots_for(HOST.device_key)}

    def kill_first(index: int, slot) -> None:
        if not killed:
            killed.append(index)
            os.kill(pids[id(slot)], signal.SIGKILL)

    return kill_first


def test_a_slot_killed_mid_measurement_loses_no_candidate() -> None:
    killed: list[int] = []
    inputs = _inputs(HOST, 4)
    with RayRunner("auto", **OPTIONS) as runner:
        runner.on_dispatch = _killer(runner, killed)
        results = runner.run(inputs)
        attempts = {p.index: p.attempts for p in runner.placements}
    assert [r.error_kind for r in results] == [ErrorKind.NONE] * 4
    assert attempts[killed[0]] == 2 and sorted(attempts) == [0, 1, 2, 3]


def test_a_candidate_lost_more_often_than_its_retries_is_a_worker_crash_result() -> None:
    killed: list[int] = []
    with RayRunner("auto", retries=0, **OPTIONS) as runner:
        runner.on_dispatch = _killer(runner, killed)
        results = runner.run(_inputs(HOST, 3))
    kinds = [r.error_kind for r in results]
    assert kinds[killed[0]] == ErrorKind.WORKER_CRASH
    assert "lost" in results[killed[0]].error_msg
    assert kinds.count(ErrorKind.NONE) == 2


def test_a_device_kind_no_node_measures_is_a_device_error_naming_tessel_worker() -> None:
    stranger = Task("matmul.x86", ARGS, target="llvm -mcpu=skylake")
    with RayRunner("auto", **OPTIONS) as runner, \
            pytest.raises(DeviceError, match="tessel worker"):
        runner.run(_inputs(stranger, 1))


def test_an_interrupted_cluster_run_resumes_with_the_one_machine_runs_records(
        tmp_path: Path) -> None:
    with TuningDatabase(tmp_path / "ray.db") as db, RayRunner("auto", **OPTIONS) as runner:
        tune(HOST, make_tuner("grid", HOST), 4, db, runner, batch_size=2)  # stopped here
        tune(HOST, make_tuner("grid", HOST), 6, db, runner, batch_size=2)  # and resumed
        on_cluster = [(r.config_json, r.error_kind) for r in db.history(HOST.workload_key)]
    with TuningDatabase(tmp_path / "one.db") as db, LocalRunner(**OPTIONS) as runner:
        tune(HOST, make_tuner("grid", HOST), 6, db, runner, batch_size=2)
        one_machine = [(r.config_json, r.error_kind) for r in db.history(HOST.workload_key)]
    assert len(on_cluster) == len({c for c, _ in on_cluster}) == 6
    assert sorted(on_cluster) == sorted(one_machine)


def test_a_measuring_node_advertises_its_device_keys_to_ray_start(monkeypatch) -> None:
    import subprocess

    from autotune.cluster import start_worker

    seen: list[tuple[list[str], dict[str, str]]] = []
    monkeypatch.setattr(subprocess, "call", lambda cmd, env: seen.append((cmd, env)) or 0)
    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    assert start_worker("10.0.0.5:6379", slots=2, block=False) == 0
    ((cmd, env),) = seen
    assert "--address=10.0.0.5:6379" in cmd
    assert any(a.startswith("--resources=") and device_resource(HOST.device_key) in a
               and ": 2" in a for a in cmd)
    assert env["RAY_worker_niceness"] == "0"  # its slots at the node's own priority


def test_tessel_tune_with_cluster_auto_stores_every_trial(tmp_path: Path) -> None:
    from autotune.cli import main

    db_path = tmp_path / "cli.db"
    assert main(["tune", "--op", "matmul:32x32x32", "--trials", "4", "--tuner", "grid",
                 "--cluster", "auto", "--db", str(db_path), "--no-progress",
                 "--min-repeat-ms", "0", "--repeat", "1"]) == 0
    with TuningDatabase(db_path) as db:
        (task_row,) = db.tasks()
        assert len(db.history(task_row.workload_key)) == 4


def _record_rows(db: TuningDatabase) -> list[tuple]:
    return sorted((r.workload_key, r.template, r.target, r.device_key, r.config_json,
                   r.error_kind, r.tuner) for r in db.history(HOST.workload_key))


def test_ctrl_c_in_the_driver_leaves_a_database_a_restart_resumes_from(
        tmp_path: Path) -> None:
    dispatched: list[int] = []

    def interrupt_in_the_third_batch(index: int, slot) -> None:
        dispatched.append(index)
        if len(dispatched) == 5:
            raise KeyboardInterrupt

    with TuningDatabase(tmp_path / "ray.db") as db:
        with pytest.raises(KeyboardInterrupt), \
                RayRunner("auto", on_dispatch=interrupt_in_the_third_batch, **OPTIONS) as r:
            tune(HOST, make_tuner("grid", HOST), 8, db, r, batch_size=2)
        assert len(db.history(HOST.workload_key)) == 4  # two whole batches; one lost
        again: list[int] = []
        with RayRunner("auto", on_dispatch=lambda i, s: again.append(i), **OPTIONS) as r:
            p = tune(HOST, make_tuner("grid", HOST), 8, db, r, batch_size=2)
        assert p.trials == 8 and p.new_trials == 4 and len(again) == 4
        on_cluster = _record_rows(db)
    with TuningDatabase(tmp_path / "one.db") as db, LocalRunner(**OPTIONS) as runner:
        tune(HOST, make_tuner("grid", HOST), 8, db, runner, batch_size=2)
        one_machine = _record_rows(db)
    assert len({row[4] for row in on_cluster}) == 8
    assert on_cluster == one_machine  # the same records, field for field (times aside)


def test_a_node_joining_mid_run_gets_work(tmp_path: Path) -> None:
    import subprocess

    from autotune.cluster import wait_for_resource, worker_command

    res = device_resource(HOST.device_key)
    port = ray.get_runtime_context().gcs_address.rsplit(":", 1)[1]
    node = None
    try:
        with TuningDatabase(tmp_path / "t.db") as db, RayRunner("auto", **OPTIONS) as runner:
            tune(HOST, make_tuner("grid", HOST), 2, db, runner, batch_size=2)
            assert {p.slot for p in runner.placements} == {0}  # one slot before the join
            head = ray.get(runner.slots_for(HOST.device_key)[0].node.remote())
            cmd = worker_command(f"127.0.0.1:{port}", 1, ["llvm"], node_ip="127.0.0.1")
            node = subprocess.Popen(cmd + ["--num-cpus=1"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
            wait_for_resource(res, 2, timeout=90)
            tune(HOST, make_tuner("grid", HOST), 6, db, runner, batch_size=4)
            slots = runner.slots_for(HOST.device_key)
            used = {p.slot for p in runner.placements}
            nodes = {ray.get(slots[k].node.remote()) for k in used}
            assert len(db.history(HOST.workload_key)) == 6
        assert used == {0, 1} and len(nodes - {head}) == 1  # the new node measured some
    finally:
        if node is not None:  # the node drains and stops its processes on SIGTERM
            node.send_signal(signal.SIGTERM)
            node.wait(timeout=90)


def test_a_slot_compares_a_candidate_with_the_default_for_confirmation() -> None:
    with RayRunner("auto", **OPTIONS) as runner:
        costs, control = runner.compare(OTHER, OTHER.config(2), quartets=6)
    assert len(costs) == len(control) >= 6 and min(costs + control) > 0


def test_the_peak_is_measured_on_a_slot_of_each_kind_for_the_scheduler() -> None:
    from autotune.task_scheduler import measure_peaks

    with RayRunner("auto", **OPTIONS) as runner:
        peaks = measure_peaks([HOST, OTHER], runner)
    assert set(peaks) == {"llvm", "llvm -mcpu=haswell"}
    assert min(peaks.values()) > 1e9  # the FMA loop ran there: GFLOP/s, not a placeholder
    # no more lanes than the host's vectors: AVX2's peak is not above the host's
    assert peaks["llvm -mcpu=haswell"] < 1.3 * peaks["llvm"]


def test_a_comparison_on_a_lost_slot_is_an_error_and_the_next_one_gets_a_new_slot() -> None:
    with RayRunner("auto", control=True, min_repeat_ms=2, **OPTIONS) as runner:
        lost = runner.slots_for(OTHER.device_key)[0]
        ray.kill(lost)
        with pytest.raises(TesselError, match="compare: the measuring slot was lost"):
            runner.compare(OTHER, OTHER.config(2), quartets=6)
        assert runner.slots_for(OTHER.device_key)[0] is not lost
        costs, control = runner.compare(OTHER, OTHER.config(2), quartets=6)
    assert len(costs) == len(control) >= 6


def test_calibrate_times_each_kinds_defaults_on_its_slot_and_every_slot_uses_them() -> None:
    import re

    other_mm = Task("matmul.x86", [((48, 32), "float32"), ((32, 32), "float32")],
                    target=OTHER.target)

    def shown_unit(r) -> float:
        assert r.ok, r.error_msg
        found = re.search(r"in units of its ([0-9.e+-]+) ms", r.error_msg)
        assert found, r.error_msg
        return float(found.group(1)) / 1e3

    with RayRunner("auto", control=True, min_repeat_ms=2, **OPTIONS) as runner:
        units = runner.calibrate([HOST, OTHER, other_mm], rounds=3)
        assert set(units) == {f"{t.workload_key}@{t.target}" for t in (HOST, OTHER,
                                                                      other_mm)}
        assert all(s > 0 for s in units.values())
        for t in (HOST, OTHER, other_mm):
            assert runner.unit(t) == units[f"{t.workload_key}@{t.target}"]
        # each kind's records are in those units, measured on that kind's slot
        results = runner.run(_inputs(HOST, 1, 3) + _inputs(OTHER, 1, 3))
        kinds = {p.resource for p in runner.placements}
        for t, r in zip((HOST, OTHER), results):
            assert shown_unit(r) == pytest.approx(runner.unit(t), rel=6e-4)
        # a slot that replaces a lost one (as one joining) is given the kind's units
        ray.kill(runner.slots_for(HOST.device_key)[0])
        [again] = runner.run(_inputs(HOST, 1, 5))
        assert runner.placements[0].attempts == 2
        assert shown_unit(again) == pytest.approx(runner.unit(HOST), rel=6e-4)
    assert kinds == {device_resource(HOST.device_key), device_resource(OTHER.device_key)}


def test_a_measuring_slot_runs_at_the_drivers_priority() -> None:
    # Ray's default worker niceness (15) starved the slots on a shared machine
    with RayRunner("auto", **OPTIONS) as runner:
        pid = ray.get(runner.slots_for(HOST.device_key)[0].pid.remote())
        assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0)


def _spawned_children(pid: int) -> list[int]:
    """The children of `pid` that multiprocessing's spawn started (not its resource
    tracker)."""
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return [k for k in kids if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]


def test_a_slots_measuring_workers_do_not_import_ray() -> None:
    # spawn re-ran the slot's main script, Ray's worker, in each build and timing worker:
    # Ray imported into each (0.3 s of CPU a start, builds about 3% slower)
    with RayRunner("auto", **OPTIONS) as runner:
        [r] = runner.run(_inputs(HOST, 1))
        assert r.error_kind == ErrorKind.NONE
        pid = ray.get(runner.slots_for(HOST.device_key)[0].pid.remote())
        workers = _spawned_children(pid)
        assert len(workers) == 2  # one build worker, one timing worker
        for w in workers:
            maps = Path(f"/proc/{w}/maps").read_text()
            assert "llvmlite" in maps  # a measuring worker, at work
            assert "_raylet" not in maps, f"measuring worker {w} has Ray loaded"
