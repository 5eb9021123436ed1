"""Suite-wide markers: tests marked `gpu` run only where an NVIDIA GPU is present."""

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
