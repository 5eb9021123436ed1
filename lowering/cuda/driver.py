"""The CUDA driver API through ctypes on the system's libcuda: device discovery, one
primary context, module loading, memory, launches and events.

ctypes rather than a wheel: a machine with a GPU has libcuda (it comes with the driver),
while a package index may be out of reach there. Without libcuda or without a device,
`gpu()` returns None and calls that need a GPU raise DeviceError pointing to the
simulator target.

    >>> dev = gpu()                    # None on a machine without an NVIDIA GPU
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from tessel_errors import DeviceError
from tessel_target.gpu import Gpu, gpu
from tessel_target.gpu import driver_call as _call
from tessel_target.gpu import libcuda as _lib

_lock = threading.Lock()
NO_GPU_HINT = ("build with target 'cuda -sim' to run the kernel in the GPU simulator on "
               "the CPU, or run on a machine with an NVIDIA GPU")


def require_gpu(what: str) -> Gpu:
    """The GPU, or a DeviceError saying that `what` needs one."""
    found = gpu()
    if found is None:
        raise DeviceError(f"{what} needs an NVIDIA GPU and this machine has none (no "
                          f"libcuda or no device); {NO_GPU_HINT}")
    return found


class Context:
    """The device's primary context, made current on the calling thread for each use."""

    _instance: Context | None = None

    def __init__(self, device: Gpu) -> None:
        self.lib = _lib()
        self.device = device
        self.handle = ctypes.c_void_p()
        _call(self.lib, "cuDevicePrimaryCtxRetain", ctypes.byref(self.handle), device.index)

    @classmethod
    def get(cls) -> Context:
        """The process's context on the first GPU (made on first use)."""
        with _lock:
            if cls._instance is None:
                cls._instance = Context(require_gpu("running a CUDA kernel"))
            ctx = cls._instance
        _call(ctx.lib, "cuCtxSetCurrent", ctx.handle)
        return ctx

    def load_module(self, image: bytes) -> ctypes.c_void_p:
        """Load a cubin (or NUL-terminated PTX) image."""
        module = ctypes.c_void_p()
        _call(self.lib, "cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(image))
        return module

    def function(self, module: ctypes.c_void_p, name: str) -> ctypes.c_void_p:
        """The kernel `name` of a loaded module."""
        fn = ctypes.c_void_p()
        _call(self.lib, "cuModuleGetFunction", ctypes.byref(fn), module, name.encode())
        return fn

    def alloc(self, nbytes: int) -> int:
        """A device allocation of `nbytes` (at least 1): its address."""
        ptr = ctypes.c_uint64()
        _call(self.lib, "cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(max(1, nbytes)))
        return ptr.value

    def free(self, ptr: int) -> None:
        """Release a device allocation."""
        _call(self.lib, "cuMemFree_v2", ctypes.c_uint64(ptr))

    def to_device(self, ptr: int, host: int, nbytes: int) -> None:
        """Copy `nbytes` from host address `host` to device address `ptr`."""
        if nbytes:
            _call(self.lib, "cuMemcpyHtoD_v2", ctypes.c_uint64(ptr), ctypes.c_void_p(host),
                  ctypes.c_size_t(nbytes))

    def to_host(self, host: int, ptr: int, nbytes: int) -> None:
        """Copy `nbytes` from device address `ptr` to host address `host`."""
        if nbytes:
            _call(self.lib, "cuMemcpyDtoH_v2", ctypes.c_void_p(host), ctypes.c_uint64(ptr),
                  ctypes.c_size_t(nbytes))

    def launch(self, fn: ctypes.c_void_p, grid: tuple[int, int, int],
               block: tuple[int, int, int], args: list[Any]) -> None:
        """Launch `fn` with ctypes-typed arguments (c_uint64 pointers, scalars)."""
        params = (ctypes.c_void_p * max(1, len(args)))(
            *[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        _call(self.lib, "cuLaunchKernel", fn, *[ctypes.c_uint(d) for d in grid],
              *[ctypes.c_uint(d) for d in block], ctypes.c_uint(0), ctypes.c_void_p(0),
              params, ctypes.c_void_p(0))

    def synchronize(self) -> None:
        """Wait for every launch; a fault inside a kernel is reported here."""
        _call(self.lib, "cuCtxSynchronize")

    def elapsed(self, work: Any) -> float:
        """Seconds `work()` takes on the device, timed with two CUDA events."""
        start, end = ctypes.c_void_p(), ctypes.c_void_p()
        _call(self.lib, "cuEventCreate", ctypes.byref(start), 0)
        _call(self.lib, "cuEventCreate", ctypes.byref(end), 0)
        try:
            _call(self.lib, "cuEventRecord", start, ctypes.c_void_p(0))
            work()
            _call(self.lib, "cuEventRecord", end, ctypes.c_void_p(0))
            _call(self.lib, "cuEventSynchronize", end)
            ms = ctypes.c_float()
            _call(self.lib, "cuEventElapsedTime", ctypes.byref(ms), start, end)
            return ms.value / 1000.0
        finally:
            self.lib.cuEventDestroy_v2(start)
            self.lib.cuEventDestroy_v2(end)


__all__ = ["Context", "Gpu", "NO_GPU_HINT", "gpu", "require_gpu"]
