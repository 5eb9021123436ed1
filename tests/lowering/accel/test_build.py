"""lowering.build(s, args, target="accel"): VTA's matrix-multiply schedules as microcode,
bit-exact against numpy on the simulator."""

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering.accel import Env
from lowering.accel.isa import Alu, AluOp, Gemm, Load, MemType, Store, Uop
from schedule import create_schedule
from tensor_expr.intrin import shift_right
from tessel_errors import ScheduleError
from tests.rng import seeded_rng


def shape_of(t):
    return tuple(int(d.value) for d in t.shape)


def operands(A, W, C):
    rng = seeded_rng()
    a = rng.integers(-128, 128, shape_of(A), dtype=np.int8)
    w = rng.integers(-128, 128, shape_of(W), dtype=np.int8)
    c = np.full(shape_of(C), 77, np.int8)  # no NaN in int8: a value the result rarely has
    return a, w, c


def reference(a, w):
    """int32 C[o, m, b, c] = sum over k, i of A[o, k, b, i] * W[m, k, c, i] (wrapping)."""
    acc = np.einsum("okbi,mkci->ombc", a.astype(np.int64), w.astype(np.int64))
    return acc.astype(np.int32)


def tutorial(env, o, n, m, pragma_a=True):
    """VTA's matrix-multiply tutorial: the TE program and the schedule as it writes it
    (without the copy pragma on A_buf if not `pragma_a`)."""
    A = te.placeholder((o, n, env.BATCH, env.BLOCK_IN), env.inp_dtype, name="A")
    W = te.placeholder((m, n, env.BLOCK_OUT, env.BLOCK_IN), env.wgt_dtype, name="W")
    A_buf = te.compute(A.shape, lambda *i: A[i], name="A_buf")
    W_buf = te.compute(W.shape, lambda *i: W[i], name="W_buf")
    ko = te.reduce_axis((0, n), name="ko")
    ki = te.reduce_axis((0, env.BLOCK_IN), name="ki")
    C_buf = te.compute((o, m, env.BATCH, env.BLOCK_OUT), lambda bo, co, bi, ci: te.sum(
        A_buf[bo, ko, bi, ki].astype(env.acc_dtype)
        * W_buf[co, ko, ci, ki].astype(env.acc_dtype), axis=[ko, ki]), name="C_buf")
    C = te.compute(C_buf.shape, lambda *i: C_buf[i].astype(env.inp_dtype), name="C")

    s = create_schedule(C)
    s[A_buf].set_scope(env.inp_scope)
    s[W_buf].set_scope(env.wgt_scope)
    s[C_buf].set_scope(env.acc_scope)
    s[C_buf].reorder(ko, *s[C_buf].op.axis, ki)
    s[A_buf].compute_at(s[C_buf], ko)
    s[W_buf].compute_at(s[C_buf], ko)
    if pragma_a:
        s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[W_buf].pragma(s[W_buf].op.axis[0], env.dma_copy)
    s[C].pragma(s[C].op.axis[0], env.dma_copy)
    s[C_buf].tensorize(s[C_buf].op.axis[2], env.gemm)
    return s, (A, W, C)


def blocked(env, o, n, m, b_block, o_block, i_block, threads=1, tail=()):
    """VTA's blocked matrix multiply (matrix_multiply_opt): output tiles of b_block x
    o_block blocks, reduction steps of i_block, `threads` virtual threads over the output
    column tiles, and an elementwise tail of accumulator stages, each with pragma alu."""
    A = te.placeholder((o, n, env.BATCH, env.BLOCK_IN), env.inp_dtype, name="A")
    W = te.placeholder((m, n, env.BLOCK_OUT, env.BLOCK_IN), env.wgt_dtype, name="W")
    ko = te.reduce_axis((0, n), name="ko")
    ki = te.reduce_axis((0, env.BLOCK_IN), name="ki")
    res = te.compute((o, m, env.BATCH, env.BLOCK_OUT), lambda bo, co, bi, ci: te.sum(
        A[bo, ko, bi, ki].astype(env.acc_dtype) * W[co, ko, ci, ki].astype(env.acc_dtype),
        axis=[ko, ki]), name="res_gem")
    stages = [res]
    for n_, fn in enumerate(tail):
        prev = stages[-1]
        stages.append(te.compute(prev.shape, lambda *i, p=prev, f=fn: f(p[i]),
                                 name=f"res_alu{n_}"))
    C = te.compute(res.shape, lambda *i: stages[-1][i].astype(env.inp_dtype), name="C")

    s = create_schedule(C)
    A_buf = s.cache_read(A, env.inp_scope, [res])
    W_buf = s.cache_read(W, env.wgt_scope, [res])
    b, oc, b_tns, oc_tns = s[C].op.axis
    b_out, b_inn = s[C].split(b, factor=b_block)
    oc_out, oc_inn = s[C].split(oc, factor=o_block)
    s[C].reorder(b_out, oc_out, b_inn, oc_inn, b_tns, oc_tns)
    at = oc_out
    if threads > 1:
        oc_out, tx = s[C].split(oc_out, factor=threads)
        s[C].reorder(tx, b_out, oc_out)
        s[C].bind(tx, te.thread_axis("cthread"))
        at = oc_out
    for st in stages:
        s[st].set_scope(env.acc_scope)
        s[st].compute_at(s[C], at)
    for st in stages[1:]:
        s[st].pragma(s[st].op.axis[0], env.alu)
    bi, oi, bt, ot = s[res].op.axis
    ko_, ki_ = s[res].op.reduce_axis
    ic_out, ic_inn = s[res].split(ko_, factor=i_block)
    s[res].reorder(ic_out, bi, oi, ic_inn, bt, ot, ki_)
    s[A_buf].compute_at(s[res], ic_out)
    s[W_buf].compute_at(s[res], ic_out)
    s[A_buf].pragma(s[A_buf].op.axis[0], env.dma_copy)
    s[W_buf].pragma(s[W_buf].op.axis[0], env.dma_copy)
    s[res].tensorize(bt, env.gemm)
    s[C].pragma(b_inn, env.dma_copy)
    return s, (A, W, C)


