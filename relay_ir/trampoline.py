"""Run deeply recursive code in constant Python stack: recursive functions written as
generators that `yield` their recursive calls, driven by one loop over an explicit stack.

The reference interpreter recurses as deep as the Relay program it runs (`map` builds
`Cons(f(h), map(f, t))` one nested call per element) and ToANormalForm as deep as the
expression nests. Written as generators, a recursive call `v = f(x)` becomes
`v = yield f(x)`; `run` keeps the pending callers on a list, so depth costs heap, not
Python frames, and neither the recursion limit nor the thread's stack is touched.

The protocol: a step function returns either a result directly (the cheap cases: a
variable, a memo hit) or a generator; a generator yields such a return value and is sent
its result. Results are never generators themselves. An exception raised anywhere ends
the whole run and reaches `run`'s caller with the raising frame's traceback; callers on
the stack do not see it (no try/except around a `yield`), which keeps the traceback one
frame long instead of as long as the recursion.

    >>> def depth(n):
    ...     if n == 0:
    ...         return 0
    ...     return (yield depth(n - 1)) + 1
    >>> run(depth(100_000), max_depth=200_000, too_deep=lambda: RuntimeError("deep"))
    100000
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from types import GeneratorType
from typing import Any


def run(step: Any, max_depth: int, too_deep: Callable[[], BaseException]) -> Any:
    """The result of `step` (a result, or a generator as described above), evaluating
    every generator it yields; more than `max_depth` pending callers raises `too_deep()`."""
    if not isinstance(step, GeneratorType):
        return step
    stack: list[Generator[Any, Any, Any]] = [step]
    value: Any = None
    while True:
        try:
            sub = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            if not stack:
                return done.value
            value = done.value
            continue
        if isinstance(sub, GeneratorType):
            stack.append(sub)
            if len(stack) > max_depth:
                stack.clear()
                raise too_deep()
            value = None
        else:
            value = sub


__all__ = ["run"]
