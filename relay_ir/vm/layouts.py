"""The graph executor's layout plan for the VM's static dataflow functions.

relay_ir.build keeps the values between NCHWc convs blocked (relay_ir.backend.layout_plan):
a conv writes its output in channel blocks and the next conv reads them directly. A VM
function that is plain dataflow over groups of static shapes (a static model's @main) gets
the same plan here, so its kernels are the graph executor's kernels for the same groups
(same lowering, same layouts, same packed weights); without it every conv packed its input
and unpacked its output per call (ResNet-18 224x224, one core, CPU time: VM 25.8 ms, graph
21.9, graph with the plan off 25.4). With it (and the constants in one arena,
relay_ir.vm.compiler.pack_in_use_order), `TESSEL_NUM_THREADS=1 python -m
benchmarks.memory_plans --models resnet18 --vm --cpu-time` read VM / graph 1.18x before,
0.98-1.02x after (two runs each, alternated, load 3.6-4.0), ResNet-50 1.18x before, 1.00x
after (one run each). Functions with control flow, closures, calls, `?` dims (but one
input's batch, below) or groups without a kernel strategy keep every value logical: a
blocked value must never reach a branch, a return, a callee or an interpreted op.

A function whose one `?` is the batch of one parameter, and whose every group runs once
per image (relay_ir.vm.batch_split), gets the plan of its batch-1 copy: the copy is the
same function re-typed with that batch 1, planned as a static function, and each of its
groups' layouts given to the group at the same position in the original. The per-image
kernels are then the static model's kernels, run once per image on blocked values (a
blocked value's images are contiguous, as a logical one's), and the data is packed once at
the stem and unpacked once at the output instead of around every conv. `TESSEL_NUM_THREADS=1
python -m benchmarks.vm_static --cpu-time --rounds 5` (ResNet-18 224, batch 1) read VM
`?`-batch / graph 1.24-1.30x before, 1.05-1.14x after (three alternated process pairs, load
3.0-4.2; the VM's static model 0.99-1.02x); ResNet-50 1.08x before, 0.99x after,
MobileNetV2 2.49x, 1.19x, ResNeXt-26 1.16x, 1.09x (one run each, --rounds 3). What is
left is not in the kernels (each one times the same as the static model's alone): the
packed weights lie outside the constant arena, outputs are fresh arrays (no storage plan,
no in-place writes), and a group call costs about 6 us of Python (MobileNetV2: 54 calls).

The plan is keyed by the fused group (the Primitive Function object), which A-normal form
keeps as it is: the code generator finds a call's layout from its callee.

    >>> layouts = plan_function(fused_main, "llvm", tuning)   # doctest: +SKIP
    >>> layouts[id(conv_group)].out_blocks                      # doctest: +SKIP
    (16,)
"""

from __future__ import annotations

from typing import Any

from relay_ir.backend.layout_plan import layout_planning_enabled, plan_layouts
from relay_ir.backend.lower_group import GroupLayout, group_name
from relay_ir.backend.pipeline import check_dataflow
from relay_ir.expr import Call, Function, Var
from relay_ir.op.registry import Op
from relay_ir.transform.rewrite import substitute
from relay_ir.ty import TensorType, TupleType, is_dynamic
from relay_ir.visitor import post_order
from relay_ir.vm.batch_split import has_batch, per_image
from relay_ir.vm.kernels import has_strategies, is_dynamic_group
from tessel_errors import RelayError


def is_static_dataflow(fn: Function) -> bool:
    """Whether a fused global function is dataflow only (no control flow, closures, ADTs,
    references or calls of functions), its parameters tensors of static shapes, and every
    group it calls compiled (a kernel strategy for each op) with static shapes."""
    try:
        check_dataflow(fn)
    except RelayError:
        return False
    for p in fn.params:
        t = p.checked_type or p.type_annotation
        if not isinstance(t, TensorType) or is_dynamic(t):
            return False
    for e in post_order(fn.body, skip=lambda n: isinstance(n, Function)):
        if isinstance(e, Call) and isinstance(e.op, Function):
            if not has_strategies(e.op) or is_dynamic_group(e.op):
                return False
    return True


