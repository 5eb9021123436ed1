"""CompiledModel: what relay_ir.build returns; runs, profiles and saves a compiled graph.

    >>> import numpy as np, relay_ir
    >>> mod = relay_ir.parse("def @main(%x: Tensor[(2, 3), float32]) { nn.relu(%x) }")
    >>> lib = relay_ir.build(mod)
    >>> lib.run(x=np.array([[-1, 2, -3], [4, -5, 6]], "float32"))  # numpy in, numpy out
    array([[0., 2., 0.],
           [4., 0., 6.]], dtype=float32)
    >>> lib.memory_plan                            # one kernel: no intermediates to plan
    MemoryPlan(peak_bytes=0, total_bytes=0, blocks=0, values=0)
    >>> print(lib.profile(x=x))                    # doctest: +SKIP
    >>> lib.save("model.tessel"); lib2 = relay_ir.load_compiled("model.tessel")  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from typing import Any

from relay_ir.backend.executor import GraphPlan, check_inputs
from relay_ir.backend.memory_plan import MemoryPlan
from relay_ir.backend.profile import ProfileTable, profile_plan
from tessel_errors import RelayError


class CompiledModel:
    """A compiled dataflow model: `run(**inputs)`, `profile(**inputs)`, `memory_plan`,
    `save(path)`; `kernels_compiled` counts distinct kernels (identical groups share one);
    `layout_changes` lists where values change between NCHW and blocked NCHWc (see
    relay_ir.backend.layout_plan).
    `tuning` (a relay_ir.backend.tuned.TuningSource) names the records that the kernels
    compiled at a first run with new shapes apply (those of build), and `pass_context`
    the PassContext they are optimised under (that of build)."""

    def __init__(self, mod: Any, target: Any, input_specs: list[tuple[str, tuple, str]],
                 static: Any = None, tuning: Any = None, pass_context: Any = None) -> None:
        self.mod, self.target = mod, target
        self.tuning = tuning
        self.pass_context = pass_context
        self.input_specs = input_specs
        self._plans: dict[tuple, GraphPlan] = {}
        self._compile_lock = threading.Lock()
        self._last: GraphPlan | None = None
        self.kernels_compiled = 0
        self.group_schedules: list[tuple[str, str]] = []
        self.layout_changes: list[tuple[str, str, str]] = []
        self.placement: list[Any] = []  # target "accel": where each group runs, and why
        if static is not None:
            plan, planner = static
            self._add(tuple(s for _, s, _ in input_specs), plan, planner)

    def _add(self, key: tuple, plan: GraphPlan, planner: Any = None) -> None:
        self._plans[key] = plan
        self._last = plan
        if planner is not None:
            self.kernels_compiled += planner.compiled
            self.group_schedules += [(g.name, g.schedule) for g in planner.group_kernels]
            self.layout_changes += planner.layout_changes
            self.placement += getattr(planner, "placement", [])

    @property
    def input_names(self) -> list[str]:
        """The names of the model's inputs, in order."""
        return [n for n, _, _ in self.input_specs]

    def _plan_for(self, arrays: list[Any]) -> GraphPlan:
        key = tuple(a.shape for a in arrays)
        plan = self._plans.get(key)
        if plan is None:
            with self._compile_lock:  # two threads meeting a new shape compile it once
                plan = self._plans.get(key)
                if plan is None:
                    if self.mod is None:
                        raise RelayError("this loaded model holds kernels for its saved "
                                         "shapes only")
                    plan, planner = self._compile(key)
                    self._add(key, plan, planner)
        self._last = plan
        return plan

    def _compile(self, shapes: tuple) -> tuple[GraphPlan, Any]:
        """Compile @main for these input shapes, applying build's tuning records."""
        from relay_ir.backend.pipeline import compile_static, specialize
        from relay_ir.backend.tuned import TuningSource

        source = self.tuning or TuningSource()
        with source.opened() as scope:
            plan_and_planner = compile_static(specialize(self.mod, list(shapes)), self.target,
                                              self.pass_context, scope)
        scope.warn(stacklevel=4)  # the caller of run / profile
        return plan_and_planner

    def run(self, *args: Any, **inputs: Any) -> Any:
        """Run the model: inputs by name (or position); returns an array or a tuple."""
        arrays = check_inputs(self.input_specs, args, inputs)
        plan = self._plan_for(arrays)
        return plan.result(plan.execute(arrays))

    __call__ = run

    def profile(self, *args: Any, repeat: int = 10, **inputs: Any) -> ProfileTable:
        """Per-kernel times (median of `repeat` runs): a table of group, shape, time, share."""
        arrays = check_inputs(self.input_specs, args, inputs)
        return profile_plan(self._plan_for(arrays), arrays, repeat)

    @property
    def memory_plan(self) -> MemoryPlan:
        """The static memory plan (of the last shapes run, for models with `?` dims)."""
        if self._last is None:
            raise RelayError("this model has `?` input dims: run it once to plan its memory")
        return self._last.memory_plan

    @property
    def plan(self) -> GraphPlan:
        """The graph plan (kernels, values, steps) of the last shapes run."""
        if self._last is None:
            raise RelayError("this model has `?` input dims: run it once first")
        return self._last

    def save(self, path: str) -> None:
        """Write kernels (object code), graph (JSON) and constants (npz) to folder `path`."""
        from relay_ir.backend.serialize import save

        save(self, path)

    def __repr__(self) -> str:
        n = len(self._last.steps) if self._last else "?"
        return (f"<CompiledModel inputs={self.input_names} steps={n} "
                f"kernels={self.kernels_compiled} target={self.target}>")
