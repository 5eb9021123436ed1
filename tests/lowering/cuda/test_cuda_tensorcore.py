"""Tensor cores: dense_tensorcore.cuda (16x16x16 warp matrix operations, float16 in, float32
accumulate) simulated against numpy on random inputs for its default and sampled configs,
at sizes that are multiples of 16 and at sizes padded to them (the conv template too), its
CUDA C (nvcuda::wmma) compiled for sm_90; the simulator runs fragments per warp and
catches a missing barrier and lanes that diverge; bad dtypes, shapes and architectures get
clear errors, and a GPU without tensor cores gets the plain templates."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering import ir as lir
from lowering.cuda.compile import compiler
from schedule.templates import config_space, instantiate
from schedule.templates.cuda_wmma import SCOPE_ACC, WMMA_FILL
from tessel_errors import CodegenError, RaceError, ScheduleError
from tests.rng import seeded_rng
from tests.unwritten import unwritten

pytestmark = pytest.mark.skipif(not compiler(), reason="no CUDA compiler (NVRTC or nvcc)")


def _operands(m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    rng = seeded_rng()
    return (rng.standard_normal((m, k)).astype("float16"),
            rng.standard_normal((n, k)).astype("float16"))


def _run(m: int, n: int, k: int, cfg=None, target: str = "cuda -sim", epilogue=None):
    args = [((m, k), "float16"), ((n, k), "float16")]
    s, tensors = instantiate("dense_tensorcore.cuda", args, cfg=cfg, target="cuda",
                             epilogue=epilogue)
    return lowering.build(s, tensors, target=target), tensors


def _reference(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ w.astype(np.float64).T


def _check(m: int, n: int, k: int, cfg=None) -> lowering.cuda.CudaKernel:
    f, _ = _run(m, n, k, cfg)
    a, w = _operands(m, n, k)
    out = unwritten((m, n), "float16")
    f(a, w, out)
    # float32 sums in another order, rounded to float16 once: within float16's rounding
    np.testing.assert_allclose(out.astype(np.float64), _reference(a, w), rtol=2e-3, atol=2e-2)
    return f


@pytest.mark.parametrize("shape", [(64, 48, 32), (32, 32, 128), (16, 16, 16)])
def test_the_default_config_computes_the_product(shape: tuple[int, int, int]) -> None:
    _check(*shape)


def test_every_config_of_a_large_gemm_fits_the_shared_memory() -> None:
    from lowering.cuda.codegen import generate

    args = [((1024, 1024), "float16"), ((1024, 1024), "float16")]
    space = config_space("dense_tensorcore.cuda", args, target="cuda")

    def block(cfg, knob: str) -> int:
        return int(cfg[knob].size[-2]) * int(cfg[knob].size[-1])

    configs = [space.get(k) for k in range(len(space))]
    assert max(block(c, "tile_m") for c in configs) == 4  # 64 rows at most
    # the largest tiles (most shared memory): 64 x 64, 64-wide k steps
    worst = [c for c in configs if block(c, "tile_m") == block(c, "tile_n") == 4
             and int(c["tile_k"].size[-1]) == 4]
    assert worst
    for cfg in worst:
        s, tensors = instantiate("dense_tensorcore.cuda", args, cfg=cfg, target="cuda")
        generate(lowering.lower(s, tensors), "sm_90")  # refuses more than 48 KiB


def test_sampled_configs_compute_the_product() -> None:
    args = [((64, 64), "float16"), ((64, 64), "float16")]
    space = config_space("dense_tensorcore.cuda", args, target="cuda")
    assert set(space.knobs) == {"tile_m", "tile_n", "tile_k", "offset"}
    rng = seeded_rng()
    for index in rng.choice(len(space), size=3, replace=False):
        _check(64, 64, 64, space.get(int(index)))


@pytest.mark.parametrize("m, n, k", [(32, 48, 32), (9, 21, 40)])  # the second padded
def test_an_epilogue_is_computed_from_the_float32_sums(m: int, n: int, k: int) -> None:
    def bias_relu(C):
        bias = te.placeholder((C.shape[1],), "float16", name="bias")
        D = te.compute(C.shape, lambda i, j: te.max(C[i, j] + bias[j], te.const(0, "float16")),
                       name="D")
        return [bias], D

    f, tensors = _run(m, n, k, epilogue=bias_relu)
    a, w = _operands(m, n, k)
    bias = seeded_rng().standard_normal(n).astype("float16")
    out = unwritten((m, n), "float16")
    f(a, w, bias, out)
    want = np.maximum(_reference(a, w).astype(np.float16) + bias, 0)
    np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=4e-3,
                               atol=4e-2)


def test_the_cuda_c_uses_nvcuda_wmma_and_compiles_for_sm_90() -> None:
    f, _ = _run(64, 48, 32, target="cuda -arch=sm_90")
    src = f.source
    assert src.startswith("#include <mma.h>")
    for call in ("fill_fragment", "load_matrix_sync", "mma_sync", "store_matrix_sync"):
        assert f"nvcuda::wmma::{call}(" in src
    assert "nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half" in src
    assert "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32" in f.ptx
    assert f.cubin[:4] == b"\x7fELF"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on PATH")
def test_nvcc_compiles_the_tensor_core_kernel_too() -> None:
    from lowering.cuda.compile import _with_nvcc

    f, _ = _run(32, 32, 32, target="cuda -arch=sm_90")
    ptx, cubin = _with_nvcc(f.source, "sm_90")
    assert "wmma.load.a.sync" in ptx and cubin[:4] == b"\x7fELF"


def test_an_architecture_without_tensor_cores_is_refused() -> None:
    with pytest.raises(CodegenError, match=r"uses tensor cores \(nvcuda::wmma\), which need "
                                           r"sm_70 or later; the target is sm_61"):
        _run(32, 32, 32, target="cuda -arch=sm_61")


@pytest.mark.parametrize("args, match", [
    ([((32, 32), "float32"), ((48, 32), "float32")], r"tensor cores take float16 operands"),
    ([((32, 20), "float16"), ((48, 24), "float16")],
     r"data \[M, K\] = \[32, 20\] and weight \[N, K\] = \[48, 24\] disagree on K"),
])
def test_operands_tensor_cores_cannot_take_are_refused(args, match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        instantiate("dense_tensorcore.cuda", args, target="cuda")


# --- any size: the GEMM padded to tiles of 16 ---------------------------------------------

@pytest.mark.parametrize("shape", [(17, 33, 50), (1, 1000, 64), (5, 7, 3)])
def test_sizes_that_are_not_multiples_of_16_are_padded(shape: tuple[int, int, int]) -> None:
    # M x N x K: the classifier's 1 x 1000 too (its K cut to 64: the simulator is slow)
    f = _check(*shape)
    assert "nvcuda::wmma::mma_sync(" in f.source and f.cubin[:4] == b"\x7fELF"


def test_sampled_configs_of_a_padded_gemm_compute_the_product() -> None:
    # 40 x 20 x 24 pads to 48 x 32 x 32: configs with one block per axis (the guarded
    # output reads part of its last tile) and with several
    args = [((40, 24), "float16"), ((20, 24), "float16")]
    space = config_space("dense_tensorcore.cuda", args, target="cuda")
    rng = seeded_rng()
    for index in rng.choice(len(space), size=3, replace=False):
        _check(40, 20, 24, space.get(int(index)))


def test_the_padding_is_read_as_zeros_in_the_shared_tile_loads() -> None:
    f, _ = _run(17, 33, 50, target="cuda -arch=sm_90")
    src = f.source
    # the tile loads test the bounds of the real operands, the output store those of [M, N]
    assert "< 17)" in src and "< 33)" in src and "< 50)" in src
    assert "data_pad_shared[" in src and "weight_pad_shared[" in src


def test_the_simulator_catches_a_missing_barrier_before_the_fragment_loads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from lowering.cuda import codegen

    monkeypatch.setattr(codegen, "storage_sync", lambda body: body)
    f, _ = _run(32, 32, 32)
    a, w = _operands(32, 32, 32)
    # found at the first warp's fragment load of the A tile other threads copied
    with pytest.raises(RaceError, match=r"race in kernel .* on shared buffer 'data.shared'"):
        f(a, w, unwritten((32, 32), "float16"))


def _fill_kernel(lanes_filling: int) -> lir.PrimFunc:
    """One warp: fill an accumulator fragment (some lanes only), store it to global."""
    from schedule.templates.cuda_wmma import WMMA_STORE

    out = lir.Buffer("out", (16, 16), "float32")
    acc = lir.Buffer("acc", (16, 16), "float32", scope=SCOPE_ACC)
    tx = te.var("tx")
    zero = (te.const(0), te.const(0))
    fill = lir.Evaluate(te.Call("int32", WMMA_FILL, (lir.BufferLoad(acc, zero),
                                                      te.const(2.5, "float32"))))
    if lanes_filling < 32:
        fill = lir.IfThenElse(tx < lanes_filling, fill)
    store = lir.Evaluate(te.Call("int32", WMMA_STORE, (lir.BufferLoad(out, zero),
                                                        lir.BufferLoad(acc, zero),
                                                        te.const(16))))
    body = lir.For(tx, te.const(0), te.const(32), lir.ForKind.THREAD_BINDING,
                   lir.Allocate(acc, lir.seq(fill, store)), "threadIdx.x")
    return lir.PrimFunc("fill", (out,), body)


def test_a_fragment_is_filled_and_stored_by_the_whole_warp() -> None:
    f = lowering.cuda.build(_fill_kernel(32), "cuda -sim")
    out = unwritten((16, 16), "float32")
    f(out)
    assert (out == 2.5).all()


def test_lanes_of_a_warp_that_diverge_at_a_fragment_call_are_a_race() -> None:
    f = lowering.cuda.build(_fill_kernel(16), "cuda -sim")
    with pytest.raises(RaceError, match=r"lanes \(0, 0, 0\) and \(16, 0, 0\) of warp 0 make "
                                        r"different tensor-core calls \(tessel.wmma_fill and "
                                        r"tessel.wmma_store"):
        f(unwritten((16, 16), "float32"))


def test_a_store_to_one_element_of_a_fragment_is_refused() -> None:
    out = lir.Buffer("out", (16, 16), "float32")
    acc = lir.Buffer("acc", (16, 16), "float32", scope=SCOPE_ACC)
    tx = te.var("tx")
    body = lir.For(tx, te.const(0), te.const(32), lir.ForKind.THREAD_BINDING,
                   lir.Allocate(acc, lir.BufferStore(acc, te.const(1.0), (tx, tx))),
                   "threadIdx.x")
    with pytest.raises(CodegenError, match=r"a store to one element of tensor-core fragment "
                                           "'acc'"):
        lowering.cuda.build(lir.PrimFunc("bad", (out,), body), "cuda -sim")


FP16_MLP = """
def @main(%x: Tensor[(32, 64), float16], %w: Tensor[(48, 64), float16],
          %b: Tensor[(48), float16]) {
  nn.relu(nn.bias_add(nn.dense(%x, %w), %b))
}"""


def _fp16_inputs(shapes) -> list[np.ndarray]:
    rng = seeded_rng()
    return [rng.standard_normal(s).astype("float16") for s in shapes]


def test_a_float16_dense_model_on_the_gpu_runs_on_tensor_cores(tmp_path) -> None:
    import relay_ir

    mod = relay_ir.parse(FP16_MLP)
    ins = _fp16_inputs(((32, 64), (48, 64), (48,)))
    lib = relay_ir.build(mod, target="cuda -sim")
    assert dict(lib.group_schedules) == {"fused_dense_bias_add_relu": "dense_tensorcore.cuda"}
    want = relay_ir.interpret(mod, *ins)
    np.testing.assert_allclose(lib.run(*ins).astype(np.float64), want.astype(np.float64),
                               rtol=2e-3, atol=2e-2)
    lib.save(str(tmp_path / "m.tessel"))  # saved with its #include, loaded without NVRTC
    np.testing.assert_array_equal(relay_ir.load_compiled(str(tmp_path / "m.tessel")).run(*ins),
                                  lib.run(*ins))


def test_tensor_core_and_plain_gpu_dense_are_both_tasks_and_the_cpu_keeps_its_own() -> None:
    import relay_ir
    from autotune.extract import extract_tasks

    mod = relay_ir.parse(FP16_MLP)
    assert [t.template for t, _ in extract_tasks(mod, "cuda")] == [
        "dense_tensorcore.cuda", "dense.cuda"]
    assert [t.template for t, _ in extract_tasks(mod, "llvm")] == ["dense.x86"]
    # a GPU without tensor cores (sm_61) gets the plain template only (built by the
    # default-template path lower_group takes; NVRTC 13 compiles no sm_61 code to try)
    assert [t.template for t, _ in extract_tasks(mod, "cuda -arch=sm_61")] == ["dense.cuda"]


def test_an_odd_sized_float16_dense_model_runs_on_tensor_cores_too() -> None:
    import relay_ir
    from autotune.extract import extract_tasks

    odd = relay_ir.parse(FP16_MLP.replace("(32, 64)", "(30, 64)").replace("64)", "50)"))
    assert [t.template for t, _ in extract_tasks(odd, "cuda")] == [
        "dense_tensorcore.cuda", "dense.cuda"]
    ins = _fp16_inputs(((30, 50), (48, 50), (48,)))
    lib = relay_ir.build(odd, target="cuda -sim")
    assert dict(lib.group_schedules) == {"fused_dense_bias_add_relu": "dense_tensorcore.cuda"}
    np.testing.assert_allclose(lib.run(*ins).astype(np.float64),
                               relay_ir.interpret(odd, *ins).astype(np.float64),
                               rtol=2e-3, atol=2e-2)


# --- conv2d as an implicit GEMM on tensor cores ------------------------------------------

def _conv_reference(x: np.ndarray, w: np.ndarray, pad: int, stride: int) -> np.ndarray:
    n, c, h, wd = x.shape
    co, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, co, oh, ow))
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", win, w[:, :, i, j].astype(np.float64))
    return out


CONVS = {"3x3": ((1, 16, 8, 8), (16, 16, 3, 3), 1, 1),
         "1x1 batch 2": ((2, 16, 8, 8), (32, 16, 1, 1), 0, 1),
         "3x3 stride 2": ((1, 32, 8, 8), (16, 32, 3, 3), 1, 2),
         # padded to tiles of 16: a stem's 3 input channels (reduction 27), 20 output
         # channels and 162 positions of a 9x9 image, a strided window with 5 outputs
         "3 channels": ((1, 3, 8, 8), (16, 3, 3, 3), 1, 1),
         "odd 1x1 batch 2": ((2, 5, 9, 9), (20, 5, 1, 1), 0, 1),
         "odd 3x3 stride 2": ((1, 3, 7, 7), (5, 3, 3, 3), 1, 2)}


def _check_conv(case: str, cfg=None) -> None:
    xs, ws, pad, stride = CONVS[case]
    args = [(xs, "float16"), (ws, "float16")]
    s, tensors = instantiate("conv2d_nchw_tensorcore.cuda", args,
                             {"padding": pad, "strides": stride}, cfg=cfg, target="cuda")
    f = lowering.build(s, tensors, target="cuda -sim")
    rng = seeded_rng()
    x, w = rng.standard_normal(xs).astype("float16"), rng.standard_normal(ws).astype("float16")
    want = _conv_reference(x, w, pad, stride)
    out = unwritten(want.shape, "float16")
    f(x, w, out)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-3, atol=4e-2)


@pytest.mark.parametrize("case", sorted(CONVS))
def test_a_tensor_core_conv_computes_the_convolution(case: str) -> None:
    _check_conv(case)


def test_sampled_configs_of_the_tensor_core_conv_compute_the_convolution() -> None:
    xs, ws, pad, _ = CONVS["3x3"]
    space = config_space("conv2d_nchw_tensorcore.cuda", [(xs, "float16"), (ws, "float16")],
                         {"padding": pad}, target="cuda")
    rng = seeded_rng()
    for index in rng.choice(len(space), size=min(2, len(space)), replace=False):
        _check_conv("3x3", space.get(int(index)))


def test_sampled_configs_of_a_padded_tensor_core_conv_compute_the_convolution() -> None:
    xs, ws, pad, stride = CONVS["odd 1x1 batch 2"]
    space = config_space("conv2d_nchw_tensorcore.cuda", [(xs, "float16"), (ws, "float16")],
                         {"padding": pad, "strides": stride}, target="cuda")
    rng = seeded_rng()
    for index in rng.choice(len(space), size=2, replace=False):
        _check_conv("odd 1x1 batch 2", space.get(int(index)))


FP16_CONV = """
def @main(%x: Tensor[(1, 16, 8, 8), float16], %w: Tensor[(32, 16, 3, 3), float16],
          %b: Tensor[(32), float16]) {
  nn.relu(nn.bias_add(nn.conv2d(%x, %w, padding=[1, 1]), %b))
}"""


STEM = {"(1, 16, 8, 8)": "(1, 3, 9, 9)", "(32, 16, 3, 3)": "(8, 3, 3, 3)", "(32)": "(8)"}


@pytest.mark.parametrize("stem", [False, True])  # the stem: 3 channels, padded
def test_a_float16_conv_model_on_the_gpu_runs_on_tensor_cores(stem: bool) -> None:
    import relay_ir
    from autotune.extract import extract_tasks

    text = FP16_CONV
    for old, new in STEM.items() if stem else ():
        text = text.replace(old, new)
    mod = relay_ir.parse(text)
    shapes = [tuple(int(d) for d in t.strip("()").split(","))
              for t in (STEM if stem else {k: k for k in STEM}).values()]
    ins = _fp16_inputs(shapes)
    lib = relay_ir.build(mod, target="cuda -sim")
    assert dict(lib.group_schedules) == {
        "fused_conv2d_bias_add_relu": "conv2d_nchw_tensorcore.cuda"}
    np.testing.assert_allclose(lib.run(*ins).astype(np.float64),
                               relay_ir.interpret(mod, *ins).astype(np.float64),
                               rtol=2e-3, atol=4e-2)
    assert [t.template for t, _ in extract_tasks(mod, "cuda")] == [
        "conv2d_nchw_tensorcore.cuda", "conv2d_nchw_gemm.cuda", "conv2d_nchw.cuda"]
    assert [t.template for t, _ in extract_tasks(mod, "llvm")] == ["conv2d_NCHWc.x86"]
    # a GPU without tensor cores gets the plain templates
    assert [t.template for t, _ in extract_tasks(mod, "cuda -arch=sm_61")] == [
        "conv2d_nchw_gemm.cuda", "conv2d_nchw.cuda"]


FP16_CNN = """
def @main(%x: Tensor[(1, 3, 12, 12), float16], %w1: Tensor[(8, 3, 3, 3), float16],
          %b1: Tensor[(8), float16], %w2: Tensor[(12, 8, 3, 3), float16],
          %w3: Tensor[(10, 12), float16]) {
  %0 = nn.relu(nn.bias_add(nn.conv2d(%x, %w1, padding=[1, 1]), %b1));
  %1 = nn.max_pool2d(%0, pool_size=[2, 2], strides=[2, 2]);
  %2 = nn.relu(nn.conv2d(%1, %w2, padding=[1, 1]));
  %3 = reshape(nn.global_avg_pool2d(%2), newshape=[1, 12]);
  nn.softmax(nn.dense(%3, %w3))
}"""


def test_a_float16_cnn_runs_every_group_on_its_template() -> None:
    # odd channel counts on tensor cores, the softmax's float16 reductions across threads
    import warnings

    import relay_ir

    mod = relay_ir.parse(FP16_CNN)
    ins = [(x * 0.5).astype("float16") for x in _fp16_inputs(
        ((1, 3, 12, 12), (8, 3, 3, 3), (8,), (12, 8, 3, 3), (10, 12)))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no group falls back to the generic schedule
        lib = relay_ir.build(mod, target="cuda -sim")
    schedules = dict(lib.group_schedules)
    assert schedules["fused_conv2d_bias_add_relu"] == "conv2d_nchw_tensorcore.cuda"
    assert schedules["fused_dense"] == "dense_tensorcore.cuda"
    assert schedules["fused_softmax"] == "softmax.cuda"
    np.testing.assert_allclose(lib.run(*ins).astype(np.float64),
                               relay_ir.interpret(mod, *ins).astype(np.float64),
                               rtol=5e-3, atol=2e-3)
