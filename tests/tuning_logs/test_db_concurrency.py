"""Two tuning processes writing one database lose no record."""

from __future__ import annotations

import multiprocessing as mp
import threading
from pathlib import Path

from tuning_logs import MeasureRecord, TuningDatabase

N_PER_WRITER = 500


def _writer(path: str, writer: int, start: mp.synchronize.Event) -> None:
    start.wait(30)
    with TuningDatabase(path) as db:
        for i in range(N_PER_WRITER):
            cfg = {"writer": writer, "i": i}
            # What a tuner does: check, measure, record, one transaction per record.
            assert not db.has_config("mm", "llvm", "cpu", cfg)
            db.add(MeasureRecord("mm", "matmul_x86", "llvm", "cpu", cfg,
                                 costs=(1e-3 + i * 1e-6,), tuner=f"w{writer}"))


def test_two_writer_processes_lose_no_record(tmp_path: Path):
    path = tmp_path / "fresh" / "tuning.db"  # both processes race to create it, too
    ctx = mp.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(path), w, start)) for w in (0, 1)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    with TuningDatabase(path) as db:
        assert db.count() == 2 * N_PER_WRITER
        got = {(r.config["writer"], r.config["i"]) for r in db.records()}
        assert got == {(w, i) for w in (0, 1) for i in range(N_PER_WRITER)}
        assert len(db.history("mm", tuner="w1")) == N_PER_WRITER


def test_threads_sharing_one_database_lose_no_record(db_path: Path):
    errors: list[BaseException] = []

    def work(db: TuningDatabase, t: int) -> None:
        try:
            for i in range(100):
                db.add(MeasureRecord("mm", "matmul_x86", "llvm", "cpu", {"t": t, "i": i},
                                     costs=(1e-3,)))
                db.has_config("mm", "llvm", "cpu", {"t": t, "i": i})
                db.best("mm", "llvm", "cpu")
        except BaseException as e:  # reported below: a thread's failure must fail the test
            errors.append(e)

    with TuningDatabase(db_path) as db:
        threads = [threading.Thread(target=work, args=(db, t)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        assert db.count() == 400
