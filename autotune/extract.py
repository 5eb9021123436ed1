"""Tuning tasks of a relay_ir model: the anchor op (conv2d, dense, matmul, batch_matmul) of
every fused group that relay_ir.build compiles through a tunable template, deduplicated,
with how many times each occurs.

    >>> from autotune.extract import extract_tasks
    >>> from tests.relay_ir.programs import resnet_block
    >>> [(t.template, n) for t, n in extract_tasks(resnet_block())]  # doctest: +SKIP
    [('conv2d_NCHWc.x86', 2)]

The task is the anchor's template on the anchor's argument specs and attrs, as the
build's template path calls it (a constant conv2d weight, which build packs once in the
blocks the tuned config picks, gives the attrs kernel_layout="OIHWio" here too). The
group's elementwise epilogue is not part of the task: it is tuned as the bare anchor.
"""

from __future__ import annotations

from typing import Any

from autotune.task import Task


def extract_tasks(mod: Any, target: str = "llvm", params: dict[str, Any] | None = None
                  ) -> list[tuple[Task, int]]:
    """[(task, occurrences)] of a model, in first-occurrence order."""
    from relay_ir import transform as T
    from relay_ir.backend import lower_group as LG
    from relay_ir.backend.pipeline import _main_of, bind_params, optimize_for_build
    from relay_ir.expr import Call, Constant, Function, Var
    from relay_ir.strategy import strategy_of
    from relay_ir.visitor import post_order
    from schedule.templates import TEMPLATES, constant_weight_attrs

    mod = T.InferType()(bind_params(_main_of(mod), params))
    fused = optimize_for_build(mod)
    found: dict[Task, int] = {}
    for e in post_order(fused["main"].body):
        if not (isinstance(e, Call) and isinstance(e.op, Function)
                and e.op.attr("Primitive")):
            continue
        fn = e.op
        anchors = [c for c in LG.group_ops(fn) if strategy_of(c.op).kind == "anchor"]
        if len(anchors) != 1:
            continue
        anchor = anchors[0]
        strat = strategy_of(anchor.op)
        a0, a1 = anchor.args[:2]
        if not (isinstance(a0, Var) and isinstance(a1, Var) and a0 in fn.params
                and a1 in fn.params) or strat.template is None:
            continue
        specs = [LG._spec(a0.checked_type), LG._spec(a1.checked_type)]
        picked = strat.template(specs, anchor.attrs)
        if picked is None or picked[0] not in TEMPLATES or not TEMPLATES[picked[0]].tunable:
            continue
        name, tattrs = picked[0], dict(picked[1])
        pos = {p: k for k, p in enumerate(fn.params)}
        if isinstance(e.args[pos[a1]], Constant):
            tattrs = constant_weight_attrs(name, tattrs)
        task = Task(name, specs, tattrs, target, name=f"{name.split('.')[0]}")
        found[task] = found.get(task, 0) + 1
    return list(found.items())
