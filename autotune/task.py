"""Tuning tasks: a template applied to argument shapes/dtypes and attrs on a target.

    >>> from autotune.task import Task
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> t.workload_key
    'matmul.x86|[[[64,64],"float32"],[[64,64],"float32"]]|{}'
    >>> t.flop
    524288.0
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from schedule.space import ConfigEntity, ConfigSpace
from tessel_errors import TesselError
from tuning_logs import canonical_json

ArgSpec = tuple[tuple[int, ...], str]


def _norm_args(args: Sequence[Any]) -> tuple[ArgSpec, ...]:
    out = []
    for n, a in enumerate(args):
        try:
            shape, dtype = a
            out.append((tuple(int(d) for d in shape), str(dtype)))
        except (TypeError, ValueError):
            raise TesselError(f"task argument {n} must be (shape, dtype), got {a!r}") from None
    return tuple(out)


@dataclass(eq=False)
class Task:
    """A tunable workload: template name, (shape, dtype) per argument, attrs, target text."""

    template: str
    args: Sequence[Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    target: str = "llvm"
    name: str = ""

    def __post_init__(self) -> None:
        self.args = _norm_args(self.args)
        self.attrs = json.loads(canonical_json(self.attrs, "task attrs"))
        self.target = str(self.target)
        if not self.name:
            self.name = self.template

    # -- identity -------------------------------------------------------------------------
    @cached_property
    def workload_key(self) -> str:
        """A deterministic string: template, args and attrs (the target is kept apart)."""
        from schedule.templates import workload_key

        return workload_key(self.template, self.args, self.attrs)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Task) and other.workload_key == self.workload_key
                and other.target == self.target)

    def __hash__(self) -> int:
        return hash((self.workload_key, self.target))

    def __repr__(self) -> str:
        return f"Task({self.workload_key!r}, target={self.target!r})"

    @cached_property
    def device_key(self) -> str:
        """The device the records of this task are filed under (target + host CPU)."""
        from tessel_target import device_key

        return device_key(self.target)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: `Task.from_dict(t.to_dict()) == t`."""
        return {"template": self.template, "args": [[list(s), d] for s, d in self.args],
                "attrs": self.attrs, "target": self.target, "name": self.name}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Task:
        """The task a `to_dict()` result describes."""
        return Task(d["template"], [(tuple(s), dt) for s, dt in d["args"]], d.get("attrs", {}),
                    d.get("target", "llvm"), d.get("name", ""))

    @staticmethod
    def from_workload_key(key: str, target: str = "llvm") -> Task:
        """The task a workload key names: `Task.from_workload_key(t.workload_key)`."""
        from schedule.templates.registry import VERSION_MARK

        try:
            template, args, attrs = key.split("|", 2)
            template = template.split(VERSION_MARK)[0]  # a key of a versioned template
            return Task(template, [(tuple(s), d) for s, d in json.loads(args)],
                        json.loads(attrs), target)
        except (ValueError, TypeError) as e:
            raise TesselError(f"{key!r} is not a workload key (template|args|attrs): {e}"
                              ) from None

    # -- the space and its points --------------------------------------------------------
    @cached_property
    def space(self) -> ConfigSpace:
        """The config space the template declares for these args (computed once)."""
        from schedule.templates import config_space

        return config_space(self.template, list(self.args), self.attrs, self.target)

    def config_space(self) -> ConfigSpace:
        """The config space: `task.config_space().size`."""
        return self.space

    @property
    def flop(self) -> float:
        """Floating-point operations of one run, as the template declares them."""
        return float(self.space.flop)

    def config(self, index: int) -> ConfigEntity:
        """The point `index` of the space."""
        return self.space.get(index)

    def config_from_json(self, text_or_obj: Any) -> ConfigEntity:
        """The point a stored config (a ConfigEntity.to_json() object) names."""
        return self.space.from_json(text_or_obj)

    def default_config(self) -> ConfigEntity | None:
        """The point of the space the template's fallback (its untuned default) chooses, or
        None where the fallback is no point of the space (e.g. a split factor that does not
        divide the extent, which only the fallback may pick).

            >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
            >>> t.default_config().index in range(t.space.size)
            True
        """
        from schedule.space import FallbackConfig

        fb = FallbackConfig(self.target)
        self.instantiate(fb)  # declares the knobs and sets the template's defaults
        picks = []
        for name, knob in self.space.knobs.items():
            want = fb[name].to_json() if name in fb.knobs else None
            k = next((k for k, e in enumerate(knob.entities) if e.to_json() == want), None)
            if k is None:
                return None
            picks.append(k)
        return self.space.get(self.space.index_of(picks))

    def instantiate(self, cfg: ConfigEntity | None = None) -> tuple[Any, list[Any]]:
        """(schedule, argument tensors) for `cfg` (None: the template's fallback)."""
        from schedule.templates import instantiate

        return instantiate(self.template, list(self.args), self.attrs, cfg,
                           target=self.target)

    def lower(self, cfg: ConfigEntity | None = None) -> Any:
        """The loop-IR PrimFunc of `cfg`."""
        import lowering

        s, tensors = self.instantiate(cfg)
        return lowering.lower(s, tensors, name="main")

    def build(self, cfg: ConfigEntity | None = None) -> Any:
        """A compiled Kernel of `cfg` for the task's target."""
        import lowering

        s, tensors = self.instantiate(cfg)
        return lowering.build(s, tensors, target=self.target, name="main")

    def num_inputs(self) -> int:
        """How many leading kernel arguments are inputs (the rest are outputs)."""
        return len(self.args)
