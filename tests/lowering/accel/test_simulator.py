"""lowering.accel.simulator on hand-written streams: bit-exact results against numpy,
the cycle model on streams small enough to count by hand, and the errors of bad streams."""

import numpy as np
import pytest

from lowering.accel import Env
from lowering.accel.dram import Dram
from lowering.accel.isa import Alu, AluOp, Finish, Gemm, Load, MemType, Store, Uop
from lowering.accel.simulator import run, timing
from tessel_errors import DeviceError
from tests.rng import seeded_rng

ENV = Env()


def int8s(rng, shape):
    return rng.integers(-128, 128, shape, dtype=np.int8)


def load(mem, dram_base, n=1, sram_base=0, **kw):
    return Load(mem=mem, sram_base=sram_base, dram_base=dram_base, y_size=1, x_size=n,
                x_stride=n, **kw)


def store(dram_base, n=1, sram_base=0, **kw):
    return Store(sram_base=sram_base, dram_base=dram_base, y_size=1, x_size=n, x_stride=n,
                 **kw)


def tiles(m, rows, cols):
    """m[R*rows, C*cols] as the (R*C, rows, cols) tiles of VTA's packed layout, row-major."""
    r, c = m.shape[0] // rows, m.shape[1] // cols
    return m.reshape(r, rows, c, cols).transpose(0, 2, 1, 3).reshape(r * c, rows, cols)


def untile(t, r, c):
    n, rows, cols = t.shape
    return t.reshape(r, c, rows, cols).transpose(0, 2, 1, 3).reshape(r * rows, c * cols)


def acc_through(dram, values, insns):
    """Load int32 `values` (n, BATCH, BLOCK_OUT) into the accumulator, run the ALU
    instructions `insns` over them, store; returns the stored int8 elements."""
    n = values.shape[0]
    acc = dram.place(MemType.ACC, values)
    uop = dram.place_uops([Uop(0, 0)])
    out = dram.alloc(MemType.OUT, n)
    stream = [load(MemType.UOP, uop), load(MemType.ACC, acc, n), *insns,
              store(out, n, pop_prev_dep=True), Finish()]
    stream[-3] = _with(stream[-3], push_next_dep=True)
    run(stream, dram)
    return dram.read(MemType.OUT, out, n)


def _with(insn, **kw):
    import dataclasses

    return dataclasses.replace(insn, **kw)


def alu(op, n, **kw):
    return Alu(op=op, uop_bgn=0, uop_end=1, iter_out=n, dst_factor_out=1, src_factor_out=1,
               **kw)


# -- GEMM ------------------------------------------------------------------------------

def test_one_gemm_tile_matches_numpy():
    rng = seeded_rng()
    a, w = int8s(rng, (1, 16)), int8s(rng, (16, 16))
    dram = Dram(ENV)
    uop, inp, wgt = dram.place_uops([Uop(0, 0, 0)]), dram.place(MemType.INP, a[None]), \
        dram.place(MemType.WGT, w[None])
    out = dram.alloc(MemType.OUT, 1)
    run([load(MemType.UOP, uop), load(MemType.INP, inp), load(MemType.WGT, wgt,
         push_next_dep=True), Gemm(reset=True, uop_bgn=0, uop_end=1),
         Gemm(uop_bgn=0, uop_end=1, pop_prev_dep=True, push_next_dep=True),
         store(out, pop_prev_dep=True), Finish()], dram)
    want = (a.astype(np.int32) @ w.T.astype(np.int32)).astype(np.int8)
    np.testing.assert_array_equal(dram.read(MemType.OUT, out, 1)[0], want)