# -- the tutorial's schedule ------------------------------------------------------------

@pytest.mark.parametrize("target, onm", [
    ("accel", (1, 4, 2)),
    ("accel", (2, 3, 5)),
    ("accel -batch=2", (3, 2, 2)),
    ("accel -batch=4 -block=32", (1, 2, 3)),
], ids=str)
def test_the_tutorial_schedule_matches_numpy(target, onm):
    env = Env(target)
    s, args = tutorial(env, *onm)
    f = lowering.build(s, list(args), target=target)
    a, w, c = operands(*args)
    f(a, w, c)
    np.testing.assert_array_equal(c, reference(a, w).astype(np.int8))


def test_the_tutorial_schedule_becomes_loads_gemms_and_one_store():
    env = Env()
    s, args = tutorial(env, 1, 4, 2)
    f = lowering.build(s, list(args), target="accel")
    kinds = [type(i).__name__ for i in f.instructions]
    assert kinds[0] == "Load" and f.instructions[0].mem is MemType.UOP
    assert kinds.count("Gemm") == 1 + 4          # the reset, then one per reduction step
    assert kinds.count("Store") == 1
    assert kinds[-1] == "Finish"
    assert "GEMM   reset" in f.disasm()
    stats = f.stats()
    assert stats.dram_bytes_written == 2 * env.OUT_ELEM_BYTES
    assert stats.dram_bytes_read == 4 * env.INP_ELEM_BYTES + 8 * env.WGT_ELEM_BYTES + 4


# -- the blocked schedule, with and without virtual threads ------------------------------

SHAPES = [((1, 8, 8), (1, 4, 4)), ((2, 4, 8), (1, 2, 2)), ((4, 6, 4), (2, 2, 3))]


@pytest.mark.parametrize("onm, tiles", SHAPES, ids=str)
@pytest.mark.parametrize("threads", [1, 2], ids=["one-thread", "two-cthreads"])
def test_the_blocked_schedule_matches_numpy(onm, tiles, threads):
    env = Env()
    s, args = blocked(env, *onm, *tiles, threads=threads)
    f = lowering.build(s, list(args), target="accel")
    a, w, c = operands(*args)
    f(a, w, c)
    np.testing.assert_array_equal(c, reference(a, w).astype(np.int8))


def test_virtual_threads_overlap_loads_with_the_gemm():
    env = Env()
    one, args = blocked(env, 1, 16, 8, 1, 2, 4, threads=1)
    two, args2 = blocked(env, 1, 16, 8, 1, 2, 4, threads=2)
    f1 = lowering.build(one, list(args), target="accel")
    f2 = lowering.build(two, list(args2), target="accel")
    a, w, c1 = operands(*args)
    c2 = c1.copy()
    f1(a, w, c1)
    f2(a, w, c2)
    np.testing.assert_array_equal(c1, c2)
    s1, s2 = f1.stats(), f2.stats()
    assert s1.gemm_cycles == s2.gemm_cycles
    assert s2.total_cycles < s1.total_cycles   # the cycle model is deterministic
    assert s2.gemm_utilisation > s1.gemm_utilisation


