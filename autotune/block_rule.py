"""The channel block a model keeps: which configs of a task tuned for a model may be used.

A model plans the layouts between its convs from the configs it applies
(relay_ir.backend.layout_plan.output_block): a conv writes its output in its config's
channel block, and the next conv reads that block. A task tuned for a model is timed in
the layouts the model's plan has with the default configs (`runner.timed_task`, e.g.
LocalRunner(model_layout=True)), so a config that writes another block would change what
its consumers read, and neither it nor they were timed so (AVX2 ResNet-18: a 64@56 3x3
config at 0.86 of its default in the worker wrote blocks of 8 for the plan's 16; in the
model it ran 0.97-1.0x and the 128@28 convs reading its output 1.04-1.26x). This module
is the one place that says which configs keep the block: the tuners propose only those
(`Tuner.restrict`, set by `autotune.tuning.tune`), and confirmation rejects, untimed, a
record that does not (one from a database tuned before this rule).

The block is read from the config's knobs (the template names its block knob:
`schedule.templates.output_block_of`), so the rule costs a few integer operations per
candidate; only the task's fallback is instantiated, once, to learn the block it keeps.

    >>> from autotune import FakeRunner, Task
    >>> t = Task("conv2d_NCHWc.x86", [((1, 64, 14, 14), "float32"),
    ...          ((64, 64, 3, 3), "float32")], {"padding": [1, 1, 1, 1]}, "llvm -mcpu=haswell")
    >>> rule = block_rule(t, FakeRunner(lambda t, c: 1.0, model_layout=True))
    >>> rule.block, rule.size * len(t.space.knobs["tile_oc"].entities) == t.space.size
    (8, True)
    >>> block_rule(t, FakeRunner(lambda t, c: 1.0)) is None  # timed as the logical task
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from autotune.task import Task


@dataclass(frozen=True)
class BlockRule:
    """The points of a task's space whose `knob` writes channel blocks of `block`: those
    whose choice of the knob (its `position` among the space's `dims`, first fastest) is
    one of `allowed`. Its points form a sub-space of `size` points, numbered in index
    order by `point(j)`."""

    template: str
    knob: str
    block: int
    position: int
    dims: tuple[int, ...]
    allowed: tuple[int, ...]

    @cached_property
    def _mul(self) -> int:
        return math.prod(self.dims[:self.position])

    @cached_property
    def _allowed_set(self) -> frozenset[int]:
        return frozenset(self.allowed)

    @property
    def size(self) -> int:
        """How many points of the space keep the block."""
        return math.prod(self.dims) // self.dims[self.position] * len(self.allowed)

    def allows(self, index: int) -> bool:
        """Whether point `index` of the space keeps the block."""
        return (int(index) // self._mul) % self.dims[self.position] in self._allowed_set

    def why(self, cfg: Any) -> str:
        """Why config `cfg` may not be applied in the model ("" when it keeps the block)."""
        from schedule.templates import output_block_of

        got = output_block_of(self.template, cfg)
        if got == self.block:
            return ""
        return (f"it writes channel blocks of {got} where the model's plan has {self.block}:"
                " its consumers would read a layout nobody timed")

    def point(self, j: int) -> int:
        """The index in the space of the `j`-th point (0-based) that keeps the block."""
        lo, rest = j % self._mul, j // self._mul
        k = len(self.allowed)
        return lo + (self.allowed[rest % k] + rest // k * self.dims[self.position]) * self._mul

    def sample(self, rng: np.random.Generator, n: int, exclude: set[int]) -> list[int]:
        """Up to `n` distinct random points that keep the block, none in `exclude`."""
        taken = sum(1 for i in exclude if self.allows(i))
        n = min(n, self.size - taken)
        if n <= 0:
            return []
        if self.size <= 4 * (n + taken):
            pool = [p for p in map(self.point, range(self.size)) if p not in exclude]
            return [int(i) for i in rng.permutation(pool)[:n]]
        picked: set[int] = set()
        while len(picked) < n:
            p = self.point(int(rng.integers(self.size)))
            if p not in exclude:
                picked.add(p)
        return list(picked)

    def fix(self, knob_indices: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Rows of per-knob choice indices (one point per row) with a choice of the block
        knob that writes another block replaced by a random allowed one, in place."""
        col = knob_indices[:, self.position]
        bad = ~np.isin(col, self.allowed)
        if bad.any():
            col[bad] = rng.choice(np.asarray(self.allowed), size=int(bad.sum()))
        return knob_indices


def block_rule(task: Task, runner: Any) -> BlockRule | None:
    """The rule for `task` tuned on `runner`: None when the runner times the task as
    itself (an --op task: no model's layouts to keep) or the template has no block knob;
    else the configs that keep the channel block of the task's fallback as the runner
    times it (the block the model's plan has around it). See the module doc."""
    from schedule.space import FallbackConfig
    from schedule.templates import get_template
    from schedule.templates.registry import block_of

    timed = runner.timed_task(task) if hasattr(runner, "timed_task") else task
    knob = get_template(task.template).output_block
    if timed is task or knob is None or knob not in task.space.knobs:
        return None
    fb = FallbackConfig(timed.target)
    timed.instantiate(fb)  # the template fills in its fallback choices
    block = block_of(fb[knob])
    names = list(task.space.knobs)
    allowed = tuple(k for k, e in enumerate(task.space.knobs[knob].entities)
                    if block_of(e) == block)
    return BlockRule(task.template, knob, block, names.index(knob),
                     tuple(task.space.dims()), allowed)


__all__ = ["BlockRule", "block_rule"]
