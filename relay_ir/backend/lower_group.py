"""Lower one fused group (a Function with ("Primitive", 1) from FuseOps) into ONE kernel.

Every group parameter becomes a placeholder (static shapes after InferType; a tuple
parameter becomes one placeholder per field), the body is walked in post order mapping
each call to its op strategy's TE compute. A group with an anchor (conv2d, dense, matmul,
batch_matmul) is built through the anchor's template for the target
(schedule.templates.template_for: dense.x86 on the CPU, dense.cuda on a GPU; GPU groups
without one take the generic GPU schedule): the template's compute gives
the anchor, the rest of the group is its epilogue (bias, batch-norm scale/shift, relu,
residual add, clip) computed in the anchor's output stage, and the template's fallback
config schedules it. Reductions, pooling and softmax get the reduction schedules, the
rest the injective schedule (inlined, vectorized, parallel; on a GPU the tunable
injective.cuda template, a task of the whole group). If a schedule cannot be
applied, the group falls back to the next, plainer one (the last: injective stages
inlined, nothing else), so every group compiles, and a warning names the group and why.

`anchor_task` is the one function from a fused group to its template task: build compiles
the group with it and autotune.extract_tasks tunes it.

    >>> from relay_ir.backend.lower_group import lower_group   # doctest: +SKIP
    >>> gk = lower_group(fused_fn, "llvm")                    # doctest: +SKIP
    >>> gk.name, gk.in_specs, gk.out_specs                    # doctest: +SKIP
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import lowering
from relay_ir.backend.blocked import Blocked, evaluate_call, to_blocked, to_logical
from relay_ir.backend.tuned import TuningScope, find_tuned
from relay_ir.expr import Call, Constant, Function, Tuple, TupleGetItem, Var
from relay_ir.op.registry import Op
from relay_ir.strategy import out_shape, strategy_of
from relay_ir.ty import TensorType, TupleType, Type
from relay_ir.visitor import post_order
from schedule.schedule import Schedule, create_schedule
from schedule.space import FallbackConfig
from schedule.templates import (
    DATA_BLOCK,
    constant_weight_attrs,
    get_template,
    input_packers,
    instantiate,
    partition_of,
    template_applies,
    templates_for,
    workload_key,
)
from schedule.templates.common import inline_injective, shape_of
from schedule.templates.cuda_generic import schedule_gpu_generic
from schedule.templates.x86_conv2d import schedule_conv2d_nchw, schedule_depthwise_nchw
from schedule.templates.x86_dense import schedule_gemm
from schedule.templates.x86_injective import (
    schedule_injective,
    schedule_reduce,
    schedule_softmax,
)
from tensor_expr.expr import const
from tensor_expr.tensor import Tensor, compute, placeholder
from tessel_errors import RelayError, ScheduleError, TesselError
from tessel_target import Target

Spec = tuple[tuple[int, ...], str]
_KIND_RANK = {"injective": 0, "reduce": 1, "softmax": 2, "anchor": 3}


@dataclass
class GroupKernel:
    """A compiled group: kernel args are the flattened inputs then the outputs."""

    name: str
    kernel: Any
    in_specs: list[Spec]
    out_specs: list[Spec]
    schedule: str  # which schedule it got: a template name, a group kind, or "plain"
    # flattened input position -> numpy transform applied once to that (constant) input
    # at build time, e.g. a conv2d weight packed into the template's blocked layout
    prepack: dict[int, Callable[[np.ndarray], np.ndarray]] = field(default_factory=dict)
    # the tuning task whose template scheduled it (schedule.templates.workload_key), ""
    # for a generic or plain schedule: its records are the ones the kernel applied
    workload_key: str = ""


def flatten_types(t: Type) -> list[TensorType]:
    """The tensor types of a (possibly nested) tuple type, in order."""
    if isinstance(t, TupleType):
        return [x for f in t.fields for x in flatten_types(f)]
    if not isinstance(t, TensorType):
        raise RelayError(f"relay_ir.build compiles tensors and tuples of tensors, got {t}")
    return [t]


@dataclass(frozen=True)
class GroupLayout:
    """How a group's flattened inputs and outputs are stored: 0 in the logical layout, x
    blocked NCHW[x]c (relay_ir.backend.blocked; chosen by relay_ir.backend.layout_plan)."""

    in_blocks: tuple[int, ...]
    out_blocks: tuple[int, ...]

    @property
    def blocked(self) -> bool:
        return any(self.in_blocks) or any(self.out_blocks)


def physical_spec(spec: Spec, block: int) -> Spec:
    """The stored shape of a value: `physical_spec(((1, 64, 8, 8), "float32"), 16)` is
    ((1, 4, 8, 8, 16), "float32")."""
    if not block:
        return spec
    n, c, h, w = spec[0]
    return (n, c // block, h, w, block), spec[1]


def _spec(t: TensorType) -> Spec:
    return out_shape(t), t.dtype


def group_ops(fn: Function) -> list[Call]:
    """The op calls of a group body, in post order."""
    return [e for e in post_order(fn.body) if isinstance(e, Call) and isinstance(e.op, Op)]


def group_name(fn: Function) -> str:
    """A readable name: `fused_conv2d_multiply_add_relu`."""
    names = [c.op.name.split(".")[-1] for c in group_ops(fn)]
    short = names[:5] + (["etc"] if len(names) > 5 else [])
    return re.sub(r"[^A-Za-z0-9_]", "_", "fused_" + "_".join(short or ["copy"]))


def _evaluate(fn: Function, env: dict[Var, Any], override: dict[int, Tensor]) -> Any:
    memo: dict[int, Any] = {}
    for e in post_order(fn.body):
        if id(e) in override:
            memo[id(e)] = override[id(e)]
        elif isinstance(e, Var):
            memo[id(e)] = env[e]
        elif isinstance(e, Constant):
            memo[id(e)] = _scalar_const(e)
        elif isinstance(e, Tuple):
            memo[id(e)] = [memo[id(f)] for f in e.fields]
        elif isinstance(e, TupleGetItem):
            memo[id(e)] = memo[id(e.tuple_value)][e.index]
        elif isinstance(e, Call) and isinstance(e.op, Op):
            args = [memo[id(a)] for a in e.args]
            if any(isinstance(a, Blocked) for a in _flat(args)):
                memo[id(e)] = evaluate_call(e, args)
            else:
                memo[id(e)] = strategy_of(e.op).compute(args, e.attrs, e.checked_type)
        elif isinstance(e, Op):
            continue
        else:
            raise RelayError(f"relay_ir.build: a fused group holds a {type(e).__name__}, "
                             "which kernels do not compute; use relay_ir.interpret")
    return memo[id(fn.body)]


def _scalar_const(c: Constant) -> Tensor:
    data = np.asarray(c.data)
    if data.ndim != 0:
        raise RelayError(f"relay_ir.build: a non-scalar constant of shape {data.shape} inside "
                         "a fused group (FuseOps should make it a parameter)")
    return compute((), lambda: const(data.item(), str(data.dtype)), name="const")


def _flat(v: Any) -> list[Any]:
    return [x for f in v for x in _flat(f)] if isinstance(v, list) else [v]


def _placeholders(fn: Function, in_blocks: Sequence[int] = ()
                  ) -> tuple[dict[Var, Any], list[Tensor]]:
    """A placeholder per flattened parameter (stored blocked where `in_blocks` says) and
    the environment of the group's parameters (Blocked values for the blocked ones)."""
    env: dict[Var, Any] = {}
    flat: list[Tensor] = []
    for k, p in enumerate(fn.params):
        tys = flatten_types(p.checked_type or p.type_annotation)
        vals = []
        for j, t in enumerate(tys):
            block = in_blocks[len(flat)] if in_blocks else 0
            shape, _ = physical_spec((out_shape(t), t.dtype), block)
            ph = placeholder(shape, t.dtype, name=f"p{k}_{j}" if len(tys) > 1 else f"p{k}")
            flat.append(ph)
            vals.append(Blocked(ph, block) if block else ph)
        env[p] = vals[0] if isinstance(p.checked_type or p.type_annotation, TensorType) else \
            _nest(p.checked_type or p.type_annotation, iter(vals))
    return env, flat


