"""Readable text of loop IR, meant to be read next to the schedule that produced it.

    >>> import tensor_expr as te
    >>> from lowering.ir import Buffer, BufferStore, For, ForKind
    >>> B = Buffer("B", (te.const(4),), "float32")
    >>> i = te.var("i")
    >>> store = BufferStore(B, te.const(1.0), (i,))
    >>> print(For(i, te.const(0), te.const(4), ForKind.VECTORIZED, store))
    for (i, 0, 4) vectorized {
      B[i] = 1.0
    }
"""

from __future__ import annotations

from typing import Any

from lowering import ir
from tensor_expr.printer import expr_to_str

_INDENT = "  "


def stmt_to_str(s: ir.Stmt, depth: int = 0) -> str:
    """The text of a statement, indented by `depth` levels."""
    lines: list[str] = []
    _emit(s, depth, lines)
    return "\n".join(lines)


def func_to_str(f: ir.PrimFunc) -> str:
    """The text of a kernel: signature with buffer shapes, then the body."""
    params = ", ".join(
        f"{b.name}: {b.dtype}[{', '.join(expr_to_str(d) for d in b.shape)}]" for b in f.params
    )
    return f"func {f.name}({params}) {{\n{stmt_to_str(f.body, 1)}\n}}"


def _emit(s: Any, depth: int, out: list[str]) -> None:
    pad = _INDENT * depth
    e = expr_to_str
    if isinstance(s, ir.SeqStmt):
        for c in s.stmts:
            _emit(c, depth, out)
    elif isinstance(s, ir.For):
        kind = "" if s.kind is ir.ForKind.SERIAL else f" {s.kind.value}"
        if s.thread_tag:
            kind += f"({s.thread_tag})"
        ann = "".join(f" @{k}={v}" for k, v in s.annotations)
        out.append(f"{pad}for ({s.var.name}, {e(s.min)}, {e(s.extent)}){kind}{ann} {{")
        _emit(s.body, depth + 1, out)
        out.append(f"{pad}}}")
    elif isinstance(s, ir.BufferStore):
        idx = ", ".join(e(i) for i in s.indices)
        out.append(f"{pad}{s.buffer.name}[{idx}] = {e(s.value)}")
    elif isinstance(s, ir.Allocate):
        shape = ", ".join(e(d) for d in s.buffer.shape)
        out.append(f"{pad}allocate {s.buffer.name}[{s.buffer.dtype} * ({shape})] "
                   f"in {s.buffer.scope}")
        _emit(s.body, depth, out)
    elif isinstance(s, ir.IfThenElse):
        out.append(f"{pad}if ({e(s.condition)}) {{")
        _emit(s.then_case, depth + 1, out)
        if s.else_case is not None:
            out.append(f"{pad}}} else {{")
            _emit(s.else_case, depth + 1, out)
        out.append(f"{pad}}}")
    elif isinstance(s, ir.LetStmt):
        out.append(f"{pad}let {s.var.name} = {e(s.value)}")
        _emit(s.body, depth, out)
    elif isinstance(s, ir.Evaluate):
        out.append(f"{pad}{e(s.value)}")
    elif isinstance(s, ir.AssertStmt):
        out.append(f"{pad}assert({e(s.condition)}, {s.message!r})")
        _emit(s.body, depth, out)
    else:
        out.append(f"{pad}<{type(s).__name__}>")
