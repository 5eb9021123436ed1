"""A genetic tuner: elitist selection, uniform crossover of knob choices, mutation.

    >>> from autotune.task import Task
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> len(GATuner(t, pop_size=8, seed=0).next_batch(8))
    8
"""

from __future__ import annotations

import numpy as np

from autotune.task import Task
from autotune.tuners.base import Tuner


class GATuner(Tuner):
    """Each generation breeds `pop_size` new points from the fittest measured ones."""

    name = "ga"

    def __init__(self, task: Task, pop_size: int = 16, elite_num: int = 4,
                 mutation_prob: float = 0.15, seed: int | None = 0) -> None:
        super().__init__(task, seed)
        self.pop_size = pop_size
        self.elite_num = elite_num
        self.mutation_prob = mutation_prob
        self.scores: dict[int, float] = {}
        self._queue: list[int] = []

    def _learn(self, indices: list[int], flops: list[float]) -> None:
        for i, f in zip(indices, flops):
            self.scores[i] = f

    def _breed(self, n: int) -> list[int]:
        measured = sorted(self.scores.items(), key=lambda kv: -kv[1])
        if len(measured) < 2 or measured[0][1] <= 0:
            return self._random(n)
        pop = measured[:max(self.pop_size, 2)]
        fit = np.array([max(f, 0.0) for _, f in pop]) + 1e-12
        prob = fit / fit.sum()
        dims = self.space.dims()
        out: set[int] = set()
        tries = 0
        while len(out) < n and tries < 50 * n:
            tries += 1
            a, b = self.rng.choice(len(pop), size=2, p=prob)
            ga = self.space.knob_indices(pop[a][0])
            gb = self.space.knob_indices(pop[b][0])
            child = [x if self.rng.random() < 0.5 else y for x, y in zip(ga, gb)]
            for k, d in enumerate(dims):
                if d > 1 and self.rng.random() < self.mutation_prob:
                    child[k] = int(self.rng.integers(d))
            if self.rule is not None:  # a child keeps the model's channel block
                child = self.rule.fix(np.asarray([child]), self.rng)[0].tolist()
            idx = self.space.index_of(child)
            if idx not in self.visited and idx not in out:
                out.add(idx)
        rest = n - len(out)
        extra = self._random(rest, self.visited | out) if rest else []
        return list(out) + extra

    def _propose(self, n: int) -> list[int]:
        if not self._queue:
            self._queue = self._breed(max(n, self.pop_size))
        out = [i for i in self._queue[:n] if i not in self.visited and self.allows(i)]
        self._queue = self._queue[n:]
        if len(out) < n:
            out += self._random(n - len(out), self.visited | set(out))
        return out
