"""Every docstring example in the packages runs and shows what it says (examples marked
`# doctest: +SKIP` need files, models or long runs and are only read)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import numpy as np
import pytest

PACKAGES = ["tessel_errors", "tessel_target", "tensor_expr", "schedule", "lowering",
            "tuning_logs", "relay_ir", "autotune"]


def _modules() -> list[str]:
    names = []
    for pkg in PACKAGES:
        names.append(pkg)
        path = importlib.import_module(pkg).__path__
        names += [m.name for m in pkgutil.walk_packages(path, pkg + ".")]
    return sorted(names)


MODULES = _modules()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run_as_shown(name: str) -> None:
    module = importlib.import_module(name)
    with np.printoptions(legacy=False):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS |
                                 doctest.NORMALIZE_WHITESPACE, report=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed"


def test_most_modules_have_running_examples() -> None:
    finder = doctest.DocTestFinder()
    running = 0
    for name in MODULES:
        tests = finder.find(importlib.import_module(name))
        if any(ex for t in tests for ex in t.examples
               if not ex.options.get(doctest.SKIP, False)):
            running += 1
    assert running >= len(MODULES) * 2 // 3, f"only {running} of {len(MODULES)} modules"
