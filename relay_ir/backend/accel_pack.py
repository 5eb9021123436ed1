"""`relay_ir.build(qmod, target="accel")`: a quantized model on the simulated accelerator,
the rest on the host CPU, values packed into the accelerator's layout where it reads them.

The module is optimised and fused as for the CPU. Each fused group whose anchor is an
int8 conv2d or dense runs it on the accelerator with as much of its integer tail as the
tensor ALU does (relay_ir.backend.accel_group), the rest of the group (a dequantization,
say) on the host; the other groups compile for the host ("llvm") as relay_ir.build
compiles them, and `lib.placement` says where each group (and each rest) runs and, on
the host, why. A group of ALU operations alone (a requantization) runs on
the accelerator too when the value it reads is already there (packed), so that value
need not leave it.

Packing is VTA's graph_pack, decided per value rather than written into the IR: a value
an accelerator group reads as its data or residual is stored packed, [N/BATCH, C/BLOCK,
H, W, BATCH, BLOCK] (channels and batch zero-padded), and stays packed from one
accelerator group to the next; a pack step starts such a region where a host value
enters it (the start operator) and an unpack step ends it where a host group or the
model's output reads it (the stop operator), each step done once per value by the host.
`lib.layout_changes` lists them. Weights and per-channel constants are packed once, at
build. The graph executor runs every step in order: host kernels, the accelerator's
kernels (the simulator, bit-exact), and the pack/unpack copies between them.

    >>> lib = relay_ir.build(qmod, target="accel")          # doctest: +SKIP
    >>> lib.run(x=image); lib.placement                     # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.backend.accel_group import AccelGroup, Rejected, accel_alu_group, accel_group
from relay_ir.backend.executor import GraphPlan, Step, Value
from relay_ir.backend.lower_group import constant_params, group_name
from relay_ir.backend.pipeline import (
    _flat_ids,
    _graph_order,
    _Planner,
    optimize_for_build,
)
from relay_ir.backend.tuned import TuningScope
from relay_ir.expr import Call, Constant, Expr, Function, Tuple, Var
from relay_ir.structural import structural_equal, structural_hash
from relay_ir.ty import TensorType
from schedule.templates.accel_env import Env
from schedule.templates.accel_layout import pack_data, unpack_data
from tessel_errors import RelayError

HOST = "llvm"


class AccelKernelFn:
    """An accelerator kernel in the graph executor: runs the simulator on the arrays."""

    def __init__(self, group: AccelGroup) -> None:
        self.group, self.kernel, self.name = group, group.kernel, group.name

    def __call__(self, arrays: Sequence[np.ndarray]) -> None:
        """Run on the packed inputs and the packed output, in the kernel's order."""
        self.kernel(*arrays)

    def object_code(self) -> bytes:
        """Not available: a model with accelerator kernels cannot be saved yet."""
        raise RelayError(f"kernel '{self.name}' runs on the simulated accelerator; saving a "
                         "model built for 'accel' is not supported (rebuild it)")


class LayoutFn:
    """A host step that changes a value's layout (pack or unpack), array to array."""

    def __init__(self, name: str, fn: Callable[[np.ndarray], np.ndarray]) -> None:
        self.name, self.fn = name, fn

    def __call__(self, arrays: Sequence[np.ndarray]) -> None:
        """Write the converted input into the output."""
        arrays[1][...] = self.fn(arrays[0])

    def object_code(self) -> bytes:
        """Not available (see AccelKernelFn)."""
        raise RelayError(f"step '{self.name}' is a host layout change of a model built for "
                         "'accel'; such models cannot be saved")


@dataclass(frozen=True)
class Placement:
    """Where a group runs: "accel" or "cpu", and why a group does not run on the accel."""

    group: str
    device: str
    why: str = ""


@dataclass
class _GroupRecord:
    name: str
    schedule: str


