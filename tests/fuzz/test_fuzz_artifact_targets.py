"""The artifact and tuning-import fuzz targets, seeded and bounded: only Tessel errors
(or results) come out of damaged saved models and mutated tuning logs."""

from __future__ import annotations

import numpy as np
import pytest

from tessel_errors import TesselError
from tests.fuzz import artifacts, tuning_import


@pytest.mark.parametrize("target", [artifacts, tuning_import], ids=lambda t: t.NAME)
def test_only_tessel_errors_come_out(target) -> None:
    rng = np.random.default_rng(20261203)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(500):
        what, thunk = target.one_input(rng)
        try:
            thunk()
            outcomes["ok"] += 1
        except TesselError:
            outcomes["error"] += 1
    assert outcomes["error"] > outcomes["ok"]  # the damage reaches the checks


def test_targets_describe_each_input() -> None:
    rng = np.random.default_rng(1)
    for target in (artifacts, tuning_import):
        what, thunk = target.one_input(rng)
        assert isinstance(what, str) and what and callable(thunk)