@pytest.mark.parametrize("target", ["accel", "accel -batch=2"])
def test_multi_tile_gemm_with_loop_factors_matches_numpy(target):
    env = Env(target)
    b, blk = env.BATCH, env.BLOCK_IN
    mo, no, ko = 2, 3, 4
    rng = seeded_rng()
    a, w = int8s(rng, (mo * b, ko * blk)), int8s(rng, (no * blk, ko * blk))
    dram = Dram(env)
    # the kernel runs the reduction; the loops walk output rows (outer) and columns (inner)
    uop = dram.place_uops([Uop(0, k, k) for k in range(ko)])
    inp = dram.place(MemType.INP, tiles(a, b, blk))
    wgt = dram.place(MemType.WGT, tiles(w, blk, blk))
    out = dram.alloc(MemType.OUT, mo * no)
    loops = dict(iter_out=mo, iter_in=no, dst_factor_out=no, dst_factor_in=1)
    run([load(MemType.UOP, uop, ko), load(MemType.INP, inp, mo * ko),
         load(MemType.WGT, wgt, no * ko, push_next_dep=True),
         Gemm(reset=True, uop_bgn=0, uop_end=1, **loops),
         Gemm(uop_bgn=0, uop_end=ko, src_factor_out=ko, wgt_factor_in=ko, pop_prev_dep=True,
              push_next_dep=True, **loops),
         store(out, mo * no, pop_prev_dep=True), Finish()], dram, env)
    want = (a.astype(np.int32) @ w.T.astype(np.int32)).astype(np.int8)
    np.testing.assert_array_equal(untile(dram.read(MemType.OUT, out, mo * no), mo, no), want)


def test_accumulating_past_int32_wraps_around():
    a = np.full((1, 1, 16), -128, np.int8)
    w = np.full((1, 16, 16), -128, np.int8)
    reps = 9000  # 9000 * 16 * 128 * 128 > 2**31
    dram = Dram(ENV)
    uop = dram.place_uops([Uop(0, 0, 0)])
    inp, wgt = dram.place(MemType.INP, a), dram.place(MemType.WGT, w)
    out = dram.alloc(MemType.OUT, 1)
    run([load(MemType.UOP, uop), load(MemType.INP, inp), load(MemType.WGT, wgt,
         push_next_dep=True), Gemm(reset=True, uop_bgn=0, uop_end=1),
         Gemm(uop_bgn=0, uop_end=1, iter_out=reps, pop_prev_dep=True),
         Alu(op=AluOp.SHR, use_imm=True, imm=24, uop_bgn=0, uop_end=1, push_next_dep=True),
         store(out, pop_prev_dep=True), Finish()], dram)
    wrapped = np.int64(reps * 16 * 128 * 128) - (1 << 32)  # the int32 the hardware holds
    assert wrapped < 0
    assert (dram.read(MemType.OUT, out, 1) == np.int8(wrapped >> 24)).all()


# -- the ALU ---------------------------------------------------------------------------

def random_acc(rng, n=6):
    return rng.integers(-(1 << 31), 1 << 31, (n, 1, 16), dtype=np.int64).astype(np.int32)


@pytest.mark.parametrize("op, imm, numpy_op", [
    (AluOp.ADD, 1234, lambda x, i: x + np.int32(i)),
    (AluOp.MAX, 0, lambda x, i: np.maximum(x, np.int32(i))),   # ReLU
    (AluOp.MIN, -77, lambda x, i: np.minimum(x, np.int32(i))),
    (AluOp.SHR, 9, lambda x, i: np.right_shift(x, np.int32(i))),
    (AluOp.SHR, -3, lambda x, i: np.left_shift(x, np.int32(-i))),
    (AluOp.MUL, -1000, lambda x, i: x * np.int32(i)),
], ids=["add", "relu", "min", "shr", "shr_negative_shifts_left", "mul"])
def test_alu_immediate_ops_match_numpy_int32(op, imm, numpy_op):
    x = random_acc(seeded_rng())
    with np.errstate(over="ignore"):
        want = numpy_op(x, imm)
    # shift the 32-bit result down so the int8 store shows its high bits, then its low
    for shift in (24, 0):
        got = acc_through(Dram(ENV), x, [alu(op, len(x), use_imm=True, imm=imm),
                                         alu(AluOp.SHR, len(x), use_imm=True, imm=shift)])
        np.testing.assert_array_equal(got, np.right_shift(want, shift).astype(np.int8))


def test_alu_ops_between_accumulator_elements_match_numpy():
    x = random_acc(seeded_rng(), 8)
    # the first four elements get the second four added: dst i, src i + 4
    add = Alu(op=AluOp.ADD, uop_bgn=0, uop_end=1, iter_out=4, dst_factor_out=1,
              src_factor_out=1)
    with np.errstate(over="ignore"):
        want = np.concatenate([x[:4] + x[4:], x[4:]])
    dram = Dram(ENV)
    acc = dram.place(MemType.ACC, x)
    uop = dram.place_uops([Uop(0, 4)])
    out = dram.alloc(MemType.OUT, 8)
    run([load(MemType.UOP, uop), load(MemType.ACC, acc, 8),
         _with(add, push_next_dep=True), store(out, 8, pop_prev_dep=True)], dram)
    np.testing.assert_array_equal(dram.read(MemType.OUT, out, 8), want.astype(np.int8))


