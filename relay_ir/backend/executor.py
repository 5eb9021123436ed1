"""The graph executor: a compiled model is a list of kernel calls over numbered values
(inputs, constants, planned intermediates, outputs), run on numpy arrays.

    >>> lib = relay_ir.build(mod)                       # doctest: +SKIP
    >>> y = lib.run(x=np.ones((4, 16), "float32"))      # doctest: +SKIP
    >>> lib.memory_plan.peak_bytes <= lib.memory_plan.total_bytes   # doctest: +SKIP
    True

Intermediates live in storage blocks from the memory plan (allocated once per compiled
model and calling thread, so two threads may run one model at once); outputs are fresh
arrays each run. Inputs are checked by name, shape and dtype before any kernel runs.

A kernel whose loop IR reads each element of an input only to compute the same element of
an output (a residual conv's add, an elementwise op: relay_ir.backend.inplace) writes
that output over the input when nothing reads the input later: the output's lines are
the ones just read, in the L1 cache, not other lines fetched only to be overwritten.
ResNet-50's 56x56 residual 1x1 convs ran 15% faster so (one Sapphire Rapids core), the
whole model 0.975-0.992x (benchmarks.memory_plans, three runs), and its intermediates
took 5.4 MiB instead of 9.2. TESSEL_PLAN_INPLACE=0 turns it off, to measure what it does.
One kernel gets slower under it: ResNet-50's stride-2 3x3 conv (128@56 -> 28) ran 8-10%
longer in whole runs (about 1450 -> 1590 us, one core), though it is not in place, reads
the same numbers, and reads and writes the same blocks at the same page offsets under
either plan (the same arena offsets too, with the blocks padded to the other plan's
sizes). Timed alone it takes the same time under both; in whole runs the gap stays with
the L2 cache flushed just before it, and comes and goes with which earlier steps write in
place: without the share at either residual conv before it (steps 8, 11) it is gone and
the 1x1 conv just before it is slower by about as much (steps 11-14 together are no
slower in place). The extra time is in reading its input, which the 1x1 conv has just
written (to the same block under both plans): reading that input (untimed, numpy) just
before the call took most of the gap away (1590 -> 1480 us, against 1425 off), reading
its weights or its output block did not. So where those just-written lines sit when it
starts (L3 or memory: the hardware's choice, from a history the plan changes) costs one
kernel or the other; the plan does not put this one's data badly, and the choice is not
visible without hardware counters (these VMs expose none). `python -m
benchmarks.memory_plans --steps 12` lists kernels whose time moves so.
A saved model records each kernel's proven pairs (relay_ir.backend.serialize), so the
model loaded from it plans the same memory; one saved without them plans without sharing.
"""

from __future__ import annotations

import ctypes
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lowering.kernel import array_address
from relay_ir.backend.huge_pages import HUGE_PAGE, huge_page_bytes
from relay_ir.backend.inplace import inplace_enabled
from relay_ir.backend.memory_plan import (
    PAGE,
    MemoryPlan,
    check_fits_in_memory,
    format_bytes,
    plan_memory,
)
from tessel_errors import KernelArgumentError, RelayError

_CALL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
Spec = tuple[tuple[int, ...], str]