def is_batch_dataflow(fn: Function) -> bool:
    """Whether a fused global function is dataflow only with exactly one parameter whose
    batch (axis 0, its only `?`) is unknown, the others static tensors, no op called
    outside a group, and every group compiled (a kernel strategy for each op) and either
    static or run once per image (relay_ir.vm.batch_split.per_image). Every `?` in such
    a function is that parameter's batch, so its groups see one batch at run time.

        >>> import relay_ir
        >>> from relay_ir.backend.pipeline import optimize_for_build
        >>> text = "def @main(%x: Tensor[(?, 4), float32]) { exp(%x) }"
        >>> is_batch_dataflow(optimize_for_build(relay_ir.parse(text))["main"])
        True
    """
    try:
        check_dataflow(fn)
    except RelayError:
        return False
    batched = 0
    for p in fn.params:
        t = p.checked_type or p.type_annotation
        if not isinstance(t, TensorType):
            return False
        if has_batch(t) and not is_dynamic(TensorType(t.shape[1:], t.dtype)):
            batched += 1
        elif is_dynamic(t):
            return False
    if batched != 1:
        return False
    for e in post_order(fn.body, skip=lambda n: isinstance(n, Function)):
        if isinstance(e, Call) and isinstance(e.op, Op):
            return False  # its result's batch need not be the parameter's
        if isinstance(e, Call) and isinstance(e.op, Function):
            if not has_strategies(e.op) or (is_dynamic_group(e.op) and not per_image(e.op)):
                return False
    return True


def batch_one_copy(fn: Function) -> Function | None:
    """`fn` (see is_batch_dataflow) re-typed with its batch 1: the same calls in the same
    post order, each group re-typed alone for batch 1 (so it is the static model's group,
    with its anchor task, and type inference inserts no run-time shape checks into it);
    None when the ops refuse batch 1."""
    from relay_ir.module import IRModule
    from relay_ir.transform.infer_type import InferType
    from relay_ir.transform.rewrite import rewrite

    def typed(params: list[Var], body: Any) -> Function:
        return InferType()(IRModule.from_expr(Function(tuple(params), body)))["main"]

    def group(g: Function) -> Function:
        params = [Var(p.name_hint, _batch_one(p.checked_type or p.type_annotation))
                  for p in g.params]
        one = typed(params, substitute(g.body, dict(zip(g.params, params))))
        return Function(one.params, one.body, one.ret_type, (), g.attrs)

    params = [Var(p.name_hint, _batch_one(p.checked_type or p.type_annotation))
              for p in fn.params]
    mapping = dict(zip(fn.params, params))
    try:
        body = rewrite(fn.body, lambda old, new: group(old) if isinstance(old, Function)
                       and old.attr("Primitive") else mapping.get(old, new)
                       if isinstance(old, Var) else new)
        return typed(params, body)
    except RelayError:
        return None


def _batch_one(t: Any) -> Any:
    if isinstance(t, TupleType):
        return TupleType(tuple(_batch_one(f) for f in t.fields))
    return TensorType((1, *t.shape[1:]), t.dtype) if has_batch(t) else t


def _group_calls(fn: Function) -> list[Call]:
    return [e for e in post_order(fn.body, skip=lambda n: isinstance(n, Function))
            if isinstance(e, Call) and isinstance(e.op, Function)]


def _by_group(calls: list[Call], by_call: dict[int, GroupLayout]
              ) -> dict[int, GroupLayout] | None:
    # keyed by the group object; None when one group is called with two layouts
    out: dict[int, GroupLayout | None] = {}
    for call in calls:
        layout = by_call.get(id(call))
        if id(call.op) in out and out[id(call.op)] != layout:
            return None
        out[id(call.op)] = layout
    return {k: v for k, v in out.items() if v is not None}


def plan_function(fn: Function, target: Any, tuning: Any = None) -> dict[int, GroupLayout]:
    """The stored layout of each group a static dataflow function (or a `?`-batch one,
    is_batch_dataflow, planned as its batch-1 copy) calls, keyed by id of the group's
    Primitive Function; empty (everything logical) for other functions, when the
    PassContext turns layout planning off (`disabled_pass=["AlterOpLayout"]`), or when
    one group object is called twice with different layouts (the key would be ambiguous)."""
    if not layout_planning_enabled():
        return {}
    if is_static_dataflow(fn):
        calls = _group_calls(fn)
        return _by_group(calls, plan_layouts(fn, target, tuning)) or {}
    if not is_batch_dataflow(fn):
        return {}
    copy = batch_one_copy(fn)
    if copy is None or not is_static_dataflow(copy):
        return {}
    calls, copies = _group_calls(fn), _group_calls(copy)
    if [group_name(c.op) for c in calls] != [group_name(c.op) for c in copies]:
        return {}  # (re-typing keeps the calls and their order: a safeguard)
    by_copy = plan_layouts(copy, target, tuning)
    by_call = {id(c): by_copy[id(k)] for c, k in zip(calls, copies) if id(k) in by_copy}
    return _by_group(calls, by_call) or {}


__all__ = ["batch_one_copy", "is_batch_dataflow", "is_static_dataflow", "plan_function"]
