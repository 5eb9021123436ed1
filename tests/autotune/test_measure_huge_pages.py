"""LocalRunner(huge_pages=True): every array a CPU kernel is timed on lies on 2 MiB pages
(relay_ir.backend.huge_pages), as a model's arenas hold them; without it, where numpy puts it."""

from __future__ import annotations

import mmap
import os

import numpy as np
import pytest

import autotune.measure as measure
from autotune import LocalRunner, MeasureInput, Task
from relay_ir.backend.huge_pages import advised_huge
from tuning_logs import ErrorKind

MATMUL = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/smaps"),
                                reason="reads /proc/self/smaps (Linux)")


def _in_a_mapping(a: np.ndarray) -> bool:
    """Whether `a`'s memory is a mapping's (huge_page_bytes'), not an ndarray's own."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return isinstance(a, memoryview) and isinstance(a.obj, mmap.mmap)


def _timed_argument_pages(monkeypatch: pytest.MonkeyPatch, **opts: object
                          ) -> list[list[tuple[bool, bool]]]:
    """Per call of the candidate's kernel in _do_run, whether each argument lies in memory
    advised for huge pages, and whether in a mapping of huge_page_bytes."""
    calls: list[list[bool]] = []
    real = measure._kernel

    def spied(task, cfg, o):  # type: ignore[no-untyped-def]
        kernel, tensors = real(task, cfg, o)

        def call(*args: np.ndarray) -> None:
            calls.append([(advised_huge(a), _in_a_mapping(a)) for a in args])
            kernel(*args)
        return call, tensors

    monkeypatch.setattr(measure, "_kernel", spied)
    res = measure._do_run(MATMUL, MATMUL.config(0),
                          {"repeat": 2, "check": True, "seed": 1, **opts})
    assert "error" not in res, res
    return calls


def test_with_huge_pages_every_timed_argument_lies_on_huge_pages(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _timed_argument_pages(monkeypatch, huge_pages=True)
    assert len(calls) >= 3  # the first call, the warm-up, the repeats
    assert all(all(advised and mapped for advised, mapped in c) for c in calls), calls


def test_without_huge_pages_the_arguments_lie_where_numpy_puts_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # (numpy's memory may still be advised for huge pages: numpy advises its allocations of
    # 4 MiB or more, and glibc reuses them once freed; that depends on the process' past)
    calls = _timed_argument_pages(monkeypatch)
    assert calls and not any(mapped for c in calls for _, mapped in c), calls


def test_the_default_timed_beside_a_candidate_lies_on_huge_pages_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    placed: list[list[np.ndarray]] = []
    real = measure._timed_arrays

    def spied(task, tensors, logical, opts):  # type: ignore[no-untyped-def]
        out = real(task, tensors, logical, opts)
        placed.append(out)
        return out

    monkeypatch.setattr(measure, "_timed_arrays", spied)
    res = measure._do_run(MATMUL, MATMUL.config(1),
                          {"repeat": 1, "seed": 1, "control": True, "huge_pages": True,
                           "min_repeat_ms": 1})
    assert "control" in res, res
    assert len(placed) == 2  # the candidate's arrays, then the default's
    assert all(advised_huge(a) for arrays in placed for a in arrays)


def test_a_huge_pages_runner_measures_right_results() -> None:
    with LocalRunner(timeout=30, check_trials=2, huge_pages=True, control=True,
                     min_repeat_ms=1) as runner:
        res = runner.run([MeasureInput(MATMUL, MATMUL.config(i)) for i in (0, 3)])
    assert [r.error_kind for r in res] == [ErrorKind.NONE] * 2, [r.error_msg for r in res]
    assert all(r.mean > 0 for r in res)