def _stored(outs: list[Any], out_blocks: Sequence[int]) -> list[Tensor]:
    """The group's results in the layouts they are stored in."""
    if not out_blocks:
        return [to_logical(o) for o in outs]
    return [to_blocked(o, b) if b else to_logical(o) for o, b in zip(outs, out_blocks)]


def _nest(t: Type, it: Any) -> Any:
    return [_nest(f, it) for f in t.fields] if isinstance(t, TupleType) else next(it)


@dataclass(frozen=True)
class AnchorTask:
    """The template task of a fused group: its anchor call, the template the anchor's
    strategy picks, the anchor's argument specs and the template attrs, and the positions
    of the anchor's operands (two; one for a reduction, pool or softmax template) among
    the group's parameters. An injective group's task (a GPU's injective.cuda) has no
    operands: its specs are the group's flattened inputs, attrs["outputs"] its outputs,
    and its template schedules the whole group.

    relay_ir.build compiles the group through this template and autotune.extract_tasks
    tunes this task: both get it from `anchor_task`, so what is tuned is what is built.
    """

    anchor: Call
    template: str
    specs: tuple[Spec, ...]
    attrs: dict[str, Any]
    operands: tuple[int, ...]

    @property
    def tunable(self) -> bool:
        """Whether the template has a space to tune (some templates only schedule)."""
        return get_template(self.template).tunable


