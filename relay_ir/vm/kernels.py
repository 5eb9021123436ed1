"""The VM's kernel table: what an InvokePacked calls.

Three kinds, one calling convention (`kernel(args)`, the inputs then the output slots):

- `StaticKernel`: a fused group with static shapes, lowered once at compile time by
  relay_ir.backend.lower_group (the strategies and tuning records relay_ir.build uses);
  its outputs are allocated by AllocTensor before the call and written in place.
- `DynamicKernel` (relay_ir.vm.dynamic): a fused group whose types hold `?` dims, one
  kernel with symbolic extents for every batch size; it returns its outputs, allocated
  once their shapes are known from the inputs.
- `InterpretedGroup`: a group holding an op that has no kernel strategy, evaluated by
  the interpreter (so such a program runs instead of failing to compile).
- `OpKernel`: an op left outside every group (a run-time shape check, an op without a
  kernel strategy, dyn.strided_slice: its result's shape comes from its bounds' values,
  so its host-side reference resolves them and copies the strided view), run through the
  interpreter's numpy reference (`evaluate_op`).

    >>> from relay_ir.op.runtime import check_shape
    >>> from relay_ir.expr import Var
    >>> OpKernel(check_shape(Var("x"), (-1, 3)))([np.zeros((4, 3)), None])[0].shape
    (4, 3)
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from lowering.kernel import array_address
from relay_ir.backend.executor import KernelFn
from relay_ir.backend.lower_group import flatten_types
from relay_ir.expr import Call, Function, Var
from relay_ir.ty import TupleType, is_dynamic
from tessel_errors import KernelArgumentError

Spec = tuple[tuple[int, ...], str]


def _check(name: str, arrays: Sequence[Any], specs: Sequence[tuple[tuple[int, ...], Any]]
           ) -> list[np.ndarray]:
    # The VM's values come from kernels, constants and the caller's ADT fields: a wrong
    # shape here would make the kernel read out of bounds, so it is checked, not trusted.
    out = []
    for k, (a, (shape, dtype)) in enumerate(zip(arrays, specs)):
        if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != dtype:
            got = f"{a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray) else \
                type(a).__name__
            raise KernelArgumentError(
                f"kernel '{name}': input {k} must be {dtype}{list(shape)}, got {got} (a value "
                "whose shape the type system could not prove)")
        flags = a.flags
        out.append(a if flags.c_contiguous and flags.aligned else
                   np.require(a, requirements="CA"))
    return out


class StaticKernel:
    """A group kernel of fixed shapes: `kernel(inputs + outputs)` writes the outputs.

    `fn` is the executor's KernelFn (compiled now, or loaded from an object file);
    `group` the GroupKernel it came from (None when loaded)."""

    dynamic = False

    def __init__(self, name: str, in_specs: Sequence[Spec], out_specs: Sequence[Spec],
                 fn: Any, group: Any = None) -> None:
        self.name, self.fn, self.group = name, fn, group
        self.in_specs = [(tuple(s), str(d)) for s, d in in_specs]
        self.out_specs = [(tuple(s), str(d)) for s, d in out_specs]
        self._checks = [(s, np.dtype(d)) for s, d in self.in_specs]
        self._pointers = ctypes.c_void_p * max(1, len(self.in_specs) + len(self.out_specs))

    @classmethod
    def of_group(cls, group: Any, fn: Any) -> StaticKernel:
        """The kernel of a compiled GroupKernel and its KernelFn."""
        return cls(group.name, group.in_specs, group.out_specs, fn, group)

    def __call__(self, args: list[Any], known: dict[int, int] | None = None
                 ) -> list[np.ndarray] | None:
        """Run on `args` (inputs, then the output arrays, written in place); `known` maps
        id() of arrays whose address is already known (the executable's read-only
        constants, whose address would otherwise cost a slow lookup every call)."""
        n = len(self.in_specs)
        arrays = _check(self.name, args[:n], self._checks) + args[n:]
        if not isinstance(self.fn, KernelFn):
            self.fn(arrays)
            return None
        known = known or {}
        self.fn.call_pointers(self._pointers(
            *[known.get(id(a)) or array_address(a) for a in arrays]))
        return None


def is_dynamic_group(fn: Function) -> bool:
    """Whether a Primitive function's parameter or result types hold `?` (or symbolic)
    dims."""
    types = [p.checked_type or p.type_annotation for p in fn.params]
    types.append(fn.body.checked_type)
    return any(is_dynamic(t) for ts in types for t in flatten_types(ts))


class InterpretedGroup:
    """A fused group holding an op without a kernel strategy (e.g. nn.batch_norm when
    SimplifyInference is disabled): evaluated by the interpreter's numpy references."""

    dynamic = True

    def __init__(self, fn: Function, name: str) -> None:
        self.fn, self.name = fn, f"{name} (interpreted)"
        self.num_outputs = len(flatten_types(fn.body.checked_type))

    def __call__(self, args: list[Any], known: dict[int, int] | None = None) -> list[Any]:
        from relay_ir.interpreter import Closure, Interpreter

        it = iter(args[:len(args) - self.num_outputs])
        values = [_nest(p.checked_type or p.type_annotation, it) for p in self.fn.params]
        return _flatten(Interpreter(None).apply(Closure(self.fn, {}), values))


def _nest(t: Any, it: Any) -> Any:
    return tuple(_nest(f, it) for f in t.fields) if isinstance(t, TupleType) else next(it)


def _flatten(v: Any) -> list[Any]:
    return [x for f in v for x in _flatten(f)] if isinstance(v, tuple) else [v]


def has_strategies(fn: Function) -> bool:
    """Whether every op of a fused group has a kernel strategy."""
    from relay_ir.backend.lower_group import group_ops
    from relay_ir.strategy import STRATEGIES

    return all(c.op in STRATEGIES for c in group_ops(fn))


class OpKernel:
    """An op call outside every group, run through the interpreter's numpy reference."""

    dynamic = True

    def __init__(self, call: Call) -> None:
        self.call = call
        self.name = call.op.name
        self.num_outputs = 1

    def function(self) -> Function:
        """`fn (%a0, ...) { op(%a0, ..., attrs) }`: the call as text can save it."""
        params = tuple(Var(f"a{i}") for i in range(len(self.call.args)))
        return Function(params, Call(self.call.op, params, self.call.attrs))

    def __call__(self, args: list[Any], known: dict[int, int] | None = None) -> list[Any]:
        from relay_ir.interpreter import evaluate_op

        return [evaluate_op(self.call, list(args[:-1]))]


__all__ = ["InterpretedGroup", "OpKernel", "StaticKernel", "has_strategies",
           "is_dynamic_group"]
