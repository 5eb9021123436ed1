"""benchmarks.isolated: a peer's runs live in a spawned process; results and medians come
back, and a failing setup or run stops the parent with the child's traceback."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from benchmarks.isolated import Peer


def _setup(n: int) -> dict[str, Any]:
    """Runs that show where they ran and what they computed."""
    a = np.arange(n, dtype=np.float32)
    return {"sum": lambda: float(a.sum()), "pid": os.getpid,
            "boom": lambda: 1 // 0}


def _failing_setup() -> dict[str, Any]:
    raise ValueError("no such model")


def test_a_peer_runs_and_times_in_its_own_process() -> None:
    with Peer("demo", _setup, 8) as p:
        assert p.keys() == ["boom", "pid", "sum"]
        assert p.run("sum") == 28.0
        assert p.run("pid") != os.getpid()
        assert 0 < p.time("sum", repeat=3, warmup=1) < 1


def test_a_failing_run_stops_the_parent_with_the_childs_traceback() -> None:
    p = Peer("demo", _setup, 4)
    with pytest.raises(SystemExit, match="(?s)peer 'demo' failed during run 'boom'.*"
                                         "ZeroDivisionError"):
        p.run("boom")
    p.close()


def test_a_failing_setup_names_the_peer_and_the_error() -> None:
    with Peer("broken", _failing_setup) as p, \
            pytest.raises(SystemExit, match="(?s)peer 'broken' failed during setup.*"
                                            "ValueError: no such model"):
        p.keys()