def constant_params(call: Call) -> frozenset[int]:
    """Positions of a group call's arguments that are constants (a weight among them is
    packed once at build time); none when a parameter is a tuple, since positions then
    differ from flattened kernel positions."""
    fn = call.op
    if not all(isinstance(p.checked_type, TensorType) for p in fn.params):
        return frozenset()
    return frozenset(i for i, a in enumerate(call.args) if isinstance(a, Constant))


def anchor_task(fn: Function, const_params: frozenset[int] = frozenset(),
                target: Any = "llvm", tuning: TuningScope | None = None,
                layout: GroupLayout | None = None) -> AnchorTask | None:
    """The template task of a fused group, or None (no single anchor, operands that are not
    group parameters, no template for these shapes).

    `const_params` (see `constant_params`): a constant weight makes the template take it
    in its packed layout (schedule.templates.constant_weight_attrs). Where the target has
    several templates for the anchor's family (`anchor_tasks`: a GPU's implicit GEMM and
    direct conv, a CPU's direct and Winograd conv), the one whose record in `tuning` is
    fastest (`record_cost`: the record the call applies, its inputs stored as `layout`
    says, None: NCHW), else the default. The layout plan and the lowering both ask here
    with the call's input blocks, so that the plan's blocks are those of the template the
    call runs.
    """
    tasks = anchor_tasks(fn, const_params, target)
    if len(tasks) > 1 and tuning is not None:
        data_block = data_block_of(tasks[0], layout)  # a family's templates share operands
        costs = [record_cost(t, target, tuning, data_block) for t in tasks]
        timed = [(c, k) for k, c in enumerate(costs) if c is not None]
        if timed:
            return tasks[min(timed)[1]]
    return tasks[0] if tasks else None


def record_cost(task: AnchorTask, target: Any, tuning: TuningScope,
                data_block: int = 0) -> float | None:
    """Seconds of the record a call of `task` (its data in `data_block`) would apply, or
    None where none applies (no record, or one the split rule refuses on this process's
    threads: `applied_config`'s rule, without its notes on the scope): what `anchor_task`
    compares a family's templates by.

        >>> t = AnchorTask(None, "dense.x86", (((4, 16), "float32"),) * 2, {}, (0, 1))
        >>> record_cost(t, "llvm", TuningScope(None)) is None
        True
    """
    if tuning.db is None:
        return None
    attrs = record_attrs(task.template, task.specs, task.attrs, target, data_block)
    if attrs is None:
        return None
    accept = None
    if lowering.kernel.num_threads() > 1:
        accept = splitting_as(task.template, default_partition(task, target, data_block))
    got = find_tuned(tuning.db, task.template, list(task.specs), attrs, target,
                     tuning.any_device, accept)
    return None if got is None else float(got.record.mean)


