"""An environment variable set for a block of a benchmark and put back after it.

    >>> import os
    >>> with temporary_env("TESSEL_PLAN_SKEW", "0"):
    ...     os.environ["TESSEL_PLAN_SKEW"]
    '0'
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def temporary_env(name: str, value: str) -> Iterator[None]:
    """Set `name` to `value` inside the block; afterwards it is as it was (or unset)."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