def test_micro_op_kernels_are_generated_once_per_content():
    env = Env()
    s, args = blocked(env, 1, 8, 8, 1, 4, 2)
    f = lowering.build(s, list(args), target="accel")
    gemms = [i for i in f.instructions if isinstance(i, Gemm) and not i.reset]
    assert len(gemms) == 2 * 4                     # 2 column tiles x 4 reduction steps
    assert len({(g.uop_bgn, g.uop_end) for g in gemms}) == 1
    # the reset's kernel (dst 0 over the tile's loops) has the same content: stored once
    assert f.uops == (Uop(0, 0, 0),)


def test_the_stats_of_a_call_are_the_cycle_model_s():
    env = Env()
    s, args = blocked(env, 2, 4, 8, 1, 2, 2, threads=2)
    f = lowering.build(s, list(args), target="accel")
    f(*operands(*args))
    assert f.last_stats.total_cycles == f.stats().total_cycles
    assert f.last_stats.dram_bytes_read == f.stats().dram_bytes_read


# -- errors ------------------------------------------------------------------------------

def test_a_buffer_larger_than_its_sram_is_a_schedule_error():
    env = Env("accel -inp_buf_kib=1")        # 64 input elements
    s, args = blocked(env, 1, 128, 2, 1, 2, 128)
    with pytest.raises(ScheduleError, match=r"'A.local.inp_buffer' .* needs 128 input "
                                            r"elements, the input buffer holds 64"):
        lowering.build(s, list(args), target="accel -inp_buf_kib=1")


def test_a_copy_into_an_accel_scope_without_dma_copy_is_a_schedule_error():
    env = Env()
    s, (A, W, C) = tutorial(env, 1, 2, 2, pragma_a=False)
    with pytest.raises(ScheduleError, match=r"'A_buf' \(scope local.inp_buffer\) .*"
                                            r"s\[A_buf\].pragma\(axis, env.dma_copy\)"):
        lowering.build(s, [A, W, C], target="accel")


def test_a_tensorize_that_does_not_match_the_gemm_is_a_schedule_error():
    env = Env()
    s, (A, W, C) = tutorial(env, 1, 2, 2)
    C_buf = s.stages[[st.name for st in s.stages].index("C_buf")]
    with pytest.raises(ScheduleError, match="does not match intrinsic 'accel_gemm'"):
        C_buf.tensorize(C_buf.op.axis[1], env.gemm)


def test_an_unpacked_argument_is_a_schedule_error():
    env = Env()
    A = te.placeholder((2, 16), "int8", name="A")
    A_buf = te.compute((2, 16), lambda *i: A[i], name="A_buf")
    s = create_schedule(A_buf)
    s[A_buf].set_scope(env.inp_scope)
    with pytest.raises(ScheduleError, match=r"trailing dims must be 1, 16"):
        lowering.build(s, [A], target="accel")


def test_a_kernel_call_with_a_wrong_shape_names_the_argument():
    from tessel_errors import KernelArgumentError

    env = Env()
    s, args = tutorial(env, 1, 2, 2)
    f = lowering.build(s, list(args), target="accel")
    a, w, c = operands(*args)
    with pytest.raises(KernelArgumentError, match=r"argument 2 'W': expected int8"):
        f(a, w[:1], c)


def test_kinds_of_instructions_in_a_stream_are_the_isa_s():
    env = Env()
    s, args = blocked(env, 1, 4, 4, 1, 2, 2, tail=(lambda x: te.max(x, 0),))
    f = lowering.build(s, list(args), target="accel")
    assert all(isinstance(i, (Load, Store, Gemm, Alu)) for i in f.instructions[:-1])
    assert any(isinstance(i, Alu) and i.op is AluOp.MAX for i in f.instructions)


@pytest.mark.parametrize("threads", [1, 2], ids=["one-thread", "two-cthreads"])
def test_the_alu_tail_shifts_applies_relu_and_clips_in_place(threads):
    env = Env()
    tail = (lambda x: shift_right(x, 7), lambda x: te.max(x, 0),
            lambda x: te.min(te.max(x, -128), 127))
    s, args = blocked(env, 2, 4, 4, 1, 2, 2, threads=threads, tail=tail)
    f = lowering.build(s, list(args), target="accel")
    a, w, c = operands(*args)
    f(a, w, c)
    want = np.clip(np.maximum(np.right_shift(reference(a, w), 7), 0), -128, 127)
    np.testing.assert_array_equal(c, want.astype(np.int8))
    alus = [i.op for i in f.instructions if isinstance(i, Alu)]
    # per output tile (virtual threads interleave their tiles' instructions)
    assert sorted(alus) == sorted([AluOp.SHR, AluOp.MAX, AluOp.MAX, AluOp.MIN] * 4)