def anchor_tasks(fn: Function, const_params: frozenset[int] = frozenset(),
                 target: Any = "llvm") -> list[AnchorTask]:
    """The group's template task for each template the target has for the anchor's family
    (schedule.templates.templates_for), the default first; [] when the group has none.
    autotune.extract_tasks tunes them all; `anchor_task` chooses among them."""
    ops = group_ops(fn)
    anchors = [c for c in ops if strategy_of(c.op).kind == "anchor"]
    secondary = False
    if not anchors:  # a reduction, pool or softmax with a tunable template for the target
        anchors = [c for c in ops if strategy_of(c.op).template is not None]
        secondary = True
    if not anchors and ops and all(strategy_of(c.op).kind == "injective" for c in ops):
        return _injective_tasks(fn, ops, target)
    if len(anchors) != 1:
        return []
    anchor = anchors[0]
    strat = strategy_of(anchor.op)
    arity = 1 if secondary else 2
    if strat.template is None or len(anchor.args) != arity:
        return []
    if not all(isinstance(a, Var) and a in fn.params for a in anchor.args) or \
            len(set(map(id, anchor.args))) != arity:
        return []
    specs = tuple(_spec(a.checked_type) for a in anchor.args)
    if _has_zero_size(specs + tuple(_spec(t) for t in flatten_types(fn.body.checked_type))):
        return []  # no work for a template to tile (and nothing worth tuning)
    picked = strat.template(list(specs), anchor.attrs, target)
    names = templates_for(picked[0], target) if picked is not None else ()
    pos = {p: k for k, p in enumerate(fn.params)}
    operands = tuple(pos[a] for a in anchor.args)
    tasks = []
    for name in names:
        if secondary and not get_template(name).tunable:
            continue
        if not template_applies(name, specs, picked[1]):
            continue  # an alternate for some calls only (a Winograd conv: 3x3, stride 1)
        tattrs = dict(picked[1])
        if arity == 2 and operands[1] in const_params:
            tattrs = constant_weight_attrs(name, tattrs)
        tasks.append(AnchorTask(anchor, name, specs, tattrs, operands))
    return tasks


# the family of an injective group's template; its task is the whole group (no operands)
INJECTIVE = "injective"


def _injective_tasks(fn: Function, ops: list[Call], target: Any) -> list[AnchorTask]:
    """An injective group's task where the target has a tunable template for the family
    (the GPU's injective.cuda; the CPU's injective.x86 is a fixed schedule: no task). The
    task is the group's input and output specs (the template measures a stand-in of that
    traffic), its `operands` empty: the template schedules the whole group."""
    ins = tuple(_spec(t) for p in fn.params
                for t in flatten_types(p.checked_type or p.type_annotation))
    outs = tuple(_spec(t) for t in flatten_types(fn.body.checked_type))
    if _has_zero_size(ins + outs):
        return []
    attrs = {"outputs": [[list(shape), dtype] for shape, dtype in outs]}
    return [AnchorTask(ops[-1], name, ins, attrs, ())
            for name in templates_for(INJECTIVE, target) if get_template(name).tunable]


def _has_zero_size(specs: Sequence[tuple[tuple[int, ...], str]]) -> bool:
    return any(d == 0 for shape, _ in specs for d in shape)


# the templates that take their data operand blocked (data_layout "NCHWxc") and write
# their output blocked (out_layout "NCHWc")
BLOCKED_TEMPLATES = frozenset({"conv2d_NCHWc.x86", "conv2d_NCHWc_winograd.x86",
                               "depthwise_conv2d_NCHWc.x86", "conv2d_int8.x86",
                               "conv2d_stem.x86", "group_conv2d_NCHWc.x86"})
