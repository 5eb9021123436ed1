"""The LLVM backend on hand-built loop IR: every statement kind and dtype against numpy and
the interpreter, and the shape of the generated code (vectors, unrolling, threads)."""

from __future__ import annotations

import os
import re
import threading
import time

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering.interpreter import run
from lowering.ir import Buffer, BufferStore, Evaluate, For, ForKind, PrimFunc
from lowering.llvm.codegen import generate
from lowering.llvm.jit import emit_assembly
from tessel_errors import CodegenError
from tests.lowering import ir_examples as X
from tests.lowering.test_interpreter import EXAMPLES, check_example, tolerance
from tests.rng import seeded_rng


def llvm_runner(func: PrimFunc, *arrays: np.ndarray) -> None:
    """Build `func` for the host and run it."""
    lowering.build(func, target="llvm")(*arrays)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_matches_numpy(name: str) -> None:
    check_example(name, llvm_runner)


@pytest.mark.parametrize("name", ["matmul_blocked", "ints_int8_vector", "floats_float16",
                                  "padded_read_vector", "casts", "symbolic"])
def test_example_matches_interpreter(name: str) -> None:
    func, make, _ = EXAMPLES[name]
    arrays = make(seeded_rng())
    mine = [a.copy() for a in arrays]
    run(func, *arrays)
    llvm_runner(func, *mine)
    for a, b in zip(arrays, mine):
        if a.dtype.kind == "f":
            np.testing.assert_allclose(b, a, **tolerance(str(a.dtype)))
        else:
            np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.VECTORIZED])
@pytest.mark.parametrize("name", X.INTRINSICS)
def test_intrinsic_matches_numpy(name: str, kind: ForKind, dtype: str) -> None:
    func, make, ref = X.intrinsic(name, dtype, kind)
    a, b = make(seeded_rng())
    llvm_runner(func, a, b)
    tol = {"rtol": 2e-6, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-13, "atol": 0}
    np.testing.assert_allclose(b, ref([a, b])[1], **tol)


@pytest.mark.parametrize("name", ["exp", "sqrt", "tanh", "erf", "round"])
def test_float16_intrinsic_matches_numpy(name: str) -> None:
    func, make, ref = X.intrinsic(name, "float16", ForKind.VECTORIZED)
    a, b = make(seeded_rng())
    llvm_runner(func, a, b)
    np.testing.assert_allclose(b, ref([a, b])[1], rtol=1e-3, atol=1e-3)


def test_tanh_float32_is_accurate_over_its_range() -> None:
    func, _, _ = X.intrinsic("tanh", "float32", ForKind.VECTORIZED)
    k = lowering.build(func)
    rng = seeded_rng()
    for lo, hi in ((-12.0, 12.0), (-1e-3, 1e-3), (-30.0, 30.0)):
        a = rng.uniform(lo, hi, 37).astype("float32")
        b = np.full_like(a, np.nan)
        k(a, b)
        np.testing.assert_allclose(b, np.tanh(a.astype("float64")), rtol=3e-7, atol=3e-7)


def test_exp_float32_is_accurate_over_its_range() -> None:
    func, _, _ = X.intrinsic("exp", "float32", ForKind.VECTORIZED)
    k = lowering.build(func)
    rng = seeded_rng()
    for lo, hi in ((-80.0, 80.0), (-1.0, 1.0), (-103.0, -87.0)):
        a = rng.uniform(lo, hi, 37).astype("float32")
        b = np.full_like(a, np.nan)
        k(a, b)
        want = np.exp(a.astype("float64"))
        np.testing.assert_allclose(b, want, rtol=3e-7, atol=1e-44)
    a = np.array([89.0, -105.0, np.inf, -np.inf, np.nan, 0.0] + [1.0] * 31, "float32")
    b = np.full_like(a, np.nan)
    k(a, b)
    assert b[0] == np.inf and b[1] == 0.0 and b[2] == np.inf and b[3] == 0.0
    assert np.isnan(b[4]) and b[5] == 1.0


