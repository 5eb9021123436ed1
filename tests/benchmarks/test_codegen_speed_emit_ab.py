"""benchmarks.codegen_speed --emit-ab on two tiny saved IR folders: it compiles both and
reports; mismatched folders are a clear error. No timing checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.codegen_speed import _emit_ab
from lowering.ir import Buffer, BufferStore, For, ForKind, PrimFunc
from lowering.llvm.codegen import generate


def _ir() -> str:
    import tensor_expr as te

    A, B = Buffer("A", (16,), "float32"), Buffer("B", (16,), "float32")
    i = te.var("i")
    return generate(PrimFunc("f", (A, B), For(i, te.const(0), te.const(16), ForKind.SERIAL,
                                              BufferStore(B, A[i] * 2.0, (i,)))), "llvm").text


def test_emit_ab_compiles_both_folders(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "001.ll").write_text(_ir())
    _emit_ab(str(tmp_path / "a"), str(tmp_path / "b"), "llvm", rounds=1)
    out = capsys.readouterr().out
    assert "O3+object CPU ms/candidate over 1 x 1" in out and "b/a median" in out


def test_emit_ab_wants_the_same_files(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "001.ll").write_text(_ir())
    with pytest.raises(SystemExit, match="must hold the same"):
        _emit_ab(str(tmp_path / "a"), str(tmp_path / "b"), "llvm")
