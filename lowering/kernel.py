"""Kernel: a compiled PrimFunc callable on numpy arrays, with argument checks, its source
code and a timer.

Every argument is checked before the native code runs (count, ndarray, dtype, rank,
shape with symbolic dimensions bound from the arrays and kept consistent, C-contiguity,
writeability of outputs, no overlap between an output and another argument), and the
error names the argument:

    >>> # f = lowering.build(s, [A, B, C]); f(a, b, c_wrong)
    >>> # KernelArgumentError: argument 3 'C': expected shape (1024, 1024), got (1024, 512)

The native call goes through a ctypes CFUNCTYPE, which releases the GIL while it runs.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import time as _time
from typing import Any

import numpy as np

from lowering import ir as lir
from tensor_expr import expr as E
from tensor_expr.visitor import post_order_visit
from tessel_errors import KernelArgumentError
from tessel_target import num_threads  # the count a tuning record is filed under too

_CALL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)



def array_address(a: np.ndarray) -> int:
    """The data pointer of `a` (ctypes.from_buffer is several times faster than .ctypes)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):  # read-only or empty
        return a.ctypes.data


def _foreign_cpu(target: Any) -> str:
    """Why code for `target` may not run on this host ("" when it can): the vector and
    bit-manipulation features the target's code may use (a named CPU's known set, plus
    `-mattr`'s +features) that the host lacks; a CPU name Tessel has no feature set for
    counts as foreign. Code for an older CPU (haswell on a Sapphire Rapids host) runs."""
    from tessel_target import Target, host_cpu, host_features, known_cpu

    if os.environ.get("TESSEL_ALLOW_FOREIGN_CPU") == "1":
        return ""
    t = Target.parse(target)
    named = t.attrs.get("mcpu")
    host = host_cpu()[0]
    if named and named not in (host, "native") and not known_cpu(named):
        return f"{host}; Tessel does not know which features '{named}' has"
    wanted = set(t.features)
    if not named or named in (host, "native"):
        wanted = {f[1:] for f in str(t.attrs.get("mattr", "")).split(",")
                  if f.strip().startswith("+")}
    missing = sorted(wanted - host_features())
    return f"{host} lacks {', '.join(missing)}" if missing else ""


def written_buffers(func: lir.PrimFunc) -> set[int]:
    """Ids of the parameter buffers that `func` stores into."""
    out: set[int] = set()

    def f(s: lir.Stmt) -> None:
        if isinstance(s, lir.BufferStore):
            out.add(id(s.buffer))

    lir.post_order_visit_stmt(func.body, f)
    return out


