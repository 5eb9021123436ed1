"""The arithmetic simplifier on the index expressions that split, fuse and tiling produce."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensor_expr as te
from tensor_expr import expr as E
from tensor_expr.arith import Analyzer, structural_equal
from tessel_errors import TensorExprError


def _text(e: E.PrimExpr) -> str:
    return te.expr_to_str(e)


def _eval(e: E.PrimExpr, env: dict[E.Var, int]) -> int | bool:
    """A scalar reference evaluator with Python's floor semantics."""
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.IntImm):
        return bool(e.value) if e.dtype == "bool" else e.value
    ops = {
        E.Add: lambda x, y: x + y, E.Sub: lambda x, y: x - y, E.Mul: lambda x, y: x * y,
        E.FloorDiv: lambda x, y: x // y, E.FloorMod: lambda x, y: x % y,
        E.Min: min, E.Max: max, E.LT: lambda x, y: x < y, E.LE: lambda x, y: x <= y,
        E.GT: lambda x, y: x > y, E.GE: lambda x, y: x >= y, E.EQ: lambda x, y: x == y,
        E.NE: lambda x, y: x != y, E.And: lambda x, y: x and y, E.Or: lambda x, y: x or y,
    }
    if type(e) in ops:
        return ops[type(e)](_eval(e.a, env), _eval(e.b, env))
    if isinstance(e, E.Not):
        return not _eval(e.a, env)
    if isinstance(e, E.Select):
        return _eval(e.true_value if _eval(e.condition, env) else e.false_value, env)
    raise AssertionError(f"no scalar rule for {type(e).__name__}")


I, J, IO, II, JO, JI, F, N = (te.var(n) for n in ("i", "j", "io", "ii", "jo", "ji", "f", "n"))


def test_collect_terms_cancels_multiples():
    assert _text(te.simplify((I * 4 + J) - I * 4)) == "j"


def test_collect_terms_merges_coefficients():
    assert _text(te.simplify(I * 2 + I)) == "(i * 3)"


def test_constant_folding_through_sums():
    assert _text(te.simplify((I + 3) * 2 - 6 - I)) == "i"


def test_nested_split_becomes_one_affine_form():
    ioo, ioi = te.var("ioo"), te.var("ioi")
    assert _text(te.simplify((ioo * 4 + ioi) * 8 + II)) == "(((ioo * 32) + (ioi * 8)) + ii)"


