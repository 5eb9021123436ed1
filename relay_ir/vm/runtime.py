"""What the translated functions (relay_ir.vm.translate) call at run time: value checks
and accessors with the VM's error messages, allocation, and the frame loop that runs
generator functions so that recursion never grows the Python stack.

    >>> def leaf(x):
    ...     return x + 1
    >>> def twice(x):          # a generator function: waits for each callee it yields
    ...     y = yield counted(x)
    ...     return counted(y)  # a tail call: the generator returned replaces this frame
    >>> def counted(x):
    ...     return leaf(x)
    ...     yield
    >>> run_frames(twice(1), 10)
    3
"""

from __future__ import annotations

import ctypes
import types
from typing import Any

import numpy as np

from relay_ir.backend.executor import ALIGN
from relay_ir.interpreter import ConstructorValue, RefValue, _short
from relay_ir.op.dyn_reshape import resolve_newshape
from tessel_errors import KernelArgumentError, RelayRuntimeError

Gen = types.GeneratorType
_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof
_empty = np.empty
_uint8 = np.uint8


def run_frames(first: Any, limit: int, where: Any = None, timer: Any = None) -> Any:
    """Run a VM function's generator (or take a plain function's value) to its result.

    A generator yields the generator of a callee it waits for (pushed on the frame stack)
    and returns either its value or, for a tail call, the callee's generator (which takes
    its place). `limit` bounds the frames waiting; `where(gen)` names a frame's function
    (for the error, and for `timer`, told which function runs: on a call, a tail call and
    a return, as VirtualMachine.profile wants)."""
    if first.__class__ is not Gen:
        return first
    stack: list[Any] = []
    gen, send = first, None
    if timer:
        timer.enter(where(gen))
    while True:
        try:
            r = gen.send(send)
        except StopIteration as stop:
            r = stop.value
            if r.__class__ is Gen:
                gen, send = r, None
                if timer:
                    timer.enter(where(gen))
                continue
            if not stack:
                if timer:
                    timer.leave()
                return r
            gen, send = stack.pop(), r
            if timer:
                timer.enter(where(gen), call=False)
            continue
        stack.append(gen)
        if len(stack) > limit:
            name = where(gen) if where else "?"
            raise RelayRuntimeError(
                f"the program recursed deeper than the VM allows ({limit:,} frames, in "
                f"@{name}); is the recursion unbounded?")
        gen, send = r, None
        if timer:
            timer.enter(where(gen))


# checks and accessors


def check_tensor(a: Any, spec: tuple[Any, ...]) -> tuple[np.ndarray, int]:
    """A kernel argument whose shape the compiler could not prove: checked against the
    kernel's (shape, dtype, C strides, argument index, kernel name); returns the array
    (a C-contiguous copy if it was not) and its data address."""
    shape, dtype, strides, i, name = spec
    if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != dtype:
        got = f"{a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray) else type(a).__name__
        raise KernelArgumentError(
            f"kernel '{name}': input {i} must be {dtype}{list(shape)}, got {got} (a value "
            "whose shape the type system could not prove)")
    if a.strides != strides:
        flags = a.flags
        if not (flags.c_contiguous and flags.aligned):
            a = np.require(a, requirements="CA")
    try:
        return a, _addressof(_from_buffer(a))
    except (TypeError, ValueError, BufferError):  # read-only or empty
        return a, a.ctypes.data


def kernel_failed(kernel: Any, rc: int) -> None:
    messages = kernel.fn.messages
    what = messages[rc - 1] if 0 < rc <= len(messages) else f"code {rc}"
    raise KernelArgumentError(f"kernel '{kernel.name}': run-time check failed: {what}")


def fresh(shape: tuple[int, ...], dtype: np.dtype, nbytes: int) -> tuple[np.ndarray, int]:
    """A new tensor and its address; large ones start at an ALIGN boundary (kernels read
    whole vectors), small ones take numpy's 16-byte alignment, which costs less."""
    if nbytes < 1024:
        a = _empty(shape, dtype)
        return a, (_addressof(_from_buffer(a)) if nbytes else 0)
    raw = _empty(nbytes + ALIGN, _uint8)
    base = _addressof(_from_buffer(raw))
    start = -base % ALIGN
    return np.ndarray(shape, dtype, raw, start), base + start


