"""The parser's groundwork: token helpers, literals, metadata and the type grammar.

relay_ir.parser's `_Parser` builds on `ParserBase`; the split keeps each file to one job
(expressions and modules there, the small sub-grammars here).

    >>> from relay_ir.parser import parse_type
    >>> parse_type("Tensor[(?, 3), float16]")
    TensorType(shape=(?, 3), dtype='float16')
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from relay_ir.expr import Constant
from relay_ir.lexer import EOF, IDENT, NUMBER, PUNCT, STRING, Token, parse_error
from relay_ir.span import Span
from relay_ir.ty import (
    ANY,
    FuncType,
    GlobalTypeVar,
    RefType,
    ShapeVar,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeVar,
)
from tessel_errors import ParseError

DTYPES = frozenset(
    "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64".split()
)
KEYWORDS = frozenset(
    "def fn let if else match match? type ref ref_read ref_write True False meta".split()
)
# Names a type, type parameter or constructor may not take: they mean something else.
RESERVED_TYPE_NAMES = KEYWORDS | DTYPES | {"Tensor", "Ref", "_", "None"}
_SUFFIX_DTYPES = {
    "f": "float32", "f16": "float16", "f32": "float32", "f64": "float64",
    "i": "int32", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u": "uint32", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
}
# Nesting deeper than this is refused with a ParseError (instead of a RecursionError):
# each level costs the recursive descent up to five Python frames, and the parser must run
# under Python's default recursion limit (1000) with the caller's frames on the stack too.
MAX_DEPTH = 120
# What a literal may hold where the grammar takes a plain integer (TVM's types for each).
DIM_MAX = 2**63 - 1  # a dimension is an int64
INDEX_MAX = 2**31 - 1  # a tuple field or metadata index is an int32
# Longer digit strings are out of range for every dtype; checked before int(), which
# refuses strings past sys.get_int_max_str_digits() (4300) with a ValueError.
_MAX_INT_DIGITS = 20



class ParserBase:
    """Token stream state plus the literal and type grammars; see relay_ir.parser."""

    text: str
    name: str
    toks: list[Token]
    pos: int
    depth: int
    type_scopes: list[dict[str, TypeVar]]
    type_names: dict[str, GlobalTypeVar]
    meta: dict[int, np.ndarray]
    meta_nodes: dict[int, Constant]

    # --- token helpers -------------------------------------------------------------------

    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.pos + k, len(self.toks) - 1)]

    def next(self) -> Token:
        tok = self.toks[self.pos]
        if tok.kind != EOF:
            self.pos += 1
        return tok

    def at(self, value: str, kind: str | None = None, k: int = 0) -> bool:
        tok = self.peek(k)
        if kind is None:
            return tok.kind in (PUNCT, IDENT) and tok.value == value
        return tok.kind == kind and tok.value == value

    def error(self, message: str, tok: Token | None = None) -> ParseError:
        tok = tok or self.peek()
        return parse_error(
            message, self.text, tok.line, tok.col, max(1, tok.end_col - tok.col), self.name
        )

    def expect(self, value: str, what: str = "") -> Token:
        if not self.at(value):
            tok = self.peek()
            ctx = f" {what}" if what else ""
            raise self.error(f"expected '{value}'{ctx}, got {tok.describe()}", tok)
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        tok = self.peek()
        if tok.kind != kind:
            raise self.error(f"expected {what}, got {tok.describe()}", tok)
        return self.next()

    def span(self, start: Token) -> Span:
        end = self.toks[self.pos - 1] if self.pos > 0 else start
        return Span(self.name, start.line, start.col, end.line, end.end_col, self.text)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(
                f"nested deeper than {MAX_DEPTH} levels (parentheses, calls, blocks, "
                "functions, ifs or types); bind inner values with let instead, as "
                "`let %a = ...; let %b = f(%a); ...` (a chain of lets has no depth limit)"
            )

    def plain_int(self, tok: Token, what: str, hi: int) -> int:
        """The value of an unsuffixed integer token in [0, hi], or a ParseError."""
        if not tok.value.isdigit():
            raise self.error(f"{what} is a plain integer, got {tok.describe()}", tok)
        digits = tok.value.lstrip("0") or "0"
        if len(digits) > _MAX_INT_DIGITS or int(digits) > hi:
            raise self.error(
                f"{what} {short_literal(tok.value)} is out of range (legal: 0..{hi})", tok
            )
        return int(digits)

    # --- type parameters ---------------------------------------------------------------

    def _parse_type_params(self) -> tuple[TypeVar, ...]:
        self.expect("[")
        out: list[TypeVar] = []
        while not self.at("]"):
            tok = self.expect_kind(IDENT, "a type parameter name")
            if tok.value in RESERVED_TYPE_NAMES or tok.value in self.type_names:
                raise self.error(
                    f"{tok.value!r} cannot be a type parameter name (reserved or a type)", tok
                )
            out.append(TypeVar(tok.value))
            if not self.at("]"):
                self.expect(",", "between type parameters")
        self.next()
        return tuple(out)


    # --- literals ------------------------------------------------------------------------

    def parse_number_const(self) -> Constant:
        start = self.peek()
        value, dtype = self.parse_number()
        return Constant(np.array(value, dtype=dtype), span=self.span(start))

    def parse_number(self, int_dtype: str = "int32") -> tuple[Any, str]:
        """A number literal and its dtype: a suffix's, else float32 or `int_dtype`."""
        neg = False
        start = self.peek()
        if self.at("-"):
            self.next()
            neg = True
        tok = self.expect_kind(NUMBER, "a number after '-'" if neg else "a number")
        text = tok.value
        suffix = ""
        for i, ch in enumerate(text):
            if ch in "fiu":
                text, suffix = text[:i], text[i:]
                break
        is_float = "." in text or "e" in text or "E" in text
        if suffix:
            if suffix not in _SUFFIX_DTYPES:
                raise self.error(f"unknown number suffix {suffix!r}", tok)
            dtype = _SUFFIX_DTYPES[suffix]
        else:
            dtype = "float32" if is_float else int_dtype
        sign = "-" if neg else ""
        if dtype.startswith(("int", "uint")):
            if is_float:
                raise self.error(
                    f"an integer suffix on the float literal {short_literal(tok.value)}", tok
                )
            info = np.iinfo(dtype)
            digits = text.lstrip("0") or "0"
            value: Any = None
            if len(digits) <= _MAX_INT_DIGITS:
                value = -int(digits) if neg else int(digits)
            if value is None or not info.min <= value <= info.max:
                wider = "; the suffix i64 gives an int64" if dtype == "int32" else ""
                raise self.error(
                    f"{sign}{short_literal(tok.value)} is out of range for {dtype} "
                    f"(legal: {info.min}..{info.max}){wider}",
                    start,
                )
            return value, dtype
        fvalue = -float(text) if neg else float(text)
        cast = _cast_float(fvalue, dtype)
        if not np.isfinite(fvalue) or not np.isfinite(cast):
            raise self.error(
                f"{sign}{short_literal(tok.value)} is out of range for {dtype} "
                f"(largest finite: {np.finfo(dtype).max!s})",
                start,
            )
        mantissa = text.replace("E", "e").split("e")[0]
        if cast == 0 and any(c in "123456789" for c in mantissa):
            raise self.error(
                f"{sign}{short_literal(tok.value)} is too small for {dtype}: it would "
                f"round to 0 (smallest positive: {np.finfo(dtype).smallest_subnormal!s}); "
                "write 0 for zero",
                start,
            )
        return fvalue, dtype

    def parse_attr_value(self) -> Any:
        self.enter()
        tok = self.peek()
        if tok.kind == STRING:
            self.next()
            value: Any = tok.value
        elif tok.kind == NUMBER or self.at("-"):
            # an attribute is a Python int: int64's range (a slice bound of 2**62 prints so)
            num, dtype = self.parse_number("int64")
            value = float(num) if dtype.startswith("float") else int(num)
        elif tok.kind == IDENT and tok.value in ("True", "False", "None"):
            self.next()
            value = {"True": True, "False": False, "None": None}[tok.value]
        elif self.at("[") or self.at("("):
            close = "]" if self.next().value == "[" else ")"
            items = []
            while not self.at(close):
                items.append(self.parse_attr_value())
                if not self.at(close):
                    self.expect(",", "between list items")
            self.next()
            value = tuple(items)
        else:
            raise self.error(
                f"expected an attribute value (number, string, True/False/None or a list), "
                f"got {tok.describe()}"
            )
        self.depth -= 1
        return value

    def parse_meta_ref(self) -> Constant:
        start = self.next()
        self.expect("[", "after 'meta'")
        kind = self.expect_kind(IDENT, "relay.Constant")
        if kind.value != "relay.Constant":
            raise self.error("only meta[relay.Constant][i] references exist", kind)
        self.expect("]")
        self.expect("[")
        itok = self.expect_kind(NUMBER, "a metadata index")
        index = self.plain_int(itok, "a metadata index", INDEX_MAX)
        self.expect("]")
        if index not in self.meta:
            raise self.error(
                f"meta[relay.Constant][{index}] is not in the #[metadata] section "
                f"({len(self.meta)} constant(s) there)",
                start,
            )
        if index not in self.meta_nodes:  # the same index is the same (shared) node
            self.meta_nodes[index] = Constant(self.meta[index], span=self.span(start))
        return self.meta_nodes[index]

    def _parse_metadata(self, text: str, first_line: int) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        for offset, line in enumerate(text.split("\n")):
            lineno = first_line + 1 + offset
            if not line.strip() or line.strip().startswith("//"):
                continue
            parts = line.split()
            try:
                if len(parts) != 5 or parts[0] != "relay.Constant":
                    raise ValueError("expected 'relay.Constant <index> <dtype> (<shape>) <base64>'")
                index = _meta_int(parts[1], "the index", INDEX_MAX)
                dtype = np.dtype(parts[2])
                if dtype.kind not in "biufc":
                    raise ValueError(f"dtype {parts[2]} is not numeric")
                body = parts[3].strip("()")
                dims = body.split(",") if body else []
                shape = tuple(_meta_int(d, "a dimension", DIM_MAX) for d in dims if d)
                # "-" stands for the empty payload of an array with no elements
                raw = b"" if parts[4] == "-" else base64.b64decode(parts[4], validate=True)
                arr = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
            except (ValueError, TypeError) as e:
                raise parse_error(
                    f"bad metadata line: {e}", self.text, lineno, 1, len(line), self.name
                ) from None
            if index in out:
                raise parse_error(
                    f"metadata constant {index} given twice", self.text, lineno, 1, 1, self.name
                )
            out[index] = arr
        return out

    # --- types ---------------------------------------------------------------------------

    def parse_type_list(self, open_: str, close: str) -> tuple[Type, ...]:
        self.expect(open_)
        out: list[Type] = []
        while not self.at(close):
            out.append(self.parse_type())
            if not self.at(close):
                self.expect(",", "between types")
        self.next()
        return tuple(out)

    def parse_type(self) -> Type:
        self.enter()
        t = self._parse_type()
        self.depth -= 1
        return t

    def _parse_type(self) -> Type:
        tok = self.peek()
        if self.at("("):
            self.next()
            fields: list[Type] = []
            trailing = False
            while not self.at(")"):
                fields.append(self.parse_type())
                trailing = False
                if not self.at(")"):
                    self.expect(",", "between tuple field types")
                    trailing = True
            self.next()
            if len(fields) == 1 and not trailing:
                return fields[0]
            return TupleType(tuple(fields))
        if tok.kind != IDENT:
            raise self.error(f"expected a type, got {tok.describe()}")
        v = tok.value
        self.next()
        if v == "fn":
            tparams = self._parse_type_params() if self.at("[") else ()
            self.type_scopes.append({tv.name: tv for tv in tparams})
            args = self.parse_type_list("(", ")")
            self.expect("->", "after the argument types of a function type")
            ret = self.parse_type()
            self.type_scopes.pop()
            return FuncType(args, ret, tparams)
        if v == "Tensor":
            self.expect("[", "after Tensor")
            self.expect("(", "to start the shape, as in Tensor[(1, 3), float32]")
            dims: list[Any] = []
            while not self.at(")"):
                dims.append(self.parse_dim())
                if not self.at(")"):
                    self.expect(",", "between dimensions")
            self.next()
            self.expect(",", "between the shape and the dtype")
            dtok = self.expect_kind(IDENT, "a dtype such as float32")
            if dtok.value not in DTYPES:
                raise self.error(f"unknown dtype {dtok.value!r}; known: {sorted(DTYPES)}", dtok)
            self.expect("]", "to close Tensor[...]")
            return TensorType(tuple(dims), dtok.value)
        if v == "Ref":
            self.expect("[", "after Ref")
            inner = self.parse_type()
            self.expect("]", "to close Ref[...]")
            return RefType(inner)
        if v in DTYPES:
            return TensorType((), v)
        for scope in reversed(self.type_scopes):
            if v in scope:
                return scope[v]
        if v in self.type_names:
            gtv = self.type_names[v]
            if self.at("["):
                return TypeCall(gtv, self.parse_type_list("[", "]"))
            return gtv
        raise self.error(
            f"unknown type {v!r}: not a dtype, a type parameter in scope, or a defined type", tok
        )

    def parse_dim(self) -> Any:
        tok = self.peek()
        if self.at("?"):
            self.next()
            return ANY
        if tok.kind == NUMBER and tok.value.isdigit():
            self.next()
            return self.plain_int(tok, "a dimension", DIM_MAX)
        if tok.kind == IDENT and tok.value.isidentifier() and "." not in tok.value:
            self.next()
            return ShapeVar(tok.value)
        raise self.error(
            f"expected a dimension (an integer, '?' or a name), got {tok.describe()}"
        )


def _meta_int(text: str, what: str, hi: int) -> int:
    """A metadata line's index or dim: a plain integer in [0, hi], else a ValueError."""
    digits = text.lstrip("0") or "0"
    if not text.isdigit() or not text.isascii():
        raise ValueError(f"{what} {short_literal(text)!r} is not a plain integer")
    if len(digits) > _MAX_INT_DIGITS or int(digits) > hi:
        raise ValueError(f"{what} {short_literal(text)} is out of range (legal: 0..{hi})")
    return int(digits)


def short_literal(text: str) -> str:
    """A literal as an error shows it: long ones (fuzzed, pasted) cut to their ends.

    >>> short_literal("9" * 5000)
    '999999...999999 (5000 characters)'
    """
    if len(text) <= 40:
        return text
    return f"{text[:6]}...{text[-6:]} ({len(text)} characters)"


def _cast_float(value: float, dtype: str) -> float:
    with np.errstate(over="ignore"):
        return float(np.array(value, dtype=dtype))

