"""Kernel calls: argument checks with their messages, the compile cache, source and time."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
import tensor_expr as te
import tessel_target
from lowering import build_module
from lowering.ir import AssertStmt, Buffer, BufferStore, For, ForKind, PrimFunc
from tessel_errors import CodegenError, KernelArgumentError
from tests.rng import seeded_rng
from tests.unwritten import unwritten


def matmul_func(n: int = 16) -> PrimFunc:
    """C[i, j] = sum_k A[i, k] * B[k, j] for n x n float32 (a plain triple loop)."""
    A, B, C = (Buffer(name, (n, n), "float32") for name in ("A", "B", "C"))
    i, j, k = te.var("i"), te.var("j"), te.var("k")
    body = For(i, te.const(0), te.const(n), ForKind.SERIAL,
               For(j, te.const(0), te.const(n), ForKind.SERIAL, lowering.ir.seq(
                   BufferStore(C, te.const(0.0), (i, j)),
                   For(k, te.const(0), te.const(n), ForKind.SERIAL,
                       BufferStore(C, C[i, j] + A[i, k] * B[k, j], (i, j))))))
    return PrimFunc("mm", (A, B, C), body)


def sym_func() -> PrimFunc:
    """B[i, j] = A[i, j] * 2 with A, B of shape (n, 4)."""
    n = te.var("n")
    A, B = Buffer("A", (n, 4), "float32"), Buffer("B", (n, 4), "float32")
    i, j = te.var("i"), te.var("j")
    return PrimFunc("sym", (A, B), For(i, te.const(0), n, ForKind.SERIAL, For(
        j, te.const(0), te.const(4), ForKind.SERIAL, BufferStore(B, A[i, j] * 2.0, (i, j)))))


@pytest.fixture(scope="module")
def mm() -> lowering.kernel.Kernel:
    return lowering.build(matmul_func(), target="llvm")


def arrays(n: int = 16) -> list[np.ndarray]:
    rng = seeded_rng()
    return [rng.random((n, n), dtype="float32"), rng.random((n, n), dtype="float32"),
            unwritten((n, n))]


def test_kernel_computes_matmul(mm) -> None:
    a, b, c = arrays()
    mm(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_wrong_argument_count(mm) -> None:
    a, b, _ = arrays()
    with pytest.raises(KernelArgumentError,
                       match=r"kernel 'mm' takes 3 arguments \(A, B, C\), got 2"):
        mm(a, b)


def test_wrong_shape_names_argument(mm) -> None:
    a, b, _ = arrays()
    with pytest.raises(KernelArgumentError,
                       match=r"argument 3 'C': expected shape \(16, 16\), got \(16, 8\)"):
        mm(a, b, np.empty((16, 8), "float32"))


def test_wrong_rank_names_argument(mm) -> None:
    a, b, _ = arrays()
    with pytest.raises(KernelArgumentError,
                       match=r"argument 3 'C': expected 2 dimensions, shape \(16, 16\), got 1"):
        mm(a, b, np.empty(256, "float32"))


def test_wrong_dtype_names_argument(mm) -> None:
    a, b, c = arrays()
    with pytest.raises(KernelArgumentError,
                       match=r"argument 1 'A': expected dtype float32, got float64; convert "
                             r"with .astype\('float32'\)"):
        mm(a.astype("float64"), b, c)


def test_non_contiguous_array_is_refused(mm) -> None:
    a, b, c = arrays()
    with pytest.raises(KernelArgumentError,
                       match=r"argument 2 'B': the array is not C-contiguous .*"
                             r"np.ascontiguousarray"):
        mm(a, b.T, c)


def test_not_an_array_is_refused(mm) -> None:
    a, b, c = arrays()
    with pytest.raises(KernelArgumentError,
                       match=r"argument 1 'A': expected a numpy.ndarray, got list"):
        mm(a.tolist(), b, c)


def test_read_only_output_is_refused(mm) -> None:
    a, b, c = arrays()
    c.flags.writeable = False
    with pytest.raises(KernelArgumentError,
                       match=r"argument 3 'C': the kernel writes this argument but the array "
                             r"is read-only"):
        mm(a, b, c)


def test_output_overlapping_input_is_refused(mm) -> None:
    a, b, _ = arrays()
    with pytest.raises(KernelArgumentError,
                       match=r"argument 3 'C' and argument 1 'A' overlap in memory"):
        mm(a, b, a)


def _misaligned_copy(a: np.ndarray) -> np.ndarray:
    out = np.ndarray(a.shape, a.dtype, buffer=bytearray(a.nbytes + 2), offset=2)
    out[...] = a
    assert not out.flags.aligned
    return out


def test_misaligned_array_is_refused_naming_the_argument(mm) -> None:
    a, b, c = arrays()
    with pytest.raises(KernelArgumentError,
                       match=r"argument 2 'B': the array's data .* is not aligned to its "
                             r"4-byte elements; .*np.require"):
        mm(a, _misaligned_copy(b), c)


def test_zero_rows_of_a_symbolic_dimension_run_and_write_nothing() -> None:
    k = lowering.build(sym_func())
    a, b = np.empty((0, 4), "float32"), np.empty((0, 4), "float32")
    k(a, b)
    assert b.shape == (0, 4)


def test_nan_and_inf_pass_through_a_kernel_as_in_numpy(mm) -> None:
    a, b, c = arrays()
    a[0, 0], a[1, 1], b[2, 2] = np.nan, np.inf, -np.inf
    mm(a, b, c)
    with np.errstate(invalid="ignore"):
        want = a.astype("float64") @ b.astype("float64")
    np.testing.assert_allclose(c, want, rtol=1e-4)  # NaN where numpy has NaN, same infs


def test_symbolic_dimension_must_agree() -> None:
    k = lowering.build(sym_func())
    a = seeded_rng().random((5, 4), dtype="float32")
    b = unwritten((5, 4))
    k(a, b)
    np.testing.assert_allclose(b, a * 2)
    with pytest.raises(KernelArgumentError,
                       match=r"argument 2 'B': expected shape \(5, 4\), got \(6, 4\) "
                             r"\(n = 5 from argument 1 'A'\)"):
        k(a, np.empty((6, 4), "float32"))


def test_runtime_assert_raises_instead_of_crashing() -> None:
    n = te.var("n")
    A = Buffer("A", (n,), "float32")
    i = te.var("i")
    f = PrimFunc("chk", (A,), AssertStmt(n > 2, "A needs more than 2 elements", For(
        i, te.const(0), n, ForKind.SERIAL, BufferStore(A, te.const(1.0), (i,)))))
    k = lowering.build(f)
    with pytest.raises(KernelArgumentError,
                       match="kernel 'chk': run-time check failed: A needs more than 2"):
        k(np.zeros(2, "float32"))
    a = np.zeros(3, "float32")
    k(a)
    assert a.tolist() == [1.0, 1.0, 1.0]


def test_second_build_hits_the_cache() -> None:
    build_module.clear_cache()
    before = dict(build_module.stats)
    k1 = lowering.build(matmul_func(8))
    k2 = lowering.build(matmul_func(8))  # equal IR built from fresh objects
    assert build_module.stats["misses"] == before["misses"] + 1
    assert build_module.stats["hits"] == before["hits"] + 1
    assert k2._jit is k1._jit
    a, b, c = arrays(8)
    k2(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_cache_separates_targets_and_programs() -> None:
    build_module.clear_cache()
    k1 = lowering.build(matmul_func(8))
    k2 = lowering.build(matmul_func(8), target="llvm -fast-math")
    k3 = lowering.build(matmul_func(4))
    assert len({id(k._jit) for k in (k1, k2, k3)}) == 3


def parallel_fill(n: int) -> PrimFunc:
    """B[i] = i over a parallel i in [0, n)."""
    B = Buffer("B", (n,), "int32")
    i = te.var("i")
    return PrimFunc("pfill", (B,), For(i, te.const(0), te.const(n), ForKind.PARALLEL,
                                       BufferStore(B, i, (i,))))


def kernel_threads(k: lowering.Kernel) -> int:
    """The thread count the kernel's parallel loops read when it runs."""
    import ctypes

    return ctypes.c_int32.from_address(k._jit.address(k.generated.num_threads_symbol)).value


