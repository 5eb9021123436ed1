"""lowering.accel.Env: the hardware configuration under VTA's names, and env.gemm."""

import pytest

import lowering
import tensor_expr as te
from lowering.accel import Env
from schedule import create_schedule
from tessel_errors import CodegenError, ScheduleError
from tessel_target import Target


def test_defaults_are_vtas():
    env = Env()
    assert (env.BATCH, env.BLOCK_IN, env.BLOCK_OUT) == (1, 16, 16)
    assert (env.inp_dtype, env.wgt_dtype, env.acc_dtype, env.out_dtype) == (
        "int8", "int8", "int32", "int8")
    assert (env.inp_scope, env.wgt_scope, env.acc_scope) == (
        "local.inp_buffer", "local.wgt_buffer", "local.acc_buffer")
    assert (env.dma_copy, env.alu) == ("dma_copy", "alu")


def test_buffer_sizes_follow_the_target():
    env = Env("accel -batch=4 -block=32 -inp_buf_kib=64")
    assert env.INP_ELEM_BYTES == 4 * 32 and env.INP_BUFF_SIZE == 64 * 1024
    assert env.INP_BUFF_DEPTH == 64 * 1024 // (4 * 32)
    assert env.WGT_ELEM_BYTES == 32 * 32 and env.WGT_BUFF_DEPTH == 256 * 1024 // (32 * 32)
    assert env.ACC_ELEM_BYTES == 4 * 32 * 4 and env.ACC_BUFF_DEPTH == 128 * 1024 // 512
    assert env.UOP_BUFF_DEPTH == 32 * 1024 // 4


def test_env_takes_a_target_value_and_compares_by_it():
    assert Env(Target.parse("accel -batch=2")) == Env("accel -batch=2") != Env("accel")


def test_a_non_accel_target_is_an_error():
    with pytest.raises(CodegenError, match="accel target"):
        Env("llvm")


def test_a_buffer_smaller_than_one_element_is_an_error():
    with pytest.raises(CodegenError, match="wgt buffer"):
        Env("accel -block=1024 -wgt_buf_kib=1")


def test_gemm_intrinsic_declares_the_core_shape():
    env = Env("accel -batch=2 -block=8")
    assert env.gemm.extents == ([2, 8], [8])


def tiled_gemm(env, m, n, k):
    """C[m, n] = A[m, k] . W[n, k]^T in int32, tiled by the core's shape."""
    A = te.placeholder((m, k), "int8", name="A")
    W = te.placeholder((n, k), "int8", name="W")
    rk = te.reduce_axis((0, k), name="rk")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, rk].astype("int32")
                                               * W[j, rk].astype("int32"), axis=rk), name="C")
    s = create_schedule(C)
    io, jo, ii, ji = s[C].tile(*C.op.axis, env.BATCH, env.BLOCK_OUT)
    ko, ki = s[C].split(rk, factor=env.BLOCK_IN)
    s[C].reorder(io, jo, ko, ii, ji, ki)
    return s, (A, W, C), ii


def test_gemm_tensorizes_a_tiled_gemm_into_one_call_per_tile():
    env = Env()
    s, args, ii = tiled_gemm(env, 2, 32, 48)
    s[args[2]].tensorize(ii, env.gemm)
    text = str(lowering.lower(s, list(args)))
    assert text.count("accel_gemm(C[i.outer, (j.outer * 16)], A[i.outer, (rk.outer * 16)], "
                      "W[(j.outer * 16), (rk.outer * 16)])") == 1


def test_gemm_refuses_a_nest_of_another_shape():
    s, args, ii = tiled_gemm(Env(), 2, 32, 48)  # 16-wide tiles against an 8-wide core
    with pytest.raises(ScheduleError, match="accel_gemm"):
        s[args[2]].tensorize(ii, Env("accel -block=8").gemm)


def test_gemm_tensorizes_a_conv2d_in_the_packed_6d_layouts():
    """data[N/B, C/16, H, W, B, 16] and kernel[O/16, C/16, KH, KW, 16, 16], as VTA packs
    them: the intrinsic covers the two trailing dims, the loops fix the four leading ones."""
    env = Env("accel -batch=4")
    b, blk = env.BATCH, env.BLOCK_IN
    D = te.placeholder((1, 2, 5, 5, b, blk), "int8", name="D")
    K = te.placeholder((3, 2, 3, 3, blk, blk), "int8", name="K")
    ic = te.reduce_axis((0, 2), name="ic")
    kh = te.reduce_axis((0, 3), name="kh")
    kw = te.reduce_axis((0, 3), name="kw")
    ii = te.reduce_axis((0, blk), name="ii")
    O = te.compute(
        (1, 3, 3, 3, b, blk),
        lambda n, oc, y, x, bn, bo: te.sum(
            D[n, ic, y + kh, x + kw, bn, ii].astype("int32")
            * K[oc, ic, kh, kw, bo, ii].astype("int32"), axis=[ic, kh, kw, ii]), name="O")
    s = create_schedule(O)
    n, oc, y, x, bn, bo = O.op.axis
    s[O].reorder(n, oc, y, x, ic, kh, kw, bn, bo, ii)
    s[O].tensorize(bn, env.gemm)
    text = str(lowering.lower(s, [D, K, O]))
    assert ("accel_gemm(O[0, oc, y, x, 0, 0], D[0, ic, (y + kh), (x + kw), 0, 0], "
            "K[oc, ic, kh, kw, 0, 0])") in text