def test_alu_iterations_run_in_order():
    x = seeded_rng().integers(-100, 100, (8, 1, 16)).astype(np.int32)
    # acc[i + 1] += acc[i] for i in order: a running sum
    scan = Alu(op=AluOp.ADD, uop_bgn=0, uop_end=1, iter_out=7, dst_factor_out=1,
               src_factor_out=1)
    dram = Dram(ENV)
    acc = dram.place(MemType.ACC, x)
    uop = dram.place_uops([Uop(1, 0)])
    out = dram.alloc(MemType.OUT, 8)
    run([load(MemType.UOP, uop), load(MemType.ACC, acc, 8), _with(scan, push_next_dep=True),
         store(out, 8, pop_prev_dep=True)], dram)
    np.testing.assert_array_equal(dram.read(MemType.OUT, out, 8),
                                  np.cumsum(x, axis=0).astype(np.int8))


# -- DMA -------------------------------------------------------------------------------

def test_strided_padded_load_copies_a_window_with_zeros_around_it():
    rng = seeded_rng()
    image = int8s(rng, (4, 5, 1, 16))  # 4 rows of 5 input elements in DRAM
    dram = Dram(ENV)
    base = dram.place(MemType.INP, image.reshape(20, 1, 16))
    eye = dram.place(MemType.WGT, np.eye(16, dtype=np.int8)[None])
    uop = dram.place_uops([Uop(0, 0, 0)])
    rows, cols = 1 + 2 + 1, 1 + 3 + 2
    n = rows * cols
    out = dram.alloc(MemType.OUT, n)
    # rows 1..2, columns 2..4 of the image, one zero row above and below, one zero column
    # left and two right
    window = Load(mem=MemType.INP, sram_base=0, dram_base=base + 1 * 5 + 2, y_size=2,
                  x_size=3, x_stride=5, y_pad_0=1, y_pad_1=1, x_pad_0=1, x_pad_1=2)
    copy = dict(uop_bgn=0, uop_end=1, iter_out=n, dst_factor_out=1, src_factor_out=1)
    run([load(MemType.UOP, uop), load(MemType.WGT, eye), _with(window, push_next_dep=True),
         Gemm(reset=True, **copy), Gemm(pop_prev_dep=True, push_next_dep=True, **copy),
         store(out, n, pop_prev_dep=True)], dram)
    want = np.pad(image[1:3, 2:5], ((1, 1), (1, 2), (0, 0), (0, 0)))
    np.testing.assert_array_equal(dram.read(MemType.OUT, out, n), want.reshape(n, 1, 16))


def test_store_keeps_the_low_8_bits():
    x = np.zeros((1, 1, 16), np.int32)
    x[0, 0, :4] = [300, -129, 2**31 - 1, -(2**31)]
    got = acc_through(Dram(ENV), x, [alu(AluOp.ADD, 1, use_imm=True, imm=0)])
    assert got[0, 0, :4].tolist() == [44, 127, -1, 0]


def test_store_writes_rows_x_stride_apart():
    x = seeded_rng().integers(-100, 100, (4, 1, 16)).astype(np.int32)
    dram = Dram(ENV)
    acc = dram.place(MemType.ACC, x)
    out = dram.alloc(MemType.OUT, 6)
    before = dram.read(MemType.OUT, out, 6)
    run([load(MemType.ACC, acc, 4, push_next_dep=True),
         Store(sram_base=0, dram_base=out, y_size=2, x_size=2, x_stride=3, pop_prev_dep=True)],
        dram)
    got = dram.read(MemType.OUT, out, 6)
    np.testing.assert_array_equal(got[[0, 1, 3, 4]], x.astype(np.int8))
    np.testing.assert_array_equal(got[[2, 5]], before[[2, 5]])


# -- errors ----------------------------------------------------------------------------

def test_a_pop_whose_token_never_comes_is_a_deadlock():
    dram = Dram(ENV)
    inp = dram.place(MemType.INP, np.zeros((1, 1, 16), np.int8))
    stream = [load(MemType.INP, inp), Gemm(reset=True, uop_bgn=0, uop_end=0,
                                            pop_prev_dep=True)]
    with pytest.raises(DeviceError, match=r"instruction 1 \(GEMM .*deadlock: the compute "
                                          r"module waits for a token from load"):
        run(stream, dram)


