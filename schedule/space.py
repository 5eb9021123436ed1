"""Configuration spaces: the knobs a schedule template declares and the values it applies.

One template function both declares and applies its knobs (autotvm's split, without the
ambient global): the config is its argument. Called with a `ConfigSpace`, each `define_*`
adds a knob and `cfg[name]` gives the knob's first choice, so the template still builds a
valid schedule while the space is being declared; called with a `ConfigEntity`, `define_*`
checks the knob exists and `cfg[name]` gives the chosen value.

    >>> from schedule.space import ConfigSpace
    >>> cfg = ConfigSpace()
    >>> cfg.define_split("tile_i", 64, num_outputs=2)
    >>> cfg.define_knob("unroll", [0, 1])
    >>> cfg.size
    14
    >>> cfg.get(3)["tile_i"].size   # the outer factor, -1, is what the inner ones leave
    [-1, 8]
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tensor_expr.expr import IntImm, IterVar
from tessel_errors import ScheduleError
from tessel_target import Target

# ---------------------------------------------------------------------------------------
# Values of one knob


@dataclass(frozen=True)
class SplitEntity:
    """Factors of a split, outermost first; -1 in front means "whatever is left"."""

    size: list[int]

    def apply(self, sch: Any, tensor: Any, axis: Any) -> list[Any]:
        """Split `axis` of stage `tensor` into len(size) axes, outermost first."""
        axes = []
        rest = axis
        for factor in reversed(self.size[1:]):
            rest, inner = sch[tensor].split(rest, factor=factor)
            axes.append(inner)
        axes.append(rest)
        return list(reversed(axes))

    def to_json(self) -> Any:
        return list(self.size)


@dataclass(frozen=True)
class ReorderEntity:
    """A permutation of the axes given to `apply`."""

    perm: list[int]

    def apply(self, sch: Any, tensor: Any, axes: Sequence[Any]) -> list[Any]:
        """Reorder `axes` of stage `tensor` by the permutation; returns the new order."""
        order = [axes[i] for i in self.perm]
        sch[tensor].reorder(*order)
        return order

    def to_json(self) -> Any:
        return list(self.perm)


@dataclass(frozen=True)
class AnnotateEntity:
    """One annotation per axis: "none", "unroll", "vec" or "parallel"."""

    anns: list[str]

    def apply(self, sch: Any, tensor: Any, axes: Sequence[Any]) -> None:
        """Unroll / vectorize / parallelize the axes as chosen."""
        for ax, ann in zip(axes, self.anns):
            if ann == "unroll":
                sch[tensor].unroll(ax)
            elif ann == "vec":
                sch[tensor].vectorize(ax)
            elif ann == "parallel":
                sch[tensor].parallel(ax)

    def to_json(self) -> Any:
        return list(self.anns)


@dataclass(frozen=True)
class OtherOptionEntity:
    """A plain choice among candidate values."""

    val: Any

    def to_json(self) -> Any:
        return self.val


# ---------------------------------------------------------------------------------------
# Knobs: the set of values one entry may take


def _extent(axis_or_extent: Any) -> int:
    if isinstance(axis_or_extent, int):
        return axis_or_extent
    if isinstance(axis_or_extent, IterVar) and axis_or_extent.dom is not None:
        ext = axis_or_extent.dom.extent
        if isinstance(ext, IntImm):
            return ext.value
    raise ScheduleError(
        f"a split knob needs a constant extent, got {axis_or_extent!r}; "
        "pass the extent as an int for axes with symbolic bounds"
    )


def _factorizations(n: int, parts: int) -> list[list[int]]:
    """Every ordered tuple of `parts` divisors whose product is n."""
    if parts == 1:
        return [[n]]
    out = []
    for d in _divisors(n):
        for rest in _factorizations(n // d, parts - 1):
            out.append(rest + [d])
    return out


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass
class SplitKnob:
    """All ways to split an extent into `num_outputs` factors (policy "factors"), or
    power-of-two inner factors that need not divide it (policy "power2", for big extents)."""

    name: str
    extent: int
    num_outputs: int
    policy: str
    max_factor: int | None
    filter: Callable[[list[int]], bool] | None = None
    extra: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.num_outputs < 2:
            raise ScheduleError(f"split knob '{self.name}': num_outputs must be >= 2")
        if self.policy == "factors":
            cands = _factorizations(self.extent, self.num_outputs)
        elif self.policy == "power2":
            pw = [1 << k for k in range(0, max(1, self.extent).bit_length())]
            cands = [[self.extent] + list(p) for p in
                     itertools.product(pw, repeat=self.num_outputs - 1)
                     if math.prod(p) <= self.extent]
        else:
            raise ScheduleError(
                f"split knob '{self.name}': unknown policy {self.policy!r}; "
                "expected 'factors' or 'power2'"
            )
        if self.max_factor is not None:
            cands = [c for c in cands if all(f <= self.max_factor for f in c[1:])]
        if self.filter is not None:
            # the filter sees the inner factors, as a config stores them ([-1, ...] dropped)
            cands = [c for c in cands if self.filter(list(c[1:]))]
        for inner in self.extra:  # inner factors that need not divide the extent
            if len(inner) != self.num_outputs - 1 or min(inner) < 1:
                raise ScheduleError(f"split knob '{self.name}': extra split {list(inner)} "
                                    f"needs {self.num_outputs - 1} positive inner factors")
            if [-1, *inner] not in [[-1, *c[1:]] for c in cands]:
                cands.append([-1, *inner])
        # the outer factor is implied: -1 keeps records valid if the extent is rounded up
        self.entities = [SplitEntity([-1] + c[1:]) for c in cands]
        if not self.entities:
            raise ScheduleError(f"split knob '{self.name}': no legal factorization")


@dataclass
class ReorderKnob:
    name: str
    num_axes: int
    candidates: list[list[int]]

    def __post_init__(self) -> None:
        self.entities = [ReorderEntity(list(p)) for p in self.candidates]


@dataclass
class AnnotateKnob:
    name: str
    num_axes: int
    choices: list[str]

    def __post_init__(self) -> None:
        self.entities = [AnnotateEntity(list(p))
                         for p in itertools.product(self.choices, repeat=self.num_axes)]


@dataclass
class OtherKnob:
    name: str
    candidates: list[Any]

    def __post_init__(self) -> None:
        if not self.candidates:
            raise ScheduleError(f"knob '{self.name}' needs at least one candidate value")
        self.entities = [OtherOptionEntity(v) for v in self.candidates]


_ANNOTATE_POLICIES = {
    "try_unroll": ["none", "unroll"],
    "try_vec": ["none", "vec"],
    "try_unroll_vec": ["none", "unroll", "vec"],
    "try_parallel": ["none", "parallel"],
}


# ---------------------------------------------------------------------------------------
# The space and a point of it


class _Config:
    """What both a space and a point share: the ordered knob table, `flop` bookkeeping,
    and the target the template sizes its schedule for (`cfg.target.fp32_lanes`, ...)."""

    def __init__(self, target: Any = None) -> None:
        self.knobs: dict[str, Any] = {}
        self.flop = 0.0
        self.target: Target = Target.parse(target if target is not None else "llvm")

    def add_flop(self, flop: float) -> None:
        """Tell the tuner how many floating-point operations one run does (for GFLOP/s)."""
        self.flop += float(flop)


class ConfigSpace(_Config):
    """The space a template declares: knobs in declaration order, mixed-radix indexed."""

    def __init__(self, target: Any = None) -> None:
        super().__init__(target)
        self.template_name = ""

    # -- declaration --------------------------------------------------------------------
    def _add(self, knob: Any) -> None:
        if knob.name in self.knobs:
            raise ScheduleError(f"knob '{knob.name}' is declared twice by the template")
        self.knobs[knob.name] = knob

    def define_split(self, name: str, axis: Any, num_outputs: int = 2,
                     policy: str = "factors", max_factor: int | None = None,
                     filter: Callable[[list[int]], bool] | None = None,
                     extra: Sequence[Sequence[int]] = ()) -> None:
        """Declare a split of `axis` (an IterVar or an int extent) into `num_outputs` parts.

        `filter(inner_factors) -> bool` keeps only the splits a template can use well, e.g.
        `cfg.define_split("tile_k", 256, filter=lambda f: f[-1] <= 32)` (a register tile
        that is unrolled must stay small). `extra` adds inner factors that need not divide
        the extent (a tile the template pads, e.g. `extra=[[16, 64]]` for 1000 columns).
        """
        self._add(SplitKnob(name, _extent(axis), num_outputs, policy, max_factor, filter,
                            tuple(tuple(int(f) for f in e) for e in extra)))

    def define_reorder(self, name: str, axes: Sequence[Any], policy: str = "all",
                       candidates: Sequence[Sequence[int]] | None = None) -> None:
        """Declare orders of `axes`: every permutation ("all") or the given candidates."""
        n = len(axes)
        if policy == "all":
            cands = [list(p) for p in itertools.permutations(range(n))]
        elif policy == "candidate" and candidates:
            cands = [list(c) for c in candidates]
            for c in cands:
                if sorted(c) != list(range(n)):
                    raise ScheduleError(f"reorder knob '{name}': {c} is not a permutation "
                                        f"of {n} axes")
        else:
            raise ScheduleError(f"reorder knob '{name}': policy must be 'all' or "
                                "'candidate' with a list of candidates")
        self._add(ReorderKnob(name, n, cands))

    def define_annotate(self, name: str, axes: Sequence[Any], policy: str) -> None:
        """Declare per-axis annotations: try_unroll, try_vec, try_unroll_vec, try_parallel."""
        if policy not in _ANNOTATE_POLICIES:
            raise ScheduleError(f"annotate knob '{name}': unknown policy {policy!r}; "
                                f"expected one of {', '.join(_ANNOTATE_POLICIES)}")
        self._add(AnnotateKnob(name, len(axes), _ANNOTATE_POLICIES[policy]))

    def define_knob(self, name: str, candidates: Sequence[Any]) -> None:
        """Declare a plain choice: `cfg.define_knob("unroll_k", [0, 4, 8])`."""
        self._add(OtherKnob(name, list(candidates)))

    def __getitem__(self, name: str) -> Any:
        # while declaring, the template applies the first choice of each knob
        return self.knobs[name].entities[0]

    # -- indexing -----------------------------------------------------------------------
    @property
    def size(self) -> int:
        """The number of points in the space."""
        return math.prod(len(k.entities) for k in self.knobs.values())

    def __len__(self) -> int:
        return self.size

    def dims(self) -> list[int]:
        """The number of values of each knob, in declaration order."""
        return [len(k.entities) for k in self.knobs.values()]

    def knob_indices(self, index: int) -> list[int]:
        """The per-knob choice indices of point `index` (first knob varies fastest)."""
        self._check_index(index)
        out = []
        for d in self.dims():
            out.append(index % d)
            index //= d
        return out

    def index_of(self, knob_indices: Sequence[int]) -> int:
        """The point index of per-knob choices (inverse of knob_indices)."""
        index, mul = 0, 1
        for i, d in zip(knob_indices, self.dims()):
            index += i * mul
            mul *= d
        return index

    def _check_index(self, index: int) -> None:
        if not 0 <= index < self.size:
            raise ScheduleError(f"config index {index} is outside the space of {self.size} "
                                f"points (template '{self.template_name}')")

    def get(self, index: int) -> ConfigEntity:
        """The point `index` of the space."""
        ki = self.knob_indices(index)
        values = {name: knob.entities[i] for (name, knob), i in zip(self.knobs.items(), ki)}
        return ConfigEntity(self, index, values)

    def __iter__(self) -> Iterator[ConfigEntity]:
        for i in range(self.size):
            yield self.get(i)

    def sample(self, rng: Any, n: int, exclude: set[int] | None = None) -> list[int]:
        """Up to `n` distinct random point indices, none of them in `exclude`."""
        exclude = exclude or set()
        free = self.size - len(exclude)
        n = min(n, max(free, 0))
        picked: set[int] = set()
        if self.size <= 4 * (n + len(exclude)):
            pool = [i for i in range(self.size) if i not in exclude]
            return [int(i) for i in rng.permutation(pool)[:n]] if pool else []
        while len(picked) < n:
            i = int(rng.integers(self.size))
            if i not in exclude:
                picked.add(i)
        return list(picked)

    def neighbor(self, index: int, rng: Any) -> int:
        """A point that differs from `index` in one knob, by one step of that knob."""
        ki = self.knob_indices(index)
        movable = [k for k, d in enumerate(self.dims()) if d > 1]
        if not movable:
            return index
        k = movable[int(rng.integers(len(movable)))]
        d = self.dims()[k]
        step = 1 if rng.random() < 0.5 else -1
        moved = ki[k] + step
        ki[k] = moved if 0 <= moved < d else ki[k] - step
        return self.index_of(ki)

    def from_json(self, text_or_obj: Any) -> ConfigEntity:
        """The point whose knob values a JSON config (from `ConfigEntity.to_json`) names."""
        try:
            obj = json.loads(text_or_obj) if isinstance(text_or_obj, str) else text_or_obj
        except json.JSONDecodeError as e:
            raise ScheduleError(f"a config must be JSON, got {text_or_obj!r}: {e}") from None
        knobs = obj.get("knobs", {}) if isinstance(obj, dict) else None
        if knobs is None:
            raise ScheduleError(f"a config must be a JSON object with 'knobs', got {obj!r}")
        ki = []
        for name, knob in self.knobs.items():
            if name not in knobs:
                raise ScheduleError(f"config lacks knob '{name}' of template "
                                    f"'{self.template_name}'")
            want = knobs[name]
            for i, ent in enumerate(knob.entities):
                if ent.to_json() == want:
                    ki.append(i)
                    break
            else:
                raise ScheduleError(f"config value {want!r} is not a choice of knob '{name}'")
        extra = set(knobs) - set(self.knobs)
        if extra:
            raise ScheduleError(f"config has unknown knobs {sorted(extra)} for template "
                                f"'{self.template_name}'")
        return self.get(self.index_of(ki))

    def __repr__(self) -> str:
        rows = [f"  {name}: {type(k).__name__} x{len(k.entities)}" for name, k in
                self.knobs.items()]
        return f"ConfigSpace(size={self.size}\n" + "\n".join(rows) + ")"


class ConfigEntity(_Config):
    """One point of a space: `cfg[name]` is the chosen value of each knob."""

    def __init__(self, space: ConfigSpace, index: int, values: dict[str, Any]) -> None:
        super().__init__(space.target)
        self.space = space
        self.index = index
        self.values = values
        self.knobs = space.knobs

    def _known(self, name: str, *_: Any, **__: Any) -> None:
        if name not in self.values:
            raise ScheduleError(f"template declares knob '{name}' that this config "
                                f"(from template '{self.space.template_name}') does not have")

    define_split = define_reorder = define_annotate = define_knob = _known

    def __getitem__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise ScheduleError(f"config has no knob '{name}'; knobs: "
                                f"{', '.join(self.values)}") from None

    def to_json(self) -> str:
        """A small JSON object naming each knob's value (stable key order)."""
        return json.dumps({"index": self.index,
                           "knobs": {k: v.to_json() for k, v in self.values.items()}},
                          sort_keys=True)

    def __repr__(self) -> str:
        return f"ConfigEntity({self.index}: {self.to_json()})"


class FallbackConfig(ConfigSpace):
    """Used when no tuning record exists: declares knobs and applies a chosen default
    (the template may set better defaults with `cfg.fallback(name, value)`)."""

    def __init__(self, target: Any = None) -> None:
        super().__init__(target)
        self._chosen: dict[str, Any] = {}

    def fallback(self, name: str, entity: Any) -> None:
        """Pick `entity` (a SplitEntity, ...) as this knob's default value."""
        self._chosen[name] = entity

    def __getitem__(self, name: str) -> Any:
        if name in self._chosen:
            return self._chosen[name]
        return super().__getitem__(name)
