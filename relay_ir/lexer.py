"""The Relay text lexer: source text to tokens with line and column, plus the metadata split.

    >>> [t.value for t in tokenize("add(%x, 1f)")][:-1]
    ['add', '(', 'x', ',', '1f', ')']
"""

from __future__ import annotations

import re
import string
import unicodedata
from dataclasses import dataclass

from relay_ir.span import render_caret
from tessel_errors import ParseError

# Token kinds.
IDENT = "identifier"
LOCAL = "local variable"  # %x
GRAPH = "graph binding"  # %0
GLOBAL = "global"  # @f
NUMBER = "number"
STRING = "string"
PUNCT = "punctuation"
EOF = "end of input"

# The grammar is ASCII (re.ASCII: \d and \s must not match Arabic digits or a
# non-breaking space); strings and comments may hold any character.
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*", re.ASCII)
_NAME_RE = re.compile(r"[A-Za-z0-9_]+", re.ASCII)
_NUMBER_RE = re.compile(r"(?:\d+\.\d*|\d+)(?:[eE][+-]?\d+)?(?:[fiu]\d*)?", re.ASCII)
_INT_RE = re.compile(r"\d+", re.ASCII)
_STRING_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_VERSION_RE = re.compile(r'#\[version\s*=\s*"[^"\n]*"\s*\]', re.ASCII)
_DIGITS = frozenset("0123456789")
_NAME_START = frozenset(string.ascii_letters + "_")
_NAME_CHARS = _NAME_START | _DIGITS
_PUNCT2 = ("=>", "->")
_PUNCT1 = "()[]{},;:=.?-!"

METADATA_HEADER = "#[metadata]"


@dataclass(frozen=True, slots=True)
class Token:
    """One token: kind, text value (without sigils), and where it starts and ends."""

    kind: str
    value: str
    line: int
    col: int
    end_col: int

    def describe(self) -> str:
        """How an error message names this token."""
        if self.kind == EOF:
            return "end of input"
        sigil = {LOCAL: "%", GRAPH: "%", GLOBAL: "@"}.get(self.kind, "")
        return f"'{sigil}{self.value}'"


def parse_error(
    message: str, source: str, line: int, col: int, width: int = 1, name: str = "<string>"
) -> ParseError:
    """A ParseError with `line`/`col` attributes and the source line with a caret."""
    caret = render_caret(source, line, col, width)
    err = ParseError(f"{name}:{line}:{col}: {message}" + (f"\n{caret}" if caret else ""))
    err.line = line  # type: ignore[attr-defined]
    err.col = col  # type: ignore[attr-defined]
    return err