# a grouped conv reads and writes blocked values too (it is one of BLOCKED_TEMPLATES),
# instead of NCHW: before, the 1x1 conv before it unpacked its output, the grouped conv
# packed it again in its padding stage and unpacked its own, which the 1x1 conv after it
# packed again. ResNeXt-26, one Emerald Rapids core, CPU time, each conv in the model's
# order, two builds a side interleaved in one process (benchmarks.template_switch
# --switch relay_ir.backend.lower_group.GROUP_CONV_BLOCKED --models resnext26 --rounds 9),
# off -> on: AVX2 code (--target "llvm -mcpu=haswell", load 1.0) 256@28 3x3 487 -> 381 us,
# 256@56 -> 28 stride 2 936 -> 833, 512@28 -> 14 stride 2 578 -> 478, 512@14 395 -> 343,
# the 1x1 convs around them 0.90-0.98 (256@56 -> 256 4489 -> 4025), the convs in order
# 53.07 -> 51.83 ms, the model (median) 59.74 -> 58.28; again (load 1.9-2.0, two builds
# of a side within 1.000-1.048 a conv) 53.48 -> 51.58 and 55.77 -> 53.97, 256@28 3x3 491
# -> 375, 512@14 389 -> 329; AVX-512 (load 1.1-2.0) 512@14
# 223 -> 185, the 1x1 1024@7 -> 2048 after a 7x7 grouped conv (two) 2977 -> 2200, the
# convs 29.70 -> 28.60, the model 32.61 -> 31.88
GROUP_CONV_BLOCKED = True


def takes_blocked_layout(template: str) -> bool:
    """Whether a model hands `template`'s data to it blocked and keeps its output blocked
    (BLOCKED_TEMPLATES, the grouped conv while GROUP_CONV_BLOCKED is on).

        >>> takes_blocked_layout("conv2d_NCHWc.x86"), takes_blocked_layout("dense.x86")
        (True, False)
    """
    if template == "group_conv2d_NCHWc.x86" and not GROUP_CONV_BLOCKED:
        return False
    return template in BLOCKED_TEMPLATES


def timed_data_block(template: str, specs: Sequence[Any], attrs: dict[str, Any],
                     target: Any) -> int:
    """The channel block of the data a blocked task's records were timed on, 0 for NCHW:
    the task's attr `data_block` where it has one (record_attrs), else the block a conv
    of its input's channels writes by default (layout_plan.as_in_model).

        >>> timed_data_block("conv2d_NCHWc.x86", [((1, 64, 56, 56), "float32"),
        ...                  ((64, 64, 1, 1), "float32")], {}, "llvm -mcpu=haswell")
        8
    """
    from relay_ir.backend.layout_plan import as_in_model

    got = as_in_model(template, specs, attrs, target)
    if got is None or got[1].get("data_layout") != "NCHWxc":
        return 0
    return int(got[0][0][0][4])


def record_attrs(template: str, specs: Sequence[Any], attrs: dict[str, Any], target: Any,
                 data_block: int) -> dict[str, Any] | None:
    """The attrs of the task whose records a call applies, the call's data arriving in
    `data_block` (0: NCHW): the task's own where that is the block the task is timed in
    by default (timed_data_block), else with `data_block` (schedule.templates.DATA_BLOCK):
    a task of its own, keyed apart and timed in that block, as TVM keys tasks by layout.
    A model's first convs read the stem's block (AVX2 writes 16 at 112x112 where its
    convs keep 8), and a config chosen and timed for another block does not fit: a 1x1
    conv whose block differs from its data's copies the whole input into its own each
    call (AVX2 MobileNetV2: 32@112 -> 16 ran 330 us with the record that is the default
    for blocks of 8, 177 us with the default for 16). None where the template is timed
    only as itself (not as_in_model's) and the data arrives blocked: no record applies.
    autotune.extract files a model's tasks under these attrs, and build looks them up
    here (applied_config), so that the two agree.

        >>> specs = [((1, 64, 56, 56), "float32"), ((64, 64, 1, 1), "float32")]
        >>> record_attrs("conv2d_NCHWc.x86", specs, {}, "llvm -mcpu=haswell", 8)
        {}
        >>> record_attrs("conv2d_NCHWc.x86", specs, {}, "llvm -mcpu=haswell", 16)
        {'data_block': 16}
    """
    from relay_ir.backend.layout_plan import as_in_model

    if data_block == timed_data_block(template, specs, attrs, target):
        return dict(attrs)
    if as_in_model(template, specs, attrs, target) is None:
        return None
    return {**attrs, DATA_BLOCK: int(data_block)}


def data_block_of(task: AnchorTask, layout: GroupLayout | None) -> int:
    """The channel block the call's data operand arrives in (0: NCHW), by its `layout`."""
    in_blocks = layout.in_blocks if layout else ()
    return in_blocks[task.operands[0]] if in_blocks and task.operands else 0