def _shape_text(shape: tuple[Any, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


class Kernel:
    """A compiled kernel: `f(a, b, c)`, `f.source("llvm")`, `f.time(a, b, c)`."""

    def __init__(self, func: lir.PrimFunc, target: Any, generated: Any, jit: Any) -> None:
        self.func = func
        self.name = func.name
        self.target = target
        self.generated = generated
        self._jit = jit
        self._fn = _CALL(jit.address(generated.entry))
        self.foreign = _foreign_cpu(target)
        threads = ctypes.c_int32.from_address(jit.address(generated.num_threads_symbol))
        threads.value = num_threads()
        # parallel loops use the runtime's thread pool unless TESSEL_THREAD_POOL=0 (then
        # the generated code starts its own pthreads on every call)
        launch = ctypes.c_void_p.from_address(jit.address(generated.launch_symbol))
        launch.value = None
        if os.environ.get("TESSEL_THREAD_POOL", "1") != "0" and threads.value > 1:
            from lowering.llvm.runtime import pool_launch_address

            launch.value = pool_launch_address(threads.value - 1)
        self.launch_address = launch.value or 0
        self._params = func.params
        self._written = written_buffers(func)
        static = all(isinstance(d, E.IntImm) for p in func.params for d in p.shape)
        self._expect: list[tuple[np.dtype, tuple[int, ...], bool]] | None = None
        if static:
            self._expect = [(np.dtype(p.dtype), tuple(d.value for d in p.shape),
                             id(p) in self._written) for p in func.params]
            self._spans = [int(np.prod(shape)) * dt.itemsize for dt, shape, _ in self._expect]
            self._written_pos = [k for k, e in enumerate(self._expect) if e[2]]
            dims = [n for _, shape, _ in self._expect for n in shape]
            self._static_dims = (ctypes.c_int64 * max(1, len(dims)))(*dims)

    # ------------------------------------------------------------------ calling
    def __call__(self, *arrays: Any) -> None:
        """Run the kernel on numpy arrays; outputs are written into the arrays passed."""
        ptrs = self._fast_check(arrays)
        if ptrs is None:  # something is off (or shapes are symbolic): the full check
            shapes = self.check_args(arrays)
            ptrs = [array_address(a) for a in arrays]
            dims = (ctypes.c_int64 * max(1, len(shapes)))(*shapes)
        else:
            dims = self._static_dims
        rc = self._fn((ctypes.c_void_p * max(1, len(arrays)))(*ptrs), dims)
        if rc != 0:
            messages = self.generated.messages
            what = messages[rc - 1] if 0 < rc <= len(messages) else f"error code {rc}"
            raise KernelArgumentError(f"kernel '{self.name}': run-time check failed: {what}")

    def _fast_check(self, arrays: tuple[Any, ...]) -> list[int] | None:
        """Data pointers when `arrays` certainly fit constant-shape parameters, else None
        (a few hundred ns per argument instead of the full check's microseconds)."""
        expect = self._expect
        if expect is None or self.foreign or len(arrays) != len(expect):
            return None
        ptrs = []
        for a, (dt, shape, written) in zip(arrays, expect):
            if type(a) is not np.ndarray or a.dtype != dt or a.shape != shape:
                return None
            flags = a.flags
            if not (flags.c_contiguous and flags.aligned) or (written and not flags.writeable):
                return None
            ptrs.append(array_address(a))
        spans = self._spans
        for k in self._written_pos:
            lo, hi = ptrs[k], ptrs[k] + spans[k]
            for j, p in enumerate(ptrs):
                if j != k and spans[j] and p < hi and lo < p + spans[j]:
                    return None  # overlap: the full check reports it
        return ptrs

    def check_args(self, arrays: tuple[Any, ...]) -> list[int]:
        """Check `arrays` against the parameters; return all their dims in order."""
        if self.foreign:
            # code for another CPU may use instructions this one lacks (SIGILL would kill
            # the interpreter); its source can still be read
            raise KernelArgumentError(
                f"kernel '{self.name}' was compiled for '{self.target}', not for this host "
                f"CPU ({self.foreign}); read it with .source('asm') or rebuild for 'llvm' "
                "(TESSEL_ALLOW_FOREIGN_CPU=1 runs it anyway)")
        return check_arguments(self.func, arrays, self._written)[0]

    # ------------------------------------------------------------------ inspection
    def source(self, kind: str = "llvm") -> str:
        """Code of the kernel: "llvm" (generated IR), "llvm-opt" (after O3), "asm", "ir"."""
        if kind == "llvm":
            return self.generated.text
        if kind in ("llvm-opt", "opt"):
            return self._jit.optimized_ir
        if kind in ("asm", "s"):
            return self._jit.assembly()
        if kind in ("ir", "loop"):
            return str(self.func)
        raise KernelArgumentError(
            f"unknown source kind {kind!r}; expected 'llvm', 'llvm-opt', 'asm' or 'ir'")

    def object_code(self) -> bytes:
        """The kernel's machine code as an object file (lowering.llvm.jit.ObjectModule loads
        it back without recompiling)."""
        return self._jit.emit_object()

    def time(self, *arrays: Any, number: int = 10, repeat: int = 3,
             warmup: int = 1) -> float:
        """Median seconds per call over `repeat` runs of `number` calls, after warm-up."""
        if number < 1 or repeat < 1:
            raise KernelArgumentError("time(): number and repeat must be at least 1")
        for _ in range(max(0, warmup)):
            self(*arrays)
        shapes = self.check_args(arrays)
        ptrs = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        dims = (ctypes.c_int64 * max(1, len(shapes)))(*shapes)
        fn = self._fn
        runs = []
        for _ in range(repeat):
            t0 = _time.perf_counter()
            for _ in range(number):
                fn(ptrs, dims)
            runs.append((_time.perf_counter() - t0) / number)
        return statistics.median(runs)

    def __repr__(self) -> str:
        return f"<Kernel {self.name} for {self.target}>"


def check_arguments(func: lir.PrimFunc, arrays: tuple[Any, ...],
                    written: set[int] | None = None) -> tuple[list[int], dict[int, int]]:
    """Check `arrays` against the parameters of `func`, naming the argument at fault.

    Returns every dimension of every argument in order, and the values of the symbolic
    shape variables (by id of the Var).
    """
    if written is None:
        written = written_buffers(func)
    for k, (a, p) in enumerate(zip(arrays, func.params), start=1):
        if not isinstance(a, np.ndarray):
            raise KernelArgumentError(
                f"argument {k} '{p.name}': expected a numpy.ndarray, got {type(a).__name__}")
    dims, bound = check_shapes(func, [(tuple(a.shape), a.dtype) for a in arrays])
    for k, (a, p) in enumerate(zip(arrays, func.params), start=1):
        where = f"argument {k} '{p.name}'"
        if not a.flags.c_contiguous:
            raise KernelArgumentError(
                f"{where}: the array is not C-contiguous (strides {a.strides}); pass "
                "np.ascontiguousarray(...) instead")
        if not a.flags.aligned:
            # the generated code tells LLVM every element is aligned to its size
            raise KernelArgumentError(
                f"{where}: the array's data (address {a.ctypes.data:#x}) is not aligned to "
                f"its {a.itemsize}-byte elements; pass an aligned copy, "
                "np.require(a, requirements='CA'), and copy results back if it is an output")
        if id(p) in written and not a.flags.writeable:
            raise KernelArgumentError(
                f"{where}: the kernel writes this argument but the array is read-only")
    _check_overlap(func.params, arrays, written)
    return dims, bound


def check_shapes(func: lir.PrimFunc, metas: list[tuple[tuple[int, ...], Any]]
                 ) -> tuple[list[int], dict[int, int]]:
    """Check (shape, dtype) per argument against the parameters (count, dtype, rank,
    shape with symbolic dims bound consistently); returns all dims and the shape vars."""
    params = func.params
    name = func.name
    if len(metas) != len(params):
        names = ", ".join(p.name for p in params)
        raise KernelArgumentError(
            f"kernel '{name}' takes {len(params)} arguments ({names}), got {len(metas)}"
        )
    bound: dict[int, tuple[int, str]] = {}
    dims: list[int] = []
    for k, ((shape, dtype), p) in enumerate(zip(metas, params), start=1):
        where = f"argument {k} '{p.name}'"
        if np.dtype(dtype) != np.dtype(p.dtype):
            raise KernelArgumentError(
                f"{where}: expected dtype {p.dtype}, got {np.dtype(dtype)}; convert with "
                f".astype('{p.dtype}')")
        if len(shape) != p.ndim:
            raise KernelArgumentError(
                f"{where}: expected {p.ndim} dimensions, shape {_shape_text(p.shape)}, "
                f"got {len(shape)} dimensions, shape {tuple(shape)}")
        for d, n in zip(p.shape, shape):
            if isinstance(d, E.Var) and id(d) not in bound:
                bound[id(d)] = (int(n), where)
        values = {key: v[0] for key, v in bound.items()}
        expected = tuple(_eval_int(d, values, name) for d in p.shape)
        if expected != tuple(shape):
            raise KernelArgumentError(
                f"{where}: expected shape {_shape_text(expected)}, got "
                f"{_shape_text(tuple(shape))}" + _symbolic_note(p, bound))
        dims.extend(int(n) for n in shape)
    return dims, {key: v[0] for key, v in bound.items()}


def _symbolic_note(p: lir.Buffer, bound: dict[int, tuple[int, str]]) -> str:
    notes = []
    for d in p.shape:
        if isinstance(d, E.Var) and id(d) in bound:
            notes.append(f"{d.name} = {bound[id(d)][0]} from {bound[id(d)][1]}")
    return f" ({'; '.join(notes)})" if notes else ""


def _check_overlap(params: tuple[lir.Buffer, ...], arrays: tuple[Any, ...],
                   written: set[int]) -> None:
    # the generated code assumes outputs alias nothing (noalias): refuse overlaps
    for i, (a, p) in enumerate(zip(arrays, params)):
        if id(p) not in written or a.size == 0:
            continue
        for j, b in enumerate(arrays):
            if j != i and b.size and np.may_share_memory(a, b):
                raise KernelArgumentError(
                    f"argument {i + 1} '{p.name}' and argument {j + 1} '{params[j].name}' "
                    f"overlap in memory; the kernel writes '{p.name}', so pass distinct "
                    "arrays")


def _eval_int(e: E.PrimExpr, values: dict[int, int], kernel: str) -> int:
    """Evaluate an integer shape expression over bound shape variables."""
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        if id(e) not in values:
            raise KernelArgumentError(
                f"kernel '{kernel}': shape variable '{e.name}' is not a dimension of any "
                "argument, so it cannot be bound from the arrays")
        return values[id(e)]
    if isinstance(e, E.Cast):
        return _eval_int(e.value, values, kernel)
    ops = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
           E.FloorDiv: lambda a, b: a // b if b else 0, E.FloorMod: lambda a, b: a % b if b else 0,
           E.Min: min, E.Max: max}
    fn = ops.get(type(e))
    if fn is None:
        raise KernelArgumentError(f"kernel '{kernel}': cannot evaluate shape expression {e}")
    return fn(_eval_int(e.a, values, kernel), _eval_int(e.b, values, kernel))


def fingerprint(func: lir.PrimFunc) -> str:
    """Text that identifies `func` exactly: its printout plus the identity, dtype and
    layout of every variable and buffer (two different vars may print alike)."""
    order: dict[int, int] = {}
    tokens: list[str] = []

    def note_var(v: E.Var) -> None:
        if id(v) not in order:
            order[id(v)] = len(order)
        tokens.append(f"{v.name}#{order[id(v)]}:{v.dtype}")

    def note_buf(b: lir.Buffer) -> None:
        key = id(b) + 1  # distinct from var ids
        if key not in order:
            order[key] = len(order)
        strides = None if b.strides is None else [str(s) for s in b.strides]
        tokens.append(f"{b.name}@{order[key]}:{b.dtype}:{b.scope}:{strides}:{b.align}")
        for d in b.shape:
            post_order_visit(d, on_expr)

    def on_expr(n: Any) -> None:
        if isinstance(n, E.Var):
            note_var(n)
        elif isinstance(n, lir.BufferLoad):
            note_buf(n.buffer)
        elif isinstance(n, E.Cast):
            tokens.append(n.dtype)

    for p in func.params:
        note_buf(p)

    def on_stmt(s: lir.Stmt) -> None:
        for name in s.__dataclass_fields__:  # type: ignore[attr-defined]
            v = getattr(s, name)
            if isinstance(v, E.PrimExpr):
                post_order_visit(v, on_expr)
            elif isinstance(v, lir.Buffer):
                note_buf(v)
            elif isinstance(v, tuple):
                for x in v:
                    if isinstance(x, E.PrimExpr):
                        post_order_visit(x, on_expr)
        if isinstance(s, lir.For):
            note_var(s.var)

    lir.post_order_visit_stmt(func.body, on_stmt)
    return str(func) + "\n" + " ".join(tokens)
