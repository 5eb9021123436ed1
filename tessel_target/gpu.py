"""The NVIDIA GPU of this machine, if any: name, compute capability, driver version, read
through ctypes on the system's libcuda (no wheel needed; without a driver or a device,
`gpu()` is None). A fact about the device, like the host CPU's features: the CUDA backend
compiles for its architecture and tuning records are filed under its key. `cuda_arch`
resolves a cuda target's architecture (-arch, else this GPU's, else sm_90): the backend
compiles for it, and templates that need a newer one (tensor cores) are left out.

    >>> found = gpu()          # None on a machine without an NVIDIA GPU
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any

from tessel_errors import DeviceError


@dataclass(frozen=True)
class Gpu:
    """The device found: its name, compute capability and driver version."""

    index: int
    name: str
    capability: tuple[int, int]
    driver_version: int

    @property
    def arch(self) -> str:
        """`sm_90` for compute capability 9.0."""
        return f"sm_{self.capability[0]}{self.capability[1]}"

    @property
    def key(self) -> str:
        """What tuning records for this GPU are filed under: name, capability, driver."""
        return f"{self.name}|{self.arch}|driver {self.driver_version}"


@functools.lru_cache(maxsize=1)
def libcuda() -> Any | None:
    """The driver library (ctypes), or None where there is none."""
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def driver_call(lib: Any, fn: str, *args: Any) -> None:
    """Call driver function `fn`; a failure is a DeviceError with the driver's message."""
    rc = getattr(lib, fn)(*args)
    if rc != 0:
        msg = ctypes.c_char_p()
        lib.cuGetErrorString(rc, ctypes.byref(msg))
        text = msg.value.decode() if msg.value else f"error {rc}"
        raise DeviceError(f"CUDA driver call {fn} failed: {text} ({rc})")


@functools.lru_cache(maxsize=1)
def gpu() -> Gpu | None:
    """The first NVIDIA GPU, or None when there is no driver or no device."""
    lib = libcuda()
    if lib is None or lib.cuInit(0) != 0:
        return None
    count = ctypes.c_int()
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return None
    dev = ctypes.c_int()
    driver_call(lib, "cuDeviceGet", ctypes.byref(dev), 0)
    name = ctypes.create_string_buffer(256)
    driver_call(lib, "cuDeviceGetName", name, 256, dev)
    major, minor, version = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    driver_call(lib, "cuDeviceGetAttribute", ctypes.byref(major), 75, dev)  # CC major
    driver_call(lib, "cuDeviceGetAttribute", ctypes.byref(minor), 76, dev)  # CC minor
    driver_call(lib, "cuDriverGetVersion", ctypes.byref(version))
    return Gpu(dev.value, name.value.decode(), (major.value, minor.value), version.value)


DEFAULT_ARCH = "sm_90"


def cuda_arch(target: Any) -> str:
    """The architecture a cuda target compiles for: its `-arch`, else the GPU found here,
    else sm_90.

        >>> cuda_arch("cuda -arch=sm_75")
        'sm_75'
    """
    from tessel_target import Target

    given = Target.parse(target).attrs.get("arch")
    if isinstance(given, str) and given:
        return given
    found = gpu()
    return found.arch if found is not None else DEFAULT_ARCH


def arch_number(arch: str) -> int:
    """The compute capability of an architecture name as a number: 90 for sm_90a."""
    return int("".join(ch for ch in arch if ch.isdigit()) or 0)


__all__ = ["DEFAULT_ARCH", "Gpu", "arch_number", "cuda_arch", "driver_call", "gpu", "libcuda"]
