"""A small declarative checker for JSON documents (`jsonschema` is not a dependency): a
schema is a value built from the classes below, and `check` walks a parsed document
against it, raising RelayError with the path of the first value that does not fit.

    >>> from relay_ir.backend.json_check import Int, ListOf, Obj, Str, check
    >>> schema = Obj({"name": Str(), "shape": ListOf(Int())})
    >>> check(schema, {"name": "x", "shape": [2, 3]}, "m.json")
    >>> check(schema, {"name": "x", "shape": [2, -3]}, "m.json")
    Traceback (most recent call last):
    ...
    tessel_errors.RelayError: m.json: shape[1]: expected an int >= 0, got -3
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tessel_errors import RelayError


class _Misfit(Exception):
    """Raised inside a walk; `check` turns it into a RelayError naming the document."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path, self.message = path, message


def _key(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


class Schema:
    """Base of the schema classes: `describe()` names what fits, `walk` checks a value."""

    def describe(self) -> str:
        raise NotImplementedError

    def fits(self, value: Any) -> bool:
        """True when `value` itself (not its contents) has the right type and range."""
        raise NotImplementedError

    def walk(self, value: Any, path: str) -> None:
        if not self.fits(value):
            raise _Misfit(path, f"expected {self.describe()}, got {_show(value)}")


@dataclass(frozen=True)
class Int(Schema):
    """A JSON integer (not a bool) in [lo, hi]."""

    lo: int = 0
    hi: int | None = None

    def describe(self) -> str:
        return f"an int >= {self.lo}" + (f" and <= {self.hi}" if self.hi is not None else "")

    def fits(self, value: Any) -> bool:
        return (isinstance(value, int) and not isinstance(value, bool) and value >= self.lo
                and (self.hi is None or value <= self.hi))


@dataclass(frozen=True)
class Str(Schema):
    """A JSON string, optionally one of `choices` or matching regular expression `pattern`."""

    choices: tuple[str, ...] = ()
    pattern: str = ""
    max_len: int = 4096

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        what = f"a string of at most {self.max_len} characters"
        return what + (f" matching {self.pattern}" if self.pattern else "")

    def fits(self, value: Any) -> bool:
        if not isinstance(value, str) or len(value) > self.max_len:
            return False
        if self.choices:
            return value in self.choices
        return not self.pattern or re.fullmatch(self.pattern, value) is not None


@dataclass(frozen=True)
class ListOf(Schema):
    """A JSON list of items of one schema."""

    item: Schema
    max_len: int = 1 << 20

    def describe(self) -> str:
        return f"a list (of at most {self.max_len} items) of {self.item.describe()}"

    def fits(self, value: Any) -> bool:
        return isinstance(value, list) and len(value) <= self.max_len

    def walk(self, value: Any, path: str) -> None:
        super().walk(value, path)
        for i, v in enumerate(value):
            self.item.walk(v, f"{path}[{i}]")


@dataclass(frozen=True)
class Tuple(Schema):
    """A JSON list of fixed length, one schema per position."""

    items: tuple[Schema, ...]

    def describe(self) -> str:
        return f"a list of {len(self.items)}: [" + ", ".join(
            s.describe() for s in self.items) + "]"

    def fits(self, value: Any) -> bool:
        return isinstance(value, list) and len(value) == len(self.items)

    def walk(self, value: Any, path: str) -> None:
        super().walk(value, path)
        for i, (s, v) in enumerate(zip(self.items, value)):
            s.walk(v, f"{path}[{i}]")


@dataclass(frozen=True)
class Obj(Schema):
    """A JSON object with `required` keys, `optional` ones, and no others."""

    required: dict[str, Schema]
    optional: dict[str, Schema] = field(default_factory=dict)

    def describe(self) -> str:
        return "an object with keys " + ", ".join(self.required)

    def fits(self, value: Any) -> bool:
        return isinstance(value, dict)

    def walk(self, value: Any, path: str) -> None:
        super().walk(value, path)
        missing = [k for k in self.required if k not in value]
        if missing:
            raise _Misfit(path, f"missing key(s) {', '.join(map(repr, missing))}")
        unknown = [k for k in value if k not in self.required and k not in self.optional]
        if unknown:
            known = ", ".join(map(repr, [*self.required, *self.optional]))
            raise _Misfit(path, f"unknown key(s) {', '.join(_show(k) for k in unknown)}; "
                                f"expected {known}")
        for k, v in value.items():
            (self.required.get(k) or self.optional[k]).walk(v, _key(path, k))


@dataclass(frozen=True)
class MapOf(Schema):
    """A JSON object whose keys fit `key` and whose values fit `value`."""

    key: Str
    value: Schema

    def describe(self) -> str:
        return f"an object of {self.key.describe()} to {self.value.describe()}"

    def fits(self, value: Any) -> bool:
        return isinstance(value, dict)

    def walk(self, value: Any, path: str) -> None:
        super().walk(value, path)
        for k, v in value.items():
            self.key.walk(k, _key(path, "<key>"))
            self.value.walk(v, _key(path, k))


@dataclass(frozen=True)
class Nested(Schema):
    """A leaf of schema `leaf`, or a list of Nested, at most `depth` lists deep."""

    leaf: Schema
    depth: int = 32

    def describe(self) -> str:
        return f"{self.leaf.describe()} or a list of such (nested at most {self.depth} deep)"

    def fits(self, value: Any) -> bool:
        return isinstance(value, list) or self.leaf.fits(value)

    def walk(self, value: Any, path: str, left: int | None = None) -> None:
        left = self.depth if left is None else left
        if not isinstance(value, list):
            self.leaf.walk(value, path)
            return
        if left <= 0:
            raise _Misfit(path, f"lists nested more than {self.depth} deep")
        for i, v in enumerate(value):
            self.walk(v, f"{path}[{i}]", left - 1)


def check(schema: Schema, value: Any, where: str) -> None:
    """Raise RelayError naming `where` and the path inside when `value` misfits `schema`.

    `check(Obj({"n": Int()}), {"n": 1}, "model.json")`
    """
    try:
        schema.walk(value, "")
    except _Misfit as e:
        raise RelayError(f"{where}: {e.path}: {e.message}" if e.path
                         else f"{where}: {e.message}") from None


__all__ = ["Int", "ListOf", "MapOf", "Nested", "Obj", "Schema", "Str", "Tuple", "check"]
