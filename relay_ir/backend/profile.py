"""Per-kernel profiling of a graph plan: each step timed on its own, medians of repeats.

    >>> t = ProfileTable([ProfileRow("fused_dense_relu", (4, 32), 1e-5)])
    >>> print(t)  # doctest: +NORMALIZE_WHITESPACE
    group              shape      time (us)   share
    fused_dense_relu   (4, 32)       10.0    100.0%
    total                            10.0
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class ProfileRow:
    """One kernel call: its fused group name, output shape and seconds."""

    group: str
    shape: tuple[int, ...]
    seconds: float


class ProfileTable:
    """Rows of a profile; `str()` prints the table with each row's share of the total."""

    def __init__(self, rows: Sequence[ProfileRow]) -> None:
        self.rows = list(rows)

    @property
    def total(self) -> float:
        """Seconds of all kernel calls together."""
        return sum(r.seconds for r in self.rows)

    def share(self, row: ProfileRow) -> float:
        """A row's fraction of the total time."""
        return row.seconds / self.total if self.total > 0 else 0.0

    def __len__(self) -> int:
        return len(self.rows)

    def __str__(self) -> str:
        gw = max([len("group"), len("total")] + [len(r.group) for r in self.rows])
        shapes = [str(tuple(r.shape)) for r in self.rows]
        sw = max([len("shape")] + [len(s) for s in shapes])
        lines = [f"{'group':<{gw}}   {'shape':<{sw}}   {'time (us)':>9}   {'share':>6}"]
        for r, s in zip(self.rows, shapes):
            lines.append(f"{r.group:<{gw}}   {s:<{sw}}   {r.seconds * 1e6:>9.1f}   "
                         f"{self.share(r) * 100:>5.1f}%")
        lines.append(f"{'total':<{gw}}   {'':<{sw}}   {self.total * 1e6:>9.1f}")
        return "\n".join(lines)

    __repr__ = __str__


def bound_steps(plan: Any, arrays: Sequence[Any]) -> list[tuple[Any, list[Any]]]:
    """Run `plan` once on `arrays` and return each step as (kernel, its arrays: inputs
    then outputs) bound to that run's values, so that a step can be called again alone,
    `fn(args)`, in or out of the model's order (profiling, model confirmation).

        >>> calls = bound_steps(lib.plan, [x])  # doctest: +SKIP
        >>> fn, args = calls[3]; fn(args)       # doctest: +SKIP
    """
    env = plan.execute(arrays)
    return [(plan.kernels[s.kernel], [env[v] for v in (*s.inputs, *s.outputs)])
            for s in plan.steps]


def profile_plan(plan: Any, arrays: Sequence[Any], repeat: int = 10) -> ProfileTable:
    """Time every step of `plan` on `arrays`: one warm-up run, then `repeat` runs."""
    calls = bound_steps(plan, arrays)  # the warm-up run binds the values
    times: list[list[float]] = [[] for _ in plan.steps]
    for _ in range(max(1, repeat)):
        for k, (fn, args) in enumerate(calls):
            t0 = time.perf_counter()
            fn(args)
            times[k].append(time.perf_counter() - t0)
    rows = []
    for s, ts in zip(plan.steps, times):
        shape = plan.values[s.outputs[0]].shape if s.outputs else ()
        rows.append(ProfileRow(s.group, shape, statistics.median(ts)))
    return ProfileTable(rows)
