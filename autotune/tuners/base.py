"""The Tuner interface: propose configs (`next_batch`), learn from results (`update`).

A tuner restricted by a `BlockRule` (`restrict`; `autotune.tuning.tune` sets it for a task
tuned in a model's layouts) proposes only the configs that keep the model's channel
block: every tuner draws its random points through `_random` and keeps its own moves
inside the rule's sub-space.

    >>> from autotune.task import Task
    >>> from autotune.tuners import RandomTuner
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> len(RandomTuner(t, seed=0).next_batch(4))
    4
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from autotune.block_rule import BlockRule
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
        self.rule: BlockRule | None = None

    def restrict(self, rule: BlockRule | None) -> None:
        """Propose only the configs `rule` allows from now on (None: every config).

            >>> from autotune import FakeRunner, Task
            >>> from autotune.block_rule import block_rule
            >>> from autotune.tuners import RandomTuner
            >>> t = Task("conv2d_NCHWc.x86", [((1, 32, 8, 8), "float32"),
            ...          ((32, 32, 3, 3), "float32")], {}, "llvm -mcpu=haswell")
            >>> tuner = RandomTuner(t)
            >>> tuner.restrict(block_rule(t, FakeRunner(lambda t, c: 1.0, model_layout=True)))
            >>> {c["tile_oc"].size[-1] for c in tuner.next_batch(8)}
            {16}
        """
        self.rule = rule

    def allows(self, index: int) -> bool:
        """Whether the tuner may propose point `index` (see `restrict`)."""
        return self.rule is None or self.rule.allows(index)

    def has_next(self) -> bool:
        """False once every point of the space (that the rule allows) was proposed or
        measured."""
        if self.rule is None:
            return len(self.visited) < self.space.size
        return sum(1 for i in self.visited if self.rule.allows(i)) < self.rule.size

    def mark_visited(self, index: int) -> None:
        """Never propose `index` (it is in the database already)."""
        self.visited.add(int(index))

    def next_batch(self, n: int) -> list[ConfigEntity]:
        """Up to n unvisited configs to measure next (they become visited)."""
        picks = self._propose(n) if self.rule is None or self.rule.size else []
        self.visited.update(picks)
        return [self.space.get(i) for i in picks]

    def _propose(self, n: int) -> list[int]:
        raise NotImplementedError

    def _random(self, n: int, exclude: set[int] | None = None) -> list[int]:
        """Up to n distinct random points the tuner may propose, none in `exclude` (by
        default the visited ones)."""
        exclude = self.visited if exclude is None else exclude
        if self.rule is not None:
            return self.rule.sample(self.rng, n, exclude)
        return self.space.sample(self.rng, n, exclude=exclude)

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