class KernelFn:
    """A kernel entry point in loaded code, called with arrays of known shapes (the graph
    executor checks the shapes once, at the model's inputs)."""

    def __init__(self, jit: Any, name: str, entry: str, num_threads_symbol: str,
                 launch_symbol: str, messages: Sequence[str], specs: Sequence[Spec]) -> None:
        from lowering.kernel import num_threads

        self.jit, self.name, self.entry = jit, name, entry
        self.num_threads_symbol, self.launch_symbol = num_threads_symbol, launch_symbol
        self.messages = list(messages)
        self.specs = [(tuple(int(d) for d in s), str(dt)) for s, dt in specs]
        self._fn = _CALL(jit.address(entry))
        threads = ctypes.c_int32.from_address(jit.address(num_threads_symbol))
        threads.value = num_threads()
        launch = ctypes.c_void_p.from_address(jit.address(launch_symbol))
        launch.value = None
        if os.environ.get("TESSEL_THREAD_POOL", "1") != "0" and threads.value > 1:
            from lowering.llvm.runtime import pool_launch_address

            launch.value = pool_launch_address(threads.value - 1)
        dims = [d for s, _ in self.specs for d in s]
        self._dims = (ctypes.c_int64 * max(1, len(dims)))(*dims)
        self._ptrs = ctypes.c_void_p * max(1, len(self.specs))

    @classmethod
    def from_kernel(cls, kernel: Any, specs: Sequence[Spec]) -> KernelFn:
        """Wrap a lowering.Kernel (keeps its JIT module alive)."""
        g = kernel.generated
        k = cls(kernel._jit, kernel.name, g.entry, g.num_threads_symbol, g.launch_symbol,
                g.messages, specs)
        k.kernel = kernel
        return k

    kernel: Any = None  # the lowering.Kernel this wraps (None when loaded from a file)
    object_bytes: bytes | None = None  # the object code this was loaded from
    # (input position, output position) pairs the output may be written over (see
    # inplace_pairs); set from a saved model's record, or proven at first use
    inplace: list[tuple[int, int]] | None = None

    def inplace_pairs(self) -> list[tuple[int, int]] | None:
        """Every (parameter position of an input, of an output) such that the kernel may
        write the output over the input (relay_ir.backend.inplace proves it from the
        loop IR; a loaded kernel has the pairs its saved model recorded): None when
        unknown (a kernel loaded from a model saved without them).

            >>> fn.inplace_pairs()     # a residual conv: output 4 over input 3  # doctest: +SKIP
            [(3, 4)]
        """
        if self.inplace is None:
            func = getattr(self.kernel, "func", None)
            if func is not None and len(func.params) == len(self.specs):
                from relay_ir.backend.inplace import inplace_pairs

                self.inplace = inplace_pairs(func)
        return self.inplace

    def object_code(self) -> bytes:
        """The kernel's machine code as a relocatable object file."""
        if self.object_bytes is not None:
            return self.object_bytes
        if self.kernel is None:
            raise RelayError(f"kernel '{self.name}' has no object code to save")
        return self.kernel.object_code()

    def __call__(self, arrays: Sequence[np.ndarray]) -> None:
        """Run on C-contiguous arrays of the kernel's parameter shapes, in order."""
        self.call_pointers(self._ptrs(*[array_address(a) for a in arrays]))

    def pointer_array(self) -> Any:
        """A ctypes array of the kernel's parameter count, for `call_pointers`."""
        return self._ptrs()

    def entry_point(self) -> tuple[Any, Any]:
        """(the ctypes entry, the dims array) for a caller that fills its own pointer arrays
        (the VM's translated code): `entry(ptrs, dims)` returns 0 or a check's number."""
        return self._fn, self._dims

    def call_pointers(self, ptrs: Any) -> None:
        """Run on the data addresses in `ptrs` (of arrays of the parameter shapes)."""
        rc = self._fn(ptrs, self._dims)
        if rc != 0:
            what = self.messages[rc - 1] if 0 < rc <= len(self.messages) else f"code {rc}"
            raise KernelArgumentError(f"kernel '{self.name}': run-time check failed: {what}")


class DeviceKernelFn:
    """A CUDA group kernel (or a simulated one, target "cuda -sim") in the graph executor.
    On a GPU the plan keeps every value in device memory (GraphPlan.execute); the
    simulator runs on the host arrays."""

    def __init__(self, kernel: Any, specs: Sequence[Spec]) -> None:
        self.kernel, self.name = kernel, kernel.name
        self.specs = [(tuple(int(d) for d in s), str(dt)) for s, dt in specs]

    def __call__(self, arrays: Sequence[np.ndarray]) -> None:
        """Run on arrays of the kernel's parameter shapes, in order."""
        self.kernel(*arrays)

    def object_code(self) -> bytes:
        """Not available: CUDA code has no host object file (a saved CUDA model keeps its
        CUDA C, PTX, cubin and loop IR: relay_ir.backend.serialize_cuda)."""
        raise RelayError(f"kernel '{self.name}' is CUDA code and has no host object file; "
                         "save the model with CompiledModel.save, which keeps its CUDA C, "
                         "PTX and loop IR")


def kernel_fn(kernel: Any, specs: Sequence[Spec]) -> KernelFn | DeviceKernelFn:
    """The executor's callable for a compiled kernel of any backend."""
    from lowering.cuda import CudaKernel

    if isinstance(kernel, CudaKernel):
        return DeviceKernelFn(kernel, specs)
    return KernelFn.from_kernel(kernel, specs)


# Kernels read whole vectors (64 bytes with AVX-512): an array at an address that is only
# 16-byte aligned (what malloc gives numpy's large arrays) splits every other load across
# two cache lines; that cost a batch-1 dense with its weight in L2 up to 2x (measured)
ALIGN = 64


