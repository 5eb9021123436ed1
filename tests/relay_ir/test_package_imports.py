"""`import relay_ir` is light: the front half (parse, types, frontend) loads without the
compiler's heavy dependencies, and the compiler half appears on first use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import relay_ir

ROOT = Path(__file__).resolve().parents[2]

_PARSE_THEN_LIST_MODULES = """
import json, sys
import relay_ir
mod = relay_ir.parse('def @main(%x: Tensor[(2, 3), float32]) { add(%x, %x) }')
assert "main" in relay_ir.astext(mod)
heavy = ("llvmlite", "islpy", "sqlite_utils", "onnx", "lowering", "tuning_logs")
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & set(heavy))))
"""


def _fresh_python(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_parsing_text_loads_no_compiler_dependency():
    assert json.loads(_fresh_python(_PARSE_THEN_LIST_MODULES)) == []


def test_frontend_is_an_attribute_after_import_relay_ir():
    out = _fresh_python("import relay_ir; print(callable(relay_ir.frontend.from_onnx))")
    assert out.strip() == "True"


def test_compiler_names_resolve_on_first_use():
    from relay_ir.backend import CompiledModel, MemoryPlan, ProfileTable, build, load

    assert relay_ir.build is build
    assert relay_ir.load_compiled is load
    assert relay_ir.CompiledModel is CompiledModel
    assert relay_ir.MemoryPlan is MemoryPlan
    assert relay_ir.ProfileTable is ProfileTable
    assert relay_ir.strategy.__name__ == "relay_ir.strategy"
    assert {"build", "load_compiled", "strategy"} <= set(dir(relay_ir))


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        relay_ir.no_such_name  # noqa: B018