def vector_kernel() -> PrimFunc:
    """B[i, j] = A[i, j] * s[0] + 1 with j vectorized over 16 float32 lanes."""
    A, B, S = Buffer("A", (8, 16), "float32"), Buffer("B", (8, 16), "float32"), \
        Buffer("s", (1,), "float32")
    i, j = te.var("i"), te.var("j")
    body = For(i, te.const(0), te.const(8), ForKind.SERIAL,
               For(j, te.const(0), te.const(16), ForKind.VECTORIZED,
                   BufferStore(B, A[i, j] * S[0] + 1.0, (i, j))))
    return PrimFunc("vec16", (A, S, B), body)


def test_vectorized_loop_uses_zmm_on_avx512() -> None:
    # compiled for Sapphire Rapids whatever the host is (only assembled, not run)
    asm = emit_assembly(generate(vector_kernel(), "llvm").text, "llvm -mcpu=sapphirerapids")
    assert re.search(r"\bv(mul|fmadd|add)\w*ps\s[^\n]*%zmm", asm)
    assert "vmovups" in asm or "vmovaps" in asm


def test_vectorized_loop_emits_vector_ir() -> None:
    text = generate(vector_kernel(), "llvm").text
    assert "load <16 x float>" in text and "store <16 x float>" in text
    # the loop-invariant s[0] is a scalar load, broadcast with a shuffle
    assert "load float" in text and "shufflevector" in text
    assert "masked.gather" not in text
    assert '"prefer-vector-width"="512"' in text


def test_strided_vector_access_uses_gather_and_scatter() -> None:
    text = generate(EXAMPLES["strided_vector"][0], "llvm").text
    assert "llvm.masked.gather" in text and "llvm.masked.scatter" in text


def test_a_select_on_an_unrolled_index_emits_only_the_taken_arm() -> None:
    # B[i] = A[i] * 3 if i == 0 else (A[i] * 5 if i < -1 + 3 else A[i] * 7): each unrolled
    # iteration knows its arm (negative constants compare signed), the others leave no code
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    i = te.var("i")
    value = te.select(i == 0, A[i] * 3.0,
                      te.select(i < te.const(-1) + 3, A[i] * 5.0, A[i] * 7.0))
    f = PrimFunc("sel", (A, B), For(i, te.const(0), te.const(4), ForKind.UNROLLED,
                                    BufferStore(B, value, (i,))))
    text = generate(f, "llvm").text
    body = text.split('@"sel.body"')[1].split("\n}\n")[0]
    assert "select" not in body and "icmp" not in body
    assert len(re.findall(r"fmul", body)) == 4
    a = seeded_rng().standard_normal(4).astype("float32")
    b = np.zeros(4, "float32")
    llvm_runner(f, a, b)
    np.testing.assert_array_equal(b, a * np.array([3, 5, 7, 7], "float32"))


def test_unrolled_loop_has_no_back_edge() -> None:
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    i = te.var("i")
    f = PrimFunc("unr", (A, B), For(i, te.const(0), te.const(4), ForKind.UNROLLED,
                                    BufferStore(B, A[i] + 1.0, (i,))))
    text = generate(f, "llvm").text
    body = text.split('@"unr.body"')[1].split("\n}\n")[0]
    assert not re.search(r"= phi ", body)
    assert re.findall(r"\bbr ", body) == ["br "]  # entry -> start, nothing loops back
    assert len(re.findall(r"store float", body)) == 4


def test_parallel_loop_starts_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSEL_NUM_THREADS", "4")
    func, make, ref = EXAMPLES["matmul_blocked"]
    text = generate(func, "llvm").text
    assert re.search(r"call i32 @\"?pthread_create", text) and "pthread_join" in text
    k = lowering.build(func)
    arrays = make(seeded_rng())
    before = threading.active_count()
    k(*arrays)
    np.testing.assert_allclose(arrays[2], ref(arrays)[2], rtol=2e-5, atol=1e-4)
    assert threading.active_count() == before  # native threads are joined


def test_parallel_threads_really_run_concurrently(monkeypatch: pytest.MonkeyPatch) -> None:
    # each chunk records the OS thread that ran it via a pthread_self store; without the
    # pool every chunk but the first runs on a thread of its own
    monkeypatch.setenv("TESSEL_NUM_THREADS", "3")
    monkeypatch.setenv("TESSEL_THREAD_POOL", "0")
    B = Buffer("B", (3,), "int64")
    i = te.var("i")
    f = PrimFunc("who", (B,), For(i, te.const(0), te.const(3), ForKind.PARALLEL,
                                  BufferStore(B, te.Call("int64", "pthread_self", ()), (i,))))
    gen = generate_with_pthread_self(f)
    from lowering.kernel import Kernel
    from lowering.llvm.jit import compile_ir
    from tessel_target import Target

    k = Kernel(f, Target.parse("llvm"), gen, compile_ir(gen.text))
    b = np.full(3, -1, "int64")
    k(b)
    assert len(set(b.tolist())) == 3


