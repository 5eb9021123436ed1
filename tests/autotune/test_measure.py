"""Real measurement: killable workers, crash / hang / wrong candidates, an end-to-end tune."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import tests.autotune.synthetic  # noqa: F401  (registers synthetic.test and crashy.test)
from autotune import LocalRunner, MeasureInput, RandomTuner, Task, tune
from autotune.measure import FakeRunner
from tuning_logs import ErrorKind, TuningDatabase

CRASHY = Task("crashy.test", [((16, 8), "float32")])
IMPORTS = ["tests.autotune.synthetic"]


def _point(task: Task, mode: str, tile: int = 0) -> MeasureInput:
    sp = task.space
    ki = [tile, 0, 0, sp.knobs["mode"].candidates.index(mode)]
    return MeasureInput(task, sp.get(sp.index_of(ki)))


def test_crashing_and_hanging_candidates_cost_a_record_not_the_run() -> None:
    with LocalRunner(timeout=3, imports=IMPORTS, ref_timeout=30) as runner:
        res = runner.run([_point(CRASHY, "crash"), _point(CRASHY, "hang"),
                          _point(CRASHY, "ok", 1)])
    assert [r.error_kind for r in res] == [ErrorKind.WORKER_CRASH, ErrorKind.TIMEOUT,
                                           ErrorKind.NONE]
    assert "died" in res[0].error_msg and "within 3 s" in res[1].error_msg
    assert res[2].mean > 0 and len(res[2].costs) == 3


def test_tuning_goes_on_past_crashes_and_records_them(tmp_path: Path) -> None:
    picks = [_point(CRASHY, m, k).config for k, m in [(0, "crash"), (1, "ok"), (2, "ok")]]

    class Fixed(RandomTuner):
        def _propose(self, n: int) -> list[int]:
            return [c.index for c in picks if c.index not in self.visited][:n]

    with TuningDatabase(tmp_path / "t.db") as db, \
            LocalRunner(timeout=5, imports=IMPORTS) as runner:
        p = tune(CRASHY, Fixed(CRASHY), 3, db, runner)
        kinds = sorted(r.error_kind.value for r in db.history(CRASHY.workload_key))
    assert p.trials == 3 and kinds == ["none", "none", "worker_crash"]


def test_a_hanging_candidate_is_retried_once_with_three_times_the_timeout(
        tmp_path: Path) -> None:
    picks = [_point(CRASHY, m, k).config for k, m in [(0, "hang"), (1, "ok")]]

    class Fixed(RandomTuner):
        def _propose(self, n: int) -> list[int]:
            return [c.index for c in picks if c.index not in self.visited][:n]

    with TuningDatabase(tmp_path / "t.db") as db, \
            LocalRunner(timeout=2, imports=IMPORTS) as runner:
        p = tune(CRASHY, Fixed(CRASHY), 2, db, runner, default_first=False)
        got = [(r.error_kind.value, r.error_msg) for r in db.history(CRASHY.workload_key)]
    assert p.trials == 2 and p.retried == 1 and runner.timeout == 2
    timeouts = [m for k, m in got if k == "timeout"]
    assert len(got) == 3 and len(timeouts) == 2
    assert "within 2 s" in timeouts[0] and "within 6 s" in timeouts[1]


def test_calibrate_reads_the_fma_peak_in_the_rounds_it_times_the_defaults() -> None:
    from tessel_target import Target

    task = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    with LocalRunner(timeout=30, control=True) as runner:
        runner.calibrate([task], rounds=3)
        peak = runner.peak_flops(task)
    # at most 2 FMA ports x lanes x 2 FLOP at 6 GHz; at least a GFLOP/s (it ran)
    lanes = Target.parse("llvm").fp32_lanes
    assert 1e9 < peak < 2 * lanes * 2 * 6e9


def test_timing_the_defaults_without_peaks_runs_no_peak_loop() -> None:
    from autotune.measure import _do_defaults

    task = Task("matmul.x86", [((16, 16), "float32"), ((16, 16), "float32")])
    with_peak = _do_defaults([task], {"rounds": 1, "min_repeat_ms": 1.0})
    without = _do_defaults([task], {"rounds": 1, "min_repeat_ms": 1.0, "peaks": False})
    assert set(with_peak["peaks"]) == {"llvm"} and without["peaks"] == {}
    assert len(without["seconds"]) == 1 and without["seconds"][0] > 0


def test_a_build_error_is_reported_as_data() -> None:
    plain = Task("synthetic.test", [((64, 36), "float32")])
    bad = MeasureInput(CRASHY, plain.config(6))  # tile_i [-1, 64]: not a choice for 16 rows
    with LocalRunner(timeout=30, imports=IMPORTS) as runner:
        res = runner.run([bad])
    assert res[0].error_kind == ErrorKind.BUILD_ERROR
    assert r"config value [-1, 64] is not a choice of knob 'tile_i'" in res[0].error_msg


def test_end_to_end_tune_of_a_small_matmul_builds_and_runs_correctly(tmp_path: Path) -> None:
    task = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    with TuningDatabase(tmp_path / "t.db") as db, LocalRunner(timeout=30) as runner:
        p = tune(task, RandomTuner(task, seed=3), 6, db, runner, batch_size=3)
        best = db.best_record(task.workload_key, "llvm", task.device_key)
    assert p.trials == 6 and best is not None and best.gflops > 0
    kernel = task.build(task.config_from_json(best.config_json))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((64, 64)).astype("float32")
    b = rng.standard_normal((64, 64)).astype("float32")
    c = np.full((64, 64), np.nan, "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_fake_runner_turns_error_kinds_into_failed_results() -> None:
    task = Task("synthetic.test", [((64, 36), "float32")])
    res = FakeRunner(lambda t, c: ErrorKind.TIMEOUT).run([MeasureInput(task, task.config(0))])
    assert res[0].error_kind == ErrorKind.TIMEOUT and not res[0].ok
    assert res[0].mean == pytest.approx(float("inf"))


def test_output_check_flags_a_wrong_result_on_the_first_trials_only() -> None:
    task = Task("synthetic.test", [((16, 8), "float32")])
    inputs = [MeasureInput(task, task.config(i)) for i in range(3)]
    with LocalRunner(timeout=30, check_trials=2,
                     imports=IMPORTS + ["tests.autotune.wrong_reference"]) as runner:
        res = runner.run(inputs)
    assert [r.error_kind for r in res] == [ErrorKind.WRONG_RESULT, ErrorKind.WRONG_RESULT,
                                           ErrorKind.NONE]
    assert "output 0 differs from the reference (max abs error 1" in res[0].error_msg


def test_a_candidate_far_slower_than_the_best_is_timed_once() -> None:
    task = Task("slowpoke.test", [((16, 8), "float32")])
    fast, slow = (MeasureInput(task, task.config(i)) for i in range(2))
    # the best so far is the fast candidate's mean: with single-call repeats (about 1 us)
    # one preemption (ms, under load) made it look as slow as the slow one's first call
    # (the test failed under load); repeats of 20 ms of calls would need a stall of
    # seconds inside one of them to bring it within 10x of the slow call's milliseconds
    with LocalRunner(timeout=30, imports=IMPORTS, check_trials=0,
                     min_repeat_ms=20) as runner:
        res = runner.run([fast, slow])
    assert res[0].ok and len(res[0].costs) == 3 and res[0].error_msg == ""
    assert res[1].ok and len(res[1].costs) == 1
    assert res[1].error_msg.startswith("timed once: first call")


def test_without_a_slow_cutoff_every_candidate_is_timed_in_full() -> None:
    task = Task("slowpoke.test", [((16, 8), "float32")])
    inputs = [MeasureInput(task, task.config(i)) for i in range(2)]
    with LocalRunner(timeout=30, imports=IMPORTS, check_trials=0, slow_cutoff=None) as runner:
        res = runner.run(inputs)
    assert [len(r.costs) for r in res] == [3, 3]


def test_the_builder_compiles_object_code_in_its_own_workers() -> None:
    from autotune.measure import LocalBuilder

    task = Task("matmul.x86", [((32, 32), "float32"), ((32, 32), "float32")])
    inputs = [MeasureInput(task, task.config(i)) for i in (0, 7)]
    builder = LocalBuilder(n_parallel=2)
    try:
        built = builder.build(inputs)
    finally:
        builder.close()
    assert all(b.error_kind == ErrorKind.NONE for b in built)
    assert all(b.object_code and b.object_code[:4] == b"\x7fELF" for b in built)
    assert built[0].object_code != built[1].object_code


def test_a_candidate_built_as_object_code_is_checked_against_the_reference() -> None:
    task = Task("matmul.x86", [((32, 32), "float32"), ((32, 32), "float32")])
    # no slow cutoff: whether config 11 runs 10x slower than config 3 depends on the load
    with LocalRunner(timeout=30, check_trials=2, slow_cutoff=None) as runner:
        res = runner.run([MeasureInput(task, task.config(i)) for i in (3, 11)])
    assert [r.error_kind for r in res] == [ErrorKind.NONE, ErrorKind.NONE]
    assert all(len(r.costs) == 3 and r.mean > 0 for r in res)


@pytest.mark.parametrize("shape", [(1, 16, 8, 8), (1, 64, 28, 28)],
                         ids=["evaluator-reference", "fallback-kernel-reference"])
def test_a_packed_weight_task_is_measured_on_weights_packed_per_config(shape) -> None:
    c = shape[1]
    task = Task("conv2d_NCHWc.x86", [(shape, "float32"), ((c, c, 3, 3), "float32")],
                {"padding": 1, "kernel_layout": "OIHWio"})
    picks = [task.config(i) for i in (0, task.space.size - 1, task.space.size // 2)]
    with LocalRunner(timeout=60, check_trials=3) as runner:
        res = runner.run([MeasureInput(task, cfg) for cfg in picks])
    assert [r.error_kind for r in res] == [ErrorKind.NONE] * 3, [r.error_msg for r in res]


def test_a_runner_with_cache_flush_measures_each_candidate() -> None:
    task = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    # no slow cutoff: on a loaded machine config 5 can take 10x config 0 and be timed once
    with LocalRunner(timeout=30, check_trials=1, cache_flush=True, min_repeat_ms=1,
                     slow_cutoff=None) as runner:
        res = runner.run([MeasureInput(task, task.config(i)) for i in (0, 5)])
    assert all(r.ok and len(r.costs) == 3 and min(r.costs) > 0 for r in res), \
        [(r.error_kind, r.error_msg, r.costs) for r in res]


def test_every_cold_call_follows_an_eviction_of_every_argument_but_the_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import lowering.llvm.cache_flush as cache_flush
    from autotune.measure import _cold_costs

    data, weight, out = (np.random.rand(64).astype("float32") for _ in range(3))
    events: list[object] = []

    def spy(arrays: list[np.ndarray]) -> bool:
        events.append([id(a) for a in arrays])
        return True

    monkeypatch.setattr(cache_flush, "flush_arrays", spy)
    costs = _cold_costs(lambda *a: events.append("call"), [data, weight, out], repeat=3,
                        min_repeat_s=0.0)
    assert len(costs) == 3
    assert events == [[id(weight), id(out)], "call"] * 3


def test_without_clflush_a_cold_call_follows_a_write_of_the_whole_flush_buffer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import lowering.llvm.cache_flush as cache_flush
    from autotune.measure import _cold_costs, _flush_buffer

    monkeypatch.setattr(cache_flush, "flush_arrays", lambda arrays: False)
    buf = _flush_buffer()
    seen: list[tuple[int, int]] = []

    def kernel(*arrays: object) -> None:  # what the buffer's first and last bytes hold now
        seen.append((int(buf[0]), int(buf[-1])))

    before = int(buf[0])
    costs = _cold_costs(kernel, [], repeat=3, min_repeat_s=0.0)
    assert len(costs) == 3
    assert seen == [((before + k) % 256,) * 2 for k in (1, 2, 3)]


def test_the_flush_buffer_is_twice_the_last_level_cache() -> None:
    from autotune.measure import _flush_buffer

    try:
        text = Path("/sys/devices/system/cpu/cpu0/cache/index3/size").read_text().strip()
    except OSError:
        pytest.skip("no last-level cache size in /sys on this machine")
    size = int(text.rstrip("KMG")) << {"K": 10, "M": 20, "G": 30}.get(text[-1], 0)
    assert _flush_buffer().nbytes == 2 * max(size, 8 << 20)


def test_a_worker_whose_import_fails_is_a_tessel_error_naming_the_imports() -> None:
    from autotune.measure import Worker
    from tessel_errors import TesselError

    worker = Worker(imports=["no_such_module_for_tessel_tests"])
    with pytest.raises(TesselError, match=r"exited while starting .*no_such_module_for_tessel"):
        worker.call(("build", {}, "{}", {}), timeout=30)


def test_a_script_starting_a_worker_without_a_main_guard_is_told_to_add_one(
        tmp_path: Path) -> None:
    import subprocess

    script = tmp_path / "no_guard.py"
    script.write_text("from autotune.measure import Worker\n"
                      "Worker().call(('build', {}, '{}', {}), timeout=60)\n")
    root = Path(__file__).resolve().parents[2]
    got = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(root)})
    assert got.returncode != 0
    assert "exited while starting" in got.stderr
    assert 'under `if __name__ == "__main__":`' in got.stderr


def test_a_worker_whose_process_fails_to_start_raises_that_error_and_closes_cleanly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing.process as mpp

    from autotune.measure import Worker

    def refuse(self: object) -> None:
        raise OSError("no more processes")

    worker = Worker()
    monkeypatch.setattr(mpp.BaseProcess, "start", refuse)
    with pytest.raises(OSError, match="no more processes"):
        worker.call(("build", {}, "{}", {}), timeout=30)
    worker.close()  # a process that never started: nothing to kill


def test_a_candidate_that_allocates_past_the_memory_cap_costs_one_error_record() -> None:
    # two 3.1 GB inputs under a 2 GiB cap: the allocation fails inside the worker, which
    # reports it and serves the next candidate
    huge = Task("matmul.x86", [((28000, 28000), "float32"), ((28000, 28000), "float32")])
    small = Task("matmul.x86", [((32, 32), "float32"), ((32, 32), "float32")])
    with LocalRunner(timeout=60, memory_limit=2 << 30, n_parallel_build=1) as runner:
        res = runner.run([MeasureInput(huge, huge.config(0)),
                          MeasureInput(small, small.config(0))])
    assert res[0].error_kind == ErrorKind.RUNTIME_ERROR
    assert "MemoryError" in res[0].error_msg
    assert res[1].error_kind == ErrorKind.NONE and res[1].mean > 0


def test_a_worker_caps_its_address_space_by_default() -> None:
    from autotune.measure import Worker, default_memory_limit

    assert Worker().memory_limit == default_memory_limit() >= 4 << 30


_MAIN_SCRIPT = """
import os, sys
if __name__ == "__mp_main__":  # multiprocessing's spawn re-running this script in a child
    with open(os.environ["MAIN_MARK"], "a") as f:
        f.write("rerun\\n")