class AccelPlanner(_Planner):
    """The graph planner with accelerator groups and per-value layouts."""

    def __init__(self, target: Any, tuning: TuningScope | None = None) -> None:
        super().__init__(HOST, tuning, blocked_layouts=False)
        self.accel_target = target
        self.env = Env(target)
        self.placement: list[Placement] = []
        self.packed: dict[int, tuple[tuple[int, ...], int]] = {}  # vid -> (logical, kind)
        self.converted: dict[tuple[int, str], int] = {}
        self.accel_cache: dict[int, list[tuple[Function, frozenset[int], int]]] = {}

    # -- values and their layouts -------------------------------------------------------
    def _new(self, kind: str, shape: tuple[int, ...], dtype: str, data: Any = None) -> int:
        self.values.append(Value(kind, tuple(shape), dtype, "", data))
        return len(self.values) - 1

    def as_packed(self, vid: int, dense: bool, user: str) -> int:
        """`vid` in the packed layout (a pack step, once per value)."""
        if vid in self.packed:
            return vid
        key = (vid, "packed")
        if key not in self.converted:
            val = self.values[vid]
            env = self.env

            def pack(a: np.ndarray) -> np.ndarray:
                return pack_data(env, a)

            shape = pack(np.zeros(val.shape, val.dtype)).shape
            if val.kind == "const":
                out = self._new("const", shape, val.dtype, pack(val.data))
            else:
                out = self._new("temp", shape, val.dtype)
                self._layout_step(pack, vid, out, "pack")
                self.layout_changes.append((user, "input", "NCHW -> packed"))
            self.packed[out] = (val.shape, 2 if dense else 4)
            self.converted[key] = out
        return self.converted[key]

    def as_logical(self, vid: int, user: str) -> int:
        """`vid` in its logical layout (an unpack step, once per value)."""
        if vid not in self.packed:
            return vid
        key = (vid, "logical")
        if key not in self.converted:
            logical, rank = self.packed[vid]
            env, val = self.env, self.values[vid]

            def unpack(a: np.ndarray) -> np.ndarray:
                y = unpack_data(env, a, logical[0], logical[1])
                return y[:, :, 0, 0] if rank == 2 else y

            out = self._new("temp", logical, val.dtype)
            self._layout_step(unpack, vid, out, "unpack")
            self.layout_changes.append((user, "input", "packed -> NCHW"))
            self.converted[key] = out
        return self.converted[key]

    def _layout_step(self, fn: Callable, src: int, dst: int, what: str) -> None:
        self.kernels.append(LayoutFn(what, fn))
        self.group_kernels.append(_GroupRecord(what, "host layout"))
        self.steps.append(Step(len(self.kernels) - 1, [src], [dst], what))

    # -- the graph ---------------------------------------------------------------------
    def plan(self, main: Function) -> GraphPlan:
        memo: dict[int, Any] = {}
        inputs = []
        for p in main.params:
            memo[id(p)] = self.value("input", p.checked_type, p.name_hint)
            inputs.append(memo[id(p)])
        for e in _graph_order(main.body):
            memo[id(e)] = self.node(e, memo)
        out = _map_ids(memo[id(main.body)], lambda v: self.as_logical(v, "output"))
        for v in _flat_ids(out):
            if self.values[v].kind == "temp":
                self.values[v].kind = "output"
        inputs, out = self._drop_unused_constants(inputs, out)
        return GraphPlan(self.kernels, self.values, self.steps, inputs, out)

    def node(self, e: Expr, memo: dict[int, Any]) -> Any:
        if isinstance(e, Tuple):
            return [_map_ids(memo[id(f)], lambda v: self.as_logical(v, "tuple"))
                    for f in e.fields]
        if not (isinstance(e, Call) and isinstance(e.op, Function) and e.op.attr("Primitive")):
            return super().node(e, memo)
        name = group_name(e.op)
        try:
            call = _inline_scalars(e)  # ALU immediates, not loaded tensors
            got = self._accel(call, memo)
            e = call
        except Rejected as why:
            self.placement.append(Placement(name, "cpu", str(why)))
            view = dict(memo)
            for a in e.args:
                view[id(a)] = _map_ids(memo[id(a)], lambda v: self.as_logical(v, name))
            return super().node(e, view)
        self.placement.append(Placement(name, "accel"))
        return self._accel_step(e, got, memo)

    def _accel(self, call: Call, memo: dict[int, Any]) -> tuple[AccelGroup, int]:
        fn, consts = call.op, constant_params(call)
        # an ALU-only group runs on the accelerator when the one value it reads is held
        # there, so that value stays packed (not worth packing a host value for)
        tensors = [a for k, a in enumerate(call.args) if k not in consts]
        held = len(tensors) == 1 and all(v in self.packed for v in _flat_ids(memo[id(
            tensors[0])]))
        h = structural_hash(fn)
        for other, c, k in self.accel_cache.get(h, []):
            if c == consts and structural_equal(other, fn):
                group = self.kernels[k].group
                if group.task is None and not held:
                    raise Rejected("an ALU-only group whose input is on the host")
                return group, k
        try:
            group = accel_group(fn, consts, self.accel_target, self.tuning)
        except Rejected as why:
            if not held:
                raise
            try:
                group = accel_alu_group(fn, consts, self.accel_target)
            except Rejected:
                raise why from None
        self.compiled += 1
        self.kernels.append(AccelKernelFn(group))
        self.group_kernels.append(_GroupRecord(group.name, f"{group.schedule} (accel)"))
        k = len(self.kernels) - 1
        self.accel_cache.setdefault(h, []).append((fn, consts, k))
        return group, k

    def _accel_step(self, call: Call, got: tuple[AccelGroup, int], memo: dict[int, Any]
                    ) -> int:
        group, k = got
        dense = len(group.logical_out) == 2
        if group.task is None:  # an ALU-only group keeps the layout of what it reads
            (src,) = [_flat_ids(memo[id(a)])[0] for a, r in zip(call.args, group.roles)
                      if r == "tensor"]
            dense = self.packed[src][1] == 2
        name = group.name
        ins = []
        for a, role, pos in zip(call.args, group.roles, range(len(call.args))):
            (vid,) = _flat_ids(memo[id(a)])
            if role is None:  # read by the host's rest of the group only
                continue
            if role in ("data", "tensor"):
                ins.append(self.as_packed(vid, dense, name))
            else:
                val = self.values[vid]
                data = group.prepack[pos](val.data)
                ins.append(self._new("const", data.shape, str(data.dtype), data))
        dtype = group.kernel.func.params[-1].dtype
        out = self._new("temp", group.out_shape, dtype)
        self.packed[out] = (group.logical_out, 2 if dense else 4)
        self.steps.append(Step(k, ins, [out], name))
        if group.rest is None:
            return out
        # the rest of the group on the host, reading the accelerator's result
        rest = group.rest
        acc = Var("acc", rest.fn.params[0].checked_type)
        host = Call(rest.fn, (acc, *(call.args[j] for j in rest.params)),
                    checked_type=call.checked_type)
        view = dict(memo)
        view[id(acc)] = self.as_logical(out, group_name(rest.fn))
        self.placement.append(Placement(group_name(rest.fn), "cpu",
                                        f"the rest of {name}: {rest.why}"))
        return super().node(host, view)


