"""Layout propagation: which values between fused groups are stored blocked, NCHW[x]c.

An NCHWc conv computes in channel blocks; stored in NCHW, its input is packed into blocks
(a copy) before each conv and its output scattered back after. Here the graph keeps the
blocks: a conv group writes its output blocked by its output block (the tuned or fallback
config's tile_oc), groups that keep the layout (elementwise, broadcast, bias add, pooling:
relay_ir.backend.blocked) pass it on, and the next conv reads it directly (re-blocked by
its pad stage only when its own input block differs). The logical layout comes back only
where it must: the model's outputs, and inside groups whose ops need it (read through an
inlined view, not a copy of its own). Model inputs and constants stay as they are.

    >>> layouts = plan_layouts(fused_main, "llvm")          # doctest: +SKIP
    >>> layouts[id(conv_call)].out_blocks                     # doctest: +SKIP
    (16,)

The decision is the builder's, not the IR's: the Relay program (and so the interpreter's
answer) does not change, only the shapes the kernels store values in. It is on by default
(opt_level 2 and up) and off with `PassContext(disabled_pass=["AlterOpLayout"])`, TVM's
name for the same job.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from relay_ir.backend.blocked import KEEPS_LAYOUT, blockable
from relay_ir.backend.lower_group import (
    AnchorTask,
    GroupLayout,
    anchor_task,
    applied_config,
    constant_params,
    data_block_of,
    flatten_types,
    group_ops,
    physical_spec,
    takes_blocked_layout,
)
from relay_ir.backend.tuned import TuningScope
from relay_ir.expr import Call, Expr, Function, Tuple, TupleGetItem
from relay_ir.op.registry import Op
from relay_ir.strategy import strategy_of
from relay_ir.transform.pass_manager import PassContext, normalise_pass_name
from relay_ir.ty import TensorType
from relay_ir.visitor import post_order
from schedule.space import FallbackConfig
from schedule.templates import DATA_BLOCK, get_template
from schedule.templates.common import shape_of
from tessel_target import Target

PASS_NAME = "AlterOpLayout"  # registered in KNOWN_PASSES by the pass manager


def layout_planning_enabled() -> bool:
    """Whether the current PassContext lets build block values (see the module doc)."""
    ctx = PassContext.current()
    off = {normalise_pass_name(n) for n in ctx.disabled_pass}
    return ctx.opt_level >= 2 and normalise_pass_name(PASS_NAME) not in off


def _groups(body: Expr) -> Iterator[Call]:
    for e in post_order(body, skip=lambda n: isinstance(n, Function)):
        if isinstance(e, Call) and isinstance(e.op, Function) and e.op.attr("Primitive"):
            yield e


def _shape(e: Expr) -> tuple[int, ...] | None:
    t = e.checked_type
    if not isinstance(t, TensorType) or not all(isinstance(d, int) for d in t.shape):
        return None
    return tuple(int(d) for d in t.shape)


def output_block(task: AnchorTask, target: Any, tuning: TuningScope | None,
                 data_block: int = 0) -> int:
    """The channel block a conv group's template writes blocked output in: conv2d's config
    tile_oc (for the logical task, the one tuned), depthwise's the data's block."""
    tpl = get_template(task.template)
    specs = list(task.specs)
    cfg = applied_config(task, target, tuning, data_block) or FallbackConfig(target)
    attrs = {**task.attrs, "out_layout": "NCHWc"}
    if data_block:
        specs[0] = physical_spec(specs[0], data_block)
        attrs["data_layout"] = "NCHWxc"
    _, outs = tpl.compute(cfg, specs, attrs)
    return int(shape_of(outs[0])[4])


# the templates a model runs with blocked values between them (a depthwise conv and the
# stem too: timed as the logical task, their NCHW packing and unpacking, a transpose each,
# cost more than the conv and ranked configs by it)
_IN_MODEL = ("conv2d_NCHWc.x86", "conv2d_NCHWc_winograd.x86", "conv2d_stem.x86",
             "depthwise_conv2d_NCHWc.x86", "group_conv2d_NCHWc.x86")


def as_in_model(template: str, specs: Sequence[Any], attrs: dict[str, Any], target: Any
                ) -> tuple[list[Any], dict[str, Any]] | None:
    """The (specs, attrs) an NCHWc conv task runs with inside a model whose values between
    convs stay blocked: output NCHWc, data NCHW[x]c in the block the task's attr
    `data_block` names (schedule.templates.DATA_BLOCK, 0 for NCHW: a task keyed apart by
    extraction, lower_group.record_attrs, for the calls whose data arrives in a block
    other than this guess), else in the block a conv with that many output channels
    writes by default (data left NCHW where the channels are fewer than a vector: a
    model's image); None for other templates and tasks with layouts given. The same for
    the stem and depthwise templates (_IN_MODEL). The attr itself is not passed on.
    Measuring a config this way times what the model runs: the logical task adds a data
    packing and an output unpacking the model does not have, which ranked configs
    otherwise (ResNet-18: one conv 0.92x its default blocked, 1.10x logical).

        >>> as_in_model("conv2d_NCHWc.x86", [((1, 64, 8, 8), "float32"),
        ...             ((64, 64, 3, 3), "float32")], {}, "llvm -mcpu=skylake-avx512")[1]
        {'out_layout': 'NCHWc', 'data_layout': 'NCHWxc'}
        >>> as_in_model("conv2d_NCHWc.x86", [((1, 64, 8, 8), "float32"),
        ...             ((64, 64, 3, 3), "float32")], {"data_block": 32},
        ...             "llvm -mcpu=skylake-avx512")[0][0]
        ((1, 2, 8, 8, 32), 'float32')
    """
    from schedule.templates.x86_conv2d_nchwc import pick_blocks

    attrs = dict(attrs)
    block = attrs.pop(DATA_BLOCK, None)
    if template not in _IN_MODEL or "data_layout" in attrs or "out_layout" in attrs or \
            not takes_blocked_layout(template):
        return None
    shape = tuple(specs[0][0])
    if len(shape) != 4:
        return None
    specs, attrs = list(specs), {**attrs, "out_layout": "NCHWc"}
    if block is None:
        t = Target.parse(target)
        _, guess, _ = pick_blocks(shape[1], shape[1], shape[3], None, t)
        block = guess if shape[1] >= t.fp32_lanes and blockable(shape, guess) else 0
    if block:
        specs[0] = physical_spec(specs[0], int(block))
        attrs["data_layout"] = "NCHWxc"
    return specs, attrs


def _keeps_layout(fn: Function) -> bool:
    return all(c.op.name in KEEPS_LAYOUT for c in group_ops(fn))


def plan_layouts(main: Function, target: Any, tuning: TuningScope | None = None
                 ) -> dict[int, GroupLayout]:
    """The stored layout of every group call's inputs and outputs in a fused @main, keyed
    by id of the call; calls absent keep every value logical. Only x86 CPUs block."""
    t = Target.parse(target)
    if "cpu" not in t.keys or "gpu" in t.keys:
        return {}
    calls = list(_groups(main.body))
    outputs = {id(e) for e in _model_outputs(main.body)}
    uses: dict[int, list[tuple[Call, int]]] = {}
    escapes: set[int] = set()  # values used other than as a whole argument of a group
    for e in post_order(main.body, skip=lambda n: isinstance(n, Function)):
        if isinstance(e, Call) and isinstance(e.op, Function):
            for k, a in enumerate(e.args):
                uses.setdefault(id(a), []).append((e, k))
        elif isinstance(e, (Tuple, TupleGetItem)) or (isinstance(e, Call)
                                                        and isinstance(e.op, Op)):
            for a in (e.fields if isinstance(e, Tuple) else [e.tuple_value]
                      if isinstance(e, TupleGetItem) else e.args):
                escapes.add(id(a))
    tasks = {id(c): anchor_task(c.op, constant_params(c), target) for c in calls}

    def accepted(call: Call, k: int) -> bool:
        """Whether argument k of a group may arrive blocked."""
        if not isinstance(call.op.params[k].checked_type, TensorType):
            return False
        task = tasks[id(call)]
        if task is None:
            # a generic group reads it through views, but an anchor's operand read so
            # would be a strided gather in its inner loop
            param = call.op.params[k]
            return not any(param in c.args for c in group_ops(call.op)
                           if strategy_of(c.op).kind == "anchor")
        if k == task.operands[1]:
            return False  # a weight
        return k != task.operands[0] or takes_blocked_layout(task.template)

    block_of: dict[int, int] = {}
    for call in calls:
        shape = _shape(call)
        if shape is None or id(call) in outputs or id(call) in escapes:
            continue
        task = tasks[id(call)]
        block = 0
        if task is not None and takes_blocked_layout(task.template):
            ins = GroupLayout(tuple(block_of.get(id(a), 0) for a in call.args), ())
            # the template the call runs (a family's fastest record: lower_group asks the same)
            task = anchor_task(call.op, constant_params(call), target, tuning, ins)
            block = output_block(task, target, tuning, data_block_of(task, ins))
        elif task is None and _keeps_layout(call.op):
            # pooling changes H and W: what must agree is the batch and the channels
            ins = {block_of[id(a)] for a in call.args if id(a) in block_of
                   and (_shape(a) or ())[:2] == shape[:2]}
            block = ins.pop() if len(ins) == 1 else 0
        if not block or not blockable(shape, block):
            continue
        if all(accepted(c, k) for c, k in uses.get(id(call), [])):
            block_of[id(call)] = block

    layouts: dict[int, GroupLayout] = {}
    for call in calls:
        ins = tuple(block_of.get(id(a), 0) for a in call.args)
        if len(ins) != sum(len(flatten_types(p.checked_type)) for p in call.op.params):
            ins = (0,) * sum(len(flatten_types(p.checked_type)) for p in call.op.params)
        out = (block_of.get(id(call), 0),) if isinstance(call.checked_type, TensorType) \
            else (0,) * len(flatten_types(call.checked_type))
        layout = GroupLayout(ins, out)
        if layout.blocked:
            layouts[id(call)] = layout
    return layouts


def layout_changes(main: Function, layouts: dict[int, GroupLayout], target: Any
                   ) -> list[tuple[str, str, str]]:
    """Where values change layout in the planned graph, as (group, which operand or
    "output", "NCHW -> NCHWc" or "NCHWc -> NCHW"): a conv template packing logical data,
    a group reading a blocked value through a logical view, a blocked result stored
    logical. `layout_changes(fused_main, plan_layouts(fused_main, "llvm"), "llvm")`
    """
    from relay_ir.backend.lower_group import group_name

    changes = []
    for call in _groups(main.body):
        lay = layouts.get(id(call))
        n_in = sum(len(flatten_types(p.checked_type)) for p in call.op.params)
        in_blocks = lay.in_blocks if lay else (0,) * n_in
        task = anchor_task(call.op, constant_params(call), target)
        blocked_conv = task is not None and takes_blocked_layout(task.template)
        keeps = blocked_conv or _keeps_layout(call.op)
        name = group_name(call.op)
        for k, a in enumerate(call.args):
            b = in_blocks[k] if k < len(in_blocks) else 0
            shape = _shape(a)
            if blocked_conv and k == task.operands[0] and not b and shape and len(shape) == 4:
                changes.append((name, f"input {k}", "NCHW -> NCHWc"))
            elif b and not keeps:
                changes.append((name, f"input {k}", "NCHWc -> NCHW"))
        out_blocked = bool(lay and any(lay.out_blocks))
        if keeps and any(in_blocks) and not out_blocked and (_shape(call) or ()).__len__() == 4:
            changes.append((name, "output", "NCHWc -> NCHW"))
    return changes


def _model_outputs(body: Expr) -> Iterator[Expr]:
    if isinstance(body, Tuple):
        for f in body.fields:
            yield from _model_outputs(f)
    else:
        yield body


__all__ = ["PASS_NAME", "as_in_model", "layout_changes", "layout_planning_enabled", "output_block",
           "plan_layouts"]
