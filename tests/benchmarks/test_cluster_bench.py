"""benchmarks/cluster.py runs a tiny job on the local runner and on 1 and 2 Ray slots and
splits its CPU time by role."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("ray")

from benchmarks.cluster import ROLES, main, tree_cpu_s  # noqa: E402

pytestmark = pytest.mark.slow  # two local Ray instances and real measuring workers


def test_the_benchmark_prints_wall_and_cpu_by_role_for_each_runner(capsys) -> None:
    # the slot actor's CPU is charged in 10 ms ticks and costs about 2.5 ms a candidate:
    # 4 candidates showed 0 ticks once in CI; 40 make a tick-less slot a 1-in-20000 event
    assert main(["--op", "matmul:16x16x16", "--candidates", "40"]) == 0
    text = capsys.readouterr().out
    rows = {line.split("  ")[0].strip(): line for line in text.splitlines()
            if "ms/candidate" in line}
    assert set(rows) == {"local runner, 1 build worker", "ray, 1 slot(s)", "ray, 2 slot(s)"}

    def cpu(row: str, role: str) -> float:
        return float(re.search(rf"{role} (-?[0-9.]+)", rows[row]).group(1))

    assert cpu("local runner, 1 build worker", "workers") > 0
    assert cpu("local runner, 1 build worker", "slots") == 0  # no Ray there
    assert cpu("ray, 1 slot(s)", "workers") > 0 and cpu("ray, 1 slot(s)", "slots") > 0
    assert re.search(r"Ray overhead per candidate \(1 slot vs local\): wall -?[0-9.]+ ms, "
                     r"CPU -?[0-9.]+ ms \(driver", text)


def test_the_cpu_of_the_process_tree_counts_this_driver() -> None:
    before = tree_cpu_s()
    sum(k * k for k in range(2_000_000))  # a little CPU of our own
    after = tree_cpu_s()
    assert set(after) <= set(ROLES) and after["driver"] > before.get("driver", 0.0)
