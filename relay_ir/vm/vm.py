"""The virtual machine: runs an Executable's bytecode on numpy values.

Values are the interpreter's (relay_ir.interpreter): numpy arrays, Python tuples,
`ConstructorValue`, `RefValue`; a closure is a `VMClosure` (a function index and its
captured values). So a VM result compares with the interpreter's directly.

The bytecode runs translated: each VM function becomes a Python function once per VM
(relay_ir.vm.translate), with no dispatch per instruction, shapes the compiler proved left
unchecked and kernels called through prepared pointer arrays. Calls are Python calls up to
a depth (translate.DEPTH); deeper, functions run as generators under one frame loop
(relay_ir.vm.runtime.run_frames): a call waiting on a deeper one costs a list entry, not
Python stack, so a non-tail recursion 10^4 deep runs, and a tail call replaces its
caller's frame, so a tail recursion of any depth runs in one.
Each thread running a VM gets its own instance of the functions (their temporaries'
buffers and pointer arrays), so two threads may run one VM at once.

    >>> import relay_ir, relay_ir.vm
    >>> mod = relay_ir.parse("def @main(%x: Tensor[(2,), float32]) { negative(%x) }")
    >>> VirtualMachine(relay_ir.vm.compile(mod)).run(np.ones(2, "float32"))
    array([-1., -1.], dtype=float32)
    >>> vm.invoke("length", some_list)                   # doctest: +SKIP
    >>> print(vm.profile(x))                             # doctest: +SKIP
"""

from __future__ import annotations

import threading
import time
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.backend.executor import bind_by_name, check_inputs
from relay_ir.backend.profile import ProfileRow, ProfileTable
from relay_ir.interpreter import ConstructorValue, RefValue
from relay_ir.vm import native
from relay_ir.vm import runtime as R
from relay_ir.vm.translate import Translation
from tessel_errors import KernelArgumentError, RelayRuntimeError

# Frames that may wait on deeper calls before the program counts as running away.
MAX_FRAMES = 1_000_000


@dataclass(frozen=True, eq=False, slots=True)
class VMClosure:
    """A function value of the VM: functions[func] with its captured values."""

    func: int
    captured: tuple[Any, ...]

    def __post_init__(self) -> None:
        # a closure made by hand reaches the VM's function table as it is: refuse what
        # could only index it wrongly (a negative index would count from the end)
        if self.func.__class__ is not int or self.func < 0:
            raise KernelArgumentError(f"VMClosure: func must be the index of a function of "
                                      f"the executable (an int >= 0), got {self.func!r}")
        if self.captured.__class__ is not tuple:
            raise KernelArgumentError(f"VMClosure: captured must be a tuple of values, got a "
                                      f"{type(self.captured).__name__}")

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
        # the constants are read-only (a caller must not change one returned to it), and
        # a read-only array's address costs a slow lookup: kernels get them from here
        self._known = {id(c): c.ctypes.data for c in exe.constants
                       if isinstance(c, np.ndarray) and c.size}
        self._tags = R.tag_reader(exe.constructors)
        self._translations: dict[bool, Translation] = {}
        self._local = threading.local()

    # entry points

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """@main on these arguments."""
        return self.invoke("main", *args, **kwargs)

    def invoke(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The global function `name` on these arguments (checked as lib.run checks)."""
        index, values = self._entry(name, args, kwargs)
        funcs = getattr(self._local, "funcs", None)
        if funcs is None:
            funcs = self._local.funcs = self.translation().instantiate(self._runtime(None))[1]
        return funcs[index](0, *values)

    def profile(self, *args: Any, **kwargs: Any) -> VMProfile:
        """Run @main once, timing every kernel call and every function's own time (every
        call goes through the frame loop, so each is seen)."""
        index, values = self._entry("main", args, kwargs)
        timer = _Timer()
        funcs = self.translation(profile=True).instantiate(self._runtime(timer))[0]
        R.run_frames(funcs[index](*values), MAX_FRAMES, self._where, timer)
        return timer.report()

    def translation(self, profile: bool = False) -> Translation:
        """The Python translation of the bytecode this VM runs (`.source` shows it)."""
        tr = self._translations.get(profile)
        if tr is None:
            tr = self._translations[profile] = Translation(self.exe, profile)
        return tr

    # internals

    def _entry(self, name: str, args: tuple, kwargs: dict[str, Any]) -> tuple[int, list]:
        if name not in self.exe.params:
            raise KernelArgumentError(f"the executable has no function @{name}; its functions "
                                      f"are {', '.join('@' + n for n in self.exe.params)}")
        return self.exe.function_index[name], _bind(name, self.exe.params[name], args, kwargs)

    def _run_frames(self, first: Any) -> Any:
        return R.run_frames(first, MAX_FRAMES, self._where)

    def _where(self, gen: Any) -> str:
        return self.functions[int(gen.gi_code.co_name[1:])].name

    def _runtime(self, timer: Any) -> dict[str, Any]:
        return {
            "_CV": ConstructorValue, "_Clo": VMClosure, "_Gen": types.GeneratorType,
            "_KNOWN": self._known, "_NEVER": False,
            "_NP": {i: f.num_params for i, f in enumerate(self.functions)},
            "_Ref": RefValue, "_T": timer,
            "_arity": R.arity, "_bad_closure": self._bad_closure, "_chk": R.check_tensor,
            "_dyn_reshape": R.dyn_reshape, "_fatal": R.fatal, "_field": R.field, "_fresh": R.fresh,
            "_kfail": R.kernel_failed, "_ndarray": np.ndarray, "_no_case": R.no_case,
            "_perf": time.perf_counter, "_ref": R.ref, "_reshape": R.reshape,
            "_scalar": R.scalar, "_shape_of": R.shape_of, "_storage": R.storage,
            "_tag": self._tags, "_empty": np.empty,
            "_VMCALL": native.caller() if native.available() else None,
            "_run": self._run_frames,
        }

    def _bad_closure(self, clo: Any, nargs: int, caller: str) -> RelayRuntimeError:
        if not isinstance(clo, VMClosure):
            return RelayRuntimeError(f"@{caller} calls a {type(clo).__name__}, not a function")
        if not clo.func < len(self.functions):
            return RelayRuntimeError(
                f"@{caller} calls a closure of function {clo.func}, but the executable has "
                f"{len(self.functions)} functions (0..{len(self.functions) - 1})")
        fn = self.functions[clo.func]
        return R.arity(fn.name, fn.num_params, len(clo.captured) + nargs)


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
        elif isinstance(v, types.GeneratorType):  # the frame loop's own currency
            raise KernelArgumentError(f"{call}: input {n!r} is a generator, not a value")
        else:
            out.append(v)
    return out


class _Timer:
    """Accumulates a profiled run's kernel times and per-function own times."""

    def __init__(self) -> None:
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