def storage(size: int, alignment: int) -> tuple[np.ndarray, int]:
    """An AllocStorage buffer and its address, starting at a multiple of `alignment` (at
    least ALIGN past 16 bytes: numpy's own allocation gives 16)."""
    if alignment <= 16:
        buf = _empty(size, _uint8)
        return buf, (_addressof(_from_buffer(buf)) if size else 0)
    alignment = max(alignment, ALIGN)
    raw = _empty(size + alignment, _uint8)
    base = _addressof(_from_buffer(raw))
    start = -base % alignment
    return raw[start:start + size], base + start


def scalar(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        if v.size != 1:
            raise RelayRuntimeError(f"if condition must be a bool scalar, got a tensor of "
                                    f"shape {v.shape}")
        return v.item()
    return v


def field(obj: Any, index: int) -> Any:
    if isinstance(obj, tuple):
        return obj[index]
    if isinstance(obj, ConstructorValue):
        return obj.fields[index]
    raise RelayRuntimeError(f"field {index} of a {type(obj).__name__}, which has no fields")


def ref(cell: Any, where: str) -> RefValue:
    if not isinstance(cell, RefValue):
        raise RelayRuntimeError(f"@{where} uses a {type(cell).__name__} as a reference")
    return cell


def shape_of(t: Any, dtype: str) -> np.ndarray:
    if not isinstance(t, np.ndarray):
        raise RelayRuntimeError(f"shape_of expects a tensor, got a {type(t).__name__}")
    return np.asarray(t.shape, dtype=dtype)


def reshape(t: np.ndarray, shape: Any) -> np.ndarray:
    return t.reshape(tuple(int(d) for d in shape))


def dyn_reshape(t: Any, newshape: Any, allowzero: int) -> np.ndarray:
    """dyn.reshape's ReshapeTensor: `t` viewed with `newshape` resolved (0s, -1) and
    checked against its shape, a RelayRuntimeError naming the op and both shapes if it
    does not fit."""
    if not isinstance(t, np.ndarray):
        raise RelayRuntimeError(f"dyn.reshape expects a tensor, got a {type(t).__name__}")
    return t.reshape(resolve_newshape(t.shape, newshape, allowzero))


def fatal(message: str, value: Any) -> RelayRuntimeError:
    what = "" if value is None else f" {_short(value)}"
    return RelayRuntimeError(f"{message}{what}")


def no_case(opcode: str) -> RelayRuntimeError:
    return RelayRuntimeError(f"the VM has no case for instruction {opcode}")


def arity(name: str, expected: int, got: int) -> RelayRuntimeError:
    return RelayRuntimeError(f"@{name} expects {expected} argument(s), got {got}")


def tag_reader(constructors: list[Any]) -> Any:
    """GetTag: a function giving a constructor value's tag in the executable's constructor
    table, matched by type and constructor name (a loaded executable has Constructor
    objects of its own), each constructor object looked up by name once."""
    by_name = {(c.belong_to.name, c.name_hint): k for k, c in enumerate(constructors)}
    seen: dict[Any, int] = {}  # Constructor (hashed by identity) -> tag

    def tag(value: Any) -> int:
        if value.__class__ is ConstructorValue:
            hit = seen.get(value.constructor)
            if hit is not None:
                return hit
        if not isinstance(value, ConstructorValue):
            raise RelayRuntimeError(f"a match expects an ADT value, got "
                                    f"{type(value).__name__}")
        c = value.constructor
        # a constructor no code of this executable tests for: -2, no clause matches
        seen[c] = by_name.get((c.belong_to.name, c.name_hint), -2)
        return seen[c]

    return tag


__all__ = ["Gen", "arity", "check_tensor", "dyn_reshape", "fatal", "field", "fresh",
           "kernel_failed", "no_case", "ref", "reshape", "run_frames",
           "scalar", "shape_of", "storage", "tag_reader"]
