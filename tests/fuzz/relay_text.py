"""Fuzz target: mutated Relay text through parse + InferType.

Seeds are valid programs (the parser fuzz's seeds and the printed test programs); each
input applies one to three mutations: a character inserted, deleted or replaced (often a
non-ASCII one: typographic quotes, a non-breaking space, NUL, a lone surrogate), bytes of
the UTF-8 text flipped, tokens spliced from another program, a number replaced by a huge or
out-of-range one, an op attribute given an odd but well-formed value, or an expression or
type nested up to 100,000 deep.

    >>> import numpy as np
    >>> description, thunk = one_input(np.random.default_rng(0))
    >>> isinstance(description, str) and callable(thunk)
    True
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

import relay_ir

NAME = "relay_text"

# Characters people paste by accident, and ones that stress the lexer's char classes.
ODD_CHARS = (
    "\u00e9", "\u201c", "\u201d", "\u2018", "\u2019", "\u00a0", "\x00", "\ud800", "\udfff",
    "\u200b", "\ufeff", "\u2028", "\u00b2", "\u0663", "\uff11", "\u00bd", "\u212a", "\u0130",
    "\U0001f600", "\u2212", "\u00d7", "\x7f", "\x1b", "\u0301", "\u03bb", "\u4e2d", "$", "`",
    "'", "~", "^", "&", "|", "+", "*", "\\", "<", ">",
)
# Numbers out of range for their type, or too long to convert, or odd but legal.
ODD_NUMBERS = (
    "9" * 5000, "9" * 5000 + "f", "9" * 5000 + "i64", "1e999f", "1e-999f", "1e999f64",
    "2147483648", "-2147483649", "2147483647", "-2147483648", "9223372036854775808i64",
    "-9223372036854775809i64", "256u8", "-1u8", "-0u8", "70000f16", "65504f16",
    "18446744073709551616u64", "4294967296u", "1e308f64", "1.8e308f64", "0" * 1000 + "1",
    "1" + "0" * 400 + ".0f", "1e" + "9" * 5000 + "f", "1." + "5" * 5000 + "f", "1e-46f",
    "3.4028236e38f", "128i8", "-129i8", "32768i16", "65536u16", "1f8", "1i128", "1e5i",
)
DEPTHS = (3, 50, 121, 1000, 10_000, 100_000)

_TOKEN_RE = re.compile(r"%?[A-Za-z0-9_.]+|@\w+|\S")
_NUMBER_RE = re.compile(r"(?<![%\w.])\d+(?:\.\d+)?(?:e-?\d+)?(?:[fiu]\d*)?")
_EXPR_RE = re.compile(r"%[A-Za-z_]\w*(?![\w:])|(?<![%\w.])\d+(?:\.\d+)?f?(?![\w.])")
_TYPE_RE = re.compile(r"Tensor\[\([^\]]*\]")


@functools.cache
def seed_programs() -> tuple[tuple[str, str], ...]:
    """(name, text) of every valid seed program."""
    from tests.relay_ir.programs import PROGRAMS
    from tests.relay_ir.test_parser_fuzz import SEED_PROGRAMS

    out = list(zip(("prelude", "conv_if", "adt_refs"), SEED_PROGRAMS, strict=True))
    # every attribute spelled out, so odd_attribute reaches each op's relation
    out.append(("all_attrs", (Path(__file__).parent / "all_attrs.rly").read_text()))
    for p in PROGRAMS:
        if not p.uses_prelude:
            out.append((p.name, relay_ir.astext(p.build())))
    return tuple(out)


def one_input(rng: np.random.Generator) -> tuple[str, Callable[[], object]]:
    """A mutated seed program and a thunk that parses it and infers its types."""
    seeds = seed_programs()
    name, text = seeds[int(rng.integers(len(seeds)))]
    steps = [name]
    for _ in range(int(rng.integers(1, 4))):
        mutate = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
        text, what = mutate(rng, text)
        steps.append(what)

    def thunk() -> object:
        mod = relay_ir.parse(text)
        return relay_ir.transform.InferType()(mod)

    return "; ".join(steps), thunk


def _pos(rng: np.random.Generator, text: str) -> int:
    return int(rng.integers(len(text) + 1))


def _char(rng: np.random.Generator) -> str:
    if rng.random() < 0.7:
        return ODD_CHARS[int(rng.integers(len(ODD_CHARS)))]
    return chr(int(rng.integers(32, 127)))


def _show(s: str) -> str:
    s = s if len(s) <= 24 else f"{s[:12]}...({len(s)} chars)"
    return ascii(s)


def insert_char(rng: np.random.Generator, text: str) -> tuple[str, str]:
    i, c = _pos(rng, text), _char(rng)
    return text[:i] + c + text[i:], f"insert {_show(c)} at {i}"


def delete_chars(rng: np.random.Generator, text: str) -> tuple[str, str]:
    i = _pos(rng, text)
    j = min(len(text), i + int(rng.integers(1, 9)))
    return text[:i] + text[j:], f"delete {i}:{j}"


def replace_char(rng: np.random.Generator, text: str) -> tuple[str, str]:
    i, c = _pos(rng, text), _char(rng)
    return text[:i] + c + text[i + 1:], f"replace {i} by {_show(c)}"


def flip_bytes(rng: np.random.Generator, text: str) -> tuple[str, str]:
    """Corrupt the UTF-8 bytes; undecodable bytes come back as lone surrogates."""
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    spots = [int(rng.integers(len(data))) for _ in range(int(rng.integers(1, 4)))]
    for k in spots:
        data[k] = int(rng.integers(256))
    return data.decode("utf-8", "surrogateescape"), f"flip bytes {spots}"


def splice_tokens(rng: np.random.Generator, text: str) -> tuple[str, str]:
    """Delete, duplicate or transplant (from another seed) a run of tokens."""
    spans = [m.span() for m in _TOKEN_RE.finditer(text)]
    if not spans:
        return text, "no tokens"
    a = int(rng.integers(len(spans)))
    b = min(len(spans) - 1, a + int(rng.integers(0, 6)))
    lo, hi = spans[a][0], spans[b][1]
    kind = ("delete", "duplicate", "transplant")[int(rng.integers(3))]
    if kind == "delete":
        return text[:lo] + text[hi:], f"delete tokens {a}..{b}"
    if kind == "duplicate":
        return text[:hi] + " " + text[lo:hi] + text[hi:], f"duplicate tokens {a}..{b}"
    seeds = seed_programs()
    donor_name, donor = seeds[int(rng.integers(len(seeds)))]
    dspans = [m.span() for m in _TOKEN_RE.finditer(donor)]
    c = int(rng.integers(len(dspans)))
    d = min(len(dspans) - 1, c + int(rng.integers(0, 6)))
    piece = donor[dspans[c][0]:dspans[d][1]]
    return text[:lo] + piece + text[lo:], f"insert {_show(piece)} from {donor_name} at {lo}"


def odd_number(rng: np.random.Generator, text: str) -> tuple[str, str]:
    """Replace a number (a literal, a dim, a tuple index) by an out-of-range one."""
    spots = [m.span() for m in _NUMBER_RE.finditer(text)]
    num = ODD_NUMBERS[int(rng.integers(len(ODD_NUMBERS)))]
    if not spots:
        return insert_char(rng, text)
    lo, hi = spots[int(rng.integers(len(spots)))]
    return text[:lo] + num + text[hi:], f"number {_show(num)} at {lo}"


# kind: (opening, closing), each repeated `depth` times around an expression or a type.
_WRAPS = {
    "parens": ("(", ")"), "tuples": ("(", ",)"), "fn": ("fn () {", "}()"),
    "blocks": ("{", "}"), "let_values": ("let %nest = ", "; %nest"), "ops": ("negative(", ")"),
    "projections": ("((", ",).0)"),
    "tuple_types": ("(", ",)"), "paren_types": ("(", ")"), "ref_types": ("Ref[", "]"),
    "fn_types": ("fn () -> ", ""),
}
EXPR_NESTS = ("parens", "tuples", "fn", "blocks", "let_values", "let_chain", "if_else", "ops",
              "projections")
TYPE_NESTS = ("tuple_types", "paren_types", "ref_types", "fn_types")


def _nest(kind: str, depth: int, x: str) -> str:
    if kind == "let_chain":
        body = "".join(f"let %c{k} = {'%c' + str(k - 1) if k else x}; " for k in range(depth))
        return "{ " + body + f"%c{depth - 1} }}"
    if kind == "if_else":
        return "if (True) { " + x + " } else " * depth + "{ " + x + " }"
    opening, closing = _WRAPS[kind]
    return opening * depth + x + closing * depth


def deep_nesting(rng: np.random.Generator, text: str) -> tuple[str, str]:
    """Nest an expression (or a type annotation) `depth` levels deep."""
    depth = DEPTHS[int(rng.integers(len(DEPTHS)))]
    types = [m.span() for m in _TYPE_RE.finditer(text)]
    if types and rng.random() < 0.3:
        kind = TYPE_NESTS[int(rng.integers(len(TYPE_NESTS)))]
        lo, hi = types[int(rng.integers(len(types)))]
        return text[:lo] + _nest(kind, depth, text[lo:hi]) + text[hi:], \
            f"{kind} {depth} deep at {lo}"
    spots = [m.span() for m in _EXPR_RE.finditer(text)]
    if not spots:
        return text, "no expression to nest"
    kind = EXPR_NESTS[int(rng.integers(len(EXPR_NESTS)))]
    if kind == "let_chain":
        depth = min(depth, 20_000)  # a long chain, not nesting: parsed and inferred for real
    lo, hi = spots[int(rng.integers(len(spots)))]
    return text[:lo] + _nest(kind, depth, text[lo:hi]) + text[hi:], \
        f"{kind} {depth} deep at {lo}"


_ATTR_RE = re.compile(r"(?<=[(,] )([a-z_]+)=(\[[^\]=]*\]|\"[^\"]*\"|[-\w.]+)")
ODD_ATTR_VALUES = (
    "0", "-1", "7", "-7", "2147483647", "-2147483648", "[]", "[0]", "[0, 0]", "[-1, -1]",
    "[7]", "[1, 2, 3, 4, 5]", "[0, 0, 0, 0]", "[-3, 3, -3, 3]", '""', '"NHWC"', '"bogus"',
    "True", "None", "0.5", "-1e30", "[[1, 2], [3]]", "[[0, 0], [0, 0], [1, 1], [9, 9]]",
    '"int8"', '"float16"',
)


def odd_attribute(rng: np.random.Generator, text: str) -> tuple[str, str]:
    """Give an op attribute (axis=, strides=, layout=, ...) an odd but well-formed value:
    the parser accepts it, and type inference has to refuse it clearly."""
    spots = list(_ATTR_RE.finditer(text))
    if not spots:
        return odd_number(rng, text)
    m = spots[int(rng.integers(len(spots)))]
    value = ODD_ATTR_VALUES[int(rng.integers(len(ODD_ATTR_VALUES)))]
    lo, hi = m.span(2)
    return text[:lo] + value + text[hi:], f"attribute {m.group(1)}={value} at {lo}"


MUTATIONS = (insert_char, insert_char, delete_chars, replace_char, replace_char, flip_bytes,
             splice_tokens, splice_tokens, odd_number, odd_number, deep_nesting,
             odd_attribute, odd_attribute, odd_attribute)