if __name__ == "__main__":
    from autotune import Task
    from autotune.measure import Worker
    t = Task("matmul.x86", [((8, 8), "float32"), ((8, 8), "float32")])
    for rerun in (False, True):
        os.environ["MAIN_MARK"] = sys.argv[1] + str(rerun)
        w = Worker(rerun_main=rerun)
        status, _ = w.call(("build", t.to_dict(), t.config(0).to_json(), {}), 60)
        w.close()
        main = sys.modules["__main__"]
        print(rerun, status, main.__file__ == __file__, main.__spec__ is None)
"""


def test_a_worker_with_rerun_main_off_does_not_run_the_parents_main_script(tmp_path) -> None:
    # a Ray slot's main script is Ray's worker: re-run in each worker it imported Ray
    import os
    import subprocess
    import sys

    import autotune

    script = tmp_path / "main_script.py"
    script.write_text(_MAIN_SCRIPT)
    root = str(Path(autotune.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "mark-")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    # both built; the script's __main__ is as it was after each start
    assert out.stdout.split("\n")[:2] == ["False ok True True", "True ok True True"]
    assert not (tmp_path / "mark-False").exists()
    assert (tmp_path / "mark-True").read_text() == "rerun\n"


def test_control_times_candidate_and_default_in_abba_quartets(monkeypatch) -> None:
    import autotune.measure as m

    calls: list[str] = []

    def kernel(tag: str):
        return lambda *arrays: calls.append(tag)

    task = Task("matmul.x86", [((8, 8), "float32"), ((8, 8), "float32")])
    _, tensors = task.instantiate(None)
    monkeypatch.setattr(m, "_default_kernel", lambda t: (kernel("D"), tensors))
    monkeypatch.setattr(m, "_WARMED", [True])
    monkeypatch.setattr(m, "_spread", lambda *a: 0.0)  # empty calls time at random
    logical = [np.ones((8, 8), "float32")] * 2
    got = m._control_costs(task, kernel("C"), [], logical, {"repeat": 2, "number": 1}, 0.0)
    # the default's first call (page faults), one warm call of each to size the slots,
    # then 3 x repeat quartets
    assert calls == ["D", "D", "C"] + ["D", "C", "C", "D"] * 6
    assert len(got["costs"]) == len(got["control"]) == 6


def test_control_costs_are_ratios_in_the_units_of_the_first_default_time() -> None:
    runner = LocalRunner(control=True)
    try:
        costs, note = runner._relative("k", [2.0, 3.0, 40.0], [1.0, 1.0, 2.0])
        # the median candidate time (3) over the median default (1), in the unit of the
        # median default
        assert costs == [3.0] and "control: 3.000 x the default" in note
        assert "3 quartets" in note
        # a later candidate of the task is scaled to the same unit, whatever its control
        costs, _ = runner._relative("k", [5.0], [10.0])
        assert costs == [0.5]
        assert runner._relative("other", [1.0], [4.0])[0] == [1.0]
        # quartets that never settled (ratios 0.5 and 1.5 alike): no win credited, their
        # upper quartile (not 1.0, a tie with the default's unit)
        costs, note = runner._relative("noisy", [0.5, 0.5, 0.7, 1.5, 1.5], [1.0] * 5)
        assert costs == [1.5] and "unsettled: measured 0.700" in note
        # ... but a win 3 of 4 quartets show is, as their upper quartile
        costs, _ = runner._relative("noisy", [0.3, 0.3, 0.3, 0.4, 0.9], [1.0] * 5)
        assert costs == [pytest.approx(0.4)]
        costs, _ = runner._relative("noisy", [1.5, 1.5, 1.7, 2.5, 2.5], [1.0] * 5)
        assert costs == [1.7]  # a loss stands as measured
    finally:
        runner.close()


def test_a_runner_with_control_records_candidates_beside_the_default() -> None:
    task = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    with LocalRunner(timeout=30, check_trials=1, control=True, min_repeat_ms=1,
                     slow_cutoff=None) as runner:
        res = runner.run([MeasureInput(task, task.config(i)) for i in (0, 5)])
    assert all(r.ok and len(r.costs) == 1 and r.error_msg.startswith("control: ")
               for r in res), [(r.error_kind, r.error_msg) for r in res]
    units = {r.error_msg.split("units of its ")[1].split(" ms")[0] for r in res}
    assert len(units) == 1  # one default time per task: both candidates in its units


def test_a_blocked_output_in_other_blocks_compares_as_the_same_tensor() -> None:
    from autotune.measure import _as_nchw

    x = np.arange(2 * 64 * 3 * 5, dtype="float32").reshape(2, 64, 3, 5)
    b16 = x.reshape(2, 4, 16, 3, 5).transpose(0, 1, 3, 4, 2)
    b32 = x.reshape(2, 2, 32, 3, 5).transpose(0, 1, 3, 4, 2)
    assert np.array_equal(_as_nchw(b32, b16.shape), b16)
    assert _as_nchw(b16, b16.shape) is b16


@pytest.mark.parametrize("flop_path", ["te", "kernel"])
def test_convs_timed_in_the_models_layouts_are_checked_and_recorded(flop_path: str) -> None:
    # blocked data and output, candidates of other output blocks than the default's: the
    # check compares them in one blocking (the small layer against the TE evaluator, the
    # large one against the default kernel), the control shares only arrays that agree
    c, hw = (16, 8) if flop_path == "te" else (64, 28)
    task = Task("conv2d_NCHWc.x86", [((1, c, hw, hw), "float32"), ((c, c, 3, 3), "float32")],
                {"padding": [1, 1, 1, 1], "kernel_layout": "OIHWio"})
    assert (task.flop > 2e7) == (flop_path == "kernel")
    sp = task.space
    picks = {}
    for cfg in sp:  # one config per distinct output block
        picks.setdefault(cfg["tile_oc"].size[-1], cfg)
    with LocalRunner(timeout=60, check_trials=len(picks), control=True, model_layout=True,
                     min_repeat_ms=1, slow_cutoff=None) as runner:
        timed = runner.timed_task(task)
        assert timed.attrs["out_layout"] == "NCHWc" and len(timed.args[0][0]) == 5
        res = runner.run([MeasureInput(task, cfg) for cfg in picks.values()])
    assert len(picks) >= 3
    assert all(r.ok for r in res), [(r.error_kind, r.error_msg) for r in res]


def test_control_confirms_a_would_be_best_with_twice_the_quartets_again(monkeypatch) -> None:
    import autotune.measure as m

    task = Task("matmul.x86", [((8, 8), "float32"), ((8, 8), "float32")])
    _, tensors = task.instantiate(None)
    monkeypatch.setattr(m, "_default_kernel", lambda t: ((lambda *a: None), tensors))
    monkeypatch.setattr(m, "_WARMED", [True])
    logical = [np.ones((8, 8), "float32")] * 2
    times = iter([1.0, 0.5, 0.5, 1.0] * 27)  # every quartet: the candidate at half the time
    monkeypatch.setattr(m, "_slot", lambda *a: next(times))
    opts = {"repeat": 3, "number": 1}
    assert len(m._control_costs(task, lambda *a: None, [], logical,
                                {**opts, "confirm_below": 0.4}, 0.0)["costs"]) == 9
    times = iter([1.0, 0.5, 0.5, 1.0] * 27)
    got = m._control_costs(task, lambda *a: None, [], logical, {**opts, "confirm_below": 0.6},
                           0.0)
    assert len(got["costs"]) == len(got["control"]) == 27


def test_control_takes_more_quartets_while_their_ratios_spread(monkeypatch) -> None:
    import autotune.measure as m

    task = Task("matmul.x86", [((8, 8), "float32"), ((8, 8), "float32")])
    _, tensors = task.instantiate(None)
    monkeypatch.setattr(m, "_default_kernel", lambda t: ((lambda *a: None), tensors))
    monkeypatch.setattr(m, "_WARMED", [True])
    logical = [np.ones((8, 8), "float32")] * 2
    # 9 quartets of which ratios 1 and 2 alternate (a busy machine), then quiet ones at 1
    noisy = [1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 1.0] * 5
    times = iter(noisy[:36] + [1.0] * 200)
    monkeypatch.setattr(m, "_slot", lambda *a: next(times))
    got = m._control_costs(task, lambda *a: None, [], logical, {"repeat": 3, "number": 1},
                           0.0)
    assert len(got["costs"]) > 9 and m._spread(got["costs"], got["control"]) <= 0.1


@pytest.mark.parametrize("template, args, attrs", [
    ("depthwise_conv2d_NCHWc.x86", [((1, 32, 10, 10), "float32"), ((32, 1, 3, 3), "float32")],
     {"padding": [1, 1, 1, 1], "groups": 32, "kernel_layout": "packed"}),
    ("conv2d_stem.x86", [((1, 3, 12, 12), "float32"), ((16, 3, 3, 3), "float32")],
     {"padding": [1, 1, 1, 1], "strides": [2, 2], "kernel_layout": "OIHWo"})])
def test_depthwise_and_stem_tasks_are_timed_and_checked_in_the_models_layouts(
        template, args, attrs) -> None:
    # timed as the logical task, their NCHW packing and unpacking would rank the configs
    task = Task(template, args, attrs)
    sp = task.space
    cfgs = [sp.get(0), sp.get(sp.size - 1)]
    with LocalRunner(timeout=60, check_trials=2, control=True, model_layout=True,
                     min_repeat_ms=1, slow_cutoff=None) as runner:
        timed = runner.timed_task(task)
        assert timed.attrs["out_layout"] == "NCHWc"
        assert len(timed.args[0][0]) == (5 if template.startswith("depthwise") else 4)
        res = runner.run([MeasureInput(task, cfg) for cfg in cfgs])
    assert all(r.ok for r in res), [(r.error_kind, r.error_msg) for r in res]


def test_the_timing_worker_loads_the_builders_lowered_function_without_lowering_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import lowering
    from autotune.measure import _do_build, _kernel

    task = Task("matmul.x86", [((32, 48), "float32"), ((48, 16), "float32")])
    cfg = task.config(3)
    built = _do_build(task, cfg, {"compile": True})
    assert "func" in built["generated"]

    def no_lowering(*args: object, **kwargs: object) -> None:
        raise AssertionError("the timing worker lowered the config again")

    monkeypatch.setattr(lowering, "lower", no_lowering)
    kernel, _ = _kernel(task, cfg, {"object_code": built["object_code"],
                                    "generated": built["generated"]})
    rng = np.random.default_rng()
    a = rng.standard_normal((32, 48)).astype("float32")
    b = rng.standard_normal((48, 16)).astype("float32")
    c = np.zeros((32, 16), "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