def test_thread_pool_workers_exist_and_results_are_right(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSEL_NUM_THREADS", "3")
    func, make, ref = EXAMPLES["matmul_blocked"]
    k = lowering.build(func)
    from lowering.llvm.runtime import pool_launch_address

    assert k.launch_address == pool_launch_address(0)
    tasks = len(os.listdir("/proc/self/task"))
    assert tasks >= threading.active_count() + 2  # two native workers beside Python's
    for _ in range(20):  # back-to-back launches reuse the workers
        arrays = make(seeded_rng())
        k(*arrays)
        np.testing.assert_allclose(arrays[2], ref(arrays)[2], rtol=2e-5, atol=1e-4)
    assert len(os.listdir("/proc/self/task")) == tasks


def test_pool_runs_kernels_called_from_several_python_threads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    func, make, ref = EXAMPLES["elementwise_vec_par"]
    k = lowering.build(func)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(30):
                arrays = make(seeded_rng())
                k(*arrays)
                np.testing.assert_allclose(arrays[1], ref(arrays)[1], rtol=2e-5, atol=1e-4)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def uneven_chunks(steps: int) -> PrimFunc:
    """B[i] = `steps` * i rounds of x -> x * 0.5 + 1 from B[i], over a parallel i in [0, 2):
    the second chunk (a worker's) takes far longer than the first (the launcher's)."""
    B = Buffer("B", (2,), "float32")
    i, j = te.var("i"), te.var("j")
    body = For(j, te.const(0), te.const(steps) * i, ForKind.SERIAL,
               BufferStore(B, B[i] * 0.5 + 1.0, (i,)))
    return PrimFunc("uneven", (B,), For(i, te.const(0), te.const(2), ForKind.PARALLEL, body))


def test_pool_launcher_sleeps_and_is_woken_by_a_slow_worker(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the worker's chunk (2M dependent steps, about 1-4 ms) outlasts the launcher's spin, so
    # the launcher sleeps and the worker's last task must wake it (a lost wake-up hangs)
    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    k = lowering.build(uneven_chunks(2_000_000))
    for start in (0.0, 3.0, -7.0):
        b = np.full(2, start, "float32")
        k(b)
        assert b[0] == start and b[1] == 2.0  # x * 0.5 + 1 settles at 2


def test_pool_wakes_idle_workers_after_a_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    # a pause longer than the workers' spin puts them to sleep; each launch after it must
    # wake them or run alone, with the same results either way
    monkeypatch.setenv("TESSEL_NUM_THREADS", "3")
    func, make, ref = EXAMPLES["matmul_blocked"]
    k = lowering.build(func)
    for _ in range(5):
        time.sleep(0.02)
        for _ in range(3):
            arrays = make(seeded_rng())
            k(*arrays)
            np.testing.assert_allclose(arrays[2], ref(arrays)[2], rtol=2e-5, atol=1e-4)


def generate_with_pthread_self(f: PrimFunc):
    """Generate `f`, letting the Call "pthread_self" through as a libc call."""
    from lowering.llvm import intrinsics
    from lowering.llvm.types import I64

    orig = intrinsics.emit

    def emit(cg, name, dtype, arg_dtypes, args):  # noqa: ANN001, ANN202
        if name == "pthread_self":
            return cg.b.call(cg.extern("pthread_self", I64, []), [])
        return orig(cg, name, dtype, arg_dtypes, args)

    intrinsics.emit = emit
    try:
        return generate(f, "llvm")
    finally:
        intrinsics.emit = orig


def test_local_buffer_is_64_byte_aligned_on_the_stack() -> None:
    text = generate(EXAMPLES["matmul_blocked"][0], "llvm").text
    assert re.search(r"alloca \[16 x float\], align 64", text)


def test_global_buffer_uses_aligned_malloc() -> None:
    text = generate(EXAMPLES["symbolic"][0], "llvm").text
    assert re.search(r"call ptr @\"?aligned_alloc", text) and re.search(r"@\"?free", text)


def test_fast_math_target_sets_fast_flags() -> None:
    func = vector_kernel()
    assert "fmul fast" in generate(func, "llvm -fast-math").text
    assert "fmul fast" not in generate(func, "llvm").text


def test_floordiv_by_power_of_two_is_a_shift() -> None:
    A, B = Buffer("A", (8,), "int32"), Buffer("B", (8,), "int32")
    i = te.var("i")
    f = PrimFunc("sh", (A, B), For(i, te.const(0), te.const(8), ForKind.SERIAL,
                                   BufferStore(B, A[i] // 8 + A[i] % 16, (i,))))
    text = generate(f, "llvm").text
    assert "ashr" in text and "sdiv" not in text and "srem" not in text


def test_thread_binding_is_rejected_naming_the_loop() -> None:
    B = Buffer("B", (8,), "float32")
    tx = te.var("tx")
    f = PrimFunc("gpu", (B,), For(tx, te.const(0), te.const(8), ForKind.THREAD_BINDING,
                                  BufferStore(B, te.const(1.0), (tx,)),
                                  thread_tag="threadIdx.x"))
    with pytest.raises(CodegenError, match="loop 'tx' is bound to GPU thread axis "
                                           "'threadIdx.x'"):
        lowering.build(f)


def test_unbound_variable_is_a_codegen_error() -> None:
    B = Buffer("B", (8,), "float32")
    i, z = te.var("i"), te.var("z")
    f = PrimFunc("unbound", (B,), For(i, te.const(0), te.const(8), ForKind.SERIAL,
                                      BufferStore(B, te.cast(z, "float32"), (i,))))
    with pytest.raises(CodegenError, match="variable 'z' is used but not bound"):
        lowering.build(f)


def _child_runs_parallel_kernels(k, func, queue) -> None:  # noqa: ANN001
    make, ref = EXAMPLES["matmul_blocked"][1], EXAMPLES["matmul_blocked"][2]
    a = make(seeded_rng())
    k(*a)  # the parent's kernel: the pool belongs to the parent, so this runs serially
    k2 = lowering.build(func)  # a kernel built here gets a fresh pool
    b = make(seeded_rng())
    k2(*b)
    queue.put(bool(np.allclose(a[2], ref(a)[2], rtol=2e-5, atol=1e-4)
                   and np.allclose(b[2], ref(b)[2], rtol=2e-5, atol=1e-4)))


def test_parallel_kernels_work_in_a_forked_child(monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    monkeypatch.setenv("TESSEL_NUM_THREADS", "2")
    func = EXAMPLES["matmul_blocked"][0]
    k = lowering.build(func)
    k(*EXAMPLES["matmul_blocked"][1](seeded_rng()))  # start the parent's pool
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_child_runs_parallel_kernels, args=(k, func, queue))
    p.start()
    assert queue.get(timeout=60) is True
    p.join(10)
    assert p.exitcode == 0


def test_unknown_intrinsic_is_a_codegen_error_naming_it() -> None:
    B = Buffer("B", (4,), "float32")
    f = PrimFunc("tz", (B,), Evaluate(te.Call("int32", "gemm_4x4_intrin", (B[0],))))
    with pytest.raises(CodegenError, match="intrinsic 'gemm_4x4_intrin' is not supported by "
                                           "the LLVM backend"):
        lowering.build(f)


def test_guard_in_vectorized_loop_becomes_masked_vector_code() -> None:
    text = generate(EXAMPLES["guarded_vector"][0], "llvm").text
    assert "llvm.masked.store.v8f32" in text and "llvm.masked.load.v8f32" in text


def test_unvectorizable_vector_loop_gets_loop_vectorize_metadata() -> None:
    # extent 67 fits no vector width: a scalar loop that asks LLVM's loop vectorizer
    text = generate(EXAMPLES["long_vector"][0], "llvm").text
    assert re.search(r'!(\d+) = distinct !\{!\1, !\d+ ?\}', text)
    assert '!"llvm.loop.vectorize.enable", i1 1' in text
