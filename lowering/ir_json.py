"""The loop IR as JSON and back: what a saved CUDA model keeps of each kernel so that the
GPU simulator can run it, and the CUDA backend can rebuild its launch plan, without
lowering or compiling again.

A document is {"format": "tessel-loop-ir", "version": 1, "nodes": [...], "root": k}: each
node a list [class name, field, ...] in the order of the class's dataclass fields, a field
that holds a node (or a tuple of nodes) holding the index of an earlier node. Shared
nodes (a loop variable, a buffer) are written once, so that identity, which the backends
key on, survives. Reading checks every node against its class's field types (the class is
one of the loop IR's and tensor_expr's scalar nodes, each reference points back at a node
of the expected kind) and raises a LoweringError naming the node; it never runs code.

    >>> import tensor_expr as te
    >>> from lowering.ir import Buffer, BufferStore, For, ForKind, PrimFunc
    >>> A = Buffer("A", (te.const(4),), "float32")
    >>> i = te.var("i")
    >>> f = PrimFunc("fill", (A,), For(i, te.const(0), te.const(4), ForKind.SERIAL,
    ...                                 BufferStore(A, te.const(1.0), (i,))))
    >>> g = from_json(to_json(f))
    >>> str(g.body) == str(f.body)
    True
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from typing import Any

from lowering import ir as L
from tensor_expr import expr as E
from tensor_expr.dtype import DTYPES, is_integral
from tessel_errors import LoweringError, TesselError

FORMAT, VERSION = "tessel-loop-ir", 1
_MAX_NODES = 1 << 22

_CLASSES: dict[str, type] = {c.__name__: c for c in (
    E.Var, E.IntImm, E.FloatImm, E.StringImm, E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv,
    E.FloorMod, E.Min, E.Max, E.EQ, E.NE, E.LT, E.LE, E.GT, E.GE, E.And, E.Or, E.Not,
    E.Select, E.Cast, E.Call, E.Let, L.BufferLoad, L.Buffer, L.For, L.SeqStmt,
    L.BufferStore, L.Allocate, L.IfThenElse, L.LetStmt, L.Evaluate, L.AssertStmt,
    L.PrimFunc)}
# what a reference may point at
_NODE_BASES = (E.PrimExpr, L.Stmt, L.Buffer, L.PrimFunc)


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls) if f.init)


def _is_node_type(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, _NODE_BASES)


def _is_node(value: Any) -> bool:
    return type(value).__name__ in _CLASSES and type(value) is _CLASSES[type(value).__name__]


# ---------------------------------------------------------------------------------------
# Writing


def to_json(func: L.PrimFunc) -> dict[str, Any]:
    """The JSON document of a PrimFunc (see the module doc): `json.dumps(to_json(f))`."""
    nodes: list[list[Any]] = []
    index: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(func, False)]
    while stack:  # post order without recursion: loop nests and expressions can be deep
        obj, ready = stack.pop()
        if id(obj) in index:
            continue
        if not _is_node(obj):
            raise LoweringError(f"to_json: the loop IR holds a {type(obj).__name__}, which "
                                "has no JSON form")
        if not ready:
            stack.append((obj, True))
            stack.extend((c, False) for c in reversed(_children(obj)) if id(c) not in index)
            continue
        row: list[Any] = [type(obj).__name__]
        for name, hint in _fields(type(obj)):
            row.append(_encode(getattr(obj, name), hint, index))
        index[id(obj)] = len(nodes)
        nodes.append(row)
    return {"format": FORMAT, "version": VERSION, "nodes": nodes, "root": index[id(func)]}


def _children(obj: Any) -> list[Any]:
    out: list[Any] = []

    def walk(v: Any) -> None:
        if isinstance(v, tuple):
            for x in v:
                walk(x)
        elif isinstance(v, (E.PrimExpr, L.Stmt, L.Buffer)):
            out.append(v)

    for name, _ in _fields(type(obj)):
        walk(getattr(obj, name))
    return out


def _encode(value: Any, hint: Any, index: dict[int, int]) -> Any:
    if value is None:
        return None
    if isinstance(value, (E.PrimExpr, L.Stmt, L.Buffer)):
        return index[id(value)]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return [_encode(v, Any, index) for v in value]
    if isinstance(value, (bool, int, float, str)):
        return value
    raise LoweringError(f"to_json: a {type(value).__name__} field ({value!r}) has no JSON "
                        "form")


# ---------------------------------------------------------------------------------------
# Reading


def from_json(doc: Any, where: str = "loop IR") -> L.PrimFunc:
    """The PrimFunc of a document `to_json` wrote; LoweringError naming `where` and the
    node when it is not one."""
    if not isinstance(doc, dict) or set(doc) != {"format", "version", "nodes", "root"}:
        raise LoweringError(f"{where}: not a loop-IR document (expected the keys format, "
                            "version, nodes, root)")
    if (doc["format"], doc["version"]) != (FORMAT, VERSION):
        raise LoweringError(f"{where}: format {doc['format']!r} version {doc['version']!r}; "
                            f"expected {FORMAT!r} version {VERSION}")
    rows = doc["nodes"]
    if not isinstance(rows, list) or not 0 < len(rows) <= _MAX_NODES:
        raise LoweringError(f"{where}: nodes must be a list of 1 to {_MAX_NODES} nodes")
    built: list[Any] = []
    for k, row in enumerate(rows):
        built.append(_decode_node(row, built, f"{where}: node {k}"))
    root = doc["root"]
    if type(root) is not int or not 0 <= root < len(built) or \
            not isinstance(built[root], L.PrimFunc):
        raise LoweringError(f"{where}: root must be the index of a PrimFunc node, got "
                            f"{root!r}")
    return built[root]


def _decode_node(row: Any, built: list[Any], where: str) -> Any:
    if not isinstance(row, list) or not row or not isinstance(row[0], str):
        raise LoweringError(f"{where}: a node is a list [class name, fields...]")
    cls = _CLASSES.get(row[0])
    if cls is None:
        raise LoweringError(f"{where}: unknown node class {row[0][:64]!r}")
    fields = _fields(cls)
    if len(row) != 1 + len(fields):
        raise LoweringError(f"{where}: a {row[0]} has {len(fields)} fields "
                            f"({', '.join(n for n, _ in fields)}), got {len(row) - 1}")
    args = [_decode(v, hint, built, f"{where} ({row[0]}.{name})")
            for v, (name, hint) in zip(row[1:], fields)]
    for (name, _), v in zip(fields, args):
        if name == "dtype" and v not in DTYPES:  # the constructors check only some
            raise LoweringError(f"{where} ({row[0]}.dtype): unknown dtype {v!r}")
    try:
        node = cls(*args)
    except TesselError as e:
        raise LoweringError(f"{where}: {e}") from None
    except (TypeError, ValueError) as e:
        raise LoweringError(f"{where}: not a valid {row[0]}: {e}") from None
    _check_integral(node, where)
    return node


def _check_integral(node: Any, where: str) -> None:
    """Indices, extents, shapes and loop variables are integers (no constructor checks)."""
    if isinstance(node, (L.BufferLoad, L.BufferStore)):
        what, exprs = "an index", node.indices
    elif isinstance(node, L.For):
        what, exprs = "a loop bound", (node.var, node.min, node.extent)
    elif isinstance(node, L.Buffer):
        what, exprs = "a shape or stride", node.shape + (node.strides or ())
    else:
        return
    for e in exprs:
        if not is_integral(e.dtype):
            raise LoweringError(f"{where}: {what} of {e.dtype} ({str(e)[:60]}); they are "
                                "integers")


def _decode(v: Any, hint: Any, built: list[Any], where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if v is None and type(None) in options:
            return None
        (inner,) = [o for o in options if o is not type(None)]
        return _decode(v, inner, built, where)
    if origin is tuple:
        targs = typing.get_args(hint)
        if not isinstance(v, list):
            raise LoweringError(f"{where}: expected a list, got {type(v).__name__}")
        if len(targs) == 2 and targs[1] is Ellipsis:
            return tuple(_decode(x, targs[0], built, where) for x in v)
        if len(v) != len(targs):
            raise LoweringError(f"{where}: expected {len(targs)} items, got {len(v)}")
        return tuple(_decode(x, t, built, where) for x, t in zip(v, targs))
    if _is_node_type(hint):
        if type(v) is not int or not 0 <= v < len(built):
            raise LoweringError(f"{where}: expected the index of an earlier node, got {v!r}")
        node = built[v]
        if not isinstance(node, hint):
            raise LoweringError(f"{where}: node {v} is a {type(node).__name__}, not a "
                                f"{hint.__name__}")
        return node
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(v)
        except ValueError:
            raise LoweringError(f"{where}: {v!r} is not a {hint.__name__}") from None
    if hint is bool or hint is str:
        if type(v) is not hint:
            raise LoweringError(f"{where}: expected a {hint.__name__}, got {v!r}")
        return v
    if hint is int:
        if type(v) is not int:
            raise LoweringError(f"{where}: expected an integer, got {v!r}")
        return v
    if hint is float:
        if type(v) not in (int, float):
            raise LoweringError(f"{where}: expected a number, got {v!r}")
        return float(v)
    if hint is Any:  # annotation and attribute values: JSON scalars and lists of them
        return _plain(v, where)
    raise LoweringError(f"{where}: no JSON form for a field of type {hint}")


def _plain(v: Any, where: str, depth: int = 0) -> Any:
    if v is None or type(v) in (bool, int, float, str):
        return v
    if isinstance(v, list) and depth < 8:
        return tuple(_plain(x, where, depth + 1) for x in v)
    raise LoweringError(f"{where}: expected a number, string or list, got "
                        f"{type(v).__name__}")


__all__ = ["FORMAT", "VERSION", "from_json", "to_json"]
