"""Interval sets (Analyzer.int_set): symbolic [min, max] of index expressions while some vars
range over intervals, checked against brute-force enumeration of those vars."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tensor_expr as te
from tensor_expr import expr as E
from tensor_expr.arith import Analyzer, IntervalSet
from tessel_errors import TensorExprError

IO, II, JI, N = te.var("io"), te.var("ii"), te.var("ji"), te.var("n")


def _value(e: E.PrimExpr, env: dict[E.Var, int]) -> int:
    """Evaluate an integer expression by substituting constants and simplifying."""
    out = te.simplify(te.substitute(e, {v: te.const(x) for v, x in env.items()}))
    assert isinstance(out, E.IntImm), f"{e} did not fold under {env}"
    return out.value


def _covers(e: E.PrimExpr, dom: dict[E.Var, tuple[int, int]], fixed: dict[E.Var, int],
            tight: bool = True) -> None:
    """int_set(e, dom) holds every value of e over dom, with the fixed vars substituted;
    `tight`: its ends are values that e takes (true of monotone forms, each var once)."""
    s = Analyzer().int_set(e, dom)
    assert s is not None
    lo, hi = _value(s.min_value, fixed), _value(s.max_value, fixed)
    values = [_value(e, {**fixed, **dict(zip(dom, pt))})
              for pt in itertools.product(*(range(a, b) for a, b in dom.values()))]
    assert lo <= min(values) and max(values) <= hi
    if tight:
        assert (lo, hi) == (min(values), max(values))


@pytest.mark.parametrize("io", [0, 3, 7])
def test_split_index_over_the_inner_loop_is_an_expression_of_the_outer(io):
    s = Analyzer().int_set(IO * 4 + II, {II: (0, 4)})
    assert (te.expr_to_str(s.min_value), te.expr_to_str(s.max_value)) == \
        ("(io * 4)", "((io * 4) + 3)")
    _covers(IO * 4 + II, {II: (0, 4)}, {IO: io})


def test_negative_coefficient_swaps_the_ends():
    _covers(IO * 8 - II * 2 + 5, {II: (0, 4)}, {IO: 2})


def test_floordiv_and_min_max_are_monotone():
    _covers((IO * 4 + II) // 3, {II: (0, 4)}, {IO: 5})
    _covers(te.min(IO + II, N) + te.max(II - 2, 0), {II: (0, 6)}, {IO: 1, N: 4})


def test_product_of_two_ranging_vars_uses_the_corners():
    _covers(II * JI, {II: (-2, 3), JI: (-1, 4)}, {})
    _covers(II * JI - II, {II: (-2, 3), JI: (-1, 4)}, {}, tight=False)


def test_product_with_a_symbolic_end_is_unknown():
    assert Analyzer().int_set(IO * II, {II: (0, 4)}) is None


def test_floormod_within_one_period_is_a_shift():
    s = Analyzer().int_set((II + 8) % 8, {II: (0, 4)})
    assert (s.min_value.value, s.max_value.value) == (0, 3)
    s = Analyzer().int_set((IO * 4 + II) % 8, {II: (0, 4)})
    assert (s.min_value.value, s.max_value.value) == (0, 7)


def test_select_is_the_union_of_its_branches():
    # the condition is not used: [0, 12] holds the values 0, 3, 8, 7, 6
    _covers(te.if_then_else(II < 2, II * 3, 10 - II), {II: (0, 5)}, {}, tight=False)
    _covers(te.if_then_else(IO < 2, II * 3, 10 - II), {II: (0, 5)}, {IO: 0}, tight=False)


def test_an_expression_without_ranging_vars_is_one_point():
    A = te.placeholder((8,), "int32", name="A")
    load = A[IO]
    s = Analyzer().int_set(load + II, {II: (0, 4)})
    assert te.expr_to_str(s.max_value) == te.expr_to_str(load + 3)
    assert Analyzer().int_set(A[II], {II: (0, 4)}) is None  # a load of a ranging index


def test_symbolic_domain_ends():
    s = Analyzer().int_set(II * 2 + 1, {II: (0, N)})
    assert (te.expr_to_str(s.min_value), te.expr_to_str(s.max_value)) == \
        ("1", "((n * 2) - 1)")


def test_domains_may_be_ranges_or_interval_sets():
    a = Analyzer().int_set(II + 1, {II: te.Range(2, 3)})
    b = Analyzer().int_set(II + 1, {II: IntervalSet(te.const(2), te.const(4))})
    assert (a.min_value.value, a.max_value.value) == (b.min_value.value, b.max_value.value) \
        == (3, 5)


def test_a_bad_domain_is_a_tensor_expr_error():
    with pytest.raises(TensorExprError, match="domain of ii"):
        Analyzer().int_set(II, {II: 4})


def test_random_affine_forms_are_covered():
    rng = np.random.default_rng(7)
    for _ in range(20):
        a, b, c = (int(x) for x in rng.integers(-5, 6, 3))
        lo = int(rng.integers(-3, 3))
        _covers((IO * a + II * b + c) // 2, {II: (lo, lo + 4)}, {IO: int(rng.integers(-4, 5))})