def test_cache_keeps_kernels_of_other_thread_counts_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the thread count lives in the compiled module: a kernel built for one thread must
    # keep running on one after the same code is built for three
    build_module.clear_cache()
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")
    k1 = lowering.build(parallel_fill(64))
    monkeypatch.setenv("TESSEL_NUM_THREADS", "3")
    k3 = lowering.build(parallel_fill(64))
    monkeypatch.setenv("TESSEL_THREAD_POOL", "0")
    k3_own = lowering.build(parallel_fill(64))
    assert len({id(k._jit) for k in (k1, k3, k3_own)}) == 3
    assert (kernel_threads(k1), kernel_threads(k3)) == (1, 3)
    for k in (k1, k3, k3_own):
        b = unwritten(64, "int32")
        k(b)
        assert b.tolist() == list(range(64))


def test_same_printed_ir_with_different_var_identity_is_not_confused() -> None:
    # two loops over vars both named "i": the inner one shadows in one program only
    B = Buffer("B", (3, 3), "int32")
    i1, i2 = te.var("i"), te.var("i")
    f_a = PrimFunc("sh", (B,), For(i1, te.const(0), te.const(3), ForKind.SERIAL, For(
        i2, te.const(0), te.const(3), ForKind.SERIAL, BufferStore(B, i1 * 10 + i2, (i1, i2)))))
    i3 = te.var("i")
    f_b = PrimFunc("sh", (B,), For(i3, te.const(0), te.const(3), ForKind.SERIAL, For(
        i3, te.const(0), te.const(3), ForKind.SERIAL, BufferStore(B, i3 * 10 + i3, (i3, i3)))))
    assert str(f_a) == str(f_b)
    assert build_module.cache_key(f_a, tessel_target.Target.parse("llvm")) != \
        build_module.cache_key(f_b, tessel_target.Target.parse("llvm"))


