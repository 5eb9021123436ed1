"""CUDA C generation and compilation (no GPU needed): one __global__ function per kernel
with the loop nest's names, the launch grid from the bound extents, NVRTC / nvcc
compiling it, and clear errors for schedules a GPU cannot run."""

from __future__ import annotations

import re

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering.cuda import arch_of, driver
from lowering.cuda.compile import compile_cuda, compiler
from lowering.ir import Buffer, BufferStore, For, ForKind, PrimFunc
from schedule import create_schedule
from tessel_errors import CodegenError, DeviceError
from tessel_target import Target
from tests.lowering.cuda.schedules import bind, shared_matmul, two_kernels, vector_scale
from tests.rng import seeded_rng
from tests.unwritten import unwritten

pytestmark = pytest.mark.skipif(not compiler(), reason="no CUDA compiler (NVRTC or nvcc)")


def test_a_kernel_is_one_extern_c_global_function_with_the_loop_names() -> None:
    s, args = vector_scale()
    f = lowering.build(s, args, target="cuda")
    assert f.source.count('extern "C" __global__') == 1
    assert "const int i_outer = (int)blockIdx.x;" in f.source
    assert "const int i_inner = (int)threadIdx.x;" in f.source
    assert ".entry main_kernel0" in f.ptx and len(f.cubin) > 0


def test_the_launch_grid_comes_from_the_bound_extents() -> None:
    s, args = vector_scale(factor=64)
    k = lowering.build(s, args, target="cuda").program.kernels[0]
    assert k.block == (64, 1, 1)
    assert str(k.grid[0]) == "floordiv((n + 63), 64)" and [str(g) for g in k.grid[1:]] == [
        "1", "1"]
    assert [v.name for v in k.scalars] == ["n"]  # the symbolic extent is an argument


def test_inputs_are_const_restrict_and_outputs_restrict() -> None:
    s, args = vector_scale()
    src = lowering.build(s, args, target="cuda").source
    assert "const float* __restrict__ A" in src and re.search(r"[^t] float\* __restrict__ B",
                                                               src)


def test_shared_memory_gets_barriers_around_its_use() -> None:
    s, args = shared_matmul(16, 4)
    f = lowering.build(s, args, target="cuda")
    assert "__shared__ __align__(32) float A_shared[16];" in f.source
    body = f.source[f.source.index("for (int k_outer"):]
    assert body.count("__syncthreads();") == 2  # after the load; before the next overwrite
    assert f.program.kernels[0].shared_bytes == 64


def test_two_stages_become_two_kernels_and_a_device_temporary() -> None:
    s, args = two_kernels()
    f = lowering.build(s, args, target="cuda")
    assert [k.name for k in f.program.kernels] == ["main_kernel0", "main_kernel1"]
    assert [st.kind for st in f.program.steps] == ["alloc", "launch", "launch", "free"]


def test_arch_is_taken_from_the_target_and_reaches_the_ptx() -> None:
    s, args = vector_scale()
    f = lowering.build(s, args, target="cuda -arch=sm_80")
    assert ".target sm_80" in f.ptx


def test_without_a_gpu_the_default_arch_is_sm_90() -> None:
    if driver.gpu() is not None:
        pytest.skip("this machine has a GPU: the default is its own architecture")
    assert arch_of(Target.parse("cuda")) == "sm_90"


def test_calling_without_a_gpu_is_a_device_error_pointing_to_the_simulator() -> None:
    if driver.gpu() is not None:
        pytest.skip("this machine has a GPU")
    s, args = vector_scale(n=8, factor=8)
    f = lowering.build(s, args, target="cuda")
    with pytest.raises(DeviceError, match=r"needs an NVIDIA GPU .*'cuda -sim'"):
        f(np.ones(8, "float32"), np.empty(8, "float32"))


def test_arguments_are_checked_before_the_device_is_needed() -> None:
    s, args = vector_scale(n=8, factor=8)
    f = lowering.build(s, args, target="cuda")
    from tessel_errors import KernelArgumentError
    with pytest.raises(KernelArgumentError, match=r"argument 2 'B': expected shape \(8,\)"):
        f(np.ones(8, "float32"), np.empty(9, "float32"))


def test_a_compile_error_quotes_the_compiler_log_and_the_offending_line() -> None:
    src = 'extern "C" __global__ void k(float* a) {\n  a[0] = not_defined_anywhere;\n}\n'
    with pytest.raises(CodegenError, match=r"(?s)not_defined_anywhere.*line 2: a\[0\] = "
                                           r"not_defined_anywhere;"):
        compile_cuda(src, "sm_90")