def applied_config(task: AnchorTask, target: Any, tuning: TuningScope | None,
                   data_block: int = 0) -> Any:
    """The tuned config a call of `task` runs with, or None (the template's fallback): the
    record of the task keyed for the block its data arrives in (`data_block`, 0 for NCHW;
    record_attrs). On more than one thread, the fastest record that splits the output among
    threads as the default does (`splits_otherwise`; none: the fallback, noted in
    `tuning.other_split`). The layout plan and the lowering both ask here, so that the
    output block the plan expects is the one the kernel writes."""
    if tuning is None:
        return None
    attrs = record_attrs(task.template, task.specs, task.attrs, target, data_block)
    if attrs is None:
        return None
    tuned = tuning.config(task.template, list(task.specs), attrs, target)
    if tuned is None or lowering.kernel.num_threads() == 1:  # no split to compare
        return tuned
    split = default_partition(task, target, data_block)
    if not splits_otherwise(task.template, tuned, split):
        return tuned
    # the fastest record that splits as the default does, where the fastest does not
    alike = find_tuned(tuning.db, task.template, list(task.specs), attrs, target,
                       tuning.any_device, splitting_as(task.template, split))
    if alike is None:
        key = workload_key(task.template, list(task.specs), attrs)
        if key not in tuning.other_split:
            tuning.other_split.append(key)
        return None
    return alike.config


def splitting_as(template: str, default_split: str | None) -> Callable[[Any], bool]:
    """find_tuned's `accept` for the split rule: a config of `template` that a build on this
    process's threads applies, the default splitting `default_split` (splits_otherwise).

        >>> splitting_as("dense.cuda", "rows")(None)
        True
    """
    return lambda cfg: not splits_otherwise(template, cfg, default_split)


def splits_otherwise(template: str, cfg: Any, default_split: str | None) -> bool:
    """Whether a build on this process's threads refuses `cfg`: on more than one thread, a
    config that splits the output among them otherwise than the default, which splits it
    `default_split` (see default_partition); never on one thread. applied_config and the
    model confirmation (which times only what a build applies) ask here.

        >>> splits_otherwise("dense.cuda", None, "rows")  # the template declares no split
        False
    """
    split = partition_of(template, cfg)
    return split is not None and split != default_split and \
        lowering.kernel.num_threads() > 1


# the default's split of each task's output among threads, by (key, target, data block)
_DEFAULT_SPLIT: dict[tuple[str, str, int], str | None] = {}


def default_partition(task: AnchorTask, target: Any, data_block: int = 0) -> str | None:
    """How the template's default for a call of `task` (data in `data_block`, 0: NCHW)
    splits its output among threads (schedule.templates.partition_of), or None.

    On more than one thread `applied_config` applies only a record that splits as this
    default does. Which core wrote which part of a kernel's input is the split of the
    kernel before it, and the defaults of neighbouring convs split alike (ResNet-50 on
    AVX-512: by rows at 56x56 and 28x28 outputs, by channel chunks at 14x14 and 7x7), so
    a record that splits otherwise reads half its input from the other core's cache. The
    tuner times a kernel alone and cannot see that. ResNet-50 on two Emerald Rapids cores
    with records tuned on one thread (wall time, 15 rounds, load 0.9-1.3) ran 1.036x its
    untuned build; the model confirmation on two threads rejected exactly the four
    records whose split differed from their default's (in the model 1.05-1.48x their
    default, alone on two threads 0.998-1.06x) and none of the 14 that split alike,
    after which the model ran 0.991x. ResNet-18 the same: both conv records that split
    otherwise were rejected, none that split alike.

        >>> fc = (((1, 512), "float32"), ((1000, 512), "float32"))  # ResNet-18's dense layer
        >>> default_partition(AnchorTask(None, "dense.x86", fc, {}, (0, 1)), "llvm")
        'rows_cols'
        >>> default_partition(AnchorTask(None, "dense.cuda", fc, {}, (0, 1)), "cuda") is None
        True
    """
    if get_template(task.template).partition is None:
        return None
    from relay_ir.backend.layout_plan import as_in_model

    key = (workload_key(task.template, list(task.specs), task.attrs), str(target), data_block)
    if key not in _DEFAULT_SPLIT:
        # the call's kernel: its data in `data_block`, its output blocked
        got = as_in_model(task.template, list(task.specs),
                          {**task.attrs, DATA_BLOCK: data_block}, target)
        specs, attrs = got if got is not None else (list(task.specs), dict(task.attrs))
        cfg = FallbackConfig(target)
        instantiate(task.template, specs, attrs, cfg)
        _DEFAULT_SPLIT[key] = partition_of(task.template, cfg)
    return _DEFAULT_SPLIT[key]


