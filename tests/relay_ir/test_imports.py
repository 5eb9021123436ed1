"""What `import relay_ir` brings: the IR, the parser and relay_ir.frontend at once; the
backend (LLVM, islpy, the SQLite tuning database) only when something compiles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PARSE_AND_TYPE = """
import sys
import relay_ir
mod = relay_ir.parse('def @main(%x: Tensor[(2, ?), float32]) { nn.relu(add(%x, %x)) }')
relay_ir.transform.InferType()(mod)
print(sorted(m for m in ("llvmlite", "islpy", "sqlite_utils") if m in sys.modules))
"""


def _python(code: str) -> str:
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_parsing_and_typing_relay_text_loads_no_llvm_islpy_or_sqlite() -> None:
    assert _python(_PARSE_AND_TYPE) == "[]"


def test_import_relay_ir_makes_the_frontend_available() -> None:
    assert _python("import relay_ir; print(relay_ir.frontend.from_onnx.__name__)") == \
        "from_onnx"


def test_the_backend_loads_on_first_use() -> None:
    code = ("import sys, relay_ir; print('relay_ir.backend' in sys.modules); "
            "f = relay_ir.build; print('relay_ir.backend' in sys.modules, f.__module__)")
    assert _python(code).split() == ["False", "True", "relay_ir.backend.pipeline"]


def test_an_unknown_attribute_is_an_attribute_error() -> None:
    import pytest

    import relay_ir

    with pytest.raises(AttributeError, match="no attribute 'bulid'"):
        relay_ir.bulid  # noqa: B018
