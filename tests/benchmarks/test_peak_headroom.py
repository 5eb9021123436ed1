"""benchmarks.peak_headroom: a model's tuning tasks against one core's FMA peak."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest

from benchmarks import peak_headroom
from tests.e2e.onnx_models import resnet18
from tuning_logs import TuningDatabase


def _small_model(tmp_path: Path) -> Path:
    path = tmp_path / "r18.onnx"
    onnx.save(resnet18(image=32, width=8, classes=10), path)
    return path


def _build(path: Path):
    import relay_ir
    from relay_ir.frontend.onnx import from_onnx

    mod, params = from_onnx(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return relay_ir.build(mod, "llvm", params)


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
@pytest.mark.parametrize("iterations", [0, 1, 9])
def test_the_fma_loop_runs_each_chain_its_iterations(target: str, iterations: int) -> None:
    chains = np.arange(1, peak_headroom.chains(target) + 1, dtype=np.float32)
    for _ in range(iterations):  # x * 0.5 + 1 in float32; fused or not, exact here
        chains = chains * np.float32(0.5) + np.float32(1.0)
    got = peak_headroom.fma_loop(target)(iterations)
    assert got == pytest.approx(float(chains.sum(dtype=np.float64)), rel=1e-6)


def test_the_peak_is_the_loops_flops_over_the_clocks_seconds() -> None:
    ticks = iter([10.0, 10.5])  # a clock read before and after the call: half a second
    got = peak_headroom.fma_peak("llvm", iterations=100, clock=lambda: next(ticks))
    assert got == peak_headroom.fma_flop("llvm", 100) / 0.5


def test_task_times_sum_each_tasks_steps_per_round_and_count_their_flops(
        tmp_path: Path) -> None:
    lib = _build(_small_model(tmp_path))
    plan = lib.plan
    rng = np.random.default_rng(3)
    seconds = rng.uniform(1e-6, 1e-3, (5, len(plan.steps)))
    got = {t.key: t for t in peak_headroom.task_times(plan, seconds, "llvm")}
    by_key: dict[str, list[int]] = {}
    for k, step in enumerate(plan.steps):
        by_key.setdefault(step.workload_key, []).append(k)
    assert set(got) == set(by_key) and "" in got
    assert got[""].name == peak_headroom.OTHER and got[""].flop == 0.0
    for key, ks in by_key.items():
        assert got[key].steps == len(ks)
        assert got[key].seconds == pytest.approx(float(np.median(seconds[:, ks].sum(axis=1))))
        if key:
            # two FLOPs per output element and weight element it reads: IC x KH x KW for
            # a conv's (OC, IC, KH, KW) weight, K for a dense's (N, K)
            weight = json.loads(key.split("|")[1])[1][0]
            want = sum(2 * math.prod(plan.values[plan.steps[k].outputs[0]].shape)
                       * math.prod(weight[1:]) for k in ks)
            assert got[key].flop == pytest.approx(want), key


def test_measure_takes_a_peak_then_a_round_of_every_plan_each_round() -> None:
    calls: list[str] = []
    peaks = iter([3.0, 1.0, 2.0])

    def peak() -> float:
        calls.append("peak")
        return next(peaks)

    def timer(plans, arrays, rounds):
        assert rounds == 1
        calls.append("plans")
        return [np.full((1, n), float(len(calls))) for n in plans]

    got, rows = peak_headroom.measure([2, 4], [], 3, "llvm", peak=peak, timer=timer)
    assert got == 2.0 and calls == ["peak", "plans"] * 3
    assert [r.shape for r in rows] == [(3, 2), (3, 4)]
    assert rows[1][:, 0].tolist() == [2.0, 4.0, 6.0]


def test_the_table_gives_each_task_its_time_over_the_same_task_in_the_base() -> None:
    tuned = [peak_headroom.TaskTime("a", "conv a", 1, 3e-3, 1e8),
             peak_headroom.TaskTime("b", "conv b", 2, 1e-3, 1e8)]
    base = [peak_headroom.TaskTime("b", "conv b", 2, 2e-3, 1e8),
            peak_headroom.TaskTime("c", "conv c", 1, 2e-3, 1e8)]
    rows = peak_headroom.table(tuned, 1e11, base).splitlines()
    by_name = {r.split()[1]: r.split() for r in rows[1:-1]}
    assert by_name["b"][-1] == "0.500" and by_name["a"][-1] == "-"  # "a" is not in base
    assert rows[-1].endswith("x1.000 of the base")  # 4 ms against 4 ms
    assert "x base" not in peak_headroom.table(tuned, 1e11)


def test_main_prints_a_table_per_build_with_the_share_of_the_peak(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.setattr("lowering.kernel.num_threads", lambda: 1)
    model = _small_model(tmp_path)
    empty = str(tmp_path / "empty.db")  # no records: the build equals the untuned one
    TuningDatabase(empty).close()
    got = peak_headroom.main([str(model), "--db", empty, "--rounds", "2"])
    assert list(got) == ["untuned", empty]
    assert [t.name for t in got["untuned"]] == [t.name for t in got[empty]]
    out = capsys.readouterr().out
    assert out.count("of the peak; at the peak the FLOPs take") == 2
    assert out.count("of the base") == 1  # the tuned build against the untuned one


def test_several_threads_are_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("lowering.kernel.num_threads", lambda: 2)
    with pytest.raises(SystemExit):
        peak_headroom.main([str(tmp_path / "m.onnx")])
