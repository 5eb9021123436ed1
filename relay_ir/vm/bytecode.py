"""The VM's bytecode: immutable instructions over numbered registers, as TVM's Relay VM.

A function's registers 0..n-1 hold its parameters; every other value lives in a register
written once by one instruction (`dst`). Jumps (`If`, `Goto`) are relative offsets from the
jumping instruction. Calls name their callee by index: `Invoke` a global function of the
executable, `InvokePacked` one of its kernels (arguments are the inputs then the output
tensors, allocated before the call), `InvokeClosure` a closure value in a register.
`tail=True` on a call marks a call in tail position: the VM replaces the caller's frame
instead of pushing one, so a tail-recursive loop of any length runs in one frame.

    >>> print(Function("id", 1, (Ret(0),), 1))
    fn @id(%0) [1 registers]
      0: ret %0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

TUPLE_TAG = -1  # AllocADT's tag for a tuple (ADT constructors number from 0)


class Instruction:
    """Base of every instruction; `str(instr)` is its one-line text."""

    __slots__ = ()
    opcode = "?"

    def __str__(self) -> str:
        parts = []
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if f.name in ("tail",):
                if v:
                    parts.append("tail")
                continue
            parts.append(f"{f.name}={_fmt(f.name, v)}")
        return f"{self.opcode} " + " ".join(parts)


def _fmt(name: str, v: Any) -> str:
    if name in ("dst", "src", "result", "test", "target", "obj", "closure", "tensor",
                "storage", "ref", "value", "shape_reg"):
        return f"%{v}" if v is not None else "-"
    if name in ("args", "fields", "captured"):
        return "(" + ", ".join(f"%{r}" for r in v) + ")"
    return repr(v) if isinstance(v, str) else str(v)


def _instr(opcode: str) -> Any:
    def wrap(cls: type) -> type:
        cls = dataclass(frozen=True, slots=True)(cls)
        cls.opcode = opcode
        return cls

    return wrap


@_instr("move")
class Move(Instruction):
    """dst = src."""

    src: int
    dst: int


@_instr("ret")
class Ret(Instruction):
    """Return register `result` to the caller."""

    result: int

    def __str__(self) -> str:
        return f"ret %{self.result}"


@_instr("invoke")
class Invoke(Instruction):
    """dst = functions[func](args...)."""

    func: int
    args: tuple[int, ...]
    dst: int
    tail: bool = False


@_instr("invoke_closure")
class InvokeClosure(Instruction):
    """dst = closure(args...): the closure's captured values come before the args."""

    closure: int
    args: tuple[int, ...]
    dst: int
    tail: bool = False


@_instr("invoke_packed")
class InvokePacked(Instruction):
    """kernels[kernel](args...): the first arity - output_size args are inputs, the rest
    output tensors the kernel writes."""

    kernel: int
    arity: int
    output_size: int
    args: tuple[int, ...]


@_instr("alloc_storage")
class AllocStorage(Instruction):
    """dst = a fresh buffer of `size` bytes, aligned to `alignment`."""

    size: int
    alignment: int
    dst: int


@_instr("alloc_tensor")
class AllocTensor(Instruction):
    """dst = a tensor of `shape` and `dtype` at `offset` bytes into `storage` (a register
    holding an AllocStorage buffer)."""

    storage: int
    offset: int
    shape: tuple[int, ...]
    dtype: str
    dst: int


@_instr("alloc_adt")
class AllocADT(Instruction):
    """dst = constructors[tag](fields...), or a tuple when tag is TUPLE_TAG."""

    tag: int
    fields: tuple[int, ...]
    dst: int


@_instr("alloc_closure")
class AllocClosure(Instruction):
    """dst = a closure of functions[func] over the captured registers."""

    func: int
    captured: tuple[int, ...]
    dst: int


@_instr("get_field")
class GetField(Instruction):
    """dst = obj.index (a tuple's or an ADT value's field)."""

    obj: int
    index: int
    dst: int


@_instr("get_tag")
class GetTag(Instruction):
    """dst = the constructor tag of the ADT value in obj."""

    obj: int
    dst: int


@_instr("if")
class If(Instruction):
    """Jump by true_offset when the values in `test` and `target` are equal, else by
    false_offset."""

    test: int
    target: int
    true_offset: int
    false_offset: int


@_instr("goto")
class Goto(Instruction):
    """Jump by offset."""

    offset: int


@_instr("load_const")
class LoadConst(Instruction):
    """dst = constants[index] (a read-only array)."""

    index: int
    dst: int


@_instr("load_consti")
class LoadConsti(Instruction):
    """dst = the integer `val` (tags and booleans that If compares with)."""

    val: int
    dst: int


@_instr("shape_of")
class ShapeOf(Instruction):
    """dst = the shape of the tensor in `tensor`, as a vector of `dtype` (int64 or
    int32)."""

    tensor: int
    dst: int
    dtype: str = "int64"


