"""`lowering.build(s, args, target="accel")`: a schedule as an accelerator kernel.

The schedule is lowered to loop IR as for the CPU, without loop partitioning and
without dropping one-iteration loops (a pragma sits on its loop even when the loop runs
once), then lowering.accel.codegen turns it into the instruction stream. The kernel is
called on numpy arrays in the packed layouts the schedule declares; each call places
them in a DRAM image, runs the simulator (bit-exact) and writes the outputs back.

    >>> f = lowering.build(s, [A, W, C], target="accel")      # doctest: +SKIP
    >>> f(a, w, c)                                             # doctest: +SKIP
    >>> print(f.disasm()); f.stats().total_cycles              # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lowering import ir
from lowering.accel.codegen import Program, generate
from lowering.accel.dram import elem_shape, elements
from lowering.accel.env import Env
from lowering.accel.isa import Insn, disasm, encode_stream
from lowering.accel.simulator import Stats, profile, run
from tessel_errors import KernelArgumentError
from tessel_target import Target


def lower_for_accel(sch: Any, args: Sequence[Any], name: str = "main") -> ir.PrimFunc:
    """The loop IR the accel code generator reads."""
    from lowering.passes.simplify import simplify
    from lowering.passes.verify_loops import verify_loops
    from lowering.schedule_ops import schedule_to_func

    func = schedule_to_func(sch, args, name)
    func = simplify(func)
    func = verify_loops(func)
    return func


class AccelKernel:
    """An accelerator kernel: `f(*arrays)` runs it on the simulator, writing outputs into
    the arrays passed; `.instructions`, `.uops`, `.disasm()`, `.stats()`."""

    def __init__(self, func: ir.PrimFunc, target: Target, program: Program) -> None:
        self.func, self.target, self.env = func, target, Env(target)
        self.program = program
        self.last_stats: Stats | None = None
        encode_stream(program.insns, self.env)  # every field fits its bits

    @property
    def instructions(self) -> tuple[Insn, ...]:
        return self.program.insns

    @property
    def uops(self) -> tuple:
        return self.program.uops

    def disasm(self) -> str:
        """The stream one instruction a line."""
        return disasm(self.program.insns)

    def stats(self) -> Stats:
        """Cycles, module busy time, GEMM utilisation and DRAM bytes, from the cycle model
        (the same numbers a call reports: they do not depend on the data)."""
        return profile(self.program.insns, self.env)

    def __call__(self, *arrays: np.ndarray) -> None:
        params = self.program.params
        if len(arrays) != len(params):
            raise KernelArgumentError(f"accel kernel '{self.func.name}' takes {len(params)} "
                                      f"arrays ({', '.join(p.buffer.name for p in params)}), "
                                      f"got {len(arrays)}")
        data = self.program.dram.data.copy()
        for n, (p, a) in enumerate(zip(params, arrays), 1):
            shape = tuple(int(d.value) for d in p.buffer.shape)  # type: ignore[attr-defined]
            if not isinstance(a, np.ndarray) or a.dtype != np.dtype(p.buffer.dtype) or \
                    a.shape != shape:
                got = f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
                raise KernelArgumentError(f"argument {n} '{p.buffer.name}': expected "
                                          f"{p.buffer.dtype} {shape}, got {got}")
            if p.output and not a.flags.writeable:
                raise KernelArgumentError(f"argument {n} '{p.buffer.name}' is an output and "
                                          "must be writeable")
            if p.mem is not None and not p.output:
                eshape, _ = elem_shape(self.env, p.mem)
                elements(self.env, data, p.mem)[p.base:p.base + p.count] = \
                    a.reshape(p.count, *eshape)
        self.last_stats = run(self.program.insns, data, self.env)
        for p, a in zip(params, arrays):
            if p.output:
                got = elements(self.env, data, p.mem)[p.base:p.base + p.planes * p.count]
                if p.planes > 1:  # byte k of each int32 in plane k: little-endian bytes
                    got = np.ascontiguousarray(got.view(np.uint8).reshape(p.planes, -1).T
                                               ).view(np.int32)
                a[...] = got.reshape(a.shape)

    def __repr__(self) -> str:
        return (f"AccelKernel('{self.func.name}', {len(self.program.insns)} instructions, "
                f"{len(self.program.uops)} micro-ops, target '{self.target}')")


def build(sch_or_func: Any, args: Sequence[Any] | None, target: Target,
          name: str = "main") -> AccelKernel:
    """The accelerator kernel of a schedule (with its argument tensors) or a PrimFunc."""
    if isinstance(sch_or_func, ir.PrimFunc):
        func = sch_or_func
    else:
        func = lower_for_accel(sch_or_func, args or [], name)
    return AccelKernel(func, target, generate(func, Env(target)))


__all__ = ["AccelKernel", "build", "lower_for_accel"]
