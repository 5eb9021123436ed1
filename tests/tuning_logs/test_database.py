"""TuningDatabase queries: add, best, history, tasks, resume, transfer reads, prune, count."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import pytest

from tessel_errors import TuningLogError
from tuning_logs import DEFAULT_DB_PATH, MeasureRecord, TuningDatabase

W1, W2 = "matmul|1024x1024x1024|float32", "conv2d|1x64x56x56|float32"
LLVM, DEV, OTHER_DEV = "llvm -mcpu=sapphirerapids", "llvm/sapphirerapids/avx512f", "llvm/zen4"


def test_added_records_come_back_equal(db, make_record):
    records = [make_record(config={"i": i}) for i in range(5)]
    for r in records:
        assert db.add(r) is True
    back = db.history(W1)
    assert back == records
    assert all(b.record_id is not None for b in back)


def test_exact_duplicate_is_not_stored_twice(db, make_record):
    r = make_record()
    assert db.add(r) is True
    assert db.add(MeasureRecord.from_json(r.to_json())) is False
    assert db.count() == 1


def test_add_many_counts_new_records(db, make_record):
    records = [make_record(config={"i": i}) for i in range(20)]
    assert db.add_many(records) == 20
    assert db.add_many(records[:5] + [make_record(config={"i": 99})]) == 1
    assert db.count() == 21


def test_add_many_is_all_or_nothing(db, make_record):
    batch = [make_record(config={"i": 0}), "not a record", make_record(config={"i": 1})]
    with pytest.raises(TuningLogError, match="can only add MeasureRecord objects, got str"):
        db.add_many(batch)
    assert db.count() == 0


def test_best_is_the_lowest_mean_among_successes(db, make_record, rng):
    means = rng.uniform(1e-3, 1e-2, size=12)
    for i, m in enumerate(means):
        db.add(make_record(config={"i": i}, costs=(float(m),)))
    # A failed record with tiny (meaningless) costs must never win.
    db.add(make_record(config={"i": -1}, costs=(1e-9,), error_kind="wrong_result"))
    order = [int(i) for i in means.argsort()]
    assert [r.config["i"] for r in db.best(W1, LLVM, DEV, k=3)] == order[:3]
    assert db.best_record(W1, LLVM, DEV).mean == pytest.approx(means.min())


def test_best_is_per_workload_target_and_device(db, make_record):
    db.add(make_record(config={"d": "here"}, costs=(2e-3,)))
    db.add(make_record(config={"d": "there"}, costs=(1e-3,), device_key=OTHER_DEV))
    db.add(make_record(config={"d": "w2"}, costs=(1e-4,), workload_key=W2))
    db.add(make_record(config={"d": "cuda"}, costs=(1e-5,), target="cuda"))
    assert db.best_record(W1, LLVM, DEV).config == {"d": "here"}
    assert db.best_record(W1, LLVM, OTHER_DEV).config == {"d": "there"}
    # device_key=None: any device, only when the user asks for it.
    assert db.best_record(W1, LLVM).config == {"d": "there"}


def test_best_of_an_unknown_or_all_failed_task_is_none(db, make_record):
    db.add(make_record(costs=(), error_kind="timeout"))
    assert db.best(W1, LLVM, DEV) == []
    assert db.best_record(W2, LLVM, DEV) is None


def test_best_needs_a_positive_k(db):
    with pytest.raises(TuningLogError, match="best\\(\\) needs k to be a positive integer, got 0"):
        db.best(W1, LLVM, DEV, k=0)


def test_history_is_in_measurement_order_and_filters(db, make_record):
    recs = [make_record(config={"i": i}, timestamp=100.0 - i, tuner="ga" if i % 2 else "xgb")
            for i in range(6)]
    db.add_many(recs)
    assert [r.config["i"] for r in db.history(W1)] == [5, 4, 3, 2, 1, 0]
    assert [r.config["i"] for r in db.history(W1, tuner="xgb")] == [4, 2, 0]
    assert len(db.history(W1, LLVM, DEV, limit=2)) == 2
    assert db.history(W1, device_key=OTHER_DEV) == []


def test_tasks_summarise_each_workload(db, make_record):
    db.add_many([make_record(config={"i": i}, costs=(c,), timestamp=10.0 + i, flops=2e9)
                 for i, c in enumerate([4e-3, 1e-3, 2e-3])])
    db.add(make_record(config={"i": 9}, costs=(), error_kind="build_error", timestamp=20.0,
                       flops=2e9))
    db.add(make_record(workload_key=W2, template="conv2d_nchw", costs=(5e-3,),
                       timestamp=5.0, flops=None))
    first, second = db.tasks()
    assert (first.workload_key, first.template, first.trials, first.ok_trials) == \
        (W1, "matmul_x86", 4, 3)
    assert first.best_mean == pytest.approx(1e-3)
    assert first.best_gflops == pytest.approx(2000.0)
    assert first.last_update == 20.0
    assert (second.workload_key, second.template, second.trials) == (W2, "conv2d_nchw", 1)
    assert second.best_gflops is None


def test_resume_sees_every_measured_config_whatever_its_outcome(db_path, make_record):
    done = [{"tile": [4, 8], "unroll": True}, {"tile": [8, 4], "unroll": False}]
    with TuningDatabase(db_path) as db:
        db.add(make_record(config=done[0]))
        db.add(make_record(config=done[1], costs=(), error_kind="worker_crash"))
    # A restarted run on the same file: both are known, in any key order, text or dict.
    with TuningDatabase(db_path) as db:
        assert db.has_config(W1, LLVM, DEV, {"unroll": True, "tile": [4, 8]})
        assert db.has_config(W1, LLVM, DEV, '{"unroll": false, "tile": [8, 4]}')
        assert not db.has_config(W1, LLVM, DEV, {"tile": [4, 4], "unroll": True})
        assert not db.has_config(W1, LLVM, OTHER_DEV, done[0])
        assert not db.has_config(W2, LLVM, DEV, done[0])
        assert db.measured_configs(W1, LLVM, DEV) == {
            '{"tile":[4,8],"unroll":true}', '{"tile":[8,4],"unroll":false}'}


def test_resumed_tuner_measures_nothing_twice(db_path, make_record):
    space = [{"t": t, "u": u} for t in (1, 2, 4, 8, 16) for u in (0, 1)]

    def tune(budget: int) -> list[dict]:
        # A fake tuner: walks the space, skipping what the database already holds.
        measured = []
        with TuningDatabase(db_path) as db:
            seen = db.measured_configs(W1, LLVM, DEV)
            for cfg in space:
                if len(measured) == budget:
                    break
                if db.has_config(W1, LLVM, DEV, cfg):
                    continue
                measured.append(cfg)
                db.add(make_record(config=cfg))
            assert len(db.measured_configs(W1, LLVM, DEV)) == len(seen) + len(measured)
        return measured

    first, second = tune(4), tune(100)
    assert len(first) == 4 and len(second) == len(space) - 4
    assert not {str(c) for c in first} & {str(c) for c in second}


def test_records_for_transfer_learning_exclude_the_new_task(db, make_record):
    db.add(make_record(workload_key="mm_a"))
    db.add(make_record(workload_key="mm_b", costs=(), error_kind="timeout"))
    db.add(make_record(workload_key="mm_c"))
    db.add(make_record(workload_key="conv", template="conv2d_nchw"))
    db.add(make_record(workload_key="mm_d", target="cuda"))
    keys = [r.workload_key for r in db.records(template="matmul_x86", target=LLVM,
                                               exclude_workload="mm_c")]
    assert keys == ["mm_a", "mm_b"]
    assert [r.workload_key for r in db.records(template="matmul_x86", target=LLVM,
                                               ok_only=True)] == ["mm_a", "mm_c"]
    assert len(db.records()) == 5
    assert len(db.records(limit=2)) == 2


def test_prune_keeps_the_top_k_per_task(db, make_record, rng):
    for dev in (DEV, OTHER_DEV):
        for w in (W1, W2):
            for i, m in enumerate(rng.uniform(1e-3, 1e-2, size=8)):
                db.add(make_record(workload_key=w, device_key=dev, config={"i": i},
                                   costs=(float(m),)))
            db.add(make_record(workload_key=w, device_key=dev, costs=(),
                               error_kind="runtime_error"))
    best_before = {(w, d): [r.config for r in db.best(w, LLVM, d, k=3)]
                   for w in (W1, W2) for d in (DEV, OTHER_DEV)}
    assert db.prune(3) == 4 * 6
    assert db.count() == 12
    for (w, d), configs in best_before.items():
        assert [r.config for r in db.history(w, LLVM, d)] != []
        assert [r.config for r in db.best(w, LLVM, d, k=10)] == configs


def test_best_of_a_task_with_confirm_records_is_among_them_only(db, make_record):
    from tuning_logs import CONFIRM_TUNER

    db.add_many([make_record(config={"i": 0}, costs=(1.0,)),
                 make_record(config={"i": 1}, costs=(0.5,)),  # a lucky first time
                 make_record(workload_key=W2, config={"i": 1}, costs=(0.5,))])
    assert db.best_record(W1, LLVM, DEV).config == {"i": 1}
    db.add_many([make_record(config={"i": 0}, costs=(1.0,), tuner=CONFIRM_TUNER),
                 make_record(config={"i": 1}, costs=(1.0,), tuner=CONFIRM_TUNER)])
    # the default's confirm record first: a rejected candidate is credited its time
    assert db.best_record(W1, LLVM, DEV).config == {"i": 0}
    assert [r.tuner for r in db.best(W1, LLVM, DEV, k=5)] == [CONFIRM_TUNER] * 2
    assert db.best_record(W2, LLVM, DEV).config == {"i": 1}  # another task: as before
    assert db.best_record(W1, LLVM, None).config == {"i": 0}  # any device: per device
    assert {t.workload_key: (t.trials, t.best_mean) for t in db.tasks()} == \
        {W1: (2, 1.0), W2: (1, 0.5)}
    db.prune(1)  # prune keeps every confirm record: what best returns stays
    assert db.best_record(W1, LLVM, DEV).config == {"i": 0}


def test_prune_needs_a_positive_k(db):
    with pytest.raises(TuningLogError, match="prune needs top_k to be a positive integer"):
        db.prune(0)


def test_count_filters(db, make_record):
    db.add_many([make_record(config={"i": i}) for i in range(3)])
    db.add(make_record(workload_key=W2))
    assert (db.count(), db.count(W1), db.count(W2, LLVM, DEV), db.count(target="cuda")) == \
        (4, 3, 1, 0)


def test_database_cannot_be_pickled(db):
    with pytest.raises(TypeError, match="cannot be pickled .*pass its path"):
        pickle.dumps(db)


def test_tasks_filter_by_target_and_device(db, make_record):
    db.add(make_record())
    db.add(make_record(device_key=OTHER_DEV))
    db.add(make_record(target="cuda"))
    assert [t.device_key for t in db.tasks(target=LLVM, device_key=OTHER_DEV)] == [OTHER_DEV]
    assert len(db.tasks(target=LLVM)) == 2


def test_a_write_blocked_past_the_timeout_is_a_tuning_log_error(db_path, make_record):
    TuningDatabase(db_path).close()
    holder = sqlite3.connect(db_path)
    holder.execute("BEGIN IMMEDIATE")  # another process in the middle of a long write
    try:
        with TuningDatabase(db_path, timeout=0.05) as db:
            with pytest.raises(TuningLogError, match="cannot add records in .*database is "
                                                     "locked.*another process"):
                db.add(make_record())
            assert db.count() == 0
    finally:
        holder.rollback()
        holder.close()


def test_default_path_is_tuning_logs_tuning_db_under_the_current_directory(
        tmp_path, monkeypatch, make_record):
    monkeypatch.chdir(tmp_path)
    assert DEFAULT_DB_PATH == Path("tuning_logs") / "tuning.db"
    with TuningDatabase() as db:
        db.add(make_record())
    assert (tmp_path / "tuning_logs" / "tuning.db").is_file()


def test_merging_a_database_into_itself_adds_nothing(db, make_record):
    db.add_many([make_record(config={"i": i}) for i in range(4)])
    assert db.merge(db.path).added == 0
    assert db.count() == 4


def test_use_after_close_is_a_tuning_log_error(db_path, make_record):
    db = TuningDatabase(db_path)
    db.close()
    with pytest.raises(TuningLogError, match="cannot add records in .*closed"):
        db.add(make_record())
