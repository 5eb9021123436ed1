"""`relay_ir.build`: a dataflow @main -> a CompiledModel of fused kernels and a graph plan.

    >>> lib = relay_ir.build(mod, target="llvm", params={"w": w})   # doctest: +SKIP
    >>> y = lib.run(x=x)                                            # doctest: +SKIP
    >>> print(lib.profile(x=x))                                     # doctest: +SKIP

Pipeline: bind params as constants, then the standard optimisation sequence for "build"
(relay_ir.transform.standard_sequence: the passes the current PassContext enables, always
ending in graph form and FuseOps); every Primitive group lowers into one kernel (identical
groups, by structural_equal, compile once); the graph's values get a static memory plan.
A @main with `?` dims is compiled per concrete input shape at the first run with that
shape, under the PassContext that was current at build.

    >>> with relay_ir.transform.PassContext(opt_level=0):     # doctest: +SKIP
    ...     lib = relay_ir.build(mod)                         # one kernel per op, no folding
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import numpy as np

from relay_ir import transform as T
from relay_ir.backend.executor import (
    DeviceKernelFn,
    GraphPlan,
    KernelFn,
    Step,
    Value,
    check_inputs,
    kernel_fn,
    not_dataflow_error,
)
from relay_ir.backend.layout_plan import layout_changes, layout_planning_enabled, plan_layouts
from relay_ir.backend.lower_group import (
    GroupLayout,
    constant_params,
    flatten_types,
    lower_group,
    physical_spec,
)
from relay_ir.backend.tuned import TuningScope, TuningSource
from relay_ir.expr import (
    Call,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Match,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from relay_ir.module import IRModule
from relay_ir.op.registry import Op
from relay_ir.structural import structural_equal, structural_hash
from relay_ir.transform.rewrite import substitute
from relay_ir.ty import ShapeVar, TensorType
from relay_ir.visitor import post_order
from tessel_errors import RelayError


def main_of(mod: Any) -> IRModule:
    """The module to build: an IRModule as is, an expression as the @main of a new one."""
    if isinstance(mod, IRModule):
        return mod
    if isinstance(mod, Expr):
        return IRModule.from_expr(mod)
    raise RelayError(f"relay_ir.build takes an IRModule (or an expression), got "
                     f"{type(mod).__name__}")


def check_dataflow(fn: Function) -> None:
    """A RelayError pointing to relay_ir.vm.compile unless `fn` is dataflow-only."""
    for p in fn.params:
        t = p.type_annotation or p.checked_type
        if t is not None and not isinstance(t, TensorType):
            raise not_dataflow_error(f"a parameter %{p.name_hint} of type {t} (inputs must be "
                                     "tensors)")
    for e in post_order(fn.body):
        what = None
        if isinstance(e, (If, Match)):
            what = "control flow (if / match)"
        elif isinstance(e, (RefCreate, RefRead, RefWrite)):
            what = "references (ref / ref_read / ref_write)"
        elif isinstance(e, Function) and not e.attr("Primitive"):
            what = "closures (a function value inside @main)"
        elif isinstance(e, Call) and isinstance(e.op, Constructor):
            what = f"algebraic data types (constructor {e.op.name_hint})"
        elif isinstance(e, Call) and isinstance(e.op, (GlobalVar, Var)):
            what = f"calls of functions ({e.op.name_hint})"
        elif isinstance(e, Constructor):
            what = f"algebraic data types (constructor {e.name_hint})"
        if what:
            raise not_dataflow_error(what)


def bind_params(mod: IRModule, params: dict[str, Any] | None,
                caller: str = "relay_ir.build") -> IRModule:
    """@main with the named params replaced by constants (unknown names are an error,
    reported as `caller`'s)."""
    main = mod["main"]
    if not params:
        return mod
    by_name = {p.name_hint: p for p in main.params}
    unknown = [k for k in params if k not in by_name]
    if unknown:
        raise RelayError(f"{caller}: params {', '.join(map(repr, unknown))} are not "
                         f"parameters of @main ({', '.join(by_name)})")
    mapping = {by_name[k]: Constant(np.asarray(v)) for k, v in params.items()}
    body = substitute(main.body, mapping)
    rest = tuple(p for p in main.params if p not in mapping)
    return mod.with_function("main", Function(rest, body, main.ret_type, main.type_params,
                                              main.attrs))


def optimize_for_build(mod: IRModule) -> IRModule:
    """The standard sequence for "build" under the current PassContext: typed, graph-form
    @main whose ops all sit in Primitive groups."""
    return T.standard_sequence("build")(mod)


class _Planner:
    """Turns the fused @main into kernels, values and steps."""

    def __init__(self, target: Any, tuning: TuningScope | None = None,
                 blocked_layouts: bool = True) -> None:
        self.target = target
        self.blocked_layouts = blocked_layouts
        self.tuning = tuning
        self.kernels: list[KernelFn | DeviceKernelFn] = []
        self.group_kernels: list[Any] = []
        self.by_hash: dict[int, list[tuple[Function, frozenset[int], Any, int]]] = {}
        self.layouts: dict[int, GroupLayout] = {}
        self.layout_changes: list[tuple[str, str, str]] = []
        self.values: list[Value] = []
        self.steps: list[Step] = []
        self.compiled = 0

    def value(self, kind: str, t: TensorType, name: str = "", data: Any = None,
              block: int = 0) -> int:
        shape, _ = physical_spec((tuple(int(d) for d in t.shape), t.dtype), block)
        self.values.append(Value(kind, shape, t.dtype, name, data))
        return len(self.values) - 1

    def kernel_for(self, fn: Function, consts: frozenset[int],
                   layout: GroupLayout | None = None) -> int:
        h = structural_hash(fn)
        for other, c, lay, k in self.by_hash.get(h, []):
            if c == consts and lay == layout and structural_equal(other, fn):
                return k
        gk = lower_group(fn, self.target, consts, self.tuning, layout)
        self.compiled += 1
        self.group_kernels.append(gk)
        self.kernels.append(kernel_fn(gk.kernel, gk.in_specs + gk.out_specs))
        k = len(self.kernels) - 1
        self.by_hash.setdefault(h, []).append((fn, consts, layout, k))
        return k

    def plan(self, main: Function) -> GraphPlan:
        if self.blocked_layouts:
            self.layouts = plan_layouts(main, self.target, self.tuning)
        # where values change layout: what the layout plan could not avoid
        self.layout_changes = layout_changes(main, self.layouts, self.target)
        memo: dict[int, Any] = {}
        inputs = []
        for p in main.params:
            memo[id(p)] = self.value("input", p.checked_type, p.name_hint)
            inputs.append(memo[id(p)])
        for e in _graph_order(main.body):
            memo[id(e)] = self.node(e, memo)
        out = memo[id(main.body)]
        for v in _flat_ids(out):
            if self.values[v].kind == "temp":
                self.values[v].kind = "output"
        inputs, out = self._drop_unused_constants(inputs, out)
        return GraphPlan(self.kernels, self.values, self.steps, inputs, out)

    def _drop_unused_constants(self, inputs: list[int], out: Any) -> tuple[list[int], Any]:
        """Forget constants no step reads: a weight a kernel takes packed is kept only in
        its packed form (else a model would hold, and save, every such weight twice)."""
        used = {v for st in self.steps for v in (*st.inputs, *st.outputs)}
        used |= set(inputs) | set(_flat_ids(out))
        keep = [v for v, val in enumerate(self.values) if val.kind != "const" or v in used]
        if len(keep) == len(self.values):
            return inputs, out
        new_id = {v: k for k, v in enumerate(keep)}
        self.values = [self.values[v] for v in keep]
        for st in self.steps:
            st.inputs = [new_id[v] for v in st.inputs]
            st.outputs = [new_id[v] for v in st.outputs]
        return [new_id[v] for v in inputs], _renumber(out, new_id)

    def node(self, e: Expr, memo: dict[int, Any]) -> Any:
        if isinstance(e, Constant):
            # ascontiguousarray makes a 0-d array 1-d: keep a scalar's shape () (the
            # kernel's parameter; the CUDA backend checks it)
            data = np.ascontiguousarray(e.data).reshape(np.shape(e.data))
            return self.value("const", TensorType(data.shape, str(data.dtype)), data=data)
        if isinstance(e, Tuple):
            return [memo[id(f)] for f in e.fields]
        if isinstance(e, TupleGetItem):
            return memo[id(e.tuple_value)][e.index]
        if isinstance(e, Call) and isinstance(e.op, Op):
            if e.op.name == "runtime.check_shape":  # static shapes: checked at the inputs
                return memo[id(e.args[0])]
            if e.op.name == "shape_of":  # static shapes: a constant (FoldConstant may be off)
                from relay_ir.op.shape_of import static_shape_of

                data = np.ascontiguousarray(static_shape_of(e, e.args[0].checked_type))
                return self.value("const", TensorType(data.shape, str(data.dtype)), data=data)
            if e.op.name == "dyn.reshape":  # its new shape is only known at run time
                raise not_dataflow_error("dyn.reshape, a reshape to a shape computed at run "
                                         "time (SimplifyExpr makes the static reshape of "
                                         "one known while compiling)")
            if e.op.name == "dyn.strided_slice":  # its bounds are only known at run time
                raise not_dataflow_error("dyn.strided_slice, a slice whose bounds are "
                                         "computed at run time (SimplifyExpr makes the static "
                                         "strided_slice of bounds known while compiling)")
            raise RelayError(f"relay_ir.build: op {e.op.name} was left outside every fused "
                             "group (a FuseOps bug?)")
        if isinstance(e, Call) and isinstance(e.op, Function) and e.op.attr("Primitive"):
            layout = self.layouts.get(id(e))
            k = self.kernel_for(e.op, constant_params(e), layout)
            ins = [v for a in e.args for v in _flat_ids(memo[id(a)])]
            for i, pack in self.group_kernels[k].prepack.items():
                val = self.values[ins[i]]
                data = pack(val.data)  # may change the dtype too (int8 -> int32 words)
                ins[i] = self.value("const", TensorType(data.shape, str(data.dtype)),
                                    data=data)
            blocks = layout.out_blocks if layout else (0,) * len(flatten_types(e.checked_type))
            outs = [self.value("temp", t, block=b)
                    for t, b in zip(flatten_types(e.checked_type), blocks)]
            gk = self.group_kernels[k]
            self.steps.append(Step(k, ins, outs, gk.name, gk.workload_key))
            return _nest_like(e.checked_type, iter(outs))
        raise not_dataflow_error(f"a {type(e).__name__} in @main")


def _graph_order(body: Expr) -> list[Expr]:
    """Post order over @main's dataflow, not entering the Primitive functions."""
    return [e for e in post_order(body, skip=lambda n: isinstance(n, Function))
            if not isinstance(e, (Var, Function))]


def _renumber(v: Any, new_id: dict[int, int]) -> Any:
    return [_renumber(x, new_id) for x in v] if isinstance(v, list) else new_id[v]


def _flat_ids(v: Any) -> list[int]:
    return [x for f in v for x in _flat_ids(f)] if isinstance(v, list) else [v]


def _nest_like(t: Any, it: Any) -> Any:
    from relay_ir.ty import TupleType

    return [_nest_like(f, it) for f in t.fields] if isinstance(t, TupleType) else next(it)


def compile_static(mod: IRModule, target: Any, pass_context: T.PassContext | None = None,
                   tuning: TuningScope | None = None) -> tuple[GraphPlan, _Planner]:
    """Optimise, fuse and plan a module whose @main has static shapes, under `pass_context`
    (default: the current one), configuring templates with the records of `tuning` (None:
    fallback configs; see relay_ir.backend.tuned).

        >>> plan, planner = compile_static(mod, "llvm")   # doctest: +SKIP
    """
    with pass_context or nullcontext():
        fused = optimize_for_build(mod)
        blocked = layout_planning_enabled()
    planner = _Planner(target, tuning, blocked)
    return planner.plan(fused["main"]), planner


def _dim(d: Any) -> Any:
    if isinstance(d, int):
        return d
    return d.name if isinstance(d, ShapeVar) else None


def build(mod: Any, target: Any = "llvm", params: dict[str, Any] | None = None,
          tuning_db: Any = None, any_device: bool = False) -> Any:
    """Compile a dataflow @main into a CompiledModel: `relay_ir.build(mod).run(x=x)`.

    `tuning_db` (a path or an open tuning_logs.TuningDatabase; default: the database of an
    enclosing `tuning_logs.using_database` block, if any) supplies the best tuned config of
    each tunable task on this device; with `any_device=True`, a task this device has no
    record of takes the best record of another device of the same target, and a warning
    says how many tasks took records of other devices. Tasks without a record use the
    template's fallback schedule, and a warning lists them. For target "accel", the int8
    conv2d/dense groups of a quantized model run on the simulated accelerator and the
    rest on the host (relay_ir.backend.accel_pack; `lib.placement`). A @main with `?` dims
    compiles at the first run with each shape, reopening the same database file read-only.
    Control flow, ADTs, references and closures raise a RelayError pointing to
    relay_ir.vm.compile.

        >>> lib = relay_ir.build(mod, tuning_db="tuning_logs/tuning.db")  # doctest: +SKIP
        >>> lib = relay_ir.build(mod, tuning_db="other.db", any_device=True)  # doctest: +SKIP
    """
    from tuning_logs import resolve_database

    with resolve_database(tuning_db, readonly=True) as db:
        scope = TuningScope(db, any_device)
        model = build_with_scope(mod, target, params, scope)
    scope.warn(stacklevel=2)
    return model


def build_with_scope(mod: Any, target: Any, params: dict[str, Any] | None,
                     tuning: TuningScope) -> Any:
    """`build` reading its records through `tuning` (a TuningScope over an open database,
    or over None), which holds afterwards what the build found and applied: `tessel
    compile` reports `tuning.report()` and warns with `tuning.warn()`, the caller's job
    here. The model's later compilations (`?` dims) reopen the same database file.

        >>> from relay_ir.backend.tuned import TuningScope
        >>> scope = TuningScope(None)
        >>> lib = build_with_scope(mod, "llvm", None, scope)  # doctest: +SKIP
        >>> scope.report()
        'no tuning database: every task uses its default schedule'
    """
    from relay_ir.backend.model import CompiledModel
    from tessel_target import Target

    kind = Target.parse(target).kind
    if kind not in ("llvm", "cuda", "accel"):
        raise RelayError(f"relay_ir.build compiles for the CPU ('llvm'), NVIDIA GPUs "
                         f"('cuda', 'cuda -sim') and the accelerator ('accel'), got target "
                         f"'{target}'")
    mod = bind_params(main_of(mod), params)
    check_dataflow(mod["main"])
    typed = T.InferType()(mod)
    main = typed["main"]
    specs = []
    for p in main.params:
        t = p.checked_type
        if not isinstance(t, TensorType):
            raise not_dataflow_error(f"a parameter %{p.name_hint} of type {t}")
        specs.append((p.name_hint, tuple(_dim(d) for d in t.shape), t.dtype))
    static = all(isinstance(d, int) for _, s, _ in specs for d in s)
    if kind == "accel":  # the accelerator's groups, the host's, and the packing between
        if not static:
            raise RelayError("relay_ir.build for 'accel' needs static input shapes; give "
                             "@main's inputs concrete dims")
        from relay_ir.backend.accel_pack import compile_accel

        plan = compile_accel(mod, target, tuning)
    else:
        plan = compile_static(mod, target, tuning=tuning) if static else None
    return CompiledModel(mod, target, specs, plan,
                         tuning=TuningSource.of(tuning.db, tuning.any_device),
                         pass_context=T.PassContext.current())


def specialize(mod: IRModule, shapes: list[tuple[int, ...]]) -> IRModule:
    """@main with its parameters re-annotated with these concrete shapes."""
    main = mod["main"]
    new = tuple(Var(p.name_hint, TensorType(s, (p.type_annotation or p.checked_type).dtype))
                for p, s in zip(main.params, shapes))
    body = substitute(main.body, dict(zip(main.params, new)))
    return mod.with_function("main", Function(new, body, None, main.type_params, main.attrs))


__all__ = ["build", "build_with_scope", "check_inputs", "specialize", "compile_static"]