def test_source_shows_llvm_ir_and_assembly(mm) -> None:
    assert 'define i32 @"mm"' in mm.source("llvm")
    assert "ret" in mm.source("asm") and ".text" in mm.source("asm") or "mm:" in mm.source("asm")
    assert "func mm(" in mm.source("ir")
    with pytest.raises(KernelArgumentError, match="unknown source kind 'ptx'"):
        mm.source("ptx")


def test_time_returns_positive_seconds(mm) -> None:
    t = mm.time(*arrays(), number=3, repeat=3)
    assert 0 < t < 1.0


def test_time_checks_its_arguments(mm) -> None:
    a, b, _ = arrays()
    with pytest.raises(KernelArgumentError, match="argument 3 'C'"):
        mm.time(a, b, np.empty((2, 2), "float32"))


def test_build_of_a_schedule_needs_args() -> None:
    with pytest.raises(CodegenError, match=r"give the argument tensors"):
        lowering.build(object())


def test_build_for_cuda_of_a_loop_nest_with_no_bound_loop_says_to_bind_it() -> None:
    with pytest.raises(CodegenError, match="outside every thread-bound loop, so it would run "
                                           "on the host: bind it"):
        lowering.build(matmul_func(), target="cuda -arch=sm_90")


def test_build_for_the_accelerator_of_a_float_loop_nest_says_what_it_cannot_run() -> None:
    from tessel_errors import ScheduleError

    with pytest.raises(ScheduleError, match="the accelerator"):
        lowering.build(matmul_func(), target="accel")


def test_kernel_for_a_cpu_with_features_the_host_lacks_refuses_to_run_but_shows_source(
        ) -> None:
    from tessel_target import host_features

    missing = next((f for f in ("avx512f", "avx512vnni", "avx512bf16") if f not in
                    host_features()), None)
    if missing is None:
        pytest.skip("this host has every feature the test could ask for")
    k = lowering.build(matmul_func(4), target=f"llvm -mcpu=haswell -mattr=+{missing}")
    assert "mm:" in k.source("asm")
    a, b, c = arrays(4)
    with pytest.raises(KernelArgumentError,
                       match=rf"kernel 'mm' was compiled for 'llvm -mattr=\+{missing} "
                             rf"-mcpu=haswell', not for this host CPU \(.* lacks {missing}\)"):
        k(a, b, c)


def test_kernel_for_an_unknown_cpu_name_refuses_to_run() -> None:
    k = lowering.build(matmul_func(4), target="llvm -mcpu=bdver2")
    with pytest.raises(KernelArgumentError, match=r"does not know which features 'bdver2'"):
        k(*arrays(4))


def test_kernel_for_an_older_cpu_runs_on_a_host_with_its_features() -> None:
    from tessel_target import host_features

    if not {"avx2", "fma", "bmi2", "f16c"} <= host_features():
        pytest.skip("the host lacks AVX2")
    k = lowering.build(matmul_func(4), target="llvm -mcpu=haswell")
    a, b, c = arrays(4)
    k(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_read_only_inputs_and_views_are_accepted(mm) -> None:
    a, b, c = arrays()
    a.flags.writeable = False
    big = np.zeros((32, 16), "float32")
    big[16:] = b
    mm(a, big[16:], c)  # a contiguous view with an offset
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_object_code_compiled_apart_loads_into_a_working_kernel() -> None:
    func = matmul_func()
    generated, obj = build_module.compile_object(func, "llvm")
    assert obj[:4] == b"\x7fELF" and generated.entry
    kernel = build_module.load_object(func, "llvm", generated, obj)
    a, b, c = arrays()
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    with pytest.raises(KernelArgumentError, match=r"argument 2 'B': expected shape \(16, 16\)"):
        kernel(a, b[:8], c)


def test_compile_object_refuses_a_non_cpu_target() -> None:
    with pytest.raises(CodegenError, match=r"compiles for the CPU \('llvm'\), not 'cuda"):
        build_module.compile_object(matmul_func(), "cuda")