def test_the_headers_for_mma_h_can_come_from_a_folder_of_their_own(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # what benchmarks/gpu_wheels.sh carries to a GPU machine whose toolkit has none
    from lowering.cuda import compile as C

    (tmp_path / "mma.h").write_text("// stand-in\n")
    monkeypatch.setenv("TESSEL_CUDA_INCLUDE", str(tmp_path))
    C.toolkit_include.cache_clear()
    try:
        assert C.toolkit_include() == str(tmp_path)
        assert C._include_options("#include <mma.h>\n") == [f"--include-path={tmp_path}"]
    finally:
        monkeypatch.delenv("TESSEL_CUDA_INCLUDE")
        C.toolkit_include.cache_clear()


def test_cuda_bindings_without_a_loadable_nvrtc_falls_back_to_nvcc(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # cuda-bindings imports without the NVRTC library and fails at the first call
    import sys
    import types

    from lowering.cuda import compile as C

    bindings = pytest.importorskip("cuda.bindings")

    def no_library() -> None:
        raise RuntimeError("Failed to dlopen libnvrtc.so.13")

    fake = types.SimpleNamespace(nvrtcVersion=no_library)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", fake)
    monkeypatch.setattr(bindings, "nvrtc", fake, raising=False)
    C._nvrtc.cache_clear()
    try:
        assert C._nvrtc() is None
        assert C.compiler() in ("nvcc", "")
    finally:
        monkeypatch.undo()
        C._nvrtc.cache_clear()


# --- schedules a GPU cannot run -----------------------------------------------------------


def test_more_than_1024_threads_per_block_is_refused() -> None:
    s, args = vector_scale(n=4096, factor=2048)
    with pytest.raises(CodegenError, match=r"threadIdx.x .* has extent 2048; a block allows "
                                           r"1 to 1024"):
        lowering.build(s, args, target="cuda")


def test_more_threads_than_a_block_holds_over_two_axes_is_refused() -> None:
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] + 1.0, name="B")
    s = create_schedule(B)
    bind(s, B, B.op.axis[0], "threadIdx.y")
    bind(s, B, B.op.axis[1], "threadIdx.x")
    with pytest.raises(CodegenError, match=r"4096 threads per block \(64 x 64 x 1\)"):
        lowering.build(s, [A, B], target="cuda")


