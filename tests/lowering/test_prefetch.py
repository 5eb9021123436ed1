"""Software prefetch (Stage.prefetch -> lowering.prefetch -> llvm.prefetch): the statements
it lowers to, that it changes no value (interpreter and LLVM against numpy on fresh random
inputs), that every prefetched address lies in its buffer, and its errors."""

from __future__ import annotations

import re

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering import interpreter
from lowering import ir as lir
from lowering.prefetch import PREFETCH
from schedule import apply_json, create_schedule
from tensor_expr import expr as E
from tessel_errors import LoweringError, ScheduleError
from tests.rng import seeded_rng
from tests.unwritten import unwritten


def _row_sums(rows: int = 6, cols: int = 64) -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """C[o] = sum_k W[o, k]: each row o reads one row of W."""
    W = te.placeholder((rows, cols), name="W")
    k = te.reduce_axis((0, cols), name="k")
    C = te.compute((rows,), lambda o: te.sum(W[o, k], axis=k), name="C")
    return W, C, k


def _run_both(s: object, args: list, inputs: list[np.ndarray], out_shape: tuple) -> list:
    """The outputs of the interpreter and of the LLVM kernel on `inputs`."""
    f = lowering.lower(s, args)
    got_i = unwritten(out_shape, "float32")
    interpreter.run(f, *inputs, got_i)
    got_l = unwritten(out_shape, "float32")
    lowering.build(s, args, target="llvm")(*inputs, got_l)
    return [got_i, got_l]


def test_prefetch_lowers_to_the_next_rows_lines_clamped_into_the_buffer() -> None:
    W, C, k = _row_sums()
    s = create_schedule(C)
    ko, _ = s[C].split(k, factor=32)
    s[C].prefetch(W, ko, dim=0, shift=1)
    text = str(lowering.lower(s, [W, C]))
    # 32 floats are two 64-byte lines; the last element too, as the span may straddle
    assert "prefetch(W[min((o + 1), 5), (k.outer * 32)], 2)" in text
    assert "prefetch(W[min((o + 1), 5), ((k.outer * 32) + 16)], 2)" in text
    assert "prefetch(W[min((o + 1), 5), ((k.outer * 32) + 31)], 2)" in text
    assert text.count("prefetch(") == 3


