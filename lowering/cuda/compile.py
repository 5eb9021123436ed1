"""CUDA C to PTX and cubin: in-process with NVRTC (the `nvidia-cuda-nvrtc` +
`cuda-bindings` wheels), else with `nvcc` on PATH. Neither needs a GPU.

A compile error is a CodegenError that quotes the compiler's log and the generated source
line it points at (the code is ours, so an error here is a Tessel bug or an unsupported
construct, and the line says which).

    >>> ptx, cubin = compile_cuda('extern "C" __global__ void k(float* a) { a[0] = 1; }',
    ...                           "sm_90")                       # doctest: +SKIP
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile

from tessel_errors import CodegenError

_OPTIONS = ("--std=c++17", "-default-device")


@functools.lru_cache(maxsize=1)
def _nvrtc() -> object | None:
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        return None
    # cuda-bindings loads libnvrtc at the first call: without the nvidia-cuda-nvrtc
    # library (a machine whose image has the one and not the other) the import succeeds
    # and every compile would fail, so ask NVRTC its version once and fall back to nvcc
    try:
        err, *_ = nvrtc.nvrtcVersion()
    except Exception:  # noqa: BLE001 (whatever the loader raises: no usable NVRTC)
        return None
    return nvrtc if int(err) == 0 else None


@functools.lru_cache(maxsize=1)
def toolkit_include() -> str | None:
    """The CUDA toolkit's include folder (with mma.h, which tensor-core kernels include):
    $TESSEL_CUDA_INCLUDE (a folder holding just the headers NVRTC needs for it, as
    benchmarks/gpu_wheels.sh prepares for a GPU machine), $CUDA_HOME / $CUDA_PATH, the
    toolkit of the nvcc on PATH, /usr/local/cuda*; None when there is none (NVRTC itself
    ships no such header)."""
    import glob

    found = []
    if os.environ.get("TESSEL_CUDA_INCLUDE"):
        found.append(os.environ["TESSEL_CUDA_INCLUDE"])
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            found.append(os.path.join(os.environ[var], "include"))
    nvcc = shutil.which("nvcc")
    if nvcc:
        found.append(os.path.join(os.path.dirname(os.path.realpath(nvcc)), "..", "include"))
    found += ["/usr/local/cuda/include", *sorted(glob.glob("/usr/local/cuda-*/include"),
                                                 reverse=True)]
    for d in found:
        if os.path.isfile(os.path.join(d, "mma.h")):
            return os.path.normpath(d)
    return None


def _include_options(source: str) -> list[str]:
    if "#include" not in source:
        return []
    inc = toolkit_include()
    if inc is None:
        raise CodegenError(
            "the kernel uses tensor cores (#include <mma.h>) and NVRTC needs the CUDA "
            "toolkit's headers for that, but none were found: install the CUDA toolkit, "
            "set CUDA_HOME to it, or set TESSEL_CUDA_INCLUDE to a folder with mma.h and "
            "the headers it includes")
    return [f"--include-path={inc}"]


def compiler() -> str:
    """Which compiler `compile_cuda` uses here: "nvrtc", "nvcc", or "" for none."""
    if _nvrtc() is not None:
        return "nvrtc"
    return "nvcc" if shutil.which("nvcc") else ""


@functools.lru_cache(maxsize=256)
def compile_cuda(source: str, arch: str) -> tuple[str, bytes]:
    """(PTX text, cubin bytes) of `source` for `arch` (e.g. "sm_90"); cached by source."""
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise CodegenError(f"CUDA architecture {arch!r} is not of the form sm_90")
    how = compiler()
    if how == "nvrtc":
        return _with_nvrtc(source, arch)
    if how == "nvcc":
        return _with_nvcc(source, arch)
    raise CodegenError(
        "no CUDA compiler here: install the nvidia-cuda-nvrtc and cuda-bindings wheels "
        "(pip install -e .[test] does) or put nvcc on PATH")


def _check(result: object, what: str) -> None:
    code = result[0] if isinstance(result, tuple) else result
    if int(code) != 0:
        raise CodegenError(f"NVRTC {what} failed: {code}")


def _with_nvrtc(source: str, arch: str) -> tuple[str, bytes]:
    nvrtc = _nvrtc()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"tessel_kernel.cu", 0, [], [])
    _check(err, "program creation")
    try:
        opts = [o.encode() for o in (f"--gpu-architecture={arch}", *_OPTIONS,
                                     *_include_options(source))]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if int(err) != 0:
            _, n = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * n
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise _compile_error(log.decode(errors="replace").rstrip("\x00"), source)
        _, n = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * n
        _check(nvrtc.nvrtcGetPTX(prog, ptx), "PTX output")
        _, n = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * n
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "cubin output")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return ptx.decode().rstrip("\x00"), bytes(cubin)


def _with_nvcc(source: str, arch: str) -> tuple[str, bytes]:
    with tempfile.TemporaryDirectory(prefix="tessel-cuda-") as tmp:
        cu = os.path.join(tmp, "tessel_kernel.cu")
        with open(cu, "w") as f:
            f.write(source)
        outs = {}
        for kind in ("ptx", "cubin"):
            out = os.path.join(tmp, f"k.{kind}")
            proc = subprocess.run(
                ["nvcc", f"--{kind}", f"-arch={arch}", "--std=c++17", "-o", out, cu],
                capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise _compile_error(proc.stderr, source)
            with open(out, "rb") as f:
                outs[kind] = f.read()
    return outs["ptx"].decode(), outs["cubin"]


def _compile_error(log: str, source: str) -> CodegenError:
    lines = source.splitlines()
    quoted = []
    for m in re.finditer(r"tessel_kernel\.cu\((\d+)\)", log):
        k = int(m.group(1))
        if 0 < k <= len(lines):
            quoted.append(f"  line {k}: {lines[k - 1].strip()}")
    where = ("\nthe generated line(s):\n" + "\n".join(dict.fromkeys(quoted))) if quoted else ""
    return CodegenError(f"the CUDA compiler rejected the generated code:\n{log.strip()}{where}")


__all__ = ["compile_cuda", "compiler"]
