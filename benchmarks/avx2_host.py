"""Run a benchmark as on an AVX2-only x86 CPU, on a host with AVX-512: every runtime in
the process (ONNX Runtime's MLAS, PyTorch, oneDNN, MKL, numpy, LLVM's host detection and
so Tessel's default target) picks the kernels it would pick on an AVX2 machine.

    python -m benchmarks.avx2_host --probe            # what the libraries see
    TESSEL_NUM_THREADS=1 python -m benchmarks.avx2_host benchmarks.models \\
        --models resnet18 --cpu-time                  # ORT, torch and Tessel, AVX2 each

Why: ONNX Runtime has no switch for its instruction set (torch has ATEN_CPU_CAPABILITY,
ONEDNN_MAX_CPU_ISA and MKL_ENABLE_INSTRUCTIONS); it asks CPUID. So the AVX2 peer comes
from CPUID itself: Linux's CPUID faulting (`cpuid_fault` in /proc/cpuinfo, on Intel
CPUs since Ivy Bridge and in KVM guests on them) makes the instruction trap, and
benchmarks/avx2_host.c answers with the AVX-512, AMX and AVX-VNNI bits cleared. The
library is preloaded (LD_PRELOAD) into a fresh interpreter, so it is armed before any
library asks, and the processes a benchmark spawns (benchmarks.isolated's peers) arm it
again from the environment. glibc chose its string functions before any constructor
runs, so GLIBC_TUNABLES masks AVX-512 for it too.

What it is not: an AVX2 machine. Caches, clocks and the core are the host's (an AVX2 core
of the same generation would be no faster at AVX2 code); the figures compare the peers'
AVX2 code on one core, which is what a user of an AVX2-only CPU chooses between.
Python's faulthandler replaces the trap's SIGSEGV handler, so the wrapper unsets
PYTHONFAULTHANDLER and checks the handler before it runs the benchmark.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import platform
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("avx2_host.c")
ARMED = "TESSEL_CPUID_CAP"
# glibc's names for the CPU features its string functions dispatch on
GLIBC_MASK = "glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD"
AVX512F_BIT = 1 << 16


class Avx2HostError(RuntimeError):
    """This host cannot pose as an AVX2-only CPU; the message says why and what to do."""


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    """The flags the kernel lists for the first CPU.

        >>> "fpu" in cpu_flags()  # doctest: +SKIP
        True
    """
    try:
        with open(cpuinfo, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError as e:
        raise Avx2HostError(f"cannot read {cpuinfo} ({e}): an AVX2 pose needs Linux") from e
    return set()


def check_host(cpuinfo: str = "/proc/cpuinfo") -> None:
    """Raise Avx2HostError unless this host can trap CPUID and has a C compiler.

        >>> check_host()  # doctest: +SKIP
    """
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise Avx2HostError(f"benchmarks.avx2_host needs Linux on x86-64, not "
                            f"{sys.platform} on {platform.machine()}")
    flags = cpu_flags(cpuinfo)
    if "cpuid_fault" not in flags:
        raise Avx2HostError(
            f"{cpuinfo} lists no 'cpuid_fault': this CPU or hypervisor cannot trap CPUID, "
            "so the runtimes cannot be shown an AVX2-only CPU here; run on an AVX2 machine, "
            "or cap torch alone with benchmarks.models.TORCH_AVX2")
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        raise Avx2HostError("no C compiler (gcc or cc) on PATH to build "
                            f"{SOURCE.name}: install gcc")


def library_path() -> Path:
    """The compiled trap library, built once per source text into the user's cache.

        >>> library_path().suffix  # doctest: +SKIP
        '.so'
    """
    text = SOURCE.read_bytes()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tessel"
    path = cache / f"avx2_host-{hashlib.sha256(text).hexdigest()[:12]}.so"
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    compiler = shutil.which("gcc") or shutil.which("cc") or "gcc"
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        built = Path(tmp) / path.name
        done = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(built),
                               str(SOURCE)], capture_output=True, text=True)
        if done.returncode != 0:
            raise Avx2HostError(f"{compiler} could not build {SOURCE}:\n{done.stderr}")
        os.replace(built, path)  # atomic: a concurrent build never leaves half a file
    return path


def posed_environment(base: dict[str, str], library: Path) -> dict[str, str]:
    """`base` with the trap preloaded and armed, glibc masked, faulthandler off."""
    env = dict(base)
    env[ARMED] = "avx2"
    env["LD_PRELOAD"] = " ".join(p for p in [str(library), base.get("LD_PRELOAD", "")] if p)
    env["GLIBC_TUNABLES"] = ":".join(
        p for p in [base.get("GLIBC_TUNABLES", ""), GLIBC_MASK] if p)
    env.pop("PYTHONFAULTHANDLER", None)
    return env


def armed_library() -> ctypes.CDLL:
    """The preloaded trap library in this process, checked to be armed and answering.

        >>> armed_library().tessel_cpuid_cap_traps() >= 0  # doctest: +SKIP
        True
    """
    lib = ctypes.CDLL(str(library_path()))  # the preloaded copy: the same handle
    if lib.tessel_cpuid_cap_status() != 0:
        raise Avx2HostError("the kernel refused CPUID faulting (arch_prctl ARCH_SET_CPUID) "
                            "in this process: is it running under a debugger or in a "
                            "container that forbids arch_prctl?")
    if not lib.tessel_cpuid_cap_handler_installed():
        raise Avx2HostError("the CPUID trap's SIGSEGV handler was replaced (faulthandler? "
                            "unset PYTHONFAULTHANDLER and drop -X faulthandler)")
    if lib.tessel_cpuid_leaf7_ebx() & AVX512F_BIT:
        raise Avx2HostError("CPUID still reports AVX512F through the trap")
    return lib


def probe() -> dict[str, str]:
    """What each library in this process believes about AVX-512 (run under the pose).

        >>> probe()["llvm"]  # doctest: +SKIP
        'emeraldrapids, avx512f off, avx2 on'
    """
    import llvmlite.binding as llvm
    import numpy as np

    seen = {}
    feats = llvm.get_host_cpu_features()
    seen["llvm"] = (f"{llvm.get_host_cpu_name()}, avx512f "
                    f"{'on' if feats.get('avx512f') else 'off'}, avx2 "
                    f"{'on' if feats.get('avx2') else 'off'}")
    numpy_features = np._core._multiarray_umath.__cpu_features__
    seen["numpy"] = (f"AVX512F {'on' if numpy_features.get('AVX512F') else 'off'}, AVX2 "
                     f"{'on' if numpy_features.get('AVX2') else 'off'}")
    from tessel_target import Target
    seen["tessel target 'llvm'"] = (f"{Target.parse('llvm').mcpu}, vector bits "
                                    f"{Target.parse('llvm').vector_bits}")
    try:
        import torch
        seen["torch"] = torch.backends.cpu.get_cpu_capability()
    except ImportError:
        seen["torch"] = "(not installed)"
    return seen


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks.avx2_host MODULE ARGS...`: MODULE run as `python -m MODULE
    ARGS...` in an interpreter that sees an AVX2-only CPU; `--probe` prints what it sees."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    if os.environ.get(ARMED) != "avx2":
        try:
            check_host()
            library = library_path()
        except Avx2HostError as e:
            print(f"benchmarks.avx2_host: {e}", file=sys.stderr)
            return 2
        env = posed_environment(dict(os.environ), library)
        os.execve(sys.executable, [sys.executable, "-m", "benchmarks.avx2_host", *argv], env)
    try:
        lib = armed_library()
    except Avx2HostError as e:
        print(f"benchmarks.avx2_host: {e}", file=sys.stderr)
        return 2
    if argv[0] == "--probe":
        for name, seen in probe().items():
            print(f"{name:24} {seen}")
        print(f"{'CPUID traps':24} {lib.tessel_cpuid_cap_traps()}")
        return 0
    module, rest = argv[0], argv[1:]
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        print(f"benchmarks.avx2_host: no module {module!r} to run (give a module name as "
              "for python -m, e.g. benchmarks.models)", file=sys.stderr)
        return 2
    print(f"benchmarks.avx2_host: {module} on an AVX2-only CPU (CPUID trapped, AVX-512/AMX "
          "masked)", flush=True)
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
