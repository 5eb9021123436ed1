"""Rendering of type errors: what went wrong, expected versus got, and where.

Every RelayTypeError of inference is built here so the messages share one shape:

    nn.dense: argument 1 (weight, %w): the reduction dim does not match: ...
      expected: Tensor[(16, 3), float32]
      got:      Tensor[(16, 4), float32]
      at main.rly:3:8
        3 |   %1 = nn.dense(%x, %w);
          |        ^^^^^^^^^^^^^^^^

Without a span (a builder-made program) the printed expression stands in for the line.

    >>> from relay_ir.expr import Var
    >>> print(describe_expr(Var("w")))
    %w
"""

from __future__ import annotations

from typing import Any

from relay_ir.expr import Call, Constant, Expr, GlobalVar, Var
from tessel_errors import RelayTypeError

_MAX_PRINT = 240


def describe_expr(e: Any) -> str:
    """A short name for an expression in a message: %x, @f, a constant, or a printed call."""
    if isinstance(e, Var):
        return f"%{e.name_hint}"
    if isinstance(e, GlobalVar):
        return f"@{e.name_hint}"
    if isinstance(e, Constant):
        return f"a constant {e.data.dtype}{list(e.data.shape)}"
    if isinstance(e, Call) and hasattr(e.op, "name") and not isinstance(e.op, Expr):
        return f"the result of {e.op.name}"
    return _printed(e, 60)


def _printed(e: Any, limit: int = _MAX_PRINT) -> str:
    try:
        text = str(e)
    except Exception:  # noqa: BLE001 - a message must never fail because printing did
        text = repr(e)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def location(e: Any) -> str:
    """Where `e` is: the source line with a caret when it has a span, else its text."""
    span = getattr(e, "span", None)
    if span is not None:
        head = f"  at {span}"
        caret = ""
        try:
            caret = span.caret() if hasattr(span, "caret") else ""
        except Exception:  # noqa: BLE001
            caret = ""
        if caret:
            head += "\n" + "\n".join("    " + line for line in caret.splitlines())
        return head
    return f"  in: {_printed(e)}"


def line_of(e: Any) -> str:
    """' at line N' when `e` has a span, else ''."""
    span = getattr(e, "span", None)
    return f" at line {span.line}" if span is not None else ""


def type_error(headline: str, node: Any, expected: Any = None, got: Any = None) -> RelayTypeError:
    """A RelayTypeError: the headline, expected/got lines when given, and the location."""
    lines = [headline]
    if expected is not None:
        lines.append(f"  expected: {expected}")
    if got is not None:
        lines.append(f"  got:      {got}")
    lines.append(location(node))
    return RelayTypeError("\n".join(lines))
