"""The op registry: an op is an object, and its behaviour lives in plain dicts keyed by it.

Each op module fills these dicts next to the op's definition (as JAX does with primitives):

    conv2d = register_op("nn.conv2d", Conv2DAttrs, num_inputs=2)
    TYPE_RELATIONS[conv2d] = conv2d_rel
    REFERENCES[conv2d] = conv2d_ref
    PATTERNS[conv2d] = OpPattern.OUT_ELEMWISE_FUSABLE

    >>> from relay_ir.op.registry import get_op
    >>> get_op("add").name
    'add'
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tessel_errors import RelayError


class OpPattern(enum.IntEnum):
    """Fusion pattern kinds, ordered as in Relay: a lower kind fuses more freely."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


@dataclass(frozen=True, slots=True, eq=False)
class Op:
    """A primitive operator. Identity-compared: there is exactly one Op per name."""

    name: str
    attrs_type: type | None = None  # a frozen dataclass of the op's attributes, or None
    num_inputs: int = -1  # -1: variadic
    description: str = ""

    def __repr__(self) -> str:
        return f"Op({self.name})"

    def make_attrs(self, values: dict[str, Any] | None = None) -> Any:
        """Build this op's attrs object from keyword values (unknown keys are an error)."""
        values = dict(values or {})
        if self.attrs_type is None:
            if values:
                raise RelayError(
                    f"op '{self.name}' takes no attributes, got {sorted(values)}"
                )
            return None
        try:
            return self.attrs_type(**values)
        except TypeError as e:
            names = [f for f in getattr(self.attrs_type, "__dataclass_fields__", {})]
            raise RelayError(
                f"bad attributes for op '{self.name}': {e}; legal attributes: {names}"
            ) from None


OPS: dict[str, Op] = {}
# op -> relation(arg_types: list[Type], attrs) -> Type  (may raise RelayTypeError)
TYPE_RELATIONS: dict[Op, Callable[..., Any]] = {}
# op -> reference(*numpy_values, attrs) -> numpy value (or tuple of them)
REFERENCES: dict[Op, Callable[..., Any]] = {}
PATTERNS: dict[Op, OpPattern] = {}


def register_op(
    name: str, attrs_type: type | None = None, num_inputs: int = -1, description: str = ""
) -> Op:
    """Create and register the op called `name`; registering a name twice is an error."""
    if name in OPS:
        raise RelayError(f"op '{name}' is registered twice")
    op = Op(name, attrs_type, num_inputs, description)
    OPS[name] = op
    return op


def get_op(name: str) -> Op:
    """The registered op called `name`, with a clear error listing near names if absent."""
    _load_all_ops()
    try:
        return OPS[name]
    except KeyError:
        import difflib

        near = difflib.get_close_matches(name, OPS.keys(), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise RelayError(f"unknown op '{name}'{hint}") from None


def _load_all_ops() -> None:
    # The op definition modules register themselves on import; importing the package
    # relay_ir.op loads them all.
    import relay_ir.op  # noqa: F401
