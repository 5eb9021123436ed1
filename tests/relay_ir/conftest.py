"""Fixtures shared by the relay_ir tests that build with tuning records."""

from __future__ import annotations

import json

import pytest

from relay_ir.backend.tuned import TuningScope


def canon(config_json: str) -> str:
    """A config's JSON with sorted keys, to compare configs read back from anywhere."""
    return json.dumps(json.loads(config_json), sort_keys=True)


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch) -> list:
    """The configs the tuning scope gave while compiling (None: the fallback was used)."""
    got: list = []
    real = TuningScope.config

    def spy(self, *args, **kwargs):
        cfg = real(self, *args, **kwargs)
        got.append(None if cfg is None else canon(cfg.to_json()))
        return cfg
    monkeypatch.setattr(TuningScope, "config", spy)
    return got


def far_config_index(task) -> int:
    """The last point of `task`'s space (far from the fallback choice) that splits the
    output among threads as the default does, so that a build on any thread count applies
    a record of it (lower_group.applied_config's split rule)."""
    from schedule.templates import partition_of

    space = task.config_space()
    split = partition_of(task.template, task.default_config())
    return next(i for i in reversed(range(space.size))
                if partition_of(task.template, space.get(i)) == split)


def concurrent_mismatches(run, inputs: list, rounds: int) -> list[int]:
    """The indices of `inputs` whose output `run(x)` differed from its serial one when two
    Python threads ran it `rounds` times each over alternate inputs at once ([] when
    every concurrent run gave the serial result bit for bit)."""
    import threading

    import numpy as np

    serial = [run(x) for x in inputs]
    wrong: list[int] = []

    def work(k0: int) -> None:
        for _ in range(rounds):
            for k in range(k0, len(inputs), 2):
                if not np.array_equal(run(inputs[k]), serial[k]):
                    wrong.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wrong