def test_a_global_temporary_computed_inside_a_kernel_is_refused() -> None:
    A = te.placeholder((32,), name="A")
    B = te.compute((32,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((32,), lambda i: B[i] * 2.0, name="C")
    s = create_schedule(C)
    bind(s, C, C.op.axis[0], "threadIdx.x")
    s[B].compute_at(s[C], s[C].op.axis[0])
    with pytest.raises(CodegenError, match=r"global buffer 'B' is allocated inside kernel "
                                           r"'main_kernel0'; make it a shared or local cache"):
        lowering.build(s, [A, C], target="cuda")


def test_same_tag_two_extents_in_one_kernel_names_both_loops() -> None:
    A, B = Buffer("A", (32,), "float32"), Buffer("B", (32,), "float32")
    i, j, b = te.var("i"), te.var("j"), te.var("b")
    body = For(b, te.const(0), te.const(1), ForKind.THREAD_BINDING, lowering.ir.seq(
        For(i, te.const(0), te.const(32), ForKind.THREAD_BINDING,
            BufferStore(B, A[i], (i,)), "threadIdx.x"),
        For(j, te.const(0), te.const(16), ForKind.THREAD_BINDING,
            BufferStore(B, A[j] * 2.0, (j,)), "threadIdx.x")), "blockIdx.x")
    with pytest.raises(CodegenError, match=r"threadIdx.x of kernel 'k_kernel0' is bound twice "
                                           r"with different extents: 32 for loop 'i' and 16 "
                                           r"for loop 'j'"):
        lowering.build(PrimFunc("k", (A, B), body), target="cuda")


def test_a_loop_left_unbound_is_refused_as_host_work() -> None:
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = create_schedule(B)
    with pytest.raises(CodegenError, match=r"loop 'i' .* outside every thread-bound loop, so "
                                           r"it would run on the host: bind it"):
        lowering.build(s, [A, B], target="cuda")


def test_an_outer_loop_left_unbound_around_bound_ones_is_refused() -> None:
    A = te.placeholder((4, 64), name="A")
    B = te.compute((4, 64), lambda i, j: A[i, j] + 1.0, name="B")
    s = create_schedule(B)
    bind(s, B, B.op.axis[1], "threadIdx.x")
    with pytest.raises(CodegenError, match=r"its loops bind threads only further in"):
        lowering.build(s, [A, B], target="cuda")


def test_shared_memory_limit_alone_is_refused_with_the_figure() -> None:
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    big = Buffer("big", (13000,), "float32", scope="shared")
    t, b = te.var("t"), te.var("b")
    body = For(b, te.const(0), te.const(1), ForKind.THREAD_BINDING, lowering.ir.Allocate(
        big, For(t, te.const(0), te.const(16), ForKind.THREAD_BINDING,
                 BufferStore(B, A[t], (t,)), "threadIdx.x")), "blockIdx.x")
    with pytest.raises(CodegenError, match=r"needs 52000 bytes of shared memory per block; "
                                           r"static shared memory is limited to 49152"):
        lowering.build(PrimFunc("k", (A, B), body), target="cuda")


def test_a_parallel_loop_inside_a_kernel_is_refused() -> None:
    A = te.placeholder((4, 64), name="A")
    B = te.compute((4, 64), lambda i, j: A[i, j] + 1.0, name="B")
    s = create_schedule(B)
    bind(s, B, B.op.axis[0], "blockIdx.x")
    s[B].parallel(B.op.axis[1])
    with pytest.raises(CodegenError, match=r"parallel, a CPU loop kind"):
        lowering.build(s, [A, B], target="cuda")


def test_an_unknown_thread_tag_is_refused() -> None:
    A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    t = te.var("t")
    body = For(t, te.const(0), te.const(16), ForKind.THREAD_BINDING,
               BufferStore(B, A[t], (t,)), "warpIdx.x")
    with pytest.raises(CodegenError, match=r"bound to 'warpIdx.x'"):
        lowering.build(PrimFunc("k", (A, B), body), target="cuda")


def _vector_kernel(offset: int):
    A = te.placeholder((1024 + offset,), name="A")
    B = te.compute((1024,), lambda i: A[i + offset] * 3.0, name="B")
    s = create_schedule(B)
    rest, lanes = s[B].split(B.op.axis[0], factor=4)
    bx, tx = s[B].split(rest, factor=64)
    bind(s, B, bx, "blockIdx.x")
    bind(s, B, tx, "threadIdx.x")
    s[B].vectorize(lanes)
    return lowering.build(s, [A, B], target="cuda -sim"), A


def test_contiguous_aligned_vector_loops_become_float4_loads_and_stores() -> None:
    f, _ = _vector_kernel(0)
    assert "const float4 A_v0 = *reinterpret_cast<const float4*>" in f.source
    assert "*reinterpret_cast<float4*>(&B[" in f.source


def test_a_vector_loop_that_is_not_aligned_stays_scalar() -> None:
    f, _ = _vector_kernel(1)  # A[i + 1]: contiguous, but one float past a 16-byte boundary
    assert "float4" not in f.source and "#pragma unroll" in f.source


@pytest.mark.parametrize("offset", [0, 1])
def test_vector_loops_compute_the_same_values(offset: int) -> None:
    f, _ = _vector_kernel(offset)
    a = seeded_rng().standard_normal(1024 + offset).astype("float32")
    b = np.full(1024, np.nan, "float32")
    f(a, b)
    np.testing.assert_allclose(b, a[offset:] * 3, rtol=1e-6)


def _narrow_vector_kernel(dtype: str, lanes: int):
    A = te.placeholder((512,), dtype, name="A")
    two = te.const(2, dtype)
    B = te.compute((512,), lambda i: A[i] * two, name="B")
    s = create_schedule(B)
    rest, inner = s[B].split(B.op.axis[0], factor=lanes)
    bx, tx = s[B].split(rest, factor=32)
    bind(s, B, bx, "blockIdx.x")
    bind(s, B, tx, "threadIdx.x")
    s[B].vectorize(inner)
    return lowering.build(s, [A, B], target="cuda -sim")


@pytest.mark.parametrize(("dtype", "lanes", "vector"), [("float16", 2, "ushort2"),
                                                        ("float16", 4, "ushort4"),
                                                        ("int8", 4, "char4")])
def test_narrow_types_load_and_store_as_vectors_of_their_bits(dtype: str, lanes: int,
                                                              vector: str) -> None:
    f = _narrow_vector_kernel(dtype, lanes)
    assert f"const {vector} A_v0 = *reinterpret_cast<const {vector}*>" in f.source
    assert f"*reinterpret_cast<{vector}*>(&B[" in f.source
    if dtype == "float16":  # each lane converted from its bits and rounded back
        assert "tessel_h2f(A_v0.x)" in f.source and "tessel_f2h(" in f.source
    rng = seeded_rng()
    a = (rng.standard_normal(512) * 20).astype(dtype)
    b = unwritten((512,), dtype)
    f(a, b)
    np.testing.assert_array_equal(b, (a * np.array(2, dtype)).astype(dtype))


def test_a_tiled_gemm_syncs_once_after_its_loads_and_once_before_the_next() -> None:
    from schedule.templates import instantiate

    args = [((64, 32), "float32"), ((48, 32), "float32")]
    s, tensors = instantiate("dense.cuda", args, target="cuda")  # fallback: vthreads of 1
    src = lowering.build(s, tensors, target="cuda").source
    assert src.count("__syncthreads();") == 2
    loop = src[src.index("for (int k_outer"):]
    assert loop.index("__syncthreads();") > loop.index("weight_shared[")  # after both loads