def _template_path(fn: Function, task: AnchorTask, target: Any,
                   tuning: TuningScope | None, layout: GroupLayout | None = None
                   ) -> tuple[Schedule, list[Tensor], str, dict[int, Any]]:
    """The anchor's template with the rest of the group as its epilogue. The config is
    the one of the logical task (what was tuned), whatever the layouts of the values."""
    specs = list(task.specs)
    tpl = get_template(task.template)
    in_blocks = layout.in_blocks if layout else ()
    out_blocks = layout.out_blocks if layout else ()
    data_block = data_block_of(task, layout)
    cfg = applied_config(task, target, tuning, data_block) or FallbackConfig(target)
    if not task.operands:  # an injective group's template schedules the group itself
        env, flat = _placeholders(fn)
        outs = _flat(_evaluate(fn, env, {}))
        return tpl.schedule(cfg, outs), flat + outs, task.template, {}
    out_block = out_blocks[0] if out_blocks else 0
    attrs = dict(task.attrs)
    if data_block or out_block:
        if not takes_blocked_layout(task.template):
            raise ScheduleError(f"the template {task.template} takes no blocked layout")
        if data_block:
            attrs["data_layout"] = "NCHWxc"
            specs[0] = physical_spec(specs[0], data_block)
        if out_block:
            attrs["out_layout"] = "NCHWc"
    ins, outs = tpl.compute(cfg, specs, attrs)
    prepack = {task.operands[k]: pack
               for k, pack in input_packers(task.template, specs, ins, attrs).items()}
    env, flat = _placeholders(fn, in_blocks)
    for k, (param, t) in enumerate(zip(task.operands, ins)):
        env[fn.params[param]] = Blocked(t, data_block) if k == 0 and data_block else t
        flat[param] = t
    anchor = Blocked(outs[0], shape_of(outs[0])[4]) if out_block else outs[0]
    final = _evaluate(fn, env, {id(task.anchor): anchor})
    if not isinstance(final, list):
        final = _stored([final], out_blocks)[0]
    if isinstance(final, list) or shape_of(final) != shape_of(outs[0]):
        raise ScheduleError(f"the group's epilogue changes the shape of the "
                            f"{task.anchor.op.name} output, which the template "
                            f"{task.template} computes in its output stage")
    return tpl.schedule(cfg, [final]), flat + [final], task.template, prepack


_ANCHOR_SCHEDULES = {"conv2d_nchw": schedule_conv2d_nchw,
                     "depthwise_conv2d_nchw": schedule_depthwise_nchw,
                     "dense": schedule_gemm, "matmul": schedule_gemm,
                     "batch_matmul": schedule_gemm}
_KIND_SCHEDULES = {"injective": schedule_injective, "reduce": schedule_reduce,
                   "softmax": schedule_softmax}


def _generic_path(fn: Function, calls: list[Call], plain: bool, target: Any,
                  layout: GroupLayout | None = None) -> tuple[Schedule, list[Tensor], str]:
    env, flat = _placeholders(fn, layout.in_blocks if layout else ())
    outs = _stored(_flat(_evaluate(fn, env, {})), layout.out_blocks if layout else ())
    if plain:
        s = create_schedule(outs)
        inline_injective(s, outs)
        return s, flat + outs, "plain", {}
    kind = max((strategy_of(c.op).kind for c in calls), key=_KIND_RANK.__getitem__,
               default="injective")
    if kind == "anchor":
        anchor = next(c for c in calls if strategy_of(c.op).kind == "anchor")
        tag = _anchor_tag(outs)
        sched = _ANCHOR_SCHEDULES.get(tag or "", None)
        if sched is None:
            raise ScheduleError(f"no x86 schedule for the anchor {anchor.op.name}")
        return sched(FallbackConfig(target), outs), flat + outs, f"{tag} (ops graph)", {}
    return _KIND_SCHEDULES[kind](FallbackConfig(target), outs), flat + outs, kind, {}


