"""`relay_ir.vm.compile`: a whole IRModule -> an Executable of bytecode over kernels.

    >>> import relay_ir
    >>> exe = compile(relay_ir.parse("def @main(%x: Tensor[(2,), float32], %n: int32) {"
    ...                              " if (less(%n, 1)) { %x } else { negative(%x) } }"))
    >>> print(exe.bytecode)
    fn @main(%0, %1) [7 registers]
      0: alloc_storage size=64 alignment=64 dst=%2
      1: alloc_tensor storage=%2 offset=0 shape=() dtype='bool' dst=%3
      2: invoke_packed kernel=0 arity=2 output_size=1 args=(%1, %3)  # fused_less
      3: load_consti val=1 dst=%4
      4: if test=%3 target=%4 true_offset=1 false_offset=2  # -> 5, 6
      5: ret %0
      6: alloc_storage size=8 alignment=16 dst=%5
      7: alloc_tensor storage=%5 offset=0 shape=(2,) dtype='float32' dst=%6
      8: invoke_packed kernel=1 arity=2 output_size=1 args=(%0, %6)  # fused_negative
      9: ret %6

The pipeline: @main's params bound as constants, then relay_ir.build's pass sequence
(relay_ir.backend.pipeline.optimize_for_build: type inference, simplification, constant
folding, FuseOps) over every global function; then each function in A-normal form is
emitted as bytecode (relay_ir.vm.codegen), local functions lifted into VM functions of
their own, and each function's temporaries given offsets in one storage
(relay_ir.vm.storage_plan; above, the `less` result, dead at the `if`). Every fused group
becomes one kernel through relay_ir.backend.lower_group with the op strategies and tuning
records build uses; identical groups (structurally equal, same constant positions)
compile once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from relay_ir.backend.executor import KernelFn, Step, Value, aligned, pack_constants
from relay_ir.backend.inplace import inplace_enabled
from relay_ir.backend.lower_group import GroupLayout, constant_params, group_name
from relay_ir.backend.pipeline import _Planner, bind_params, main_of, optimize_for_build
from relay_ir.backend.tuned import TuningScope, TuningSource
from relay_ir.expr import Call, Constructor, Function, GlobalVar, Var
from relay_ir.module import IRModule
from relay_ir.transform.a_normal_form import to_a_normal_form
from relay_ir.ty import TensorType, TupleType
from relay_ir.vm import bytecode as B
from relay_ir.vm.codegen import FunctionCompiler
from relay_ir.vm.dynamic import DynamicKernel
from relay_ir.vm.kernels import (
    InterpretedGroup,
    OpKernel,
    StaticKernel,
    has_strategies,
    is_dynamic_group,
)
from relay_ir.vm.layouts import plan_function
from relay_ir.vm.storage_plan import plan_storage
from tessel_errors import RelayError

# A parameter's check: ("tensor", shape with None for `?` / str for a shape var, dtype),
# ("tuple", None, ""), or ("any", None, "") for ADTs, closures and references.
ParamSpec = tuple[str, str, Any, str]


@dataclass
class Executable:
    """A compiled program: bytecode, constants, ADT constructors and kernels.

    `print(exe.bytecode)` shows every function, one instruction a line.
    """

    bytecode: B.Bytecode
    constants: list[np.ndarray]
    constructors: list[Constructor]
    kernels: list[Any]
    params: dict[str, list[ParamSpec]]  # global function name -> its parameters' checks
    target: str = "llvm"
    function_index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.constants = pack_in_use_order(self.constants, self.bytecode)

    def save(self, path: str) -> None:
        """Write the executable to folder `path` (bytecode, constants, object code; no
        pickle): `exe.save("m.tvm"); relay_ir.vm.load("m.tvm")`."""
        from relay_ir.vm.serialize import save

        save(self, path)

    @property
    def functions(self) -> tuple[B.Function, ...]:
        """The VM functions (globals first, then lifted closures and constructor
        wrappers)."""
        return self.bytecode.functions


def pack_in_use_order(constants: list[Any], bytecode: B.Bytecode) -> list[Any]:
    """The constants moved into one arena in the order the bytecode loads them, each
    ALIGN-aligned and read-only: build's packing (relay_ir.backend.executor.pack_constants,
    the same TESSEL_PACK_CONSTANTS switch), so a static model on the VM streams its weights
    from memory as the graph executor does.

        >>> from relay_ir.vm import bytecode as B
        >>> code = B.Bytecode((B.Function("main", 0, (B.LoadConst(1, 0), B.Ret(0)), 1),), ())
        >>> a, b = pack_in_use_order([np.ones(3, "float32"), np.ones(5, "float32")], code)
        >>> a.ctypes.data - b.ctypes.data   # constant 1 is loaded first
        64
    """
    order = [ins.index for f in bytecode.functions for ins in f.instructions
             if isinstance(ins, B.LoadConst)]
    values = [Value("const", np.shape(c), str(c.dtype), data=c)
              if isinstance(c, np.ndarray) else Value("input", (), "") for c in constants]
    pack_constants(values, [Step(-1, order, [], "vm")])
    out = []
    for c, v in zip(constants, values):
        if v.kind == "const" and v.data is not c:
            c = v.data.view()
            c.flags.writeable = False  # a caller writing into a result must not change it
        out.append(c)
    return out


def compile(mod: Any, target: str = "llvm", params: dict[str, Any] | None = None,
            tuning_db: Any = None) -> Executable:
    """Compile a whole module (control flow, ADTs, closures, references, recursion) for
    the VM.

    `params` bind @main's parameters by name as constants; `tuning_db` (a path or an open
    tuning_logs.TuningDatabase; default: the enclosing `using_database`) supplies tuned
    configs exactly as for relay_ir.build.

        >>> exe = relay_ir.vm.compile(relay_ir.parse(text))          # doctest: +SKIP
        >>> relay_ir.vm.VirtualMachine(exe).run(np.int32(5), x)      # doctest: +SKIP
    """
    from tessel_target import Target
    from tuning_logs import resolve_database

    if Target.parse(target).kind != "llvm":
        raise RelayError(f"relay_ir.vm.compile compiles for the CPU ('llvm'), got target "
                         f"'{target}'")
    with resolve_database(tuning_db, readonly=True) as db:
        scope = TuningScope(db, False)
        exe = _ModuleCompiler(target, scope, TuningSource.of(db)).run(main_of(mod), params)
    scope.warn(stacklevel=2)
    return exe


def _param_spec(p: Var) -> ParamSpec:
    t = p.type_annotation or p.checked_type
    if isinstance(t, TensorType):
        shape = tuple(d if isinstance(d, int) else getattr(d, "name", None) for d in t.shape)
        return (p.name_hint, "tensor", shape, t.dtype)
    if isinstance(t, TupleType):
        return (p.name_hint, "tuple", None, "")
    return (p.name_hint, "any", None, "")


class _ModuleCompiler:
    """The tables every function's code indexes, and the worklist of functions."""

    def __init__(self, target: str, tuning: TuningScope, source: TuningSource) -> None:
        self.target, self.tuning, self.source = target, tuning, source
        self.planner = _Planner(target, tuning)  # build's structural kernel cache
        self.functions: list[B.Function | None] = []
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.constants: list[np.ndarray] = []
        self.const_ids: dict[int, int] = {}
        self.constructors: list[Constructor] = []
        self.ctor_ids: dict[tuple[str, str], int] = {}
        self.ctor_funcs: dict[int, int] = {}
        self.kernels: list[Any] = []
        self.static_of_planner: dict[int, int] = {}
        # (group, its layout, kernel index): equal groups in equal layouts share a kernel
        self.dynamic_cache: list[tuple[Function, GroupLayout | None, int]] = []
        self.layouts: dict[int, GroupLayout] = {}  # the current function's (vm.layouts)
        self.lifted = 0
        self.kept: list[Any] = []

    def run(self, mod: IRModule, params: dict[str, Any] | None) -> Executable:
        mod = bind_params(mod, params)
        if not mod.has_function("main"):
            raise RelayError("relay_ir.vm.compile: the module has no @main")
        fused = optimize_for_build(mod)
        globals_ = sorted(fused.functions.items(), key=lambda kv: kv[0].name_hint != "main")
        for gv, _ in globals_:
            self.reserve(gv.name_hint)
        specs = {}
        for gv, fn in globals_:
            if fn.attr("Primitive"):
                continue
            specs[gv.name_hint] = [_param_spec(p) for p in fn.params]
            self.layouts = plan_function(fn, self.target, self.tuning)
            anf = to_a_normal_form(fn)
            fc = FunctionCompiler(self, gv.name_hint, list(anf.params))
            fc.tail(anf.body)
            self.functions[self.index[gv.name_hint]] = fc.finish()
        funcs = tuple(f for f in self.functions if f is not None)
        if len(funcs) != len(self.functions):
            raise RelayError("relay_ir.vm.compile: a global holds a bare fused group")
        static = [not k.dynamic for k in self.kernels]
        inplace = self.inplace_pairs if inplace_enabled() else None
        funcs = tuple(plan_storage(f, static.__getitem__, inplace) for f in funcs)
        bytecode = B.Bytecode(funcs, tuple(k.name for k in self.kernels))
        return Executable(bytecode, self.constants, self.constructors, self.kernels, specs,
                          self.target, dict(self.index))

    def inplace_pairs(self, k: int) -> list[tuple[int, int]] | None:
        """Kernel k's (input slot, output slot) pairs whose output may be written over the
        input: a static group kernel's, proven from its loop IR (relay_ir.backend.inplace);
        None for the others."""
        fn = getattr(self.kernels[k], "fn", None)
        return fn.inplace_pairs() if isinstance(fn, KernelFn) else None

    # functions

    def reserve(self, name: str) -> int:
        self.functions.append(None)
        self.names.append(name)
        self.index.setdefault(name, len(self.functions) - 1)
        return len(self.functions) - 1

    def function_index(self, gv: GlobalVar) -> int:
        if gv.name_hint not in self.index:
            raise RelayError(f"relay_ir.vm.compile: unknown global @{gv.name_hint}")
        return self.index[gv.name_hint]

    def lift(self, parent: str, fn: Function, captured: list[Var], self_var: Var | None) -> int:
        """A VM function for a local function: params are the captured vars, then its own."""
        # `fn` is already in A-normal form (its enclosing global was converted whole)
        self.lifted += 1
        idx = self.reserve(f"{parent}.lambda{self.lifted}")
        own = (self_var, idx, len(captured)) if self_var is not None else None
        fc = FunctionCompiler(self, self.names[idx], captured + list(fn.params), own)
        fc.tail(fn.body)
        self.functions[idx] = fc.finish()
        return idx

    def constructor_function(self, ctor: Constructor) -> int:
        """A VM function `fn(fields...) = Ctor(fields...)`, for a constructor used as a
        value (e.g. passed to @foldr)."""
        tag = self.constructor(ctor)
        if tag not in self.ctor_funcs:
            idx = self.reserve(f"ctor.{ctor.name_hint}")
            n = len(ctor.inputs)
            code = (B.AllocADT(tag, tuple(range(n)), n), B.Ret(n))
            self.functions[idx] = B.Function(self.names[idx], n, code, n + 1)
            self.ctor_funcs[tag] = idx
        return self.ctor_funcs[tag]

    # tables

    def constant(self, data: Any) -> int:
        k = self.const_ids.get(id(data))
        if k is None:
            arr = aligned(np.asarray(data)).view()  # (ascontiguousarray makes 0-d 1-d)
            arr.flags.writeable = False  # a caller writing into a result must not change it
            self.constants.append(arr)
            k = len(self.constants) - 1
            self.const_ids[id(data)] = k
            self.kept.append(data)  # so no id in const_ids is reused while compiling
        return k

    def constructor(self, ctor: Constructor) -> int:
        key = (ctor.belong_to.name, ctor.name_hint)
        if key not in self.ctor_ids:
            self.constructors.append(ctor)
            self.ctor_ids[key] = len(self.constructors) - 1
        return self.ctor_ids[key]

    def op_kernel(self, call: Call) -> int:
        self.kernels.append(OpKernel(call))
        return len(self.kernels) - 1

    def layout_of(self, fn: Function) -> GroupLayout | None:
        """The stored layout of a group's values in the function being compiled (None:
        all logical)."""
        return self.layouts.get(id(fn))

    def group_kernel(self, call: Call) -> tuple[int, dict[int, np.ndarray]]:
        """The kernel of a fused group call (in the layout the function's plan gives it)
        and its constant arguments packed for it."""
        fn: Function = call.op  # type: ignore[assignment]
        if not has_strategies(fn):
            self.kernels.append(InterpretedGroup(fn, group_name(fn)))
            return len(self.kernels) - 1, {}
        if is_dynamic_group(fn):
            from relay_ir.structural import structural_equal

            layout = self.layout_of(fn)
            for other, other_layout, k in self.dynamic_cache:
                if other_layout == layout and structural_equal(other, fn):
                    return k, {}
            self.kernels.append(DynamicKernel(fn, group_name(fn), self.target, self.source,
                                              layout))
            self.dynamic_cache.append((fn, layout, len(self.kernels) - 1))
            return len(self.kernels) - 1, {}
        consts = constant_params(call)
        pk = self.planner.kernel_for(fn, consts, self.layout_of(fn))
        if pk not in self.static_of_planner:
            group = self.planner.group_kernels[pk]
            self.kernels.append(StaticKernel.of_group(group, self.planner.kernels[pk]))
            self.static_of_planner[pk] = len(self.kernels) - 1
        k = self.static_of_planner[pk]
        packs = self.kernels[k].group.prepack
        packed = {i: aligned(np.asarray(pack(call.args[i].data))) for i, pack in packs.items()}
        return k, packed


__all__ = ["Executable", "compile", "pack_in_use_order"]
