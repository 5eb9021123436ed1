"""Each VM function's bytecode translated once into a Python function: no dispatch per
instruction, registers as local variables, kernels called through prepared pointer arrays.

The VM runs these functions (relay_ir.vm.vm); the bytecode stays the executable's
definition (what is printed, saved and loaded), and the translation is made from it alone,
so a loaded executable runs the same way. What the translation does besides spelling the
instructions out as Python:

- Shapes proven at compile time are not checked again. A kernel argument whose register
  holds a tensor of a known shape (an AllocTensor, a constant, or a value already checked
  on every path to here) goes in unchecked; any other (a parameter, an ADT field) is
  checked once, before its first kernel call, as lib.run checks inputs.
- Every static kernel call site owns a ctypes pointer array filled once with the addresses
  that never change (constants, temporaries), so a call sets only the others.
- A storage whose tensors are all temporaries (they do not escape the function and no
  call happens while they are live) is allocated once per instantiation instead of at
  every run, its tensors views at the offsets the bytecode's storage plan gives them
  (relay_ir.vm.storage_plan): no allocation and no address lookup at run time.
- Calls: a function whose calls are loops on itself or calls of such functions is a
  plain Python function called directly (`plain_functions`). Every other one is made
  twice: a direct version `d<i>(depth, ...)` calling its callees as Python functions, and
  a generator `f<i>` that yields the generator of each callee it waits for and returns
  the one it tail-calls. Runs start in the direct versions; a call nested DEPTH deep runs
  its callee's generator under the frame loop (relay_ir.vm.runtime.run_frames), which
  holds the frames from there on, so recursion of any depth runs and the Python stack
  stays bounded. A tail call of a function to itself is a loop.
- A closure whose contents the bytecode shows (an AllocClosure in the same function) is
  called directly and not built when nothing else uses it; a tuple read only by GetField
  is not built either.

Only integers from the bytecode go into the generated text (register, block, kernel and
constant numbers); names, messages, shapes and dtypes are values the code reads from its
environment, so a forged executable cannot inject code through them.

With `profile=True` every function is a generator and every call goes through the frame
loop (which times functions), kernel calls are timed and executed instructions counted.

    >>> import relay_ir, relay_ir.vm
    >>> exe = relay_ir.vm.compile(relay_ir.parse(
    ...     "def @main(%x: Tensor[(2,), float32]) { negative(exp(%x)) }"))
    >>> print(Translation(exe).source.split("def d0")[1].splitlines()[0])
    (dp_, r0):
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from relay_ir.backend.executor import KernelFn
from relay_ir.vm import bytecode as B
from relay_ir.vm import native
from relay_ir.vm.analysis import FunctionInfo, plain_functions
from relay_ir.vm.kernels import StaticKernel
from relay_ir.vm.native import ALIGNED, C_CONTIGUOUS
from relay_ir.vm.runtime import storage


@dataclass(frozen=True)
class _Tensor:
    """A register's tensor with a known shape, dtype and address (a name in the code)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    addr: str


# the names the generated code takes from the VM (relay_ir.vm.vm supplies them)
RUNTIME = ("_CV", "_Clo", "_Gen", "_KNOWN", "_NEVER", "_NP", "_Ref", "_T",
           "_arity", "_bad_closure", "_chk", "_dyn_reshape", "_fatal", "_field", "_fresh", "_kfail",
           "_ndarray", "_no_case", "_perf", "_ref", "_reshape", "_scalar", "_shape_of",
           "_storage", "_tag", "_VMCALL", "_empty", "_run")
# nested direct calls before a call goes through the frame loop instead (bounds the Python
# stack a recursion takes)
DEPTH = 200

_INT, _ADT = "int", "adt"  # a register holding a Python int / a checked ConstructorValue
_NATIVE_FLAGS = C_CONTIGUOUS | ALIGNED
_SMALL = 1024  # bytes: a fresh tensor below this takes numpy's 16-byte alignment


