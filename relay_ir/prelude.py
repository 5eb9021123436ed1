"""The prelude: List, Option and Tree with their usual functions, written in Relay text.

The text lives in prelude.rly beside this file; it is parsed once and shared (nodes are
immutable, so every module that imports the prelude holds the same Cons, Nil, @map, ...).

    >>> from relay_ir.module import IRModule
    >>> mod = load_prelude(IRModule())
    >>> mod.get_constructor("Cons").belong_to.name
    'List'
    >>> sorted(PRELUDE_FUNCTIONS)[:3]
    ['compose', 'concat', 'filter']
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from relay_ir.module import IRModule
from tessel_errors import RelayError

PRELUDE_PATH = Path(__file__).with_name("prelude.rly")
PRELUDE_TYPES = ("List", "Option", "Tree")
PRELUDE_FUNCTIONS = (
    "id", "compose", "hd", "tl", "nth", "length", "map", "foldl", "foldr", "sum",
    "concat", "filter", "zip", "rev", "tmap",
)


def prelude_text() -> str:
    """The prelude's source text."""
    return PRELUDE_PATH.read_text()


@lru_cache(maxsize=1)
def prelude_module() -> IRModule:
    """The prelude parsed into a module of its own (cached; treat as immutable).

    >>> prelude_module()["map"].type_params[0].name
    'A'
    """
    from relay_ir.parser import parse

    return parse(prelude_text(), source_name=str(PRELUDE_PATH.name))


def load_prelude(mod: IRModule) -> IRModule:
    """A new module with the prelude's types and functions added to `mod` (idempotent).

    >>> load_prelude(load_prelude(IRModule())).has_function("foldl")
    True
    """
    prelude = prelude_module()
    new = mod.copy()
    for gtv, td in prelude.type_definitions.items():
        if gtv in new.type_definitions and new.type_definitions[gtv] is td:
            continue
        if any(t.name == gtv.name for t in new.type_definitions):
            raise RelayError(
                f"cannot import the prelude: the module already defines a type {gtv.name}"
            )
        new.type_definitions[gtv] = td
    for gv, fn in prelude.functions.items():
        if gv in new.functions:
            continue
        if new.has_function(gv.name_hint):
            raise RelayError(
                f"cannot import the prelude: the module already defines @{gv.name_hint}"
            )
        new.functions[gv] = fn
    return new


__all__ = [
    "PRELUDE_FUNCTIONS",
    "PRELUDE_PATH",
    "PRELUDE_TYPES",
    "load_prelude",
    "prelude_module",
    "prelude_text",
]
