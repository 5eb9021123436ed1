"""Source spans: where in the text a node came from, kept so errors can point at it.

    >>> Span("model.rly", 3, 5, 3, 9)
    Span(file='model.rly', line=3, col=5, end_line=3, end_col=9)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Span:
    """A region of source text; lines and columns count from 1 (end_col is exclusive).

    `source` (optional, not compared) is the whole text, so errors can show the line.
    """

    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    source: str | None = field(default=None, compare=False, repr=False)

    def caret(self) -> str:
        """The span's first source line with carets under it ("" without source)."""
        if self.source is None:
            return ""
        width = self.end_col - self.col if self.end_line == self.line else 1
        return render_caret(self.source, self.line, self.col, width)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def render_caret(source: str, line: int, col: int, width: int = 1) -> str:
    """The source line `line` with a caret under column `col` (both from 1).

    >>> print(render_caret("let %x = 1;\\nfoo bar", 2, 5, 3))
        2 | foo bar
          |     ^^^
    """
    # Lines as the lexer counts them: only "\n" ends one (splitlines would also split at
    # U+2028 or a form feed, and point at the wrong line).
    lines = [ln.removesuffix("\r") for ln in source.split("\n")]
    if line < 1 or line > len(lines):
        return ""
    # Invisible or unencodable characters (NUL, a lone surrogate) show as one '?' each, so
    # the caret still lines up and the message prints on any terminal.
    text = "".join(c if c.isprintable() else "?" for c in lines[line - 1].expandtabs(1))
    # Long lines (generated code, fuzzed input) show a window around the spot.
    if len(text) > _WINDOW:
        lo = max(0, col - 1 - _WINDOW // 2)
        text = text[lo : lo + _WINDOW]
        col -= lo
    prefix = f"{line:5d} | "
    pad = " " * (len(prefix) - 2) + "| "
    width = max(1, min(width, max(1, len(text) - col + 1)))
    return f"{prefix}{text}\n{pad}{' ' * (col - 1)}{'^' * width}"


_WINDOW = 100
