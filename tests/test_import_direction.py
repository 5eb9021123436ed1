"""Imports point down the pipeline and never up (DESIGN.md): walk every module with ast."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# package -> the packages of ours it may import
ALLOWED: dict[str, set[str]] = {
    "tessel_errors": set(),
    "tessel_target": {"tessel_errors"},
    "tuning_logs": {"tessel_errors"},
    "tensor_expr": {"tessel_errors"},
    "schedule": {"tensor_expr", "tessel_target", "tessel_errors"},
    "lowering": {"tensor_expr", "schedule", "tessel_target", "tessel_errors"},
    "relay_ir": {"tensor_expr", "schedule", "lowering", "tuning_logs", "tessel_target",
                 "tessel_errors"},
    "autotune": {"tensor_expr", "schedule", "lowering", "relay_ir", "tuning_logs",
                 "tessel_target", "tessel_errors"},
}
OURS = set(ALLOWED)


def _imported_packages(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((node.lineno, alias.name.split(".")[0]))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module.split(".")[0]))
    return [(line, pkg) for line, pkg in found if pkg in OURS]


def _modules() -> list[Path]:
    return sorted(p for pkg in ALLOWED for p in (ROOT / pkg).rglob("*.py"))


def upward_edges() -> list[str]:
    """Every import of a package of ours that the importing package may not use."""
    bad = []
    for path in _modules():
        pkg = path.relative_to(ROOT).parts[0]
        for line, imported in _imported_packages(path):
            if imported != pkg and imported not in ALLOWED[pkg]:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {pkg} imports {imported}")
    return bad


def test_every_package_exists() -> None:
    for pkg in ALLOWED:
        assert (ROOT / pkg / "__init__.py").is_file(), pkg


def test_no_module_imports_a_higher_layer() -> None:
    assert upward_edges() == []


def test_the_checker_catches_an_upward_edge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "tensor_expr"
    fake.mkdir()
    (fake / "__init__.py").write_text("from lowering.ir import For\n")
    for pkg in ALLOWED:
        if pkg != "tensor_expr":
            (tmp_path / pkg).mkdir()
            (tmp_path / pkg / "__init__.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert upward_edges() == ["tensor_expr/__init__.py:1: tensor_expr imports lowering"]
