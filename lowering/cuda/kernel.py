"""A compiled CUDA kernel: its CUDA C (`.source`), PTX and cubin, and calls on a GPU.

`f(a, b, c)` takes numpy arrays (copied to the device and the written ones back) or
`DeviceArray`s from `to_device` (no copies); arguments are checked exactly as for CPU
kernels before anything reaches the device. Without a GPU, building and reading the
source work; a call raises DeviceError pointing to the simulator (`"cuda -sim"`).

    >>> f = lowering.build(s, [A, B], target="cuda")       # doctest: +SKIP
    >>> print(f.source)                                     # doctest: +SKIP
    >>> f(a, b)                                             # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import statistics
from typing import Any

import numpy as np

from lowering import ir as lir
from lowering.cuda import driver
from lowering.cuda.codegen import CudaProgram
from lowering.kernel import check_arguments, check_shapes
from tessel_errors import DeviceError, KernelArgumentError


class DeviceArray:
    """An array in GPU memory: `d = to_device(x); f(d, out); out.numpy()`."""

    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        self.shape = tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self._ctx = driver.Context.get()
        self.ptr = self._ctx.alloc(self.nbytes)

    def copy_from(self, host: np.ndarray) -> None:
        """Fill from a host array of the same shape and dtype."""
        host = np.ascontiguousarray(host, dtype=self.dtype)
        self._ctx.to_device(self.ptr, host.ctypes.data, self.nbytes)

    def numpy(self) -> np.ndarray:
        """A host copy."""
        out = np.empty(self.shape, self.dtype)
        self._ctx.to_host(out.ctypes.data, self.ptr, self.nbytes)
        return out

    def __del__(self) -> None:
        ptr, self.ptr = getattr(self, "ptr", 0), 0
        if ptr:
            try:
                self._ctx.free(ptr)
            except DeviceError:
                pass  # the context is going away with the process

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype})"


def to_device(x: np.ndarray) -> DeviceArray:
    """A copy of `x` in GPU memory (DeviceError without a GPU)."""
    x = np.asarray(x)
    d = DeviceArray(x.shape, x.dtype)
    d.copy_from(x)
    return d


class CudaKernel:
    """A kernel for NVIDIA GPUs. `.source`: the CUDA C; `.ptx`; `.func`: the loop IR."""

    def __init__(self, func: lir.PrimFunc, target: Any, program: CudaProgram, ptx: str,
                 cubin: bytes) -> None:
        self.func = func
        self.name = func.name
        self.target = target
        self.program = program
        self.source = program.source
        self.ptx = ptx
        self.cubin = cubin
        self._loaded: list[Any] | None = None

    def __repr__(self) -> str:
        return f"<CudaKernel {self.name} for {self.target}: {len(self.program.kernels)} " \
               f"kernel(s)>"

    # ------------------------------------------------------------------ calling
    @property
    def simulated(self) -> bool:
        """True for target "cuda -sim": calls run in the GPU simulator on the CPU."""
        return bool(self.target.attrs.get("sim"))

    def __call__(self, *arrays: Any) -> None:
        """Run on numpy arrays or DeviceArrays; written numpy arrays get the results."""
        if self.simulated:
            from lowering.cuda import simulator

            simulator.run(self.program, list(arrays))
            return
        scalars = self._check(arrays)
        ctx = driver.Context.get()
        fns = self._functions(ctx)
        device: list[DeviceArray] = []
        for a in arrays:
            device.append(a if isinstance(a, DeviceArray) else to_device(a))
        self._run(ctx, fns, device, scalars)
        ctx.synchronize()
        written = {id(b) for k in self.program.kernels for b in k.buffers if id(b) in k.written}
        for a, d, p in zip(arrays, device, self.func.params):
            if isinstance(a, np.ndarray) and id(p) in written:
                a[...] = d.numpy()

    def time(self, *arrays: Any, number: int = 10, repeat: int = 3, warmup: int = 1
             ) -> float:
        """Median seconds per call (CUDA events) over `repeat` runs of `number` calls, on
        DeviceArrays (numpy arrays are copied to the device once, first)."""
        if number < 1 or repeat < 1:
            raise KernelArgumentError("time(): number and repeat must be at least 1")
        if self.simulated:
            raise DeviceError(
                f"kernel '{self.name}' runs in the GPU simulator ('cuda -sim'), whose times "
                "say nothing about a GPU's; time it on a machine with a GPU (target 'cuda')")
        scalars = self._check(arrays)
        ctx = driver.Context.get()
        fns = self._functions(ctx)
        device = [a if isinstance(a, DeviceArray) else to_device(a) for a in arrays]
        for _ in range(max(0, warmup)):
            self._run(ctx, fns, device, scalars)
        ctx.synchronize()

        def calls() -> None:
            for _ in range(number):
                self._run(ctx, fns, device, scalars)

        return statistics.median(ctx.elapsed(calls) / number for _ in range(repeat))

    def _check(self, arrays: tuple[Any, ...]) -> dict[int, int]:
        host = tuple(a for a in arrays if not isinstance(a, DeviceArray))
        if len(host) == len(arrays):
            _, bound = check_arguments(self.func, arrays)
        else:
            for k, a in enumerate(arrays, start=1):
                if not isinstance(a, (np.ndarray, DeviceArray)):
                    raise KernelArgumentError(
                        f"argument {k}: expected a numpy.ndarray or a DeviceArray, got "
                        f"{type(a).__name__}")
            _, bound = check_shapes(self.func, [(a.shape, a.dtype) for a in arrays])
        driver.require_gpu(f"calling CUDA kernel '{self.name}'")
        return bound

    def module_image(self, arch: str) -> bytes:
        """What the driver loads on a GPU of `arch`: the cubin when it was built for that
        architecture, else the PTX (NUL-terminated), which the driver compiles for it."""
        if self.cubin and arch == self.program.arch:
            return self.cubin
        return self.ptx.encode() + b"\0"

    def _functions(self, ctx: driver.Context) -> list[Any]:
        if self._loaded is None:
            module = ctx.load_module(self.module_image(ctx.device.arch))
            self._loaded = [module] + [ctx.function(module, k.name)
                                       for k in self.program.kernels]
        return self._loaded[1:]

    def _run(self, ctx: driver.Context, fns: list[Any], arrays: list[DeviceArray],
             scalars: dict[int, int]) -> None:
        ptrs = {id(p): a.ptr for p, a in zip(self.func.params, arrays)}
        temps: list[DeviceArray] = []

        def alloc(buf: lir.Buffer, shape: tuple[int, ...]) -> None:
            temps.append(DeviceArray(shape, buf.dtype))
            ptrs[id(buf)] = temps[-1].ptr

        def launch(index: int, grid: tuple[int, ...]) -> None:
            k = self.program.kernels[index]
            args: list[Any] = [ctypes.c_uint64(ptrs[id(b)]) for b in k.buffers]
            args += [np.ctypeslib.as_ctypes_type(np.dtype(v.dtype))(scalars[id(v)])
                     for v in k.scalars]
            ctx.launch(fns[index], grid, k.block, args)

        scalars = dict(scalars)
        self.program.run_host(scalars, alloc, launch)
        if temps:
            ctx.synchronize()  # temporaries are freed when the kernels that use them ended


__all__ = ["CudaKernel", "DeviceArray", "to_device"]
