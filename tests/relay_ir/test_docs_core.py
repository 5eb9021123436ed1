"""The examples in the docstrings of relay_ir's core and syntax modules run as shown."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "relay_ir", "relay_ir.span", "relay_ir.ty", "relay_ir.expr", "relay_ir.module",
    "relay_ir.visitor", "relay_ir.structural", "relay_ir.lexer", "relay_ir.parse_base",
    "relay_ir.parser",
    "relay_ir.printer", "relay_ir.prelude", "relay_ir.builder",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