def test_split_outer_recovered_by_floordiv():
    ranges = {IO: (0, 32), II: (0, 32)}
    assert _text(te.simplify((IO * 32 + II) // 32, ranges)) == "io"


def test_split_inner_recovered_by_floormod():
    ranges = {IO: (0, 32), II: (0, 32)}
    assert _text(te.simplify((IO * 32 + II) % 32, ranges)) == "ii"


def test_floordiv_with_divisible_coefficient_and_small_rest():
    assert _text(te.simplify((I * 8 + J) // 4, {J: (0, 4)})) == "(i * 2)"


def test_floormod_keeps_small_rest():
    assert _text(te.simplify((I * 8 + J) % 4, {J: (0, 4)})) == "j"


def test_fuse_then_split_divides_through_common_factor():
    # fused f = fo*16 + fi over a row of 64: row f // 64, column f % 64
    fo, fi = te.var("fo"), te.var("fi")
    ranges = {fo: (0, 256), fi: (0, 16)}
    assert _text(te.simplify((fo * 16 + fi) // 64, ranges)) == "floordiv(fo, 4)"
    assert _text(te.simplify((fo * 16 + fi) % 64, ranges)) == "((floormod(fo, 4) * 16) + fi)"


def test_fused_index_reassembles_from_div_and_mod():
    assert _text(te.simplify((F // 32) * 32 + F % 32)) == "f"


def test_a_position_split_into_three_digits_reassembles():
    # (n, h, w) of a position over 9x9 images, put back together: n*81 + h*9 + w
    assert _text(te.simplify((F // 81) * 81 + (F // 9 % 9) * 9 + F % 9)) == "f"
    assert _text(te.simplify((F // 9 % 7) * 18 + (F % 9) * 2)) == "(floormod(f, 63) * 2)"
    # the low digit simplified first (16 == 7 mod 9) still pairs with its outer digit
    x = IO * 16 + II
    assert _text(te.simplify((x // 81) * 81 + (x // 9 % 9) * 9 + x % 9)) == "((io * 16) + ii)"
    assert _text(te.simplify((F // 9 % 9) * 9 + N % 9)) == \
        "((floormod(floordiv(f, 9), 9) * 9) + floormod(n, 9))"  # not the same number


@given(st.integers(1, 12), st.integers(1, 12), st.integers(-3, 3).filter(bool),
       st.integers(-20, 20), st.integers(-40, 40), st.integers(-500, 500))
@settings(max_examples=200, deadline=None)
def test_reassembled_digits_equal_the_original(a, b, m, c, k, f):
    x = F * c + k
    e = (x // a % b) * (a * m) + (x % a) * m
    assert _eval(te.simplify(e), {F: f}) == _eval(e, {F: f})


def test_var_minus_its_floor_multiple_is_mod():
    assert _text(te.simplify(F - (F // 8) * 8)) == "floormod(f, 8)"


def test_double_floordiv_combines():
    assert _text(te.simplify(F // 4 // 8)) == "floordiv(f, 32)"


def test_mod_of_mod_with_dividing_modulus():
    assert _text(te.simplify(F % 32 % 8)) == "floormod(f, 8)"


def test_floordiv_divides_a_form_whose_coefficients_it_divides():
    assert _text(te.simplify((I * 8 + J * 4) // 4)) == "((i * 2) + j)"


def test_floormod_without_ranges_drops_the_multiples_of_the_modulus():
    assert _text(te.simplify((I * 8 + J) % 4)) == "floormod(j, 4)"


def test_like_terms_are_merged_by_identity_not_by_name():
    # two vars that print alike (two stages' axes both named n) are different values
    m, n = te.var("n"), te.var("n")
    assert _text(te.simplify(m * m - n * n)) == "((n * n) - (n * n))"
    assert isinstance(te.simplify(m * m - m * m), E.IntImm)


def test_floordiv_without_ranges_is_kept():
    assert _text(te.simplify((I * 6 + J) // 4)) == "floordiv(((i * 6) + j), 4)"


def test_floordiv_negative_constant_part_floors():
    # (i*4 - 1) // 4 == i - 1 for every integer i (floor, not truncation)
    assert _text(te.simplify((I * 4 - 1) // 4)) == "(i - 1)"
    assert _text(te.simplify((I * 4 - 1) % 4)) == "3"


def test_always_true_guard_of_a_dividing_split_is_removed():
    ranges = {IO: (0, 32), II: (0, 32)}
    assert te.simplify(II + IO * 32 < 1024, ranges).value == 1


def test_guard_of_a_non_dividing_split_is_kept():
    ranges = {IO: (0, 32), II: (0, 32)}
    assert _text(te.simplify(IO * 32 + II < 1000, ranges)) == "(((io * 32) + ii) < 1000)"


def test_guard_against_symbolic_extent_is_proved():
    ana = Analyzer()
    ana.bind(I, (0, N))
    assert ana.can_prove(I < N)
    assert ana.can_prove(I + 1 <= N)
    assert not ana.can_prove(I + 1 < N)


def test_min_max_with_provable_order_removed():
    ranges = {II: (0, 32)}
    assert _text(te.simplify(te.min(II, 31), ranges)) == "ii"
    assert _text(te.simplify(te.max(II, 0), ranges)) == "ii"
    assert _text(te.simplify(te.min(II + 1, II))) == "ii"
    assert _text(te.simplify(te.max(II, 64), ranges)) == "64"


def test_min_max_unknown_order_kept():
    assert _text(te.simplify(te.min(I, J))) == "min(i, j)"


def test_comparison_normalised_and_divided_by_gcd():
    assert _text(te.simplify(I - 1 >= 0)) == "(i >= 1)"
    assert _text(te.simplify(I * 4 < 9)) == "(i < 3)"
    assert _text(te.simplify(5 - I < 0)) == "(i > 5)"
    assert te.simplify(I * 2 == 3).value == 0


def test_always_false_comparison():
    assert te.simplify(II >= 32, {II: (0, 32)}).value == 0


def test_select_with_constant_condition():
    e = te.select(II < 32, II * 2, II - 1)
    assert _text(te.simplify(e, {II: (0, 32)})) == "(ii * 2)"


def test_if_then_else_guard_removed_when_always_true():
    A = te.placeholder((64,), name="A")
    e = te.if_then_else(te.all(II >= 0, II < 64), A[II], 0.0)
    assert _text(te.simplify(e, {II: (0, 64)})) == "A[ii]"


def test_if_then_else_guard_kept_when_needed():
    A = te.placeholder((64,), name="A")
    e = te.if_then_else(II >= 1, A[II - 1], 0.0)
    out = te.simplify(e, {II: (0, 64)})
    assert isinstance(out, E.Call) and _text(out) == "if_then_else((ii >= 1), A[(ii - 1)], 0.0)"


def test_logic_folding():
    x = I < J
    assert _text(te.simplify(te.all(II < 32, x), {II: (0, 32)})) == "(i < j)"
    assert te.simplify(te.any(II < 32, x), {II: (0, 32)}).value == 1
    assert _text(te.simplify(~(I < J))) == "(i >= j)"


def test_cast_folding():
    assert te.simplify(te.cast(te.const(3, "int32"), "float32")).value == 3.0
    assert te.simplify(E.Cast("int32", E.FloatImm(-2.7, "float32"))).value == -2
    assert te.simplify(E.Cast("uint8", E.IntImm(300, "int32"))).value == 44
    x64 = te.cast(te.cast(I, "int64"), "int32")
    assert te.simplify(x64) is I


def test_narrowing_cast_chain_is_kept():
    e = te.cast(te.cast(I, "int8"), "int32")
    assert _text(te.simplify(e)) == "int32(int8(i))"


def test_float_constant_folding_rounds_to_dtype():
    x = te.var("x", "float32")
    assert te.simplify(te.const(0.1, "float32") + te.const(0.2, "float32")).value == float(
        np.float32(0.1) + np.float32(0.2))
    assert te.simplify(x * 1.0) is x
    assert _text(te.simplify(te.exp(te.const(0.0, "float32")) * x)) == "x"


def test_float_sums_are_not_reassociated():
    x, y = te.var("x", "float32"), te.var("y", "float32")
    assert _text(te.simplify((x + y) - y)) == "((x + y) - y)"


def test_simplify_inside_tensor_indices():
    A = te.placeholder((1024,), name="A")
    e = A[(IO * 32 + II) // 32 * 32 + (IO * 32 + II) % 32]
    assert _text(te.simplify(e, {IO: (0, 32), II: (0, 32)})) == "A[((io * 32) + ii)]"


def test_reduce_axis_ranges_are_used_inside_reductions():
    A = te.placeholder((8, 16), name="A")
    k = te.reduce_axis((0, 16), name="k")
    r = te.sum(A[I, (k * 4 + 3) // 4], axis=k)
    out = te.simplify(r)
    assert "A[i, k]" in _text(out)


def test_const_int_bound():
    ana = Analyzer()
    ana.bind(I, (0, 10))
    assert ana.const_int_bound(I * 4 - 3) == (-3, 33)
    assert ana.const_int_bound(I // 3 - 1) == (-1, 2)
    assert ana.const_int_bound(I % 4) == (0, 3)
    assert ana.const_int_bound(J) == (None, None)
    assert ana.const_int_bound(J % 8) == (0, 7)
    assert ana.const_int_bound(te.min(I, J)) == (None, 9)
    assert ana.const_int_bound(I - I) == (0, 0)


def test_const_int_bound_of_narrow_types():
    ana = Analyzer()
    u = te.var("u", "uint8")
    assert ana.const_int_bound(u) == (0, 255)
    assert ana.const_int_bound(te.cast(u, "int32") * 2) == (0, 510)


def test_const_int_bound_of_a_narrowing_cast_that_wraps_is_the_whole_type():
    # int8(i) for i in [0, 200] takes the values -128..127 (numpy: astype wraps)
    ana = Analyzer()
    ana.bind(I, (0, 201))
    wrapped = np.arange(201).astype("int8")
    assert ana.const_int_bound(te.cast(I, "int8")) == (wrapped.min(), wrapped.max())
    assert ana.const_int_bound(te.cast(I // 2, "int8")) == (0, 100)  # fits: no wrap


def test_comparison_of_a_wrapped_cast_is_not_decided_from_the_unwrapped_range():
    wide = te.cast(te.cast(I, "int8"), "int32")
    assert not isinstance(te.simplify(wide >= 0, {I: (0, 201)}), E.IntImm)


def test_modular_set():
    ana = Analyzer()
    assert ana.modular_set(I * 8 + J * 4 + 2) == (4, 2)
    assert ana.modular_set(I * 16 + 4) == (16, 4)
    assert ana.modular_set((I * 16 + 4) // 4) == (4, 1)
    assert ana.modular_set(te.const(7)) == (0, 7)
    assert ana.modular_set(I + J) == (1, 0)


def test_bind_with_range_and_expression():
    ana = Analyzer()
    ana.bind(I, te.Range(4, 8))
    assert ana.const_int_bound(I) == (4, 11)
    ana.bind(J, I * 2)
    assert _text(ana.simplify(J - I)) == "i"


def test_constraint_scope_tightens_and_restores():
    ana = Analyzer()
    with ana.constraint_scope(te.all(I >= 0, I < 4)):
        assert ana.can_prove(I // 4 == 0)
    assert not ana.can_prove(I // 4 == 0)


def test_can_prove_equal():
    ana = Analyzer()
    ana.bind(II, (0, 16))
    assert ana.can_prove_equal((IO * 16 + II) // 16, IO)
    assert not ana.can_prove_equal(IO // 2, IO)


def test_bind_rejects_bad_range():
    with pytest.raises(TensorExprError, match=r"expected a Range, a \(lo, hi\) pair"):
        Analyzer().bind(I, "0..4")


# ---- property: the simplified expression has the original's value -----------------------

_VARS = [te.var(f"v{d}") for d in range(4)]


def _leaf() -> st.SearchStrategy:
    return st.one_of(st.sampled_from(_VARS), st.integers(-9, 40).map(te.const))


def _combine(children: st.SearchStrategy) -> st.SearchStrategy:
    pos = st.sampled_from([1, 2, 3, 4, 8, 16, 32])
    return st.one_of(
        st.tuples(children, children).map(lambda t: t[0] + t[1]),
        st.tuples(children, children).map(lambda t: t[0] - t[1]),
        st.tuples(children, st.integers(-5, 33)).map(lambda t: t[0] * t[1]),
        st.tuples(children, pos).map(lambda t: t[0] // t[1]),
        st.tuples(children, pos).map(lambda t: t[0] % t[1]),
        st.tuples(children, children).map(lambda t: te.min(t[0], t[1])),
        st.tuples(children, children).map(lambda t: te.max(t[0], t[1])),
        st.tuples(children, children, children, children).map(
            lambda t: te.select(t[0] < t[1], t[2], t[3])),
    )


_EXPRS = st.recursive(_leaf(), _combine, max_leaves=10)
_RANGES = st.lists(st.tuples(st.integers(-20, 20), st.integers(1, 40)), min_size=4, max_size=4)


@settings(max_examples=150, deadline=None)
@given(_EXPRS, _RANGES, st.randoms(use_true_random=False))
def test_simplify_preserves_value_inside_ranges(expr, ranges, rnd):
    ana = Analyzer()
    for v, (lo, ext) in zip(_VARS, ranges):
        ana.bind(v, (lo, lo + ext))
    simple = ana.simplify(expr)
    for _ in range(20):
        env = {v: rnd.randrange(lo, lo + ext) for v, (lo, ext) in zip(_VARS, ranges)}
        assert _eval(simple, env) == _eval(expr, env), (str(expr), str(simple), env)


@settings(max_examples=100, deadline=None)
@given(_EXPRS, _EXPRS, _RANGES, st.randoms(use_true_random=False))
def test_simplified_comparison_preserves_truth(a, b, ranges, rnd):
    ana = Analyzer()
    for v, (lo, ext) in zip(_VARS, ranges):
        ana.bind(v, (lo, lo + ext))
    cond = a < b
    simple = ana.simplify(cond)
    proved = ana.can_prove(cond)
    for _ in range(20):
        env = {v: rnd.randrange(lo, lo + ext) for v, (lo, ext) in zip(_VARS, ranges)}
        assert bool(_eval(simple, env)) == bool(_eval(cond, env)), (str(cond), str(simple))
        if proved:
            assert _eval(cond, env)


@settings(max_examples=100, deadline=None)
@given(_EXPRS, _RANGES, st.randoms(use_true_random=False))
def test_const_int_bound_contains_every_value(expr, ranges, rnd):
    ana = Analyzer()
    for v, (lo, ext) in zip(_VARS, ranges):
        ana.bind(v, (lo, lo + ext))
    lo_b, hi_b = ana.const_int_bound(expr)
    mod = ana.modular_set(expr)
    for _ in range(20):
        env = {v: rnd.randrange(lo, lo + ext) for v, (lo, ext) in zip(_VARS, ranges)}
        val = _eval(expr, env)
        assert lo_b is None or val >= lo_b
        assert hi_b is None or val <= hi_b
        if mod.coeff == 0:
            assert val == mod.base
        else:
            assert (val - mod.base) % mod.coeff == 0


def test_structural_equal_distinguishes_vars():
    assert structural_equal(I + 1, I + 1)
    assert not structural_equal(I + 1, J + 1)


def test_shared_subexpressions_are_simplified_once():
    e = I
    for _ in range(60):  # a DAG: 2**60 paths if walked as a tree
        e = (e + e) - e
    ana = Analyzer()
    ana.bind(I, (0, 10))
    assert ana.simplify(e) is I
    assert ana.const_int_bound(e) == (0, 9)


def test_guard_of_partitioned_main_loop_is_proved():
    # the main loop of a split of n by 32 runs io over [0, n // 32): no guard needed there
    ana = Analyzer()
    ana.bind(IO, (0, N // 32))
    ana.bind(II, (0, 32))
    assert ana.can_prove(IO * 32 + II < N)
    assert not ana.can_prove(IO * 32 + II < N - 1)
    assert _text(ana.simplify(te.min(IO * 32 + II, N - 1))) == "((io * 32) + ii)"


def test_floor_multiple_bound_uses_the_remainder():
    assert Analyzer().const_int_bound(N - (N // 8) * 8) == (0, 7)


def test_branches_are_simplified_under_their_condition():
    A = te.placeholder((8,), name="A")
    e = te.if_then_else(I < 8, A[te.min(I, 7)], A[te.max(I - 8, 0)] * 2.0)
    assert _text(te.simplify(e, {I: (0, 16)})) == \
        "if_then_else((i < 8), A[i], (A[(i - 8)] * 2.0))"


def test_branch_facts_do_not_leak_into_shared_nodes():
    shared = te.min(I, 7)
    e = te.select(I < 8, shared, shared + 100)
    out = te.simplify(e, {I: (0, 16)})
    assert _text(out) == "select((i < 8), i, 107)"


def test_self_referencing_branch_fact_terminates():
    v2, v3 = te.var("v2"), te.var("v3")
    e = te.select(v3 <= (v3 - v2 - te.min(-1, v3)) % 32, v2 + 36, v2 // 4 // 16 * te.min(v3, 7))
    ana = Analyzer()
    for v in (v2, v3):
        ana.bind(v, (-5, 20))
    out = ana.simplify(e)
    for a in range(-5, 20, 3):
        for b in range(-5, 20, 2):
            assert _eval(out, {v2: a, v3: b}) == _eval(e, {v2: a, v3: b})
