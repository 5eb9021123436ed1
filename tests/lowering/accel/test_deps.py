"""lowering.accel.deps: dependency tokens from the buffers' read/write order."""

import dataclasses

import numpy as np
import pytest

from lowering.accel import Env
from lowering.accel.deps import insert_dependencies
from lowering.accel.dram import Dram
from lowering.accel.isa import Alu, AluOp, Finish, Gemm, Load, MemType, Store, Uop
from lowering.accel.simulator import run
from tessel_errors import CodegenError, DeviceError

UOPS = [Uop(0, 0, 0), Uop(1, 1, 1)]  # entry 0 works on element 0, entry 1 on element 1


def load(mem, sram_base=0):
    return Load(mem=mem, sram_base=sram_base, dram_base=0, y_size=1, x_size=1, x_stride=1)


def gemm(k, **kw):
    return Gemm(uop_bgn=k, uop_end=k + 1, **kw)


def flags(insn):
    return {f for f in ("pop_prev_dep", "pop_next_dep", "push_prev_dep", "push_next_dep")
            if getattr(insn, f)}


def flag_list(stream):
    return [flags(i) for i in insert_dependencies(stream, UOPS)]


def test_a_gemm_waits_for_the_load_of_its_operands():
    assert flag_list([load(MemType.INP), gemm(0)]) == [{"push_next_dep"}, {"pop_prev_dep"}]


def test_a_load_waits_for_the_gemm_that_read_what_it_overwrites():
    assert flag_list([gemm(0), load(MemType.WGT)]) == [{"push_prev_dep"}, {"pop_next_dep"}]


def test_a_load_into_another_element_needs_no_token():
    assert flag_list([gemm(0), load(MemType.INP, sram_base=1)]) == [set(), set()]


def test_a_store_waits_for_the_alu_and_a_reset_waits_for_the_store():
    stream = [Alu(op=AluOp.ADD, use_imm=True, imm=1, uop_bgn=0, uop_end=1),
              Store(sram_base=0, dram_base=0, y_size=1, x_size=1, x_stride=1),
              gemm(0, reset=True)]
    assert flag_list(stream) == [{"push_next_dep"}, {"pop_prev_dep", "push_prev_dep"},
                                 {"pop_next_dep"}]


def test_a_wait_an_earlier_pop_covers_is_dropped():
    # the second GEMM reads the same tile; the first one's pop already ordered it
    assert flag_list([load(MemType.INP), gemm(0), gemm(0)]) == [
        {"push_next_dep"}, {"pop_prev_dep"}, set()]


def test_only_the_latest_conflicting_instruction_is_waited_for():
    stream = [load(MemType.INP), load(MemType.INP, sram_base=1), load(MemType.WGT),
              Gemm(uop_bgn=0, uop_end=2)]
    assert flag_list(stream) == [set(), set(), {"push_next_dep"}, {"pop_prev_dep"}]


def test_finish_waits_for_the_last_store():
    stream = [gemm(0, reset=True), Store(sram_base=0, dram_base=0, y_size=1, x_size=1,
                                         x_stride=1), Finish()]
    assert flag_list(stream) == [{"push_next_dep"}, {"pop_prev_dep", "push_prev_dep"},
                                 {"pop_next_dep"}]


def test_flags_already_set_are_replaced():
    stream = [load(MemType.INP), dataclasses.replace(gemm(1), pop_next_dep=True)]
    assert flag_list(stream) == [set(), set()]


def test_loop_factors_widen_what_a_gemm_touches():
    # iteration 1 of the loop reads input element 0 + 1 * 1: the second load's
    g = Gemm(uop_bgn=0, uop_end=1, iter_out=2, src_factor_out=1, dst_factor_out=1)
    assert flag_list([load(MemType.INP, sram_base=1), g]) == [{"push_next_dep"},
                                                              {"pop_prev_dep"}]


def test_without_the_tokens_a_gemm_would_run_before_its_loads():
    env = Env()
    dram = Dram(env)
    uop = dram.place_uops(UOPS[:1])
    inp = dram.place(MemType.INP, np.ones((1, 1, 16), np.int8))
    wgt = dram.place(MemType.WGT, np.ones((1, 16, 16), np.int8))
    stream = [Load(mem=MemType.UOP, sram_base=0, dram_base=uop, y_size=1, x_size=1,
                   x_stride=1), load(MemType.INP), load(MemType.WGT), gemm(0, reset=True),
              gemm(0)]
    stream[1] = dataclasses.replace(stream[1], dram_base=inp)
    stream[2] = dataclasses.replace(stream[2], dram_base=wgt)
    run(insert_dependencies(stream, UOPS[:1]), dram, env)
    with pytest.raises(DeviceError, match="instruction 4 .*reads WGT buffer element 0, which "
                                          "no instruction wrote"):
        run(stream, dram, env)


def test_a_micro_op_range_past_the_table_is_an_error():
    with pytest.raises(CodegenError, match=r"micro-ops \[1,3\) are past the 2 of the micro-op "
                                           "table"):
        insert_dependencies([Gemm(uop_bgn=1, uop_end=3)], UOPS)
