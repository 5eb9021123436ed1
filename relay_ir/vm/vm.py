"""The virtual machine: runs an Executable's bytecode on numpy values.

Values are the interpreter's (relay_ir.interpreter): numpy arrays, Python tuples,
`ConstructorValue`, `RefValue`; a closure is a `VMClosure` (a function index and its
captured values). So a VM result compares with the interpreter's directly.

The dispatch loop never recurses in Python: a call pushes the caller's frame (function,
pc, registers, result register) onto a list and a Ret pops it, so a non-tail recursion
10^4 deep costs 10^4 list entries; a call marked tail replaces the frame, so a tail
recursion of any depth runs in one.

    >>> import relay_ir, relay_ir.vm
    >>> mod = relay_ir.parse("def @main(%x: Tensor[(2,), float32]) { negative(%x) }")
    >>> VirtualMachine(relay_ir.vm.compile(mod)).run(np.ones(2, "float32"))
    array([-1., -1.], dtype=float32)
    >>> vm.invoke("length", some_list)                   # doctest: +SKIP
    >>> print(vm.profile(x))                             # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.backend.executor import aligned_bytes, bind_by_name, check_inputs
from relay_ir.backend.profile import ProfileRow, ProfileTable
from relay_ir.interpreter import ConstructorValue, RefValue, _short
from relay_ir.vm import bytecode as B
from tessel_errors import KernelArgumentError, RelayRuntimeError

# Frames that may wait on deeper calls before the program counts as running away.
MAX_FRAMES = 1_000_000


@dataclass(frozen=True, eq=False)
class VMClosure:
    """A function value of the VM: functions[func] with its captured values."""

    func: int
    captured: tuple[Any, ...]

    def __repr__(self) -> str:
        return f"VMClosure(func {self.func}, {len(self.captured)} captured)"


@dataclass
class VMProfile:
    """Where a run's time went: per kernel (all calls together) and per function (time in
    its own instructions and kernels, callees excluded)."""

    kernels: ProfileTable
    functions: ProfileTable
    calls: dict[str, int]
    instructions: int = 0  # executed, kernel calls included: the VM's own work

    def __str__(self) -> str:
        return (f"kernels:\n{self.kernels}\n\nfunctions:\n{self.functions}\n\n"
                f"{self.instructions} instructions")


class VirtualMachine:
    """Runs an Executable: `vm.run(*args)` calls @main, `vm.invoke(name, *args)` any
    global function; keyword arguments bind parameters by name.

        >>> vm = VirtualMachine(exe)           # doctest: +SKIP
        >>> vm.run(x=np.ones(3, "float32"))    # doctest: +SKIP
    """

    def __init__(self, exe: Any) -> None:
        self.exe = exe
        self.functions = exe.bytecode.functions
        self.tags = {(c.belong_to.name, c.name_hint): k
                     for k, c in enumerate(exe.constructors)}
        self._timer: _Timer | None = None
        # the constants are read-only (a caller must not change one returned to it), and
        # a read-only array's address costs a slow lookup: kernels get them from here
        self._known = {id(c): c.ctypes.data for c in exe.constants
                       if isinstance(c, np.ndarray) and c.size}

    # entry points

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """@main on these arguments."""
        return self.invoke("main", *args, **kwargs)

    def invoke(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The global function `name` on these arguments (checked as lib.run checks)."""
        if name not in self.exe.params:
            raise KernelArgumentError(f"the executable has no function @{name}; its functions "
                                      f"are {', '.join('@' + n for n in self.exe.params)}")
        values = _bind(name, self.exe.params[name], args, kwargs)
        return self._execute(self.exe.function_index[name], values)

    def profile(self, *args: Any, **kwargs: Any) -> VMProfile:
        """Run @main once, timing every kernel call and every function's own time."""
        self._timer = _Timer(self)
        try:
            self.run(*args, **kwargs)
            return self._timer.report()
        finally:
            self._timer = None

    # the dispatch loop

    def _execute(self, func: int, args: list[Any]) -> Any:  # noqa: C901 (one dispatch loop)
        fn = self.functions[func]
        regs: list[Any] = [None] * fn.num_registers
        regs[:len(args)] = args
        code, pc = fn.instructions, 0
        frames: list[tuple[B.Function, int, list[Any], int]] = []
        timer = self._timer
        if timer:
            timer.enter(fn.name)
        # the loop's hot names as locals: an instruction costs a few hundred nanoseconds,
        # and attribute lookups were a visible part of it
        constants, kernels, known = self.exe.constants, self.exe.kernels, self._known
        InvokePacked, AllocStorage, AllocTensor, LoadConst = \
            B.InvokePacked, B.AllocStorage, B.AllocTensor, B.LoadConst
        empty, uint8, ndarray = np.empty, np.uint8, np.ndarray
        while True:
            ins = code[pc]
            kind = type(ins)
            if timer:
                timer.instructions += 1
            if kind is InvokePacked:
                kernel = kernels[ins.kernel]
                if timer or kernel.dynamic:
                    self._invoke_packed(ins, regs, timer, known)
                else:
                    kernel([regs[r] for r in ins.args], known)
            elif kind is AllocStorage:
                # numpy's own allocation is 16-byte aligned: enough below a cache line
                regs[ins.dst] = empty(ins.size, uint8) if ins.alignment <= 16 else \
                    aligned_bytes(ins.size)
            elif kind is AllocTensor:
                # np.ndarray over the storage's buffer is 3x cheaper than slicing, view and
                # reshape, and still refuses a tensor that would run past the storage
                regs[ins.dst] = ndarray(ins.shape, ins.dtype, regs[ins.storage], ins.offset)
            elif kind is LoadConst:
                regs[ins.dst] = constants[ins.index]
            elif kind is B.LoadConsti:
                regs[ins.dst] = ins.val
            elif kind is B.Move:
                regs[ins.dst] = regs[ins.src]
            elif kind is B.If:
                pc += ins.true_offset if _scalar(regs[ins.test]) == regs[ins.target] \
                    else ins.false_offset
                continue
            elif kind is B.Goto:
                pc += ins.offset
                continue
            elif kind is B.GetField:
                regs[ins.dst] = _field(regs[ins.obj], ins.index)
            elif kind is B.GetTag:
                regs[ins.dst] = self._tag(regs[ins.obj])
            elif kind is B.AllocADT:
                fields = tuple(regs[r] for r in ins.fields)
                regs[ins.dst] = fields if ins.tag == B.TUPLE_TAG else \
                    ConstructorValue(self.exe.constructors[ins.tag], fields)
            elif kind is B.AllocClosure:
                regs[ins.dst] = VMClosure(ins.func, tuple(regs[r] for r in ins.captured))
            elif kind is B.Invoke or kind is B.InvokeClosure:
                if kind is B.Invoke:
                    callee, call_args = ins.func, [regs[r] for r in ins.args]
                else:
                    clo = regs[ins.closure]
                    if not isinstance(clo, VMClosure):
                        raise RelayRuntimeError(f"@{fn.name} calls a {type(clo).__name__}, "
                                                "not a function")
                    callee = clo.func
                    call_args = [*clo.captured, *(regs[r] for r in ins.args)]
                if not ins.tail:
                    frames.append((fn, pc + 1, regs, ins.dst))
                    if len(frames) > MAX_FRAMES:
                        raise RelayRuntimeError(
                            f"the program recursed deeper than the VM allows ({MAX_FRAMES:,} "
                            f"frames, in @{fn.name}); is the recursion unbounded?")
                fn = self.functions[callee]
                if len(call_args) != fn.num_params:
                    raise RelayRuntimeError(f"@{fn.name} expects {fn.num_params} argument(s), "
                                            f"got {len(call_args)}")
                regs = [None] * fn.num_registers
                regs[:len(call_args)] = call_args
                code, pc = fn.instructions, 0
                if timer:
                    timer.enter(fn.name)
                continue
            elif kind is B.Ret:
                result = regs[ins.result]
                if not frames:
                    if timer:
                        timer.leave()
                    return result
                fn, pc, regs, dst = frames.pop()
                regs[dst] = result
                code = fn.instructions
                if timer:
                    timer.enter(fn.name, call=False)
                continue
            elif kind is B.RefNew:
                regs[ins.dst] = RefValue(regs[ins.value])
            elif kind is B.RefRead:
                regs[ins.dst] = _ref(regs[ins.ref], fn.name).value
            elif kind is B.RefWrite:
                _ref(regs[ins.ref], fn.name).value = regs[ins.value]
            elif kind is B.ShapeOf:
                regs[ins.dst] = np.asarray(regs[ins.tensor].shape, dtype="int64")
            elif kind is B.ReshapeTensor:
                shape = tuple(int(d) for d in regs[ins.shape_reg])
                regs[ins.dst] = regs[ins.tensor].reshape(shape)
            elif kind is B.Fatal:
                what = "" if ins.value is None else f" {_short(regs[ins.value])}"
                raise RelayRuntimeError(f"{ins.message}{what}")
            else:
                raise RelayRuntimeError(f"the VM has no case for instruction {ins.opcode}")
            pc += 1

    def _invoke_packed(self, ins: B.InvokePacked, regs: list[Any], timer: Any,
                       known: dict[int, int]) -> None:
        kernel = self.exe.kernels[ins.kernel]
        args = [regs[r] for r in ins.args]
        t0 = time.perf_counter() if timer else 0.0
        outs = kernel(args, known)
        if timer:
            timer.kernel(kernel.name, time.perf_counter() - t0, outs or args[-1:])
        if outs is not None:
            for r, v in zip(ins.args[ins.arity - ins.output_size:], outs):
                regs[r] = v

    def _tag(self, value: Any) -> int:
        if not isinstance(value, ConstructorValue):
            raise RelayRuntimeError(f"a match expects an ADT value, got {type(value).__name__}")
        c = value.constructor
        tag = self.tags.get((c.belong_to.name, c.name_hint))
        if tag is None:
            return -2  # a constructor no code of this executable tests for: no clause matches
        return tag


