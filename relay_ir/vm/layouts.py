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
after (one run each). Functions with control flow, closures, calls, `?` dims or groups without a
kernel strategy keep every value logical: a blocked value must never reach a branch, a
return, a callee or an interpreted op.

The plan is keyed by the fused group (the Primitive Function object), which A-normal form
keeps as it is: the code generator finds a call's layout from its callee.

    >>> layouts = plan_function(fused_main, "llvm", tuning)   # doctest: +SKIP
    >>> layouts[id(conv_group)].out_blocks                      # doctest: +SKIP
    (16,)
"""

from __future__ import annotations

from typing import Any

from relay_ir.backend.layout_plan import layout_planning_enabled, plan_layouts
from relay_ir.backend.lower_group import GroupLayout
from relay_ir.backend.pipeline import check_dataflow
from relay_ir.expr import Call, Function
from relay_ir.ty import TensorType, is_dynamic
from relay_ir.visitor import post_order
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


def plan_function(fn: Function, target: Any, tuning: Any = None) -> dict[int, GroupLayout]:
    """The stored layout of each group a static dataflow function calls, keyed by id of
    the group's Primitive Function; empty (everything logical) for other functions, when
    the PassContext turns layout planning off (`disabled_pass=["AlterOpLayout"]`), or when
    one group object is called twice with different layouts (the key would be ambiguous)."""
    if not layout_planning_enabled() or not is_static_dataflow(fn):
        return {}
    by_call = plan_layouts(fn, target, tuning)
    out: dict[int, GroupLayout | None] = {}
    for e in post_order(fn.body, skip=lambda n: isinstance(n, Function)):
        if isinstance(e, Call) and isinstance(e.op, Function):
            layout = by_call.get(id(e))
            if id(e.op) in out and out[id(e.op)] != layout:
                return {}
            out[id(e.op)] = layout
    return {k: v for k, v in out.items() if v is not None}


__all__ = ["is_static_dataflow", "plan_function"]
