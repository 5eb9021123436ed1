"""Random and grid search.

    >>> from autotune.task import Task
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> [c.index for c in GridTuner(t).next_batch(3)]
    [0, 1, 2]
"""

from __future__ import annotations

from autotune.tuners.base import Tuner, unvisited_random


class RandomTuner(Tuner):
    """Uniform random points of the space, never the same twice."""

    name = "random"

    def _propose(self, n: int) -> list[int]:
        return unvisited_random(self.space, self.rng, n, self.visited)


class GridTuner(Tuner):
    """Every point in index order (the first knob varies fastest)."""

    name = "grid"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._next = 0

    def _propose(self, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n and self._next < self.space.size:
            if self._next not in self.visited:
                out.append(self._next)
            self._next += 1
        return out