# ReshapeTensor's modes: the shape is the result's ("", a static view), or it is
# dyn.reshape's new shape, resolved and checked at run time (-1 infers a dim; 0 copies the
# data's dim, or with allowzero is an extent of 0)
RESHAPE_MODES = ("", "dyn", "dyn_allowzero")


@_instr("reshape_tensor")
class ReshapeTensor(Instruction):
    """dst = the tensor in `tensor` viewed with the shape held (an integer vector) in
    `shape_reg`; with a `mode` of dyn.reshape (RESHAPE_MODES) the shape's 0s and -1 are
    resolved against the tensor's and a shape that does not fit is a RelayRuntimeError."""

    tensor: int
    shape_reg: int
    dst: int
    mode: str = ""

    def __str__(self) -> str:
        text = f"reshape_tensor tensor=%{self.tensor} shape_reg=%{self.shape_reg} " \
            f"dst=%{self.dst}"
        return f"{text} mode={self.mode!r}" if self.mode else text


@_instr("fatal")
class Fatal(Instruction):
    """Stop the program with a RelayRuntimeError: `message`, then the value in `value`
    (None: no value)."""

    message: str
    value: int | None = None


@_instr("ref_new")
class RefNew(Instruction):
    """dst = a new reference cell holding the value in `value`."""

    value: int
    dst: int


@_instr("ref_read")
class RefRead(Instruction):
    """dst = the value the cell in `ref` holds."""

    ref: int
    dst: int


@_instr("ref_write")
class RefWrite(Instruction):
    """The cell in `ref` now holds the value in `value`."""

    ref: int
    value: int


@dataclass(frozen=True)
class Function:
    """One VM function: its name, parameter count, instructions and register count."""

    name: str
    num_params: int
    instructions: tuple[Instruction, ...]
    num_registers: int

    def __str__(self) -> str:
        return self.text()

    def text(self, function_names: tuple[str, ...] = (), kernel_names: tuple[str, ...] = ()
             ) -> str:
        """The function, one instruction a line; calls are annotated with their callee's
        name when the names are given, a tensor placed on bytes an earlier tensor of its
        storage had with that tensor's register."""
        params = ", ".join(f"%{i}" for i in range(self.num_params))
        lines = [f"fn @{self.name}({params}) [{self.num_registers} registers]"]
        width = len(str(max(len(self.instructions) - 1, 0)))
        placed: dict[int, list[tuple[int, int, int]]] = {}  # storage -> (start, end, reg)
        for i, ins in enumerate(self.instructions):
            note = ""
            if isinstance(ins, AllocTensor):
                end = ins.offset + _nbytes(ins)
                before = placed.setdefault(ins.storage, [])
                shared = [r for a, b, r in before if a < end and ins.offset < b]
                before.append((ins.offset, end, ins.dst))
                if shared:
                    note = "  # reuses bytes of " + ", ".join(f"%{r}" for r in shared)
            elif isinstance(ins, (Invoke, AllocClosure)) and ins.func < len(function_names):
                note = f"  # @{function_names[ins.func]}"
            elif isinstance(ins, InvokePacked) and ins.kernel < len(kernel_names):
                note = f"  # {kernel_names[ins.kernel]}"
            elif isinstance(ins, (If, Goto)):
                offsets = (ins.true_offset, ins.false_offset) if isinstance(ins, If) \
                    else (ins.offset,)
                note = "  # -> " + ", ".join(str(i + o) for o in offsets)
            lines.append(f"  {i:>{width}}: {ins}{note}")
        return "\n".join(lines)


def _nbytes(ins: AllocTensor) -> int:
    return int(np.dtype(ins.dtype).itemsize) * math.prod(ins.shape)


@dataclass(frozen=True)
class Bytecode:
    """Every function of an executable and the names of its kernels; printing it shows
    every function, one instruction a line."""

    functions: tuple[Function, ...]
    kernel_names: tuple[str, ...] = ()

    def __str__(self) -> str:
        names = tuple(f.name for f in self.functions)
        return "\n\n".join(f.text(names, self.kernel_names) for f in self.functions)


__all__ = [
    "RESHAPE_MODES",
    "TUPLE_TAG",
    "AllocADT",
    "AllocClosure",
    "AllocStorage",
    "AllocTensor",
    "Bytecode",
    "Fatal",
    "Function",
    "GetField",
    "GetTag",
    "Goto",
    "If",
    "Instruction",
    "Invoke",
    "InvokeClosure",
    "InvokePacked",
    "LoadConst",
    "LoadConsti",
    "Move",
    "RefNew",
    "RefRead",
    "RefWrite",
    "ReshapeTensor",
    "Ret",
    "ShapeOf",
]