def aligned_bytes(n: int) -> np.ndarray:
    """`n` uninitialised bytes (uint8) starting at an ALIGN-byte boundary.

        >>> aligned_bytes(100).ctypes.data % ALIGN
        0
    """
    raw = np.empty(n + ALIGN, np.uint8)
    start = -array_address(raw) % ALIGN
    return raw[start:start + n]


def aligned_empty(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts at an ALIGN-byte boundary.

        >>> aligned_empty((3, 5), "float32").ctypes.data % ALIGN
        0
    """
    dt = np.dtype(dtype)
    return aligned_bytes(dt.itemsize * math.prod(shape)).view(dt).reshape(tuple(shape))


def aligned(a: np.ndarray) -> np.ndarray:
    """`a` itself when C-contiguous and ALIGN-byte aligned, else an aligned copy."""
    if a.flags.c_contiguous and a.ctypes.data % ALIGN == 0:
        return a
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


@dataclass
class Value:
    """A value of the graph: kind is "input", "const", "temp" or "output"."""

    kind: str
    shape: tuple[int, ...]
    dtype: str
    name: str = ""
    data: np.ndarray | None = None


@dataclass
class Step:
    """One kernel call: kernel index, input value ids, output value ids; the workload key
    of the tuning task whose template compiled it ("" for a group without one, and in a
    loaded model): what autotune.model_confirm sums a task's in-model time by."""

    kernel: int
    inputs: list[int]
    outputs: list[int]
    group: str
    workload_key: str = ""


class GraphPlan:
    """Kernels, values and steps of one compiled (static-shape) model."""

    def __init__(self, kernels: list[KernelFn], values: list[Value], steps: list[Step],
                 inputs: list[int], outputs: Any) -> None:
        self.kernels, self.values, self.steps = kernels, values, steps
        self.inputs, self.outputs = inputs, outputs  # outputs: an id or nested lists
        temps = [v for v, val in enumerate(values) if val.kind == "temp"]
        spans = []
        for v in temps:
            start = next(k for k, s in enumerate(steps) if v in s.outputs)
            end = max([k for k, s in enumerate(steps) if v in s.inputs], default=start)
            spans.append((start, end, _nbytes(values[v])))
        share = _inplace_shares(kernels, steps, temps, spans) if inplace_enabled() else {}
        self.memory_plan: MemoryPlan = plan_memory(spans, share=share)
        _check_memory(values, self.memory_plan, {v: st.group for st in steps
                                                 for v in st.outputs})
        self._temps = temps
        pack_constants(values, steps)
        self._local = threading.local()  # each thread runs in storage of its own
        self._device_consts: dict[int, Any] | None = None  # on a GPU, made at the first run
        self._on_device = bool(kernels) and all(
            isinstance(k, DeviceKernelFn) and not k.kernel.simulated for k in kernels)
        self._by_kind: dict[str, list[int]] = {}
        for v, val in enumerate(values):
            self._by_kind.setdefault(val.kind, []).append(v)
        # the values whose arrays change at every run: their kernel argument slots are
        # rewritten per run, every other slot is filled once per thread (see _calls)
        self._per_run = sorted(set(inputs) | set(self._by_kind.get("output", [])))
        self._pointer_calls = all(isinstance(k, KernelFn) for k in kernels)

    def _temp_views(self) -> dict[int, np.ndarray]:
        """The planned intermediates of the calling thread, allocated on its first run: two
        threads running one model at once never share a buffer."""
        views = getattr(self._local, "views", None)
        if views is None:
            # one page-aligned arena: the planned offsets fix each buffer's page offset;
            # from 2 MiB up all of it on huge pages (arena_bytes; from numpy, part or all
            # of it lay on 4 KiB pages, by chance: relay_ir.backend.huge_pages)
            plan = self.memory_plan
            arena = arena_bytes(plan.arena_bytes, PAGE)
            views = {}
            for v, b in zip(self._temps, plan.storage_of):
                val = self.values[v]
                off = plan.block_offsets[b]
                views[v] = arena[off:off + _nbytes(val)].view(val.dtype).reshape(val.shape)
            self._local.views = views
        return views

    def bind(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray | None]:
        """The array of every value for one run (inputs given in order)."""
        env: list[np.ndarray | None] = [None] * len(self.values)
        values = self.values
        for v in self._by_kind.get("const", ()):
            env[v] = values[v].data
        temps = self._temp_views()
        for v in self._by_kind.get("temp", ()):
            env[v] = temps[v]
        for v in self._by_kind.get("output", ()):
            # fresh each run and written once: aligning them would cost more than it saves
            env[v] = np.empty(values[v].shape, values[v].dtype)
        for v, a in zip(self.inputs, arrays):
            env[v] = a
        return env

    def _calls(self, env: list[np.ndarray | None]) -> list[tuple[Any, Any, list]]:
        """The calling thread's steps as (kernel, pointer array, [(slot, value)] to fill
        per run), the addresses of constants and of its intermediates written in once:
        a step then costs one foreign call, not an address lookup per argument."""
        calls = getattr(self._local, "calls", None)
        if calls is None:
            per_run = set(self._per_run)
            calls = []
            for s in self.steps:
                k = self.kernels[s.kernel]
                ptrs, patch = k.pointer_array(), []
                for slot, v in enumerate((*s.inputs, *s.outputs)):
                    if v in per_run:
                        patch.append((slot, v))
                    else:
                        ptrs[slot] = env[v].ctypes.data
                calls.append((k, ptrs, patch))
            self._local.calls = calls
        return calls

    def execute(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray | None]:
        """Run every step; returns the value arrays."""
        if self._on_device:
            return self._execute_on_device(arrays)
        env = self.bind(arrays)
        if not self._pointer_calls:
            for s in self.steps:
                self.kernels[s.kernel]([env[v] for v in s.inputs] +
                                       [env[v] for v in s.outputs])
            return env

        addr = {v: array_address(env[v]) for v in self._per_run}
        for k, ptrs, patch in self._calls(env):
            for slot, v in patch:
                ptrs[slot] = addr[v]
            k.call_pointers(ptrs)
        return env

    def _execute_on_device(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray | None]:
        """A GPU run: inputs copied to the device once, constants kept there across runs,
        intermediates and outputs in device memory, the outputs copied back at the end."""
        from lowering.cuda import DeviceArray, to_device

        consts = self._device_consts
        if consts is None:
            consts = {v: to_device(val.data) for v, val in enumerate(self.values)
                      if val.kind == "const"}
            self._device_consts = consts
        dev: list[Any] = [None] * len(self.values)
        for v, a in zip(self.inputs, arrays):
            dev[v] = to_device(a)
        for v, val in enumerate(self.values):
            if val.kind == "const":
                dev[v] = consts[v]
            elif val.kind in ("temp", "output"):
                dev[v] = DeviceArray(val.shape, val.dtype)
        for s in self.steps:
            self.kernels[s.kernel]([dev[v] for v in s.inputs] + [dev[v] for v in s.outputs])
        env: list[np.ndarray | None] = [None] * len(self.values)
        for v, a in zip(self.inputs, arrays):
            env[v] = a
        for v, val in enumerate(self.values):
            if val.kind == "output":
                env[v] = dev[v].numpy()
            elif val.kind == "const":
                env[v] = val.data
        return env

    def result(self, env: list[np.ndarray | None]) -> Any:
        """The model's outputs from the value arrays: one array or a tuple."""
        def get(o: Any) -> Any:
            if isinstance(o, list):
                return tuple(get(x) for x in o)
            a = env[o]
            return a.copy() if self.values[o].kind in ("input", "const") else a
        return get(self.outputs)


# Constants in one arena, in the order the steps first read them, each at a cache line:
# in a model run every weight comes from memory (the other kernels' weights evicted it:
# benchmarks.layer_profile.primed_convs), and one array read front to back streams better
# than one allocation per weight, most of them under the 4 MiB from which numpy asks for
# huge pages. ResNet-50 (98 MiB of constants), one Sapphire Rapids core, the same kernels
# in one process, interleaved: 0.959-1.004x the time with one allocation each (five runs,
# median 0.979x, load 3.7-4.5), ResNet-18 0.986x; packed in reverse or shuffled order
# 0.986x, 0.983x (one run each). The arena is a mapping of its own on huge pages
# (relay_ir.backend.huge_pages: from numpy it got them by chance).
CONST_ARENA_ALIGN = HUGE_PAGE  # the arena starts on a huge page


def arena_bytes(n: int, align: int) -> np.ndarray:
    """`n` bytes for one of a plan's arenas: from a huge page's size up, a mapping on huge
    pages (huge_page_bytes); below, from numpy at an `align`-byte boundary (each small
    model's arena on a huge page of its own would take 2 MiB of memory for a few KiB).

        >>> arena_bytes(3 << 20, 64).ctypes.data % HUGE_PAGE, arena_bytes(100, 64).size
        (0, 100)
    """
    if n >= HUGE_PAGE:
        return huge_page_bytes(n)
    raw = np.empty(n + align, np.uint8)
    return raw[-array_address(raw) % align:][:n]


def pack_constants(values: Sequence[Value], steps: Sequence[Step]) -> None:
    """Move the constants' data into one arena, in first-use order (see CONST_ARENA_ALIGN),
    each ALIGN-aligned; values whose data already lie so (an earlier plan over the same
    values packed them) are left as they are. TESSEL_PACK_CONSTANTS=0 only aligns each
    (one allocation per constant), to measure what packing does.

        >>> vals = [Value("const", (3,), "float32", data=np.ones(3, "float32")),
        ...         Value("const", (5,), "float32", data=np.zeros(5, "float32"))]
        >>> pack_constants(vals, [Step(0, [1, 0], [], "f")])
        >>> vals[0].data.ctypes.data - vals[1].data.ctypes.data
        64
    """
    if os.environ.get("TESSEL_PACK_CONSTANTS", "1") == "0":
        for val in values:
            if val.kind == "const" and val.data is not None:
                val.data = aligned(val.data)
        return
    order: list[int] = []
    seen: set[int] = set()
    for v in [v for s in steps for v in s.inputs] + list(range(len(values))):
        val = values[v]
        if v not in seen and val.kind == "const" and val.data is not None:
            seen.add(v)
            order.append(v)
    offsets, end = [], 0
    for v in order:
        end = -(-end // ALIGN) * ALIGN
        offsets.append(end)
        end += np.asarray(values[v].data).nbytes
    if _packed_already([np.asarray(values[v].data) for v in order], offsets):
        return
    # pages are touched as each constant is copied, and its old array freed as the value
    # lets go of it: about one constant more in memory at a time, not all of them twice
    arena = arena_bytes(end, CONST_ARENA_ALIGN)
    for v, off in zip(order, offsets):
        val = values[v]
        a = np.asarray(val.data)  # (np.ascontiguousarray would make a 0-d constant 1-d)
        view = arena[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
        view[...] = a
        val.data = view


def _packed_already(datas: Sequence[np.ndarray], offsets: Sequence[int]) -> bool:
    return bool(datas) and datas[0].ctypes.data % ALIGN == 0 and all(
        d.flags.c_contiguous and d.ctypes.data - datas[0].ctypes.data == off
        for d, off in zip(datas, offsets))


def _inplace_shares(kernels: Sequence[Any], steps: Sequence[Step], temps: Sequence[int],
                    spans: Sequence[tuple[int, int, int]]) -> dict[int, int]:
    """The memory plan's `share` (indices into `temps`): an intermediate written by a step
    may take the storage of an intermediate input of that step that no later step reads,
    where the step's kernel reads that input only element by element into that output
    (KernelFn.inplace_pairs: proven from its loop IR, or recorded in its saved model)."""
    at = {v: i for i, v in enumerate(temps)}
    share: dict[int, int] = {}
    for k, s in enumerate(steps):
        dying = {v for v in s.inputs if v in at and spans[at[v]][1] == k
                 and s.inputs.count(v) == 1}
        fn = kernels[s.kernel]
        if not dying or not isinstance(fn, KernelFn) or \
                len(fn.specs) != len(s.inputs) + len(s.outputs):
            continue
        n = len(s.inputs)
        for ip, op in fn.inplace_pairs() or ():
            # (a loaded model's pairs were checked at load; a pair that still does not fit
            # the step, an input over an output or two shapes, is not used)
            if not 0 <= ip < n <= op < len(fn.specs) or fn.specs[ip] != fn.specs[op]:
                continue
            r, o = s.inputs[ip], s.outputs[op - n]
            if r in dying and o in at and at[o] not in share:
                share[at[o]] = at[r]
                dying.discard(r)
    return share


def _nbytes(val: Value) -> int:
    # math.prod on Python ints: np.prod would wrap around for shapes past 2**63 elements
    return math.prod(int(d) for d in val.shape) * np.dtype(val.dtype).itemsize


def _check_memory(values: list[Value], plan: MemoryPlan, writer: dict[int, str]) -> None:
    needed = {"inputs": 0, "outputs": 0, "constants": 0}
    for val in values:
        kind = {"input": "inputs", "output": "outputs", "const": "constants"}.get(val.kind)
        if kind is not None:
            needed[kind] += _nbytes(val)
    needed["intermediates after reuse"] = plan.peak_bytes
    if not values:
        return
    v = max(range(len(values)), key=lambda k: _nbytes(values[k]))
    big = values[v]
    what = f"{big.kind} {big.name!r}" if big.name else (
        f"the {big.kind} written by {writer[v]}" if v in writer else big.kind)
    largest = (f"{what} of shape {_fmt_shape(big.shape)} {big.dtype} "
               f"({format_bytes(_nbytes(big))})")
    check_fits_in_memory(needed, largest)


def _fmt_shape(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def bind_by_name(names: Sequence[str], args: Sequence[Any], kwargs: dict[str, Any],
                 call: str = "run()") -> dict[str, Any]:
    """Positional then keyword arguments by input name; a KernelArgumentError (naming
    `call`) for too many, unknown, doubly given or missing ones.

        >>> bind_by_name(["x", "w"], [1], {"w": 2})
        {'x': 1, 'w': 2}
    """
    if len(args) > len(names):
        raise KernelArgumentError(f"{call} takes {len(names)} inputs ({', '.join(names)}), "
                                  f"got {len(args)} positional")
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise KernelArgumentError(f"{call}: unknown input {k!r}; the model's inputs are "
                                      f"{', '.join(names)}")
        if k in given:
            raise KernelArgumentError(f"{call}: input {k!r} given twice")
        given[k] = v
    missing = [n for n in names if n not in given]
    if missing:
        raise KernelArgumentError(f"{call}: missing input(s) {', '.join(missing)}; the model's "
                                  f"inputs are {', '.join(names)}")
    return given


def check_inputs(params: Sequence[tuple[str, tuple[Any, ...], str]], args: Sequence[Any],
                 kwargs: dict[str, Any]) -> list[np.ndarray]:
    """The model's inputs as C-contiguous arrays, checked by name, shape and dtype.

    `params` are (name, shape with None for `?`, dtype); shape vars bind consistently.
    """
    if not kwargs and len(args) == len(params):  # the common call, checked cheaply first
        fast = [a for a, (_, shape, dtype) in zip(args, params) if type(a) is np.ndarray
                and a.shape == shape and a.dtype == dtype and a.flags.c_contiguous
                and a.flags.aligned]
        if len(fast) == len(params):
            return fast
    given = bind_by_name([p[0] for p in params], args, kwargs)
    out, bound = [], {}
    for name, shape, dtype in params:
        a = given[name]
        if not isinstance(a, np.ndarray):
            a = _as_array(a, name, dtype)
        if a.dtype != np.dtype(dtype):
            raise KernelArgumentError(f"run(): input {name!r} must have dtype {dtype}, got "
                                      f"{a.dtype} (convert with .astype('{dtype}'))")
        ok = len(a.shape) == len(shape)
        for d, n in zip(shape, a.shape) if ok else ():
            if isinstance(d, int):
                ok = ok and d == n
            elif isinstance(d, str):
                ok = ok and bound.setdefault(d, n) == n
        if not ok:
            raise KernelArgumentError(
                f"run(): input {name!r} must have shape "
                f"{_fmt_shape(['?' if d is None else d for d in shape])}, got "
                f"{_fmt_shape(a.shape)}")
        # kernels want C order and element alignment; copies only when the array lacks them
        out.append(np.require(a, requirements="CA"))
    return out


def _as_array(value: Any, name: str, dtype: str) -> np.ndarray:
    # A Python number or (nested) list means the model's dtype; a numpy scalar keeps its own.
    if isinstance(value, np.generic):
        return np.asarray(value)
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise KernelArgumentError(
            f"run(): input {name!r} must be a numpy array of {dtype} (or a number or nested "
            f"list of them); converting the {type(value).__name__} given failed: {e}"
        ) from None


def not_dataflow_error(what: str) -> RelayError:
    """The error for programs the graph executor does not run."""
    return RelayError(
        f"relay_ir.build compiles dataflow-only programs (@main of tensor ops, tuples and "
        f"lets); this one uses {what}. Compile it for the VM with relay_ir.vm.compile(mod) "
        "(run by relay_ir.vm.VirtualMachine), or run it with relay_ir.interpret(mod, ...)")