def test_an_aligned_tensor_gets_exactly_its_lines() -> None:
    # W starts on a line and each 32-float span starts 32 * k.outer floats in: 2 lines
    W, C, k = _row_sums()
    s = create_schedule(C)
    ko, _ = s[C].split(k, factor=32)
    s[C].prefetch(W, ko, dim=0, shift=1, aligned=True)
    text = str(lowering.lower(s, [W, C]))
    assert "prefetch(W[min((o + 1), 5), (k.outer * 32)], 2)" in text
    assert "prefetch(W[min((o + 1), 5), ((k.outer * 32) + 16)], 2)" in text
    assert text.count("prefetch(") == 2
    w = seeded_rng().standard_normal((6, 64)).astype("float32")
    for got in _run_both(s, [W, C], [w], (6,)):
        np.testing.assert_allclose(got, w.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_an_aligned_tensor_still_gets_the_last_element_of_a_span_off_the_lines() -> None:
    # 24-float spans start 24 * k.outer floats in: every other one in mid-line
    W, C, k = _row_sums(cols=48)
    s = create_schedule(C)
    ko, _ = s[C].split(k, factor=24)
    s[C].prefetch(W, ko, dim=0, shift=1, aligned=True)
    text = str(lowering.lower(s, [W, C]))
    assert "prefetch(W[min((o + 1), 5), ((k.outer * 24) + 23)], 2)" in text
    assert text.count("prefetch(") == 3


def test_an_aligned_row_of_an_odd_width_is_counted_with_its_straddle() -> None:
    # rows of 40 floats: the next row's start is 40 floats in, not on a line
    W, C, k = _row_sums(cols=40)
    s = create_schedule(C)
    s[C].prefetch(W, s[C].op.axis[0], dim=0, shift=1, aligned=True)
    text = str(lowering.lower(s, [W, C]))
    assert "prefetch(W[min((o + 1), 5), 39], 2)" in text
    assert text.count("prefetch(") == 4  # 0, 16, 32 and 39


def test_an_aligned_32_by_32_weight_block_is_64_lines_not_65() -> None:
    # a packed 1x1 conv's weights: each (oc chunk, ic block) step reads a 32 x 32 block
    W = te.placeholder((3, 2, 32, 32), name="W")
    i = te.reduce_axis((0, 32), name="i")
    C = te.compute((3, 2, 32), lambda o, b, c: te.sum(W[o, b, i, c], axis=i), name="C")
    s = create_schedule(C)
    o, b, c = s[C].op.axis
    with pytest.raises(LoweringError, match="65 cache lines"):
        s[C].prefetch(W, b, dim=0, shift=1)
        lowering.lower(s, [W, C])
    s = create_schedule(C)
    o, b, c = s[C].op.axis
    s[C].prefetch(W, b, dim=0, shift=1, aligned=True)
    text = str(lowering.lower(s, [W, C]))
    assert text.count("prefetch(") == 64, text
    w = seeded_rng().standard_normal((3, 2, 32, 32)).astype("float32")
    for got in _run_both(s, [W, C], [w], (3, 2, 32)):
        np.testing.assert_allclose(got, w.sum(axis=2), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shift", [1, 2, -1])
@pytest.mark.parametrize("level", [1, 2, 3])
def test_a_prefetch_changes_no_value(shift: int, level: int) -> None:
    W, C, k = _row_sums()
    s = create_schedule(C)
    ko, _ = s[C].split(k, factor=16)
    s[C].prefetch(W, ko, dim=0, shift=shift, level=level)
    w = seeded_rng().standard_normal((6, 64)).astype("float32")
    for got in _run_both(s, [W, C], [w], (6,)):
        np.testing.assert_allclose(got, w.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_a_region_over_several_dimensions_is_prefetched_whole_and_correct() -> None:
    # each (o, i) iteration reads W[o, i, 0:4, 0:16]: a contiguous 64-float tail, 16 lines
    W = te.placeholder((3, 5, 4, 16), name="W")
    a = te.reduce_axis((0, 4), name="a")
    b = te.reduce_axis((0, 16), name="b")
    C = te.compute((3, 5), lambda o, i: te.sum(W[o, i, a, b] * 2.0, axis=[a, b]), name="C")
    s = create_schedule(C)
    o, i = s[C].op.axis
    s[C].prefetch(W, i, dim=0, shift=1)
    text = str(lowering.lower(s, [W, C]))
    assert text.count("prefetch(") == 5  # lines at 0, 16, 32, 48 floats and the last one
    assert "prefetch(W[min((o + 1), 2), i, 3, 15], 2)" in text
    w = seeded_rng().standard_normal((3, 5, 4, 16)).astype("float32")
    for got in _run_both(s, [W, C], [w], (3, 5)):
        np.testing.assert_allclose(got, 2 * w.sum(axis=(2, 3)), rtol=1e-5, atol=1e-4)


def test_spread_gives_each_iteration_of_the_outer_loop_its_share() -> None:
    # every o reads all of W; with spread (o, 4), o prefetches the k-blocks kb with
    # kb % 4 == o % 4, so the 4 iterations of o share the 8 blocks
    W = te.placeholder((2, 8, 16), name="W")
    kb = te.reduce_axis((0, 8), name="kb")
    ki = te.reduce_axis((0, 16), name="ki")
    C = te.compute((4,), lambda o: te.sum(W[0, kb, ki] * (o + 1).astype("float32"),
                                          axis=[kb, ki]), name="C")
    s = create_schedule(C)
    o = s[C].op.axis[0]
    s[C].prefetch(W, kb, dim=0, shift=1, spread=(o, 4))
    text = str(lowering.lower(s, [W, C]))
    assert "if ((floormod(kb, 4) == o))" in text, text  # o % 4 is o: o < 4
    w = seeded_rng().standard_normal((2, 8, 16)).astype("float32")
    want = w[0].sum() * np.arange(1, 5, dtype="float32")
    for got in _run_both(s, [W, C], [w], (4,)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_the_interpreter_rejects_a_prefetch_outside_its_buffer() -> None:
    # what the clamp prevents: an address one row past the end
    W = lir.Buffer("W", (te.const(2), te.const(16)), "float32")
    C = lir.Buffer("C", (te.const(1),), "float32")
    call = E.Call("int32", PREFETCH, (lir.BufferLoad(W, (te.const(2), te.const(0))),
                                      te.const(2, "int32")))
    body = lir.seq(lir.Evaluate(call), lir.BufferStore(C, te.const(1.0), (te.const(0),)))
    f = lir.PrimFunc("f", (W, C), body)
    with pytest.raises(LoweringError, match="W"):
        interpreter.run(f, np.zeros((2, 16), "float32"), np.zeros(1, "float32"))


@pytest.mark.parametrize("level, instr", [(1, "prefetcht0"), (2, "prefetcht1"),
                                          (3, "prefetcht2")])
def test_llvm_emits_the_prefetch_instruction_of_the_level(level: int, instr: str) -> None:
    W, C, k = _row_sums()
    s = create_schedule(C)
    ko, _ = s[C].split(k, factor=32)
    s[C].prefetch(W, ko, dim=0, shift=1, level=level)
    asm = lowering.build(s, [W, C], target="llvm").source("asm")
    assert re.search(rf"\b{instr}\b", asm), asm


def test_a_prefetch_replays_from_json() -> None:
    W, C, k = _row_sums()
    s = create_schedule(C)
    ko, _ = s[C].split(k, factor=32)
    s[C].prefetch(W, ko, dim=0, shift=1, level=3, spread=(s[C].op.axis[0], 2), aligned=True)
    s2 = create_schedule(C)
    apply_json(s2, s.to_json())
    assert str(lowering.lower(s2, [W, C])) == str(lowering.lower(s, [W, C]))


@pytest.mark.parametrize("kwargs, match", [
    ({"dim": 2}, r"dim must be an integer in \[0, 2\)"),
    ({"shift": 1.5}, "shift must be an integer"),
    ({"level": 0}, "level must be 1, 2 or 3"),
    ({"spread": ("o", 2)}, r"spread must be \(axis, period\)"),
    ({"aligned": 1}, "aligned must be True or False"),
])
def test_bad_prefetch_arguments_name_the_stage_and_the_fix(kwargs: dict, match: str) -> None:
    W, C, k = _row_sums()
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match=match) as e:
        s[C].prefetch(W, k, **kwargs)
    assert "stage 'C'" in str(e.value)


def test_prefetch_of_something_not_a_tensor_is_refused() -> None:
    W, C, k = _row_sums()
    s = create_schedule(C)
    with pytest.raises(ScheduleError, match="needs a tensor"):
        s[C].prefetch("W", k)


def test_a_region_too_big_for_one_iteration_says_where_to_prefetch_instead() -> None:
    W, C, k = _row_sums(cols=4096)
    s = create_schedule(C)
    with pytest.raises(LoweringError, match="more than 64; prefetch at a loop further in"):
        s[C].prefetch(W, s[C].op.axis[0], dim=0, shift=1)
        lowering.lower(s, [W, C])


def test_a_prefetch_of_a_tensor_the_loop_does_not_read_is_an_error() -> None:
    W, C, k = _row_sums()
    V = te.placeholder((6, 64), name="V")
    D = te.compute((6,), lambda o: C[o] + V[o, 0], name="D")
    s = create_schedule(D)
    s[C].prefetch(V, k, dim=0, shift=1)  # C reads W, not V
    with pytest.raises(LoweringError, match="reads no element of 'V'"):
        lowering.lower(s, [W, V, D])


def test_a_prefetch_in_a_vector_loop_is_an_error() -> None:
    W, C, k = _row_sums()
    s = create_schedule(C)
    ko, ki = s[C].split(k, factor=16)
    o = s[C].op.axis[0]
    s[C].reorder(ko, o)
    s[C].vectorize(o)
    s[C].prefetch(W, o, dim=1, shift=16)
    with pytest.raises(LoweringError, match="vectorized loop"):
        lowering.lower(s, [W, C])


def test_a_spread_axis_that_does_not_enclose_the_prefetch_is_an_error() -> None:
    W, C, k = _row_sums()
    s = create_schedule(C)
    ko, ki = s[C].split(k, factor=16)
    s[C].prefetch(W, ko, dim=0, shift=1, spread=(ki, 2))
    with pytest.raises(LoweringError, match="spread axis 'k.inner' is not a loop around it"):
        lowering.lower(s, [W, C])
