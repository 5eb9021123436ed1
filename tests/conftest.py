"""Suite-wide markers and guards: tests marked `gpu` run only where an NVIDIA GPU is present;
no test leaves TESSEL_ALLOW_FOREIGN_CPU set."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests on machines without a GPU (they still run wherever one exists)."""
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    from tessel_target.gpu import gpu

    if gpu() is not None:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (none found: no libcuda or device)")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_test_leaves_foreign_cpu_code_allowed():
    """A test (or a benchmark's main it calls) that sets TESSEL_ALLOW_FOREIGN_CPU for the
    process lets every later test run code for CPUs this host is not: one such leak ran
    code for AMD's bdver2 (FMA4) on an Intel host and killed the suite with SIGILL."""
    import os

    before = os.environ.get("TESSEL_ALLOW_FOREIGN_CPU")
    yield
    after = os.environ.get("TESSEL_ALLOW_FOREIGN_CPU")
    if after != before:
        if before is None:
            os.environ.pop("TESSEL_ALLOW_FOREIGN_CPU", None)
        else:
            os.environ["TESSEL_ALLOW_FOREIGN_CPU"] = before
        pytest.fail(f"the test left TESSEL_ALLOW_FOREIGN_CPU={after!r} set for the process "
                    "(use monkeypatch.setenv, and never set it in library or benchmark code)")
