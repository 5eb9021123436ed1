"""Parser fuzzing (hypothesis): random text and mutated programs raise nothing but
ParseError, never hang, and whatever parses prints and parses back to an equal module."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relay_ir as r
from relay_ir.prelude import prelude_text
from tessel_errors import ParseError

FUZZ = settings(
    max_examples=250,
    deadline=5000,  # a hang or a blow-up shows as a deadline failure
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=False,
)

SEED_PROGRAMS = [
    prelude_text(),
    """#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, ?), float32], %w: Tensor[(8, 3, 3, 3), float32], %n: int32) {
  let %y = nn.conv2d(%x, %w, strides=[1, 1], padding=[1, 1]);
  %0 = nn.relu(%y);
  let %t = (%0, %0, 2i64, -1.5f, True);
  if (equal(%n, 0)) { %t.0 } else { add(%t.1, 1f) }
}
def @f(%z) -> (int32, float32) { (1, 2f) }
""",
    """type Opt[A] { Yes(A), No }
def @main(%o: Opt[int32]) {
  let %r = ref(0);
  let %u = ref_write(%r, 1);
  match? (%o) { Yes(%v) => add(%v, ref_read(%r)), _ => fn [B](%b: B) -> B { %b }(0) }
}
""",
]

TOKENS = [
    "def", "@main", "@f", "fn", "let", "if", "else", "match", "match?", "type", "ref",
    "ref_read", "ref_write", "%x", "%y", "%0", "%1", "(", ")", "[", "]", "{", "}", ",", ";",
    ":", "=", "=>", "->", ".", "?", "_", "-", "1", "2.5f", "3i64", "True", "Tensor",
    "float32", "int32", "add", "nn.relu", "nn.conv2d", "strides", "List", "Cons", "Nil",
    "meta", "relay.Constant", '"s"', "/*", "*/", "//", "\n", "#[metadata]", "A", "n",
]

ALPHABET = string.ascii_letters + string.digits + "%@(){}[],;:=.?-!#\"/*_ \n\t\\'"


def check(text: str) -> None:
    """Parsing either fails with a ParseError or gives a module that round-trips."""
    for entry in (r.parse, r.parse_expr):
        try:
            out = entry(text)
        except ParseError as e:
            assert hasattr(e, "line") and hasattr(e, "col")
            continue
        printed = r.astext(out)
        again = r.parse(printed) if entry is r.parse else r.parse_expr(printed)
        assert r.structural_equal(out, again, map_free_vars=True), printed


@FUZZ
@given(st.text(alphabet=ALPHABET, max_size=200))
def test_random_text_raises_only_parse_errors(text):
    check(text)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=60))
def test_random_token_soup_raises_only_parse_errors(tokens):
    check(" ".join(tokens))


@st.composite
def mutated_program(draw):
    text = draw(st.sampled_from(SEED_PROGRAMS))
    for _ in range(draw(st.integers(1, 4))):
        n = len(text)
        i = draw(st.integers(0, n))
        j = draw(st.integers(i, min(n, i + 12)))
        kind = draw(st.sampled_from(["delete", "insert", "duplicate", "replace"]))
        if kind == "delete":
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
        elif kind == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            text = text[:i] + draw(st.text(alphabet=ALPHABET, max_size=4)) + text[j:]
    return text


@FUZZ
@given(mutated_program())
def test_mutated_programs_raise_only_parse_errors(text):
    check(text)


def test_seed_programs_parse_and_round_trip():
    for text in SEED_PROGRAMS:
        mod = r.parse(text)
        assert r.structural_equal(mod, r.parse(r.astext(mod)))