def _inline_scalars(call: Call) -> Call:
    """The group call with its scalar constant arguments written into the function
    (FuseOps keeps them apart when it fuses nothing: at opt_level 0)."""
    fn = call.op
    inline = {p: a for p, a in zip(fn.params, call.args) if isinstance(a, Constant)
              and isinstance(p.checked_type, TensorType) and p.checked_type.shape == ()}
    if not inline:
        return call
    from relay_ir import transform as T
    from relay_ir.module import IRModule
    from relay_ir.transform.rewrite import substitute

    keep = [(p, a) for p, a in zip(fn.params, call.args) if p not in inline]
    new = Function(tuple(p for p, _ in keep), substitute(fn.body, inline), None, (),
                   fn.attrs)
    typed = T.InferType()(IRModule.from_expr(new))["main"]
    return Call(typed, tuple(a for _, a in keep), checked_type=call.checked_type)


def _map_ids(v: Any, f: Callable[[int], int]) -> Any:
    return [_map_ids(x, f) for x in v] if isinstance(v, list) else f(v)


def compile_accel(mod: Any, target: Any, tuning: TuningScope | None = None
                  ) -> tuple[GraphPlan, AccelPlanner]:
    """Optimise, fuse and plan a static-shape module for the accelerator and the host."""
    fused = optimize_for_build(mod)
    planner = AccelPlanner(target, tuning)
    plan = planner.plan(fused["main"])
    on_cpu = [p for p in planner.placement
              if p.device == "cpu" and ("conv2d" in p.group or "dense" in p.group)]
    if on_cpu:
        warnings.warn(f"{len(on_cpu)} conv2d/dense groups run on the host CPU, not the "
                      f"accelerator: " + "; ".join(f"{p.group}: {p.why}" for p in on_cpu[:3])
                      + (" ..." if len(on_cpu) > 3 else ""), stacklevel=3)
    return plan, planner


__all__ = ["AccelKernelFn", "AccelPlanner", "LayoutFn", "Placement", "compile_accel"]
