"""JSON-document mutations for fuzz targets (tests/fuzz): rename, delete or retype one value
somewhere in a parsed document, or nudge a number.

    >>> import numpy as np
    >>> doc, what = mutate_json({"a": [1, 2]}, np.random.default_rng(0))
    >>> isinstance(what, str)
    True
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

# Values a field may be retyped to: wrong types, out-of-range numbers, odd strings.
ODD_VALUES: tuple[Any, ...] = (
    None, True, "", "x", "../x", "/etc/passwd", "\ud800", "a\0b", "é" * 3, -1, 0, 1, 2**31,
    2**63, -(2**63), 10**30, 1.5, -0.0, float("nan"), float("inf"), float("-inf"), [], {},
    [0], [-1], [[[]]], {"k": 1}, [None, None],
)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _show(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path) or "<root>"


def mutate_json(doc: Any, rng: np.random.Generator) -> tuple[Any, str]:
    """A mutated deep copy of `doc` and a description of the change."""
    doc = copy.deepcopy(doc)
    paths = _paths(doc)
    path = paths[int(rng.integers(len(paths)))]
    if not path:
        return ODD_VALUES[int(rng.integers(len(ODD_VALUES)))], "root replaced"
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    key, value = path[-1], parent[path[-1]]
    op = rng.choice(["rename", "delete", "retype", "nudge", "duplicate"])
    if op == "rename" and isinstance(parent, dict):
        parent[key + rng.choice(["_", "X", " "])] = parent.pop(key)
        return doc, f"{_show(path)} renamed"
    if op == "delete":
        del parent[key]
        return doc, f"{_show(path)} deleted"
    if op == "nudge" and isinstance(value, int) and not isinstance(value, bool):
        delta = int(rng.choice([-1, 1, -value - 1, 2**40, 7]))
        parent[key] = value + delta
        return doc, f"{_show(path)} {value} -> {value + delta}"
    if op == "duplicate" and isinstance(parent, list):
        parent.insert(int(key), copy.deepcopy(value))
        return doc, f"{_show(path)} duplicated"
    new = ODD_VALUES[int(rng.integers(len(ODD_VALUES)))]
    parent[key] = new
    return doc, f"{_show(path)} retyped to {new!r}"


__all__ = ["ODD_VALUES", "mutate_json"]