def _scalar(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        if v.size != 1:
            raise RelayRuntimeError(f"if condition must be a bool scalar, got a tensor of "
                                    f"shape {v.shape}")
        return v.item()
    return v


def _field(obj: Any, index: int) -> Any:
    if isinstance(obj, tuple):
        return obj[index]
    if isinstance(obj, ConstructorValue):
        return obj.fields[index]
    raise RelayRuntimeError(f"field {index} of a {type(obj).__name__}, which has no fields")


def _ref(cell: Any, where: str) -> RefValue:
    if not isinstance(cell, RefValue):
        raise RelayRuntimeError(f"@{where} uses a {type(cell).__name__} as a reference")
    return cell


def _bind(name: str, specs: list[Any], args: tuple, kwargs: dict[str, Any]) -> list[Any]:
    """The arguments in parameter order: tensors checked as lib.run checks its inputs
    (name, shape, dtype), tuples made tuples, other values (ADTs, refs) passed as they
    are."""
    call = "run()" if name == "main" else f"invoke({name!r})"
    given = bind_by_name([s[0] for s in specs], args, kwargs, call)
    tensors = [(n, shape, dtype) for n, kind, shape, dtype in specs if kind == "tensor"]
    checked = iter(check_inputs(tensors, [given[n] for n, _, _ in tensors], {}))
    out = []
    for n, kind, _, _ in specs:
        v = given[n]
        if kind == "tensor":
            out.append(next(checked))
        elif kind == "tuple":
            if not isinstance(v, (tuple, list)):
                raise KernelArgumentError(f"{call}: input {n!r} must be a tuple, got "
                                          f"{type(v).__name__}")
            out.append(tuple(v))
        else:
            out.append(v)
    return out


class _Timer:
    """Accumulates a profiled run's kernel times and per-function own times."""

    def __init__(self, vm: VirtualMachine) -> None:
        self.kernel_time: dict[str, float] = {}
        self.kernel_shape: dict[str, tuple[int, ...]] = {}
        self.function_time: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.current: str | None = None
        self.instructions = 0
        self.since = time.perf_counter()

    def enter(self, name: str, call: bool = True) -> None:
        self.leave()
        self.current = name
        if call:
            self.calls[name] = self.calls.get(name, 0) + 1

    def leave(self) -> None:
        now = time.perf_counter()
        if self.current is not None:
            self.function_time[self.current] = self.function_time.get(self.current, 0.0) + \
                now - self.since
        self.since = now

    def kernel(self, name: str, seconds: float, outs: list[Any]) -> None:
        self.kernel_time[name] = self.kernel_time.get(name, 0.0) + seconds
        first = outs[0] if outs else None
        self.kernel_shape[name] = tuple(first.shape) if isinstance(first, np.ndarray) else ()

    def report(self) -> VMProfile:
        kernels = ProfileTable([ProfileRow(k, self.kernel_shape[k], t)
                                for k, t in self.kernel_time.items()])
        funcs = ProfileTable([ProfileRow(f, (), t) for f, t in self.function_time.items()])
        return VMProfile(kernels, funcs, dict(self.calls), self.instructions)


__all__ = ["VMClosure", "VMProfile", "VirtualMachine"]