@dataclass
class Static:
    """A temporary's buffer, made per instantiation: `size` bytes aligned to `alignment`,
    and a tensor view over it per (name, shape, dtype, offset)."""

    size: int
    alignment: int
    views: list[tuple[str, tuple[int, ...], np.dtype, int]] = field(default_factory=list)

    def names(self) -> list[str]:
        return [n for v in self.views for n in (v[0], f"{v[0]}_addr")]

    def make(self) -> dict[str, Any]:
        """A fresh buffer and its views: name -> view, name_addr -> its address."""
        buf, base = storage(self.size, self.alignment)
        out: dict[str, Any] = {}
        for name, shape, dtype, offset in self.views:
            out[name] = np.ndarray(shape, dtype, buf, offset)
            out[f"{name}_addr"] = base + offset
        return out


def _fast(kernel: Any) -> bool:
    return isinstance(kernel, StaticKernel) and isinstance(kernel.fn, KernelFn)


def _nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    return int(dtype.itemsize) * math.prod(shape)


class Translation:
    """The Python text of every function of `exe` and what instantiating it needs: values
    shared by every instantiation (`env`), temporaries' buffers (`statics`) and pointer
    arrays (`pointers`: name, kernel, per argument a constant index, a temporary's view
    name or None) made per instantiation."""

    def __init__(self, exe: Any, profile: bool = False) -> None:
        self.exe, self.profile = exe, profile
        self.functions = exe.bytecode.functions
        self.kernels = exe.kernels
        self.env: dict[str, Any] = {}
        self._names: dict[Any, str] = {}
        self.closures: set[int] = set()  # functions whose capture-free closure is shared
        self.native = native.available()
        self._kept: list[Any] = []
        self.statics: dict[str, Static] = {}
        self.pointers: dict[str, tuple[int, list[Any]]] = {}  # by name: kernel, entries
        self.infos = [FunctionInfo(f, lambda k: not getattr(self.kernels[k], "dynamic", True))
                      for f in self.functions]
        self.plain = [False] * len(self.functions) if profile else plain_functions(self.infos)
        body: list[str] = []
        for i in range(len(self.functions)):
            body += _FunctionText(self, i).lines()
            if not profile:
                body += _FunctionText(self, i, direct=True).lines()
        names = sorted({*self.env, *RUNTIME, *self.pointer_names(),
                        *(f"CLO{f}" for f in self.closures),
                        *(n for st in self.statics.values() for n in st.names())})
        lines = ["def _make(env):"]
        lines += [f"    {n} = env[{n!r}]" for n in names]
        lines.append("    _FN, _FD = [], []")
        lines += ["    " + ln for ln in body]
        fns = ", ".join(f"f{i}" for i in range(len(self.functions)))
        lines.append(f"    _FN[:] = [{fns}]")
        if not profile:
            lines.append("    _FD[:] = [" + ", ".join(f"d{i}" for i in range(len(self.functions)))
                         + "]")
        lines.append("    return _FN, _FD")
        self.source = "\n".join(lines) + "\n"
        namespace: dict[str, Any] = {}
        exec(compile(self.source, "<tessel-vm>", "exec"), namespace)  # noqa: S102
        self._make = namespace["_make"]

    def pointer_names(self) -> list[str]:
        return list(self.pointers)

    def instantiate(self, runtime: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        """The generator (or plain) versions and the direct versions of the functions
        (index = VM function index; no direct versions when profiling), with fresh
        temporaries' buffers and pointer arrays; `runtime` supplies the RUNTIME names."""
        env = dict(self.env)
        env.update(runtime)
        for st in self.statics.values():
            env.update(st.make())
        for f in self.closures:
            env[f"CLO{f}"] = runtime["_Clo"](f, ())
        for name, (k, entries) in self.pointers.items():
            fn = self.kernels[k].fn
            arr = fn.pointer_array()
            for i, e in enumerate(entries):
                if e is not None:
                    arr[i] = env[f"CA{e[1]}"] if e[0] == "const" else env[f"{e[1]}_addr"]
            env[name] = arr
        return self._make(env)

    def name(self, prefix: str, value: Any) -> str:
        """An environment name for `value` (one per distinct value)."""
        try:
            key: Any = (prefix, type(value), value)
            hash(key)
        except TypeError:
            key = (prefix, id(value))
            self._kept.append(value)
        n = self._names.get(key)
        if n is None:  # "_": the fixed names (C3, D3, P3_4, S3_4_5, ...) never have it there
            n = self._names[key] = f"{prefix}_{len(self.env)}"
            self.env[n] = value
        return n


class _FunctionText:
    """Emits one function."""

    def __init__(self, tr: Translation, index: int, direct: bool = False) -> None:
        self.tr, self.index, self.direct = tr, index, direct
        self.fn = tr.functions[index]
        self.info = tr.infos[index]
        self.out: list[str] = []
        self.facts: dict[int, Any] = {}
        self.statics = self.info.static_storages()
        self.static_views: dict[int, str] = {}  # AllocTensor pc -> view name
        # the bytecode's storage plan says which tensors share a buffer and where
        for st in self.statics.values():
            name = f"S{index}_{st.pc}"
            static = Static(st.size, st.alignment)
            for t in st.tensors:
                ins = self.fn.instructions[t]
                vname = f"{name}_{t}"
                static.views.append((vname, tuple(int(d) for d in ins.shape),
                                     np.dtype(ins.dtype), int(ins.offset)))
                self.static_views[t] = vname
            tr.statics[name] = static
        self.loops = False
        self.generator = not tr.plain[index] and not direct

    # text

    def lines(self) -> list[str]:
        info = self.info
        params = ", ".join(f"r{i}" for i in range(self.fn.num_params))
        head = [f"def d{self.index}(dp_, {params}):" if self.direct else
                f"def f{self.index}({params}):"]
        blocks: list[list[str]] = []
        ends: list[dict[int, Any]] = []
        for k, (start, end) in enumerate(info.blocks):
            dom = info.idom[k]
            self.facts = dict(ends[dom]) if dom >= 0 else {}
            self.out = []
            if self.tr.profile:
                self.out.append(f"_T.instructions += {end - start}")
            for pc in range(start, end):
                self.instruction(pc, self.fn.instructions[pc])
            last = self.fn.instructions[end - 1]
            if info.succs[k] and not isinstance(last, (B.If, B.Goto)):
                self.jump(info.succs[k][0], k)
            blocks.append(self.out)
            ends.append(self.facts)
        body: list[str] = []
        single = len(blocks) == 1 and not self.loops
        for k, text in enumerate(blocks):
            if not info.reachable[k]:
                continue
            if single:
                body += text
            else:
                body.append(f"if b_ == {k}:")
                body += ["    " + ln for ln in text]
        if not single:
            if self.loops or info.backward:
                body = ["b_ = 0", "while True:"] + ["    " + ln for ln in body]
            else:
                body = ["b_ = 0"] + body
        if self.tr.profile or (self.generator and not any("yield" in ln for ln in body)):
            body = ["if _NEVER:", "    yield"] + body  # a generator in any case
        return head + ["    " + ln for ln in body]

    def emit(self, line: str) -> None:
        self.out.append(line)

    def jump(self, target: int, here: int) -> None:
        self.emit(f"b_ = {target}")
        if target <= here:
            self.emit("continue")

    def env(self, prefix: str, value: Any) -> str:
        return self.tr.name(prefix, value)

    def single(self, r: int) -> bool:
        return self.info.single_def(r) is not None

    def fact(self, r: int, value: Any) -> None:
        if self.single(r):
            self.facts[r] = value

    # instructions

    def instruction(self, pc: int, ins: B.Instruction) -> None:  # noqa: C901
        info = self.info
        if isinstance(ins, B.Move):
            self.emit(f"r{ins.dst} = r{ins.src}")
            if ins.src in self.facts:
                self.fact(ins.dst, self.facts[ins.src])
        elif isinstance(ins, B.Ret):
            self.emit(f"return r{ins.result}")
        elif isinstance(ins, B.LoadConst):
            c = self.tr.exe.constants[ins.index]
            self.emit(f"r{ins.dst} = {self.const(ins.index)}")
            if isinstance(c, np.ndarray):
                self.fact(ins.dst, _Tensor(tuple(c.shape), c.dtype, self.const_addr(ins.index)))
        elif isinstance(ins, B.LoadConsti):
            self.emit(f"r{ins.dst} = {int(ins.val)}")
            self.fact(ins.dst, (_INT, int(ins.val)))
        elif isinstance(ins, B.AllocStorage):
            self.alloc_storage(pc, ins)
        elif isinstance(ins, B.AllocTensor):
            self.alloc_tensor(pc, ins)
        elif isinstance(ins, B.InvokePacked):
            self.invoke_packed(pc, ins)
        elif isinstance(ins, B.If):
            self.branch(pc, ins)
        elif isinstance(ins, B.Goto):
            self.jump(info.block_of[pc + ins.offset], info.block_index[pc])
        elif isinstance(ins, B.GetField):
            self.get_field(ins)
        elif isinstance(ins, B.GetTag):
            self.emit(f"r{ins.dst} = _tag(r{ins.obj})")
            self.fact(ins.obj, (_ADT, None))
            self.fact(ins.dst, (_INT, None))
        elif isinstance(ins, B.AllocADT):
            self.alloc_adt(ins)
        elif isinstance(ins, B.AllocClosure):
            if info.known_closure(ins.dst) and info.only_called(ins.dst):
                pass  # every call through it is direct
            elif not ins.captured:  # immutable and the same every time: made once
                self.emit(f"r{ins.dst} = CLO{int(ins.func)}")
                self.tr.closures.add(int(ins.func))
            else:
                caps = "".join(f"r{c}, " for c in ins.captured)
                self.emit(f"r{ins.dst} = _Clo({int(ins.func)}, ({caps}))")
        elif isinstance(ins, (B.Invoke, B.InvokeClosure)):
            self.call(pc, ins)
        elif isinstance(ins, B.RefNew):
            self.emit(f"r{ins.dst} = _Ref(r{ins.value})")
        elif isinstance(ins, B.RefRead):
            self.emit(f"r{ins.dst} = _ref(r{ins.ref}, {self.fname()}).value")
        elif isinstance(ins, B.RefWrite):
            self.emit(f"_ref(r{ins.ref}, {self.fname()}).value = r{ins.value}")
        elif isinstance(ins, B.ShapeOf):
            dt = self.env("DT", np.dtype(ins.dtype))
            self.emit(f"r{ins.dst} = _shape_of(r{ins.tensor}, {dt})")
        elif isinstance(ins, B.ReshapeTensor) and ins.mode:
            allowzero = int(ins.mode == "dyn_allowzero")
            self.emit(f"r{ins.dst} = _dyn_reshape(r{ins.tensor}, r{ins.shape_reg}, {allowzero})")
        elif isinstance(ins, B.ReshapeTensor):
            self.emit(f"r{ins.dst} = _reshape(r{ins.tensor}, r{ins.shape_reg})")
            self.reshape_fact(ins)
        elif isinstance(ins, B.Fatal):
            msg = self.env("M", ins.message)
            value = "None" if ins.value is None else f"r{ins.value}"
            self.emit(f"raise _fatal({msg}, {value})")
        else:
            op = self.env("M", getattr(ins, "opcode", type(ins).__name__))
            self.emit(f"raise _no_case({op})")

    def reshape_fact(self, ins: B.ReshapeTensor) -> None:
        """A reshape of a proven tensor to a constant shape of as many elements is that
        tensor's data (a view: it is contiguous) under the new shape."""
        src = self.facts.get(ins.tensor)
        d = self.info.single_def(ins.shape_reg)
        if not isinstance(src, _Tensor) or d is None or d < 0 or \
                not isinstance(self.fn.instructions[d], B.LoadConst):
            return
        shape = self.tr.exe.constants[self.fn.instructions[d].index]
        if not (isinstance(shape, np.ndarray) and shape.ndim == 1 and shape.dtype.kind == "i"):
            return
        new = tuple(int(x) for x in shape)
        if min(new, default=0) >= 0 and math.prod(new) == math.prod(src.shape):
            addr = src.addr if not src.addr.startswith("id(") else f"id(r{ins.dst})"
            self.fact(ins.dst, _Tensor(new, src.dtype, addr))

    def fname(self) -> str:
        return self.env("N", self.fn.name)

    def const(self, index: int) -> str:
        name = f"C{int(index)}"
        if name not in self.tr.env:
            c = self.tr.exe.constants[index]
            self.tr.env[name] = c
            if isinstance(c, np.ndarray):
                self.tr.env[f"CA{int(index)}"] = c.ctypes.data if c.size else 0
        return name

    def const_addr(self, index: int) -> str:
        return "CA" + self.const(index)[1:]

    # allocation

    def fresh_tensor(self, pc: int) -> B.AllocTensor | None:
        """The one AllocTensor at offset 0 over this AllocStorage, when it is the storage's
        only use: the pair becomes one allocation of the tensor."""
        ins = self.fn.instructions[pc]
        uses = self.info.uses[ins.dst]
        if self.info.single_def(ins.dst) != pc or len(uses) != 1:
            return None
        t = self.fn.instructions[uses[0]]
        if not isinstance(t, B.AllocTensor) or t.storage != ins.dst or t.offset != 0:
            return None
        if _nbytes(tuple(t.shape), np.dtype(t.dtype)) > ins.size:
            return None  # as the storage-backed view would, fail at run time below
        return t

    def alloc_storage(self, pc: int, ins: B.AllocStorage) -> None:
        if pc in self.statics or self.fresh_tensor(pc) is not None:
            return  # made with its tensor
        self.emit(f"r{ins.dst}, a{ins.dst} = _storage({int(ins.size)}, {int(ins.alignment)})")

    def alloc_tensor(self, pc: int, ins: B.AllocTensor) -> None:
        shape = tuple(int(d) for d in ins.shape)
        dtype = np.dtype(ins.dtype)
        if pc in self.static_views:
            view = self.static_views[pc]
            self.emit(f"r{ins.dst} = {view}")
            self.fact(ins.dst, _Tensor(shape, dtype, f"{view}_addr"))
            return
        dt = self.env("DT", dtype)
        storage_pc = self.info.single_def(ins.storage)
        fused = storage_pc is not None and storage_pc >= 0 and \
            isinstance(self.fn.instructions[storage_pc], B.AllocStorage) and \
            self.fresh_tensor(storage_pc) is ins
        if fused and self.tr.native and _nbytes(shape, dtype) < _SMALL:
            # numpy's own allocation; its address is read at the kernel call
            self.emit(f"r{ins.dst} = _empty({shape!r}, {dt})")
            self.fact(ins.dst, _Tensor(shape, dtype, f"id(r{ins.dst})"))
            return
        if fused:
            self.emit(f"r{ins.dst}, a{ins.dst} = _fresh({shape!r}, {dt}, "
                      f"{_nbytes(shape, dtype)})")
        else:
            self.emit(f"r{ins.dst} = _ndarray({shape!r}, {dt}, r{ins.storage}, "
                      f"{int(ins.offset)})")
            self.emit(f"a{ins.dst} = a{ins.storage} + {int(ins.offset)}")
        self.fact(ins.dst, _Tensor(shape, dtype, f"a{ins.dst}"))

    # kernels

    def invoke_packed(self, pc: int, ins: B.InvokePacked) -> None:
        k = int(ins.kernel)
        kernel = self.tr.kernels[k]
        n_in = ins.arity - ins.output_size
        if _fast(kernel) and len(kernel.in_specs) == n_in and \
                len(kernel.out_specs) == ins.output_size == len(ins.args) - n_in:
            outs = ins.args[n_in:]
            ok = all(isinstance(self.facts.get(r), _Tensor) and
                     (self.facts[r].shape, self.facts[r].dtype) ==
                     (spec[0], np.dtype(spec[1])) for r, spec in zip(outs, kernel.out_specs))
            if ok:
                self.static_call(pc, k, kernel, ins.args[:n_in], outs)
                return
        self.generic_call(k, kernel, ins, n_in)

    def static_call(self, pc: int, k: int, kernel: StaticKernel, ins: tuple[int, ...],
                    outs: tuple[int, ...]) -> None:
        knm = self.kernel_env(k, kernel)
        pname = f"P{self.index}_{pc}"
        entries: list[Any] = []
        sets: list[str] = []
        rows: list[tuple[int, bool, tuple[int, ...], Any, int]] = []
        objects: list[int] = []  # the registers of the object rows, in row order
        checks: list[tuple[int, Any]] = []  # (row, check_tensor spec) of unproven inputs
        slots = [(r, i, spec, True) for i, (r, spec) in enumerate(zip(ins, kernel.in_specs))]
        slots += [(r, len(ins) + j, spec, False) for j, (r, spec) in
                  enumerate(zip(outs, kernel.out_specs))]
        for r, i, (shape, dtype), is_input in slots:
            f = self.facts.get(r)
            dt = np.dtype(dtype)
            shape = tuple(int(d) for d in shape)
            if is_input and not (isinstance(f, _Tensor) and f.shape == shape and f.dtype == dt):
                spec = (shape, dt, _strides(shape, dt), i, kernel.name)
                if self.tr.native:  # checked in native code at the call (relay_ir.vm.native)
                    checks.append((len(rows), spec))
                    rows.append((i, True, shape, dt, _NATIVE_FLAGS))
                    objects.append(r)
                    sets.append(f"{pname}[{i}] = id(r{r})")
                    entries.append(None)
                    self.fact(r, _Tensor(shape, dt, f"id(r{r})"))
                    continue
                self.emit(f"r{r}, a{r} = _chk(r{r}, {self.env('SP', spec)})")
                f = _Tensor(shape, dt, f"a{r}")
                self.fact(r, f)
            assert isinstance(f, _Tensor)
            entries.append(self.entry(f.addr))
            if entries[-1] is None:
                sets.append(f"{pname}[{i}] = {f.addr}")
                if f.addr.startswith("id("):
                    rows.append((i, False, shape, None, 0))
                    objects.append(int(f.addr[4:-1]))
        self.tr.pointers[pname] = (k, entries)
        self.out += sets
        if self.tr.profile:
            self.emit("t0_ = _perf()")
        if rows:
            site = native.CallSite(kernel, rows, checks)
            table, rows_array = self.env("TB", site), self.env("TA", site.table.array)
            regs = "".join(f"r{r}, " for r in objects)
            self.emit(f"t_ = _VMCALL(FA{knm}, {pname}, D{knm}, {rows_array}, {len(rows)})")
            self.emit("if t_:")
            self.emit(f"    {regs}= {table}.retry(t_, {pname}, ({regs}))")
        else:
            self.emit(f"t_ = F{knm}({pname}, D{knm})")
            self.emit(f"if t_: _kfail(K{knm}, t_)")
        if self.tr.profile:
            self.emit(f"_T.kernel(K{knm}.name, _perf() - t0_, "
                      f"[{', '.join(f'r{r}' for r in outs)}])")

    def entry(self, addr: str) -> Any:
        """A pointer array entry fixed at instantiation, or None (set before each call)."""
        if addr.startswith("CA"):
            return ("const", int(addr[2:]))
        if addr.startswith("S"):
            return ("static", addr.removesuffix("_addr"))
        return None

    def kernel_env(self, k: int, kernel: StaticKernel) -> str:
        knm = str(k)
        if f"K{knm}" not in self.tr.env:
            entry, dims = kernel.fn.entry_point()
            self.tr.env[f"K{knm}"] = kernel
            self.tr.env[f"F{knm}"] = entry
            self.tr.env[f"FA{knm}"] = ctypes.cast(entry, ctypes.c_void_p).value
            self.tr.env[f"D{knm}"] = dims
        return knm

    def generic_call(self, k: int, kernel: Any, ins: B.InvokePacked, n_in: int) -> None:
        name = f"K{k}"
        self.tr.env.setdefault(name, kernel)
        outs = ins.args[n_in:]
        # a dynamic kernel's output slots are the registers it defines: no value yet
        slot = "None" if getattr(kernel, "dynamic", True) else None
        args = ", ".join(f"r{r}" for r in ins.args[:n_in])
        args += "".join(f", {slot or f'r{r}'}" for r in outs)
        if self.tr.profile:
            self.emit("t0_ = _perf()")
        self.emit(f"t_ = {name}([{args.lstrip(', ')}], _KNOWN)")
        if self.tr.profile:
            last = f"r{ins.args[-1]}" if ins.args and not slot else ""
            self.emit(f"_T.kernel({name}.name, _perf() - t0_, t_ or [{last}])")
        if outs:
            self.emit("if t_ is not None:")
            self.emit("    " + "".join(f"r{r}, " for r in outs) + "= t_")

    # values

    def get_field(self, ins: B.GetField) -> None:
        tup = self.info.known_tuple(ins.obj)
        if tup is not None and 0 <= ins.index < len(tup.fields):
            src = tup.fields[ins.index]
            self.emit(f"r{ins.dst} = r{src}")
            if src in self.facts:
                self.fact(ins.dst, self.facts[src])
            return
        f = self.facts.get(ins.obj)
        if isinstance(f, tuple) and f[0] == _ADT:
            self.emit(f"r{ins.dst} = r{ins.obj}.fields[{int(ins.index)}]")
        else:
            self.emit(f"r{ins.dst} = _field(r{ins.obj}, {int(ins.index)})")

    def alloc_adt(self, ins: B.AllocADT) -> None:
        fields = "".join(f"r{r}, " for r in ins.fields)
        if ins.tag == B.TUPLE_TAG:
            if not self.info.only_field_read(ins.dst):
                self.emit(f"r{ins.dst} = ({fields})")
            return
        ctor = self.env("CT", self.tr.exe.constructors[ins.tag])
        self.emit(f"r{ins.dst} = _CV({ctor}, ({fields}))")

    # control

    def branch(self, pc: int, ins: B.If) -> None:
        info = self.info
        here = info.block_index[pc]
        test, target = self.facts.get(ins.test), self.facts.get(ins.target)
        want = str(target[1]) if isinstance(target, tuple) and target[0] == _INT and \
            target[1] is not None else f"r{ins.target}"
        if isinstance(test, tuple) and test[0] == _INT:
            cond = f"r{ins.test} == {want}"
        elif isinstance(test, _Tensor) and test.shape == ():
            cond = f"r{ins.test}.item() == {want}"
        else:
            cond = f"_scalar(r{ins.test}) == {want}"
        t = info.block_of[pc + ins.true_offset]
        f = info.block_of[pc + ins.false_offset]
        self.emit(f"if {cond}:")
        self.out.append(f"    b_ = {t}" + ("; continue" if t <= here else ""))
        self.emit("else:")
        self.out.append(f"    b_ = {f}" + ("; continue" if f <= here else ""))

    def call(self, pc: int, ins: Any) -> None:
        info, tr = self.info, self.tr
        target = info.callee(ins)
        tail = bool(ins.tail)
        if target is None:
            self.closure_call(ins)
            return
        func, captured = target
        regs = [*captured, *ins.args]
        args = ", ".join(f"r{r}" for r in regs)
        if not 0 <= func < len(tr.functions) or len(regs) != tr.functions[func].num_params:
            known = 0 <= func < len(tr.functions)
            callee = self.env("N", tr.functions[func].name if known else "?")
            nparams = tr.functions[func].num_params if known else -1
            self.emit(f"raise _arity({callee}, {nparams}, {len(regs)})")
            return
        if tail and func == self.index and not tr.profile:
            self.loops = True
            if regs:
                self.emit(", ".join(f"r{i}" for i in range(len(regs))) + f" = {args}")
            self.emit("b_ = 0")
            self.emit("continue")
            return
        call = f"f{func}({args})"
        if self.direct and not tr.plain[func]:
            # a Python call while the depth allows, else the frame loop takes over
            dargs = f"dp_ + 1, {args}" if args else "dp_ + 1"
            call = f"(d{func}({dargs}) if dp_ < {DEPTH} else _run({call}))"
            self.emit(f"return {call}" if tail else f"r{ins.dst} = {call}")
        elif tail:
            self.emit(f"return {call}")
        elif tr.plain[func]:
            self.emit(f"r{ins.dst} = {call}")
        else:
            self.emit(f"r{ins.dst} = yield {call}")

    def closure_call(self, ins: B.InvokeClosure) -> None:
        n = len(ins.args)
        args = "".join(f", r{r}" for r in ins.args)
        self.emit(f"c_ = r{ins.closure}")
        self.emit(f"if c_.__class__ is not _Clo or len(c_.captured) + {n} != _NP.get(c_.func):")
        self.emit(f"    raise _bad_closure(c_, {n}, {self.fname()})")
        call = f"_FN[c_.func](*c_.captured{args})"
        if self.direct:
            call = (f"(_FD[c_.func](dp_ + 1, *c_.captured{args}) if dp_ < {DEPTH} "
                    f"else _run({call}))")
            self.emit(f"return {call}" if ins.tail else f"r{ins.dst} = {call}")
            return
        if ins.tail:
            self.emit(f"return {call}")
            return
        self.emit(f"r{ins.dst} = {call}")
        self.emit(f"if r{ins.dst}.__class__ is _Gen:")
        self.emit(f"    r{ins.dst} = yield r{ins.dst}")


def _strides(shape: tuple[int, ...], dtype: np.dtype) -> tuple[int, ...]:
    out, step = [], int(dtype.itemsize)
    for d in reversed(shape):
        out.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(out))


__all__ = ["RUNTIME", "Static", "Translation"]