def split_metadata(text: str) -> tuple[str, str, int]:
    """Split off a `#[metadata]` section: (program, metadata, line of the header)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.strip() == METADATA_HEADER:
            return "\n".join(lines[:i]), "\n".join(lines[i + 1 :]), i + 1
    return text, "", 0


def tokenize(text: str, name: str = "<string>") -> list[Token]:
    """Tokens of `text`, ending with an EOF token; raises ParseError on a bad character."""
    tokens: list[Token] = []
    i, line, line_start, n = 0, 1, 0, len(text)

    def err(msg: str, at: int, width: int = 1) -> ParseError:
        return parse_error(msg, text, line, at - line_start + 1, width, name)

    while i < n:
        ch = text[i]
        if ch == "\n":
            i += 1
            line, line_start = line + 1, i
            continue
        if ch in " \t\r\f\v":
            i += 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            # Block comments nest, so commenting out code that has comments works.
            depth, j = 1, i + 2
            start_line, start_col = line, i - line_start + 1
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    if text[j] == "\n":
                        line, line_start = line + 1, j + 1
                    j += 1
            if depth:
                raise parse_error(
                    "unterminated /* comment", text, start_line, start_col, 2, name
                )
            i = j
            continue
        col = i - line_start + 1
        if ch == "#":
            m = _VERSION_RE.match(text, i)
            if not m:
                raise err(
                    "unexpected '#': only a '#[version = \"...\"]' header or a "
                    "'#[metadata]' line may start with '#'",
                    i,
                )
            i = m.end()
            continue
        if ch in "%@":
            m = _NAME_RE.match(text, i + 1)
            if not m:
                raise err(f"expected a name after '{ch}'", i)
            value = m.group()
            if ch == "@":
                kind = GLOBAL
                if value[0].isdigit():
                    raise err("a global name must not start with a digit", i, len(value) + 1)
            else:
                kind = GRAPH if value.isdigit() else LOCAL
                if kind == LOCAL and value[0].isdigit():
                    raise err(
                        "a variable name must start with a letter or '_' (all digits is a "
                        "graph binding such as %0)",
                        i,
                        len(value) + 1,
                    )
            tokens.append(Token(kind, value, line, col, col + len(value) + 1))
            i = m.end()
            continue
        if ch in _DIGITS:
            after_dot = bool(tokens) and tokens[-1].kind == PUNCT and tokens[-1].value == "."
            # After '.', only an integer: `%t.0.1` is two projections, not a float.
            m = (_INT_RE if after_dot else _NUMBER_RE).match(text, i)
            assert m is not None
            end = m.end()
            if end < n and text[end] in _NAME_CHARS:
                tail = _NAME_RE.match(text, end)
                width = end - i + (tail.end() - end if tail else 1)
                raise err(
                    f"bad number literal {text[i:i + width]!r}: suffixes are f, f16, f32, "
                    "f64, i8, i16, i32, i64, u8, u16, u32, u64",
                    i,
                    width,
                )
            tokens.append(Token(NUMBER, m.group(), line, col, col + end - i))
            i = end
            continue
        if ch in _NAME_START:
            m = _IDENT_RE.match(text, i)
            assert m is not None
            value = m.group()
            end = m.end()
            if value == "match" and text.startswith("?", end):
                value, end = "match?", end + 1
            tokens.append(Token(IDENT, value, line, col, col + end - i))
            i = end
            continue
        if ch == '"':
            m = _STRING_RE.match(text, i)
            if not m:
                raise err("unterminated string literal", i)
            raw = m.group()
            tokens.append(Token(STRING, _unescape(raw[1:-1]), line, col, col + len(raw)))
            i = m.end()
            continue
        two = text[i : i + 2]
        if two in _PUNCT2:
            tokens.append(Token(PUNCT, two, line, col, col + 2))
            i += 2
            continue
        if ch in _PUNCT1:
            tokens.append(Token(PUNCT, ch, line, col, col + 1))
            i += 1
            continue
        raise err(describe_bad_char(ch), i)
    tokens.append(Token(EOF, "", line, i - line_start + 1, i - line_start + 2))
    return tokens


def describe_bad_char(ch: str) -> str:
    """How an error names a character outside the grammar, with a likely fix.

    >>> describe_bad_char("\u00e9").split(":")[0]
    "unexpected character U+00E9 'é' (LATIN SMALL LETTER E WITH ACUTE)"
    """
    code = ord(ch)
    label = f"U+{code:04X}"
    category = unicodedata.category(ch)
    # Spaces, controls and combining marks would be invisible or garbled between quotes.
    if ch.isprintable() and not ch.isspace() and not category.startswith("M"):
        label += f" {ch!r}"
    if 0xD800 <= code <= 0xDFFF:
        name = "a lone surrogate"
    elif category == "Cc":
        name = "a control character"
    else:
        name = unicodedata.name(ch, "")
    label += f" ({name})" if name else ""
    return f"unexpected character {label}: {_hint(ch)}"


def _hint(ch: str) -> str:
    if ch in "\u201c\u201d\u201e\u00ab\u00bb":
        return 'strings take straight double quotes ", not typographic ones'
    if ch in "\u2018\u2019\u201a'`":
        return 'strings take straight double quotes ", not single or typographic quotes'
    if ch in "\u2212\u2013\u2014":
        return "a minus sign is the ASCII '-'"
    if ch.isspace() or ch in "\u200b\ufeff":
        return ("only ASCII spaces, tabs and newlines separate tokens (a non-breaking or "
                "zero-width space pasted from a web page or a word processor?)")
    if 0xD800 <= ord(ch) <= 0xDFFF:
        return "the text held bytes that are not UTF-8; save the file as UTF-8"
    if ch.isdigit() or unicodedata.category(ch) == "Nd":
        return "numbers are written with the ASCII digits 0-9"
    if ch.isalpha() or unicodedata.category(ch).startswith("M"):
        return "names are ASCII letters, digits and '_'"
    if not ch.isprintable():
        return "only strings and comments may hold control characters"
    return "it is not part of the Relay text format (outside strings and comments)"


_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "r": "\r"}


def _unescape(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def quote(s: str) -> str:
    """A string literal for `s` that the lexer reads back exactly.

    >>> quote('a"b')
    '"a\\\\"b"'
    """
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + out.replace("\t", "\\t").replace("\r", "\\r") + '"'
