"""lowering.accel.isa: the instructions' 128-bit encodings, micro-ops, the disassembler."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lowering.accel import Env
from lowering.accel.isa import (
    Alu,
    AluOp,
    Finish,
    Gemm,
    Load,
    MemType,
    Store,
    Uop,
    decode,
    decode_uop,
    disasm,
    encode,
    encode_stream,
    encode_uop,
    layout,
)
from tessel_errors import CodegenError

ENV = Env()
BITS = layout(ENV)


def field(opcode, name):
    return st.integers(0, (1 << BITS.width(opcode, name)) - 1)


DEPS = {k: st.booleans() for k in ("pop_prev_dep", "pop_next_dep", "push_prev_dep",
                                   "push_next_dep")}


def fields_of(cls, **fixed):
    names = [f.name for f in dataclasses.fields(cls) if f.name not in DEPS and f.name not in fixed]
    return st.builds(cls, **DEPS, **fixed, **{n: field(cls.opcode, n) for n in names
                                              if n not in ("reset", "use_imm")},
                     **{n: st.booleans() for n in names if n in ("reset", "use_imm")})


LOADS = fields_of(Load, mem=st.sampled_from(list(MemType)))
STORES = fields_of(Store, mem=st.sampled_from(list(MemType)))
GEMMS = fields_of(Gemm)
ALUS = fields_of(Alu, op=st.sampled_from(list(AluOp)), imm=st.integers(-(1 << 15), (1 << 15) - 1))
FINISHES = st.builds(Finish, **DEPS)


@pytest.mark.parametrize("kind", [LOADS, STORES, GEMMS, ALUS, FINISHES],
                         ids=["load", "store", "gemm", "alu", "finish"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_every_instruction_kind_round_trips(kind, data):
    insn = data.draw(kind)
    word = encode(insn, ENV)
    assert 0 <= word < 1 << 128
    assert decode(word, ENV) == insn


@settings(max_examples=150, deadline=None)
@given(st.integers(0, ENV.ACC_BUFF_DEPTH - 1), st.integers(0, ENV.INP_BUFF_DEPTH - 1),
       st.integers(0, ENV.WGT_BUFF_DEPTH - 1))
def test_micro_ops_round_trip_in_32_bits(dst, src, wgt):
    word = encode_uop(Uop(dst, src, wgt), ENV)
    assert 0 <= word < 1 << 32
    assert decode_uop(word, ENV) == Uop(dst, src, wgt)


def test_opcode_and_flags_are_the_low_seven_bits():
    word = encode(Gemm(uop_bgn=0, uop_end=1, pop_prev_dep=True, push_next_dep=True), ENV)
    assert word & 0b111 == 2  # VTA's GEMM opcode
    assert (word >> 3) & 0b1111 == 0b1001  # pop prev, pop next, push prev, push next


def test_micro_op_fields_are_dst_then_src_then_wgt():
    acc_bits = (ENV.ACC_BUFF_DEPTH - 1).bit_length()
    inp_bits = (ENV.INP_BUFF_DEPTH - 1).bit_length()
    assert encode_uop(Uop(1, 2, 3), ENV) == 1 | 2 << acc_bits | 3 << (acc_bits + inp_bits)


def test_field_widths_follow_the_buffer_depths():
    small = layout(Env("accel -acc_buf_kib=32 -uop_buf_kib=4"))
    assert small.width(Gemm.opcode, "dst_factor_out") == 9   # 512 accumulator elements
    assert small.width(Gemm.opcode, "uop_bgn") == 10         # 1024 micro-ops
    assert small.width(Gemm.opcode, "uop_end") == 11         # uop_end may equal the depth


def test_a_field_too_wide_names_the_instruction_and_field():
    bad = Gemm(uop_bgn=0, uop_end=1, iter_out=1 << 14)
    with pytest.raises(CodegenError, match=r"instruction 1 \(GEMM .*\): field iter_out=16384 "
                                           r"does not fit its 14 bits"):
        encode_stream([Finish(), bad], ENV)


def test_a_negative_field_is_an_error():
    with pytest.raises(CodegenError, match="field dram_base=-1"):
        encode(Load(mem=MemType.INP, sram_base=0, dram_base=-1, y_size=1, x_size=1,
                    x_stride=1), ENV)


def test_an_immediate_out_of_16_signed_bits_is_an_error():
    with pytest.raises(CodegenError, match=r"field imm=32768 .*range -32768\.\.32767"):
        encode(Alu(op=AluOp.ADD, use_imm=True, imm=1 << 15, uop_bgn=0, uop_end=1), ENV)


def test_a_micro_op_index_past_its_field_is_an_error():
    with pytest.raises(CodegenError, match="micro-op 7 .*field wgt=1024"):
        encode_uop(Uop(0, 0, ENV.WGT_BUFF_DEPTH), ENV, 7)


def test_an_unknown_opcode_is_an_error():
    with pytest.raises(CodegenError, match="no opcode 7"):
        decode(7, ENV)


def test_a_configuration_too_wide_for_the_halves_is_an_error():
    with pytest.raises(CodegenError, match="GEMM instruction's high half needs 72 bits"):
        layout(Env("accel -block=8"))


def test_disasm_prints_one_instruction_a_line():
    stream = [
        Load(mem=MemType.UOP, sram_base=0, dram_base=0, y_size=1, x_size=2, x_stride=2),
        Load(mem=MemType.INP, sram_base=0, dram_base=4, y_size=2, x_size=3, x_stride=5,
             x_pad_0=1, push_next_dep=True),
        Gemm(reset=True, uop_bgn=0, uop_end=2, iter_out=3, iter_in=1, dst_factor_out=2,
             src_factor_out=1, wgt_factor_in=4, pop_prev_dep=True),
        Alu(op=AluOp.MAX, use_imm=True, imm=0, uop_bgn=0, uop_end=1, push_next_dep=True),
        Store(sram_base=0, dram_base=9, y_size=1, x_size=4, x_stride=4, pop_prev_dep=True),
        Finish(),
    ]
    assert disasm(stream) == """\
   0  LOAD   UOP sram=0 dram=0 y=1 x=2 stride=2 pad=(0,0,0,0)
   1  LOAD   INP sram=0 dram=4 y=2 x=3 stride=5 pad=(0,0,1,0)  [push next]
   2  GEMM   reset uop=[0,2) iter=(3,1) dst=(2,0) src=(1,0) wgt=(0,4)  [pop prev]
   3  ALU    MAX imm=0 uop=[0,1) iter=(1,1) dst=(0,0) src=(0,0)  [push next]
   4  STORE  sram=0 dram=9 y=1 x=4 stride=4  [pop prev]
   5  FINISH"""
