"""TESSEL_DEBUG is read as a number: 2 and above print the generated code at build."""

from __future__ import annotations

import pytest

import lowering
import tensor_expr as te
from lowering.build_module import clear_cache, debug_level
from schedule import create_schedule


@pytest.mark.parametrize(("value", "level"), [("", 0), ("0", 0), ("1", 1), ("2", 2),
                                              (" 10 ", 10)])
def test_numbers_are_read_as_numbers(monkeypatch, value, level):
    monkeypatch.setenv("TESSEL_DEBUG", value)
    assert debug_level() == level


def test_unset_is_zero(monkeypatch):
    monkeypatch.delenv("TESSEL_DEBUG", raising=False)
    assert debug_level() == 0


def test_a_value_that_is_not_a_number_warns_and_counts_as_zero(monkeypatch):
    monkeypatch.setenv("TESSEL_DEBUG", "yes")
    with pytest.warns(UserWarning, match=r"TESSEL_DEBUG='yes' is not a number"):
        assert debug_level() == 0


def _build_add_one() -> None:
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    clear_cache()  # a cached kernel skips code generation, and so the print
    lowering.build(create_schedule(B), [A, B], target="llvm")


@pytest.mark.parametrize("value", ["2", "10"])
def test_level_two_and_above_print_the_generated_code(monkeypatch, capsys, value):
    monkeypatch.setenv("TESSEL_DEBUG", value)
    _build_add_one()
    assert "define" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "1"])
def test_levels_below_two_print_nothing(monkeypatch, capsys, value):
    monkeypatch.setenv("TESSEL_DEBUG", value)
    _build_add_one()
    assert capsys.readouterr().out == ""
