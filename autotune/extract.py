"""Tuning tasks of a relay_ir model: the template task of every fused group that
relay_ir.build compiles through a tunable template, deduplicated, with how many times each
occurs.

    >>> from autotune.extract import extract_tasks
    >>> from tests.relay_ir.programs import resnet_block
    >>> [(t.template, n) for t, n in extract_tasks(resnet_block())]  # doctest: +SKIP
    [('conv2d_NCHWc.x86', 2)]

The task of a group is the one build compiles it with: both ask
relay_ir.backend.lower_group (a constant conv2d weight, which build packs once in the
blocks the tuned config picks, gives the attrs kernel_layout="OIHWio" in both). A
blocked conv whose data the model's layout plan (default configs) hands it in another
block than its task is timed in by default gets the attr data_block, a task of its own
(lower_group.record_attrs, which build asks too): AVX2 ResNet-18's first 64@56 3x3 reads
the stem's blocks of 16, the other three its own 8. Where the
target has several templates for a group's op (a GPU conv2d: implicit GEMM and direct),
each is a task (`anchor_tasks`), and build takes the one with the fastest record
(`extract_model_tasks` says which tasks are such alternates). The
group's elementwise epilogue is not part of the task: it is tuned as the bare anchor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autotune.task import Task


@dataclass
class ModelTasks:
    """A model's tuning tasks with their occurrences, and which of them are alternates:
    `alternates` lists, per fused group with more than one template, the indices (into
    `tasks`) of its tasks, of which build compiles the fastest. A task is in at most one
    such set (its group's op, shapes and attrs decide the whole set)."""

    tasks: list[tuple[Task, int]]
    alternates: list[list[int]]


def extract_model_tasks(mod: Any, target: str = "llvm", params: dict[str, Any] | None = None
                        ) -> ModelTasks:
    """The tasks of a model and its groups' alternate templates.

        >>> from tests.relay_ir.programs import resnet_block
        >>> found = extract_model_tasks(resnet_block(), "cuda -sim")
        >>> [[found.tasks[k][0].template for k in a] for a in found.alternates]
        [['conv2d_nchw_gemm.cuda', 'conv2d_nchw.cuda']]
    """
    from relay_ir import transform as T
    from relay_ir.backend.layout_plan import layout_planning_enabled, plan_layouts
    from relay_ir.backend.lower_group import (
        anchor_tasks,
        constant_params,
        data_block_of,
        record_attrs,
    )
    from relay_ir.backend.pipeline import bind_params, main_of, optimize_for_build
    from relay_ir.expr import Call, Function
    from relay_ir.visitor import post_order

    mod = T.InferType()(bind_params(main_of(mod), params))
    fused = optimize_for_build(mod)
    # the layouts build plans with no records applied (the block rule keeps them so)
    layouts = plan_layouts(fused["main"], target) if layout_planning_enabled() else {}
    found: dict[Task, int] = {}
    sets: dict[tuple[Task, ...], None] = {}
    for e in post_order(fused["main"].body):
        if not (isinstance(e, Call) and isinstance(e.op, Function)
                and e.op.attr("Primitive")):
            continue
        group = []
        for at in anchor_tasks(e.op, constant_params(e), target):
            if not at.tunable:
                continue
            attrs = record_attrs(at.template, at.specs, at.attrs, target,
                                 data_block_of(at, layouts.get(id(e))))
            task = Task(at.template, list(at.specs), at.attrs if attrs is None else attrs,
                        target, name=at.template.split(".")[0])
            found[task] = found.get(task, 0) + 1
            group.append(task)
        if len(group) > 1:
            sets[tuple(group)] = None
    index = {t: k for k, t in enumerate(found)}
    return ModelTasks(list(found.items()), [[index[t] for t in g] for g in sets])


def extract_tasks(mod: Any, target: str = "llvm", params: dict[str, Any] | None = None
                  ) -> list[tuple[Task, int]]:
    """[(task, occurrences)] of a model, in first-occurrence order."""
    return extract_model_tasks(mod, target, params).tasks
