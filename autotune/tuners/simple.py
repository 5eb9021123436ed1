"""Random and grid search.

    >>> from autotune.task import Task
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> [c.index for c in GridTuner(t).next_batch(3)]
    [0, 1, 2]
"""

from __future__ import annotations

from autotune.block_rule import BlockRule
from autotune.tuners.base import Tuner


class RandomTuner(Tuner):
    """Uniform random points of the space, never the same twice."""

    name = "random"

    def _propose(self, n: int) -> list[int]:
        return self._random(n)


class GridTuner(Tuner):
    """Every point in index order (the first knob varies fastest; of a restricted tuner,
    every point its rule allows)."""

    name = "grid"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._next = 0

    def restrict(self, rule: BlockRule | None) -> None:
        if rule != self.rule:
            self._next = 0  # counts the points of the rule's sub-space now
        super().restrict(rule)

    def _propose(self, n: int) -> list[int]:
        out: list[int] = []
        size = self.space.size if self.rule is None else self.rule.size
        while len(out) < n and self._next < size:
            p = self._next if self.rule is None else self.rule.point(self._next)
            if p not in self.visited:
                out.append(p)
            self._next += 1
        return out
