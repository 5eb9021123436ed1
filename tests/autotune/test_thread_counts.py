"""Records are filed at the thread count they were timed on (tessel_target.device_key):
resume skips what was measured at this count only, confirmation at one count does not
touch another's records, legacy records (no count) keep applying until this count has
its own, and the first verdict at a count carries the legacy verdicts there, so that a
rejection of one legacy record does not hide the others."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.autotune.synthetic  # noqa: F401
from autotune import FakeRunner, Task, make_tuner, tune
from autotune.cli import _untuned
from autotune.confirm import candidates, confirm_best
from autotune.model_confirm import confirm_in_model
from relay_ir.backend.tuned import find_tuned
from tessel_target import device_key, device_threads, legacy_device_key
from tests.autotune.test_model_confirm import _default_json, _others, by_task, model  # noqa: F401
from tuning_logs import CONFIRM_TUNER, MeasureRecord, TuningDatabase, canonical_json


def _fresh(task: Task) -> Task:
    """The task again, its device key (cached) read at the current thread count."""
    return Task(task.template, task.args, task.attrs, task.target)


def _applied(db: TuningDatabase, task: Task) -> str | None:
    got = find_tuned(db, task.template, list(task.args), task.attrs, task.target)
    return None if got is None else canonical_json(got.config.to_json())


def _cost(t: Task, cfg) -> float:
    return 1.0 + cfg.index % 17


def test_resume_measures_nothing_again_at_the_same_count_but_again_at_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = Task("synthetic.test", [((64, 36), "float32")])
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    with TuningDatabase(tmp_path / "t.db") as db:
        first = FakeRunner(_cost)
        tune(_fresh(small), make_tuner("random", small, seed=0), 20, db, first)
        same = FakeRunner(_cost)
        tune(_fresh(small), make_tuner("random", small, seed=0), 20, db, same)
        monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
        other = FakeRunner(_cost)
        p = tune(_fresh(small), make_tuner("random", small, seed=0), 20, db, other)
        counts = sorted(device_threads(r.device_key) for r in db.history(small.workload_key))
    assert len(first.seen) == 20 and same.seen == [] and len(other.seen) == 20
    assert p.trials == 20 and counts == [1] * 20 + [2] * 20


def test_confirmation_at_two_threads_times_the_one_thread_records_and_files_its_verdicts_at_two(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mm = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    default = canonical_json(mm.default_config().to_json())
    one = device_key("llvm", threads=1)
    rec = lambda i, s: MeasureRecord(  # noqa: E731
        mm.workload_key, mm.template, mm.target, one, mm.config(i).to_json(), (s,))
    # config 1 wins, config 2 loses, whatever the count
    times = lambda t, c: {1: 0.8, 2: 1.3}.get(c.index, 1.0) * 1e-3  # noqa: E731
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    with TuningDatabase(tmp_path / "t.db") as db:
        db.add(MeasureRecord(mm.workload_key, mm.template, mm.target, one, default, (1e-3,)))
        db.add_many([rec(1, 0.5e-3), rec(2, 0.7e-3)])
        # a legacy record (no count) applies until two threads have their own; it is no
        # candidate (a model's confirmation judges it at its count)
        db.add(MeasureRecord(mm.workload_key, mm.template, mm.target,
                             legacy_device_key(one), mm.config(3).to_json(), (0.1e-3,)))
        here = _fresh(mm)
        assert _applied(db, here) == canonical_json(mm.config(3).to_json())
        assert [mm.config_from_json(r.config_json).index
                for r in candidates(here, db, default, 5)] == [1, 2]
        verdicts = confirm_best(here, db, FakeRunner(times), k=2)
        assert [v.accepted for v in verdicts] == [True, False]
        assert _applied(db, here) == canonical_json(mm.config(1).to_json())
        confirms = [r for r in db.history(mm.workload_key) if r.tuner == CONFIRM_TUNER]
        assert confirms and all(device_threads(r.device_key) == 2 for r in confirms)
        monkeypatch.setenv("TESSEL_NUM_THREADS", "1")  # at one thread: its records, unconfirmed
        at_one = db.best_record(mm.workload_key, mm.target, one)
        assert mm.config_from_json(at_one.config_json).index == 1 and at_one.tuner != CONFIRM_TUNER


@pytest.mark.parametrize("filed", ["legacy", "both counts"])
def test_a_rejection_in_the_model_at_two_threads_leaves_the_record_applied_at_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model, filed: str) -> None:  # noqa: F811
    mod, params = model
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    from autotune.extract import extract_model_tasks

    conv = next(t for t, _ in extract_model_tasks(mod, "llvm", params).tasks
                if t.args[1][0][2] == 3)
    default, (cand,) = _default_json(conv), _others(conv, 1)
    keys = [legacy_device_key(device_key("llvm"))] if filed == "legacy" else \
        [device_key("llvm", threads=1), device_key("llvm", threads=2)]
    with TuningDatabase(tmp_path / "t.db") as db:
        for key in keys:  # the default, a candidate confirmed 0.8x it
            db.add_many([MeasureRecord(conv.workload_key, conv.template, conv.target, key,
                                       config, (seconds,), tuner=tuner)
                         for config, seconds, tuner in [
                             (default, 1e-3, "xgb"), (cand, 0.7e-3, "xgb"),
                             (default, 1e-3, CONFIRM_TUNER), (cand, 0.8e-3, CONFIRM_TUNER)]])
        assert _applied(db, _fresh(conv)) == cand
        got = confirm_in_model(mod, params, "llvm", db, timer=by_task(lambda n, p: 1.3))
        assert [(v.config_json, v.accepted) for v in got.verdicts] == [(cand, False)]
        assert _applied(db, _fresh(conv)) == default  # rejected at two threads
        rejected = [r for r in db.history(conv.workload_key) if not r.ok]
        assert [device_threads(r.device_key) for r in rejected] == [2]
        monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
        assert _applied(db, _fresh(conv)) == cand  # still applied at one


def _legacy_verdicts(db: TuningDatabase, task: Task, default: str,
                     confirmed: list[tuple[str, float]]) -> None:
    """Legacy records (no thread count) of `task`: the default and `confirmed` configs
    as trials, then confirmed beside the default at the given ratios."""
    key = legacy_device_key(device_key(task.target))
    trials = [(default, 1e-3, "xgb")] + [(c, r * 0.9e-3, "xgb") for c, r in confirmed]
    verdicts = [(default, 1e-3, CONFIRM_TUNER)] + [(c, r * 1e-3, CONFIRM_TUNER)
                                                   for c, r in confirmed]
    db.add_many([MeasureRecord(task.workload_key, task.template, task.target, key, config,
                               (seconds,), tuner=tuner)
                 for config, seconds, tuner in trials + verdicts])


def test_a_rejection_at_a_count_of_a_legacy_record_leaves_the_next_legacy_record_applied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.confirm import record_rejection

    mm = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    default = canonical_json(mm.default_config().to_json())
    first, second = (canonical_json(mm.config(i).to_json()) for i in (1, 2))
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    with TuningDatabase(tmp_path / "t.db") as db:
        _legacy_verdicts(db, mm, default, [(first, 0.8), (second, 0.9)])
        here = _fresh(mm)
        assert _applied(db, here) == first
        assert record_rejection(here, db, default, first, "slower in the model", None,
                                default_seconds=1e-3)
        assert _applied(db, here) == second  # not the default: `second` was not judged
        rejected = [r for r in db.history(mm.workload_key) if not r.ok]
        assert [(r.config_json, device_threads(r.device_key)) for r in rejected] == \
            [(first, 2)]
        monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
        assert _applied(db, _fresh(mm)) == first  # the legacy records are untouched


def test_a_confirmation_at_a_count_without_records_keeps_the_legacy_verdicts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mm = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    default = canonical_json(mm.default_config().to_json())
    judged, new = (canonical_json(mm.config(i).to_json()) for i in (1, 3))
    one = device_key("llvm", threads=1)
    times = lambda t, c: {1: 1.3, 3: 0.7}.get(c.index, 1.0) * 1e-3  # noqa: E731
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    with TuningDatabase(tmp_path / "t.db") as db:
        _legacy_verdicts(db, mm, default, [(judged, 0.8)])
        db.add_many([MeasureRecord(mm.workload_key, mm.template, mm.target, one, config,
                                   (seconds,)) for config, seconds in
                     [(default, 1e-3), (judged, 0.5e-3), (new, 0.6e-3)]])
        verdicts = confirm_best(_fresh(mm), db, FakeRunner(times), k=2)
        # the legacy verdict on `judged` came along: only the one-thread `new` is timed
        assert [(v.config_json, v.accepted) for v in verdicts] == [(new, True)]
        assert _applied(db, _fresh(mm)) == new


def test_a_model_confirmation_at_a_count_judges_the_next_legacy_record_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model) -> None:  # noqa: F811
    from autotune.extract import extract_model_tasks

    mod, params = model
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    conv = next(t for t, _ in extract_model_tasks(mod, "llvm", params).tasks
                if t.args[1][0][2] == 3)
    default, (first, second) = _default_json(conv), _others(conv, 2)
    with TuningDatabase(tmp_path / "t.db") as db:
        _legacy_verdicts(db, conv, default, [(first, 0.8), (second, 0.9)])
        got = confirm_in_model(mod, params, "llvm", db, timer=by_task(lambda n, p: 1.3))
        assert [(v.config_json, v.accepted) for v in got.verdicts] == \
            [(first, False), (second, False)]
        assert _applied(db, _fresh(conv)) == default  # both lost in the model at two
        monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
        assert _applied(db, _fresh(conv)) == first


def test_untuned_only_counts_legacy_records_but_not_those_of_other_counts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = Task("synthetic.test", [((64, 36), "float32")])
    b = Task("synthetic.test", [((32, 36), "float32")])
    c = Task("synthetic.test", [((16, 36), "float32")])
    legacy = legacy_device_key(device_key("llvm"))
    with TuningDatabase(tmp_path / "t.db") as db:
        for task, key in [(a, legacy), (b, device_key("llvm", threads=1)),
                          (c, device_key("llvm", threads=2))]:
            db.add(MeasureRecord(task.workload_key, task.template, task.target, key,
                                 task.config(0).to_json(), (1e-3,)))
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    found = [(_fresh(t), 1) for t in (a, b, c)]
    left, _ = _untuned(str(tmp_path / "t.db"), found, [], 0)
    assert [t.args for t, _ in left] == [b.args]


def test_untuned_only_says_it_counts_this_thread_count_and_legacy_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from autotune.cli import build_parser

    a = Task("synthetic.test", [((64, 36), "float32")])
    with TuningDatabase(tmp_path / "t.db") as db:  # tuned on one thread only
        db.add(MeasureRecord(a.workload_key, a.template, a.target,
                             device_key("llvm", threads=1), a.config(0).to_json(), (1e-3,)))
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    left, _ = _untuned(str(tmp_path / "t.db"), [(_fresh(a), 1)], [], 0)
    said = capsys.readouterr().out
    assert len(left) == 1 and "1 of 1 tasks have no record in" in said
    assert "one of this device at 2 threads (TESSEL_NUM_THREADS)" in said
    assert "or one filed before records had a thread count" in said
    assert "records of other thread counts do not count" in said
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tune", "--help"])
    helped = " ".join(capsys.readouterr().out.split())  # argparse wraps the lines
    assert "at this thread count (TESSEL_NUM_THREADS) or filed before records had a thread " \
        "count; records of other counts do not count" in helped


def test_build_and_confirmation_read_the_same_records_of_other_counts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.confirm import _other_counts
    from relay_ir.backend.tuned import other_thread_counts

    mm = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    keys = [device_key("llvm", threads=1), device_key("llvm", threads=4),
            legacy_device_key(device_key("llvm")),  # applies at any count: not "other"
            "llvm -mcpu=znver4|AMD EPYC 9654|0a1b2c3d|threads=1"]  # another machine
    with TuningDatabase(tmp_path / "t.db") as db:
        db.add_many([MeasureRecord(mm.workload_key, mm.template, mm.target, key,
                                   mm.config(i).to_json(), (1e-3,))
                     for i, key in enumerate(keys)])
        counts = other_thread_counts(db, mm.template, list(mm.args), mm.attrs, mm.target)
        records = _other_counts(_fresh(mm), db)
    assert counts == [1, 4]
    assert sorted(device_threads(r.device_key) for r in records) == counts
    assert {r.device_key for r in records} == set(keys[:2])


def test_db_best_shows_this_counts_records_else_the_legacy_ones(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    mm = Task("matmul.x86", [((32, 32), "float32"), ((32, 32), "float32")])
    with TuningDatabase(tmp_path / "t.db") as db:
        db.add(MeasureRecord(mm.workload_key, mm.template, mm.target,
                             legacy_device_key(device_key("llvm")), mm.config(1).to_json(),
                             (2e-3,)))
        db.add(MeasureRecord(mm.workload_key, mm.template, mm.target,
                             device_key("llvm", threads=1), mm.config(2).to_json(), (1e-3,)))
    root = Path(__file__).resolve().parents[2]
    shown = {}
    for n in ("1", "2"):
        env = dict(os.environ, TESSEL_NUM_THREADS=n, PYTHONPATH=str(root))
        shown[n] = subprocess.run([sys.executable, "-m", "autotune.cli", "db", "best",
                                   mm.workload_key, "--db", "t.db"], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=120, check=True).stdout
    assert " 1.0000 " in shown["1"] and " 2.0000 " not in shown["1"]
    assert " 2.0000 " in shown["2"] and " 1.0000 " not in shown["2"]
