"""The Tuner interface: propose configs (`next_batch`), learn from results (`update`).

    >>> from autotune.task import Task
    >>> from autotune.tuners import RandomTuner
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> len(RandomTuner(t, seed=0).next_batch(4))
    4
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from autotune.measure import MeasureInput, MeasureResult
from autotune.task import Task
from schedule.space import ConfigEntity


class Tuner:
    """Base class: tracks visited points and the best throughput seen."""

    name = "base"

    def __init__(self, task: Task, seed: int | None = 0) -> None:
        self.task = task
        self.space = task.space
        self.rng = np.random.default_rng(seed)
        self.visited: set[int] = set()
        self.best_flops = 0.0
        self.best_config: ConfigEntity | None = None
        self.trials = 0
        self.best_trial = 0

    def has_next(self) -> bool:
        """False once every point of the space was proposed or measured."""
        return len(self.visited) < self.space.size

    def mark_visited(self, index: int) -> None:
        """Never propose `index` (it is in the database already)."""
        self.visited.add(int(index))

    def next_batch(self, n: int) -> list[ConfigEntity]:
        """Up to n unvisited configs to measure next (they become visited)."""
        picks = self._propose(n)
        self.visited.update(picks)
        return [self.space.get(i) for i in picks]

    def _propose(self, n: int) -> list[int]:
        raise NotImplementedError

    def update(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        """Learn from measured candidates (also called with the database's past records)."""
        for inp, res in zip(inputs, results):
            self.trials += 1
            flops = throughput(self.task, res)
            if flops > self.best_flops:
                self.best_flops = flops
                self.best_config = inp.config
                self.best_trial = self.trials
        self._learn([inp.config.index for inp in inputs],
                    [throughput(self.task, r) for r in results])

    def _learn(self, indices: list[int], flops: list[float]) -> None:
        """Subclasses that model the space override this."""


def throughput(task: Task, res: MeasureResult) -> float:
    """FLOP/s of a result (FLOP per second of 1/mean when the task declares no flop);
    0 for a failed candidate."""
    if not res.ok or not math.isfinite(res.mean) or res.mean <= 0:
        return 0.0
    return (task.flop or 1.0) / res.mean


def unvisited_random(space: Any, rng: np.random.Generator, n: int, visited: set[int]
                     ) -> list[int]:
    """Up to n random points not in `visited`."""
    return space.sample(rng, n, exclude=visited)
