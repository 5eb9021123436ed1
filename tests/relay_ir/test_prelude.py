"""The prelude: its definitions, loading, type checking, and what its functions compute."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir as r
from relay_ir.interpreter import ConstructorValue, interpret
from relay_ir.prelude import (
    PRELUDE_FUNCTIONS,
    PRELUDE_TYPES,
    load_prelude,
    prelude_module,
    prelude_text,
)
from tessel_errors import RelayError
from tests.rng import seeded_rng


def run(body: str, *args, params: str = ""):
    """Interpret `def @main(params) { body }` in a module with the prelude."""
    prelude = r.IRModule().import_prelude()
    mod = r.parse(f"def @main({params}) {{ {body} }}", init_module=prelude)
    return interpret(mod, *args)


def to_list(value) -> list:
    out = []
    while value.name == "Cons":
        out.append(value.fields[0])
        value = value.fields[1]
    assert value.name == "Nil"
    return out


def test_prelude_defines_the_issue_types_and_functions():
    mod = prelude_module()
    assert {t.name for t in mod.type_definitions} == set(PRELUDE_TYPES)
    assert {gv.name_hint for gv in mod.functions} == set(PRELUDE_FUNCTIONS)
    for name in ("id", "compose", "hd", "tl", "nth", "length", "map", "foldl", "foldr",
                 "sum", "concat", "filter", "zip", "rev"):
        assert mod.has_function(name)
    assert [c.name_hint for c in mod[mod.get_global_type_var("Tree")].constructors] == ["Rose"]
    assert [c.name_hint for c in mod[mod.get_global_type_var("Option")].constructors] == [
        "Some", "None"
    ]


def test_import_prelude_keeps_the_module_and_is_idempotent():
    x = r.var("x", shape=(2,))
    mod = r.IRModule.from_expr(r.function([x], x))
    with_prelude = mod.import_prelude()
    assert with_prelude is not mod and not mod.has_function("map")
    assert with_prelude["main"] is mod["main"]
    again = load_prelude(with_prelude)
    assert len(again.functions) == len(with_prelude.functions)
    assert again.get_constructor("Cons") is with_prelude.get_constructor("Cons")


def test_prelude_conflicting_with_user_definitions_is_an_error():
    mod = r.parse("def @map(%x) { %x }")
    with pytest.raises(RelayError, match="already defines @map"):
        mod.import_prelude()
    mod = r.parse("type List { Empty }")
    with pytest.raises(RelayError, match="already defines a type List"):
        mod.import_prelude()


def test_prelude_is_well_typed():
    from relay_ir.transform import InferType

    typed = InferType()(prelude_module())
    assert str(typed["map"].checked_type) == "fn [A, B](fn (A) -> B, List[A]) -> List[B]"


def test_prelude_text_parses_to_the_cached_module():
    assert r.structural_equal(r.parse(prelude_text()), prelude_module())


F32 = "Tensor[(2, 2), float32]"


def three_tensors():
    rng = seeded_rng()
    return [rng.standard_normal((2, 2)).astype("float32") for _ in range(3)]


def test_sum_of_a_list_of_tensors():
    a, b, c = three_tensors()
    got = run("@sum(Cons(%a, Cons(%b, Cons(%c, Nil))))", a, b, c,
              params=f"%a: {F32}, %b: {F32}, %c: {F32}")
    np.testing.assert_allclose(got, a + b + c, rtol=1e-6)


def test_map_foldl_foldr_length_nth():
    a, b, c = three_tensors()
    params = f"%a: {F32}, %b: {F32}, %c: {F32}"
    lst = "Cons(%a, Cons(%b, Cons(%c, Nil)))"
    mapped = run(f"@map(fn (%t: {F32}) {{ tanh(%t) }}, {lst})", a, b, c, params=params)
    for got, want in zip(to_list(mapped), (a, b, c)):
        np.testing.assert_allclose(got, np.tanh(want), rtol=1e-6)
    # foldl associates to the left, foldr to the right: subtraction tells them apart
    left = run(f"@foldl(fn (%x: {F32}, %y: {F32}) {{ subtract(%x, %y) }}, %a, Cons(%b, "
               "Cons(%c, Nil)))", a, b, c, params=params)
    np.testing.assert_allclose(left, (a - b) - c, rtol=1e-6)
    right = run(f"@foldr(fn (%x: {F32}, %y: {F32}) {{ subtract(%x, %y) }}, %c, Cons(%a, "
                "Cons(%b, Nil)))", a, b, c, params=params)
    np.testing.assert_allclose(right, a - (b - c), rtol=1e-6)
    assert int(run(f"@length({lst})", a, b, c, params=params)) == 3
    np.testing.assert_array_equal(run(f"@nth({lst}, 2)", a, b, c, params=params), c)


def test_hd_tl_rev_concat():
    got = run(
        "(@hd(Cons(1, Cons(2, Nil))), @tl(Cons(1, Cons(2, Nil))),"
        " @rev(Cons(1, Cons(2, Cons(3, Nil)))), @concat(Cons(1, Nil), Cons(2, Cons(3, Nil))))"
    )
    hd, tl, rev, cat = got
    assert int(hd) == 1
    assert [int(v) for v in to_list(tl)] == [2]
    assert [int(v) for v in to_list(rev)] == [3, 2, 1]
    assert [int(v) for v in to_list(cat)] == [1, 2, 3]


def test_filter_zip_id_compose():
    got = run("@filter(fn (%i: int32) { greater(%i, 1) }, Cons(1, Cons(3, Cons(0, Cons(2, Nil)))))")
    assert [int(v) for v in to_list(got)] == [3, 2]
    pairs = to_list(run("@zip(Cons(1, Cons(2, Cons(3, Nil))), Cons(True, Cons(False, Nil)))"))
    assert [(int(p[0]), bool(p[1])) for p in pairs] == [(1, True), (2, False)]
    assert int(run("@id(7)")) == 7
    composed = run(
        "@compose(fn (%i: int32) { multiply(%i, 10) }, fn (%j: int32) { add(%j, 1) })(4)"
    )
    assert int(composed) == 50


def test_hd_of_an_empty_list_fails_at_run_time():
    from tessel_errors import RelayRuntimeError

    with pytest.raises(RelayRuntimeError):
        run("@hd(Nil)")


def test_tmap_over_a_rose_tree():
    tree = run("@tmap(fn (%i: int32) { multiply(%i, 2) }, Rose(1, Cons(Rose(2, Nil), "
               "Cons(Rose(3, Cons(Rose(4, Nil), Nil)), Nil))))")

    def values(t: ConstructorValue) -> list[int]:
        out = [int(t.fields[0])]
        for child in to_list(t.fields[1]):
            out += values(child)
        return out

    assert values(tree) == [2, 4, 6, 8]
