"""Run deeply recursive work on a thread with a big stack: the reference interpreter, whose
evaluator recurses as deep as the Relay program it runs (a recursive function 10^4 calls
deep). Traversals, mutators and type inference need none of this: they walk dataflow and
let chains with explicit stacks (relay_ir.visitor.dataflow_below) under Python's own limit.

One helper with one counter for the whole process: the recursion limit is raised while any
deep run is active and restored when the last one ends, so overlapping runs of the
interpreter and of type inference never restore each other's limit too early.

    >>> run_with_big_stack(lambda: 1 + 1)
    2
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

STACK_BYTES = 512 * 1024 * 1024
# How deep the evaluator may recurse, in Python frames (about four per nested Relay call).
MAX_PYTHON_FRAMES = 1_000_000
_lock = threading.Lock()
_active = [0, 0]  # [running deep runs, the recursion limit before the first of them]


def run_with_big_stack(work: Callable[[], Any], name: str = "relay-deep") -> Any:
    """Run `work()` in a worker thread with a big stack and a raised recursion limit;
    its result is returned and its exception re-raised in the caller's thread."""
    result: list[Any] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(work())
        except BaseException as e:  # noqa: BLE001  (re-raised in the caller's thread)
            error.append(e)

    with _lock:
        if _active[0] == 0:
            _active[1] = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_active[1], MAX_PYTHON_FRAMES))
        _active[0] += 1
        old_size = threading.stack_size()
        threading.stack_size(STACK_BYTES)
        try:
            worker = threading.Thread(target=target, name=name)
            worker.start()
        finally:
            threading.stack_size(old_size)
    try:
        worker.join()
    finally:
        with _lock:
            _active[0] -= 1
            if _active[0] == 0:
                sys.setrecursionlimit(_active[1])
    if error:
        raise error[0]
    return result[0]