def _is_gpu(target: Any) -> bool:
    return "gpu" in Target.parse(target).keys


def _gpu_path(fn: Function) -> tuple[Schedule, list[Tensor], str, dict[int, Any]]:
    """One thread per output element for every root stage (schedule.templates.cuda_generic)."""
    env, flat = _placeholders(fn)
    outs = _flat(_evaluate(fn, env, {}))
    return schedule_gpu_generic(create_schedule(outs), outs), flat + outs, "gpu generic", {}


def _anchor_tag(outs: list[Tensor]) -> str | None:
    from schedule.templates.common import walk_ops

    for op in reversed(walk_ops(outs)):
        tag = getattr(op, "tag", "")
        if tag in _ANCHOR_SCHEDULES:
            return tag
    return None


def lower_group(fn: Function, target: Any = "llvm",
                const_params: frozenset[int] = frozenset(),
                tuning: TuningScope | None = None,
                layout: GroupLayout | None = None) -> GroupKernel:
    """Compile one Primitive function into a GroupKernel (template, group kind, or plain).

    `const_params`: positions of params that are constants at the call (see
    `constant_params`; a conv2d weight among them is packed once at build time, see
    GroupKernel.prepack). `tuning`: the records to configure the template with (None: the
    template's fallback config). `layout`: which inputs and outputs are stored blocked
    (None: all logical). A schedule that does not apply is a warning naming the
    group and the reason, and the group compiles with the next, plainer schedule.
    `gk = lower_group(fn); gk.kernel(*inputs, *outputs)`
    """
    name = group_name(fn)
    calls = group_ops(fn)
    in_specs = [_spec(t) for p in fn.params
                for t in flatten_types(p.checked_type or p.type_annotation)]
    out_specs = [_spec(t) for t in flatten_types(fn.body.checked_type)]
    if layout is not None:
        in_specs = [physical_spec(sp, b) for sp, b in zip(in_specs, layout.in_blocks)]
        out_specs = [physical_spec(sp, b) for sp, b in zip(out_specs, layout.out_blocks)]
    attempts: list[tuple[str, Callable[[], Any]]] = []
    task = anchor_task(fn, const_params, target, tuning, layout)
    if task is not None:
        attempts.append((f"template {task.template}",
                         lambda: _template_path(fn, task, target, tuning, layout)))
    if _is_gpu(target):
        attempts.append(("gpu generic", lambda: _gpu_path(fn)))
    if not _is_gpu(target):
        if not _has_zero_size(in_specs + out_specs):  # tiling an empty tensor: not worth it
            attempts.append(("group", lambda: _generic_path(fn, calls, False, target,
                                                            layout)))
        attempts.append(("plain", lambda: _generic_path(fn, calls, True, target, layout)))
    failed: list[str] = []
    for what, attempt in attempts:
        try:
            s, args, how, prepack = attempt()
            kernel = lowering.build(s, args, target=target, name=name)
        except RelayError:
            raise
        except TesselError as e:  # a schedule that does not apply: try the next one
            failed.append(f"the {what} schedule does not apply: {e}")
            continue
        if failed:
            warnings.warn(f"fused group {name} compiled with the {how} schedule, slower "
                          f"than intended; " + "; ".join(failed), stacklevel=2)
        specs = list(in_specs)
        for k in prepack:
            specs[k] = (tuple(int(d.value) for d in args[k].shape), args[k].dtype)
        key = ""
        if task is not None and how == task.template:
            keyed = record_attrs(task.template, task.specs, task.attrs, target,
                                 data_block_of(task, layout))
            key = workload_key(task.template, list(task.specs),
                               task.attrs if keyed is None else keyed)
        return GroupKernel(name, kernel, specs, out_specs, how, prepack, key)
    raise RelayError(f"relay_ir.build could not compile the fused group {name}: "
                     + "; ".join(failed))
