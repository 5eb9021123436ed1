"""The explicit current-database context: set by `using_database`, visible only inside."""

from __future__ import annotations

import threading

import pytest

from tessel_errors import TuningLogError
from tuning_logs import TuningDatabase, current_database, resolve_database, using_database


def test_no_database_is_current_by_default():
    assert current_database() is None


def test_using_a_path_opens_and_closes_it(db_path, make_record):
    with using_database(db_path) as db:
        assert current_database() is db
        db.add(make_record())
    assert current_database() is None
    with TuningDatabase(db_path) as again:
        assert again.count() == 1


def test_using_an_open_database_leaves_it_open(db, make_record):
    with using_database(db):
        assert current_database() is db
    db.add(make_record())  # still usable: using_database did not close it
    assert db.count() == 1


def test_nested_blocks_restore_the_outer_database(tmp_path):
    with using_database(tmp_path / "outer.db") as outer:
        with using_database(tmp_path / "inner.db") as inner:
            assert current_database() is inner
        assert current_database() is outer


def test_other_threads_do_not_see_the_current_database(db):
    seen = []
    with using_database(db):
        t = threading.Thread(target=lambda: seen.append(current_database()))
        t.start()
        t.join()
    assert seen == [None]


def test_current_database_is_reset_after_an_error(db):
    try:
        with using_database(db):
            raise RuntimeError("tuning failed")
    except RuntimeError:
        pass
    assert current_database() is None


def test_resolve_none_gives_the_current_database(db):
    with resolve_database(None) as none:
        assert none is None
    with using_database(db), resolve_database(None) as found:
        assert found is db


def test_resolve_an_open_database_gives_it_back_open(db):
    with resolve_database(db) as found:
        assert found is db
    assert db.count() == 0


def test_resolve_a_path_opens_it_for_the_block(db_path, make_record):
    with TuningDatabase(db_path) as db:
        db.add(make_record())
    with resolve_database(db_path, readonly=True) as found:
        assert found.count() == 1 and found.readonly
    with pytest.raises(TuningLogError, match="cannot read tuning database .*closed"):
        found.count()


def test_resolve_a_missing_path_read_only_is_an_error(tmp_path):
    with pytest.raises(TuningLogError, match="no tuning database at"):
        with resolve_database(tmp_path / "none.db", readonly=True):
            pass
