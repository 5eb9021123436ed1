"""The explicit "current tuning database": a context variable set by `using_database`.

This is the one piece of ambient state the database layer has (see DESIGN.md): a build that is
not handed a database asks `current_database()`, and gets the one a caller chose with a `with`
block, or None. A context variable keeps threads and asyncio tasks from seeing each other's.

    >>> import tempfile, pathlib
    >>> current_database() is None
    True
    >>> with using_database(pathlib.Path(tempfile.mkdtemp()) / "t.db") as db:
    ...     current_database() is db
    True
    >>> current_database() is None
    True
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from pathlib import Path

from .database import TuningDatabase

_CURRENT: contextvars.ContextVar[TuningDatabase | None] = contextvars.ContextVar(
    "tessel_current_tuning_database", default=None)


def current_database() -> TuningDatabase | None:
    """The database chosen by the innermost enclosing `using_database`, else None.

        >>> current_database() is None
        True
    """
    return _CURRENT.get()


@contextlib.contextmanager
def using_database(db: str | Path | TuningDatabase) -> Iterator[TuningDatabase]:
    """Make `db` (a path, opened and closed here, or an open database) current in the block.

        >>> import tempfile, pathlib
        >>> with TuningDatabase(pathlib.Path(tempfile.mkdtemp()) / "t.db") as mine:
        ...     with using_database(mine) as db:
        ...         db is mine
        True
    """
    opened = not isinstance(db, TuningDatabase)
    database = TuningDatabase(db) if opened else db
    token = _CURRENT.set(database)
    try:
        yield database
    finally:
        _CURRENT.reset(token)
        if opened:
            database.close()


@contextlib.contextmanager
def resolve_database(spec: str | Path | TuningDatabase | None, *,
                     readonly: bool = False) -> Iterator[TuningDatabase | None]:
    """The database a caller meant: an open one as is, a path opened here, None the current.

    For APIs such as `build(..., tuning_db=...)`: a path is opened for the block and closed
    after it (read-only when asked, which also refuses a path with no database); None gives
    `current_database()`, which may itself be None.

        >>> with resolve_database(None) as db:
        ...     db is None
        True
    """
    if spec is None or isinstance(spec, TuningDatabase):
        yield spec if spec is not None else current_database()
        return
    with TuningDatabase(spec, readonly=readonly) as database:
        yield database


__all__ = ["current_database", "resolve_database", "using_database"]
