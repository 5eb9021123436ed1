"""benchmarks.avx2_host shows every runtime in a process tree an AVX2-only CPU (CPUID
trapped and masked), so ONNX Runtime, torch and Tessel's default target run their AVX2
code side by side on an AVX-512 host; hosts that cannot trap CPUID are refused clearly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import avx2_host

ROOT = Path(__file__).resolve().parents[2]


def _host_can_pose() -> str | None:
    try:
        avx2_host.check_host()
    except avx2_host.Avx2HostError as e:
        return str(e)
    return None


needs_pose = pytest.mark.skipif(_host_can_pose() is not None,
                                reason=f"this host cannot pose as AVX2: {_host_can_pose()}")


def _posed(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(avx2_host.ARMED, None)
    return subprocess.run([sys.executable, "-m", "benchmarks.avx2_host", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


def test_a_host_without_cpuid_faulting_is_refused_with_what_to_do(tmp_path: Path) -> None:
    if sys.platform != "linux":
        pytest.skip("the pose is Linux-only")
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 avx512f\n")
    with pytest.raises(avx2_host.Avx2HostError, match="cpuid_fault.*AVX2 machine"):
        avx2_host.check_host(str(cpuinfo))


def test_the_posed_environment_preloads_the_trap_masks_glibc_and_keeps_faulthandler_off(
        ) -> None:
    env = avx2_host.posed_environment({"LD_PRELOAD": "/x/other.so", "PYTHONFAULTHANDLER": "1",
                                       "GLIBC_TUNABLES": "glibc.malloc.check=0"},
                                      Path("/cache/trap.so"))
    assert env["LD_PRELOAD"] == "/cache/trap.so /x/other.so"
    assert env["GLIBC_TUNABLES"] == f"glibc.malloc.check=0:{avx2_host.GLIBC_MASK}"
    assert env[avx2_host.ARMED] == "avx2" and "PYTHONFAULTHANDLER" not in env


@needs_pose
def test_under_the_pose_llvm_numpy_and_the_default_target_see_no_avx512() -> None:
    done = _posed("--probe")
    assert done.returncode == 0, done.stderr
    seen = dict(line.split(None, 1) for line in done.stdout.splitlines()
                if line.split(None, 1)[0] in ("llvm", "numpy"))
    assert "avx512f off, avx2 on" in seen["llvm"]
    assert "AVX512F off, AVX2 on" in seen["numpy"]
    assert "vector bits 256" in done.stdout


@needs_pose
def test_a_posed_build_emits_avx2_code_that_matches_the_interpreter_and_children_are_posed(
        ) -> None:
    done = _posed("tests.benchmarks.avx2_pose_check")
    assert done.returncode == 0, done.stderr
    out = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    assert out["conv code"].split() == ["no", "zmm", "ymm"]
    assert float(out["relative error vs interpreter"]) < 1e-5
    assert out["child avx512f"] == "False"


@needs_pose
def test_an_unknown_module_is_named_with_how_to_give_one() -> None:
    done = _posed("benchmarks.no_such_benchmark")
    assert done.returncode == 2
    assert "no module 'benchmarks.no_such_benchmark'" in done.stderr
    assert "Traceback" not in done.stderr


@needs_pose
def test_a_real_segfault_under_the_pose_still_ends_the_process_as_one() -> None:
    env = avx2_host.posed_environment(dict(os.environ), avx2_host.library_path())
    done = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.string_at(0)"],
                          env=env, capture_output=True, timeout=60)
    assert done.returncode == -11  # SIGSEGV, not a hang in the trap's handler