def test_a_load_past_its_buffer_is_an_sram_overflow():
    dram = Dram(ENV)
    inp = dram.place(MemType.INP, np.zeros((2, 1, 16), np.int8))
    stream = [Finish(), load(MemType.INP, inp, 2, sram_base=ENV.INP_BUFF_DEPTH - 1)]
    with pytest.raises(DeviceError, match=r"instruction 1 \(LOAD .*run past the INP buffer "
                                          r"\(2048 elements\)"):
        run(stream, dram)


def test_a_gemm_index_past_the_accumulator_is_an_sram_overflow():
    dram = Dram(ENV)
    uop = dram.place_uops([Uop(ENV.ACC_BUFF_DEPTH - 2, 0, 0)])
    stream = [load(MemType.UOP, uop), Gemm(reset=True, uop_bgn=0, uop_end=1, iter_out=3,
                                            dst_factor_out=1)]
    with pytest.raises(DeviceError, match=r"instruction 1 .*iteration 2 addresses ACC buffer "
                                          r"element 2048 \(dst index\)"):
        run(stream, dram)


def test_a_micro_op_outside_the_loaded_range_is_an_error():
    dram = Dram(ENV)
    uop = dram.place_uops([Uop(0, 0, 0)])
    stream = [load(MemType.UOP, uop), Gemm(reset=True, uop_bgn=0, uop_end=2)]
    with pytest.raises(DeviceError, match=r"instruction 1 .*micro-op 1 is outside the "
                                          r"loaded micro-op range"):
        run(stream, dram)


def test_a_dma_past_dram_is_an_error():
    dram = Dram(ENV)
    inp = dram.place(MemType.INP, np.zeros((2, 1, 16), np.int8))
    with pytest.raises(DeviceError, match=r"instruction 0 .*DRAM element 2 of INP .*past the "
                                          r"32-byte DRAM image"):
        run([load(MemType.INP, inp + 1, 2)], dram)


def test_a_gemm_reading_an_unwritten_accumulator_is_an_error():
    dram = Dram(ENV)
    uop = dram.place_uops([Uop(0, 0, 0)])
    inp = dram.place(MemType.INP, np.zeros((1, 1, 16), np.int8))
    wgt = dram.place(MemType.WGT, np.zeros((1, 16, 16), np.int8))
    stream = [load(MemType.UOP, uop), load(MemType.INP, inp),
              load(MemType.WGT, wgt, push_next_dep=True),
              Gemm(uop_bgn=0, uop_end=1, pop_prev_dep=True)]
    with pytest.raises(DeviceError, match=r"instruction 3 .*reads ACC buffer element 0, "
                                          r"which no instruction wrote"):
        run(stream, dram)


def test_a_dependency_flag_toward_no_module_is_an_error():
    with pytest.raises(DeviceError, match=r"instruction 0 .*pop_prev_dep on the load module, "
                                          r"which has no previous module"):
        run([load(MemType.INP, 0, pop_prev_dep=True)], Dram(ENV))


# -- the cycle model -------------------------------------------------------------------

def test_independent_loads_overlap_and_a_gemm_waits_for_its_token():
    dram = Dram(ENV)
    uop = dram.place_uops([Uop(0, 0, 0)])
    inp = dram.place(MemType.INP, np.zeros((1, 1, 16), np.int8))
    wgt = dram.place(MemType.WGT, np.zeros((1, 16, 16), np.int8))
    stats = run([
        load(MemType.UOP, uop),                       # compute   0 .. 65  (64 + 4 B / 8)
        load(MemType.INP, inp),                       # load      0 .. 66  (64 + 16 B / 8)
        load(MemType.WGT, wgt, push_next_dep=True),   # load     66 .. 162 (64 + 256 B / 8)
        Gemm(reset=True, uop_bgn=0, uop_end=1),       # compute  65 .. 66
        Gemm(uop_bgn=0, uop_end=1, pop_prev_dep=True),  # compute 162 .. 163 (the token)
        Finish(),                                     # compute 163
    ], dram)
    assert stats.timeline == ((0, 65), (0, 66), (66, 162), (65, 66), (162, 163), (163, 163))
    assert stats.total_cycles == 163
    assert stats.busy == {"load": 66 + 96, "compute": 65 + 1 + 1, "store": 0}
    assert stats.gemm_cycles == 2 and stats.gemm_utilisation == 2 / 163
    assert (stats.dram_bytes_read, stats.dram_bytes_written) == (4 + 16 + 256, 0)
    assert stats.counts == {"LOAD": 3, "GEMM": 2, "FINISH": 1}


