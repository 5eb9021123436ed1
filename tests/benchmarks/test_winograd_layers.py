"""benchmarks.winograd_layers at a tiny size: the direct and Winograd defaults and the
grid are built in model layouts, checked against numpy and timed; no timing checked."""

from __future__ import annotations

import pytest

from benchmarks.winograd_layers import main


def test_a_tiny_shape_times_both_defaults_and_the_grid() -> None:
    rows = main(["--shapes", "16@8", "--rounds", "1", "--number", "1",
                 "--target", "llvm -mcpu=haswell"])
    assert len(rows) == 1 and rows[0]["shape"] == "16@8"
    timed = {k for k in rows[0] if k != "shape"}
    assert {"direct", "winograd"} <= timed
    assert any('"fuse": "root"' in k for k in timed) and any('"tile_m": 2' in k for k in timed)
    assert all(rows[0][k] > 0 for k in timed)


def test_cold_weights_rotate_copies_of_each_kernel_s_weight() -> None:
    rows = main(["--shapes", "16@8", "--rounds", "1", "--number", "2", "--no-grid",
                 "--cold-weights", "0.05"])
    assert set(rows[0]) == {"shape", "direct", "winograd"}


def test_cpu_time_needs_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    with pytest.raises(SystemExit, match="TESSEL_NUM_THREADS=1"):
        main(["--shapes", "16@8", "--cpu-time"])