def test_gemm_and_alu_cost_a_cycle_per_micro_op_iteration():
    dram = Dram(ENV)
    uop = dram.place_uops([Uop(k, 0, 0) for k in range(3)])
    stats = run([load(MemType.UOP, uop, 3),
                 Gemm(reset=True, uop_bgn=0, uop_end=3, iter_out=4, iter_in=5,
                      dst_factor_out=3),
                 Alu(op=AluOp.ADD, use_imm=True, imm=1, uop_bgn=1, uop_end=3, iter_out=2)],
                dram)
    assert [e - s for s, e in stats.timeline[1:]] == [3 * 4 * 5, 2 * 2]
    assert (stats.gemm_cycles, stats.alu_cycles) == (60, 4)


def k_tiled_stream(dram, a_tiles, w_tiles, reps, double_buffer):
    """acc[0] = sum over tiles t of reps * a_t . w_t^T: per tile a load of its input and
    weight, and a GEMM; with `double_buffer` tile t uses buffer half t % 2, so loading
    tile t + 1 overlaps the GEMM of tile t."""
    halves = 2 if double_buffer else 1
    t_n = len(a_tiles)
    uop = dram.place_uops([Uop(0, h, h) for h in range(halves)])
    out = dram.alloc(MemType.OUT, 1)
    load_q, compute_q = [], [load(MemType.UOP, uop, halves),
                             Gemm(reset=True, uop_bgn=0, uop_end=1)]
    for t in range(t_n):
        h = t % halves
        inp = dram.place(MemType.INP, a_tiles[t][None])
        wgt = dram.place(MemType.WGT, w_tiles[t][None])
        # a half is free again once the GEMM that read it is done
        load_q += [load(MemType.INP, inp, sram_base=h, pop_next_dep=t >= halves),
                   load(MemType.WGT, wgt, sram_base=h, push_next_dep=True)]
        compute_q.append(Gemm(uop_bgn=h, uop_end=h + 1, iter_out=reps, pop_prev_dep=True,
                              push_prev_dep=t + halves < t_n, push_next_dep=t == t_n - 1))
    stream = load_q + compute_q + [store(out, pop_prev_dep=True), Finish()]
    return stream, out


def test_double_buffered_loads_overlap_the_gemm_and_finish_sooner():
    rng = seeded_rng()
    t_n, reps = 6, 200
    a, w = int8s(rng, (t_n, 1, 16)), int8s(rng, (t_n, 16, 16))
    results, cycles = [], []
    for double in (False, True):
        dram = Dram(ENV)
        stream, out = k_tiled_stream(dram, a, w, reps, double)
        cycles.append(run(stream, dram).total_cycles)
        results.append(dram.read(MemType.OUT, out, 1)[0])
    want = (reps * np.einsum("tbk,tok->bo", a.astype(np.int32), w.astype(np.int32)))
    for got in results:
        np.testing.assert_array_equal(got, want.astype(np.int8))
    serial, overlapped = cycles
    assert overlapped < serial - (t_n - 2) * reps  # most GEMMs hidden behind the loads


def test_a_negative_field_is_an_error_before_anything_runs():
    with pytest.raises(DeviceError, match=r"instruction 1 .*field sram_base=-1 is negative"):
        run([Finish(), load(MemType.INP, 0, sram_base=-1)], Dram(ENV))


def test_alu_immediates_on_one_element_apply_once_per_iteration():
    x = seeded_rng().integers(-100, 100, (1, 1, 16)).astype(np.int32)
    # three iterations, all on element 0 (no factors): +5 three times
    got = acc_through(Dram(ENV), x, [Alu(op=AluOp.ADD, use_imm=True, imm=5, uop_bgn=0,
                                         uop_end=1, iter_out=3)])
    np.testing.assert_array_equal(got, (x + 15).astype(np.int8))


def test_timing_alone_gives_the_runs_cycles():
    rng = seeded_rng()
    a, w = int8s(rng, (4, 1, 16)), int8s(rng, (4, 16, 16))
    dram = Dram(ENV)
    stream, _ = k_tiled_stream(dram, a, w, 3, double_buffer=True)
    assert timing(stream, ENV) == run(stream, dram).timeline
