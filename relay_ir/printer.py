"""The Relay text printer: `astext(module_or_expr)`, the inverse of the parser.

Graph form: every call that feeds another expression, and every node used more than
once, is printed once as a numbered binding `%0 = ...;` and referred to by number after,
so shared sub-expressions stay shared when the text is parsed back. Constants that are
not plain scalars go to a `#[metadata]` section as exact base64 bytes.

    >>> from relay_ir.expr import Var, Tuple
    >>> x = Var("x")
    >>> print(astext(Tuple((x, x))))
    (%x, %x)
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import numpy as np

from relay_ir.expr import (
    Call,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from relay_ir.lexer import METADATA_HEADER, quote
from relay_ir.module import IRModule
from relay_ir.ty import (
    AnyDim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    ShapeVar,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    TypeVar,
)
from relay_ir.visitor import DATAFLOW_NODES, children, free_vars, post_order
from tessel_errors import RelayError


def dim_text(d: object) -> str:
    """A dimension as text: `3`, `n` or `?`."""
    if isinstance(d, AnyDim):
        return "?"
    if isinstance(d, ShapeVar):
        return d.name
    return str(d)


def type_text(t: Type) -> str:
    """A type in Relay syntax.

    >>> type_text(TensorType((1, None), "float32"))
    'Tensor[(1, ?), float32]'
    """
    if isinstance(t, TensorType):
        if not t.shape:
            return t.dtype
        dims = ", ".join(dim_text(d) for d in t.shape)
        if len(t.shape) == 1:
            dims += ","
        return f"Tensor[({dims}), {t.dtype}]"
    if isinstance(t, TupleType):
        inner = ", ".join(type_text(f) for f in t.fields)
        return f"({inner},)" if len(t.fields) == 1 else f"({inner})"
    if isinstance(t, TypeVar):
        return t.name
    if isinstance(t, GlobalTypeVar):
        return t.name
    if isinstance(t, TypeCall):
        # `List[]` (a call with no arguments) differs from the bare name `List`.
        return f"{t.func.name}[{', '.join(type_text(a) for a in t.args)}]"
    if isinstance(t, FuncType):
        tp = f"[{', '.join(v.name for v in t.type_params)}]" if t.type_params else ""
        args = ", ".join(type_text(a) for a in t.arg_types)
        return f"fn {tp}({args}) -> {type_text(t.ret_type)}"
    if isinstance(t, RefType):
        return f"Ref[{type_text(t.value)}]"
    if isinstance(t, IncompleteType):
        return f"?t{t.id}"
    if isinstance(t, TypeData):
        return f"type {t.header.name}"
    return repr(t)


VERSION_HEADER = '#[version = "0.0.5"]'
_SCALAR_SUFFIX = {
    "int32": "", "int8": "i8", "int16": "i16", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float32": "f", "float16": "f16", "float64": "f64",
}
_DATAFLOW = DATAFLOW_NODES
# Nodes that feed another expression get a numbered binding of their own.
_BIND_WHEN_NESTED = (Call, RefCreate, RefRead, RefWrite, If, Match, Let)
_ATOMIC = (Var, GlobalVar, Constant, Constructor)


def _indent(text: str) -> str:
    return "\n".join(("  " + line) if line else line for line in text.split("\n"))


def scalar_literal(value: np.ndarray) -> str | None:
    """The literal for a 0-d array (`1.5f`, `2i64`, `True`), or None if it has none.

    >>> scalar_literal(np.array(3, "int64")), scalar_literal(np.array(0.5, "float32"))
    ('3i64', '0.5f')
    """
    dtype = str(value.dtype)
    if value.ndim != 0:
        return None
    if dtype == "bool":
        return "True" if bool(value) else "False"
    if dtype not in _SCALAR_SUFFIX:
        return None
    if dtype.startswith(("int", "uint")):
        return f"{int(value)}{_SCALAR_SUFFIX[dtype]}"
    if not np.isfinite(value):
        return None
    short = str(value.item()) if dtype == "float64" else str(value[()])
    # Keep the short form only if it reads back to the very same bits.
    if np.array(float(short), dtype=dtype).tobytes() != value.tobytes():
        short = repr(float(value))
    return short + _SCALAR_SUFFIX[dtype]


def attr_value_text(value: Any) -> str:
    """An attribute value as the parser reads it: numbers, strings, booleans, None, lists."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not np.isfinite(value):
            raise RelayError(f"cannot print the non-finite attribute value {value}")
        return repr(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(attr_value_text(v) for v in value) + "]"
    raise RelayError(
        f"cannot print attribute value {value!r} of type {type(value).__name__}: "
        "attributes must be numbers, strings, booleans, None or lists of them"
    )


def _op_attrs_text(attrs: Any) -> list[str]:
    if attrs is None:
        return []
    if not dataclasses.is_dataclass(attrs):
        raise RelayError(f"op attrs must be a dataclass, got {type(attrs).__name__}")
    out = []
    for f in dataclasses.fields(attrs):
        value = getattr(attrs, f.name)
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        if default is not dataclasses.MISSING and _same_value(value, default):
            continue
        out.append(f"{f.name}={attr_value_text(value)}")
    return out


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


class _Printer:
    def __init__(self, show_types: bool) -> None:
        self.show_types = show_types
        self.meta: list[np.ndarray] = []
        self.meta_index: dict[int, int] = {}
        self.keep: list[Any] = []

    # --- per-definition state ------------------------------------------------------------

    def start(self, root: Expr) -> None:
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.text: dict[int, str] = {}
        self.counter = 0
        self.refs: dict[int, int] = {}
        self.free_annot: set[int] = set()
        self.uses: dict[int, int] = {}
        for node in post_order(root):
            for c in children(node):
                self.refs[id(c)] = self.refs.get(id(c), 0) + 1

    def name_of(self, v: Var, binding: bool = False) -> str:
        key = id(v)
        if not binding:
            self.uses[key] = self.uses.get(key, 0) + 1
        if key in self.names:
            return "%" + self.names[key]
        base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in v.name_hint)
        if not base or not (base[0].isalpha() or base[0] == "_"):
            base = "v" + base
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        self.names[key] = name
        self.keep.append(v)
        text = "%" + name
        # A free var (printing a bare expression) carries its type at its first use.
        if not binding and key in self.free_annot and v.type_annotation is not None:
            text += f": {type_text(v.type_annotation)}"
        return text

    def binder(self, v: Var) -> str:
        # A var bound a second time (say, a pass duplicated a let) gets a fresh name from
        # here on, so the text reads back as the distinct binding it is.
        self.names.pop(id(v), None)
        text = self.name_of(v, binding=True)
        if v.type_annotation is not None:
            text += f": {type_text(v.type_annotation)}"
        return text

    def type_comment(self, e: Expr) -> str:
        if self.show_types and e.checked_type is not None:
            return f" /* ty={type_text(e.checked_type)} */"
        return ""

    # --- expressions ---------------------------------------------------------------------

    def block(self, e: Expr, own_let: bool = False) -> str:
        """A block's lines: bindings, lets, then the result (a let chain in a loop).

        A shared let is printed by its own block (own_let) and bound as a whole."""
        lines: list[str] = []
        while isinstance(e, Let) and id(e) not in self.text and (
            own_let or self.refs.get(id(e), 0) <= 1
        ):
            own_let = False
            name = self.binder(e.var)
            before = self.uses.get(id(e.var), 0)
            value_lines: list[str] = []
            value = self.expr(e.value, value_lines)
            if value_lines and self.uses.get(id(e.var), 0) > before:
                # A recursive let: the value's bindings mention the var, which is only in
                # scope from the let on, so they go in a block inside the value.
                value = "{\n" + _indent("\n".join(value_lines + [value])) + "\n}"
            else:
                lines.extend(value_lines)
            lines.append(f"let {name} = {value};{self.type_comment(e.value)}")
            e = e.body
        lines.append(self.expr(e, lines))
        return "\n".join(lines)

    def expr(self, e: Any, lines: list[str]) -> str:
        """Inline text of `e` (a root: not bound unless shared); bindings go to `lines`."""
        if isinstance(e, _ATOMIC):
            return self.atom(e)
        if id(e) in self.text:
            return self.text[id(e)]
        if isinstance(e, _DATAFLOW):
            self.dataflow_region(e, lines)
            return self.text[id(e)]
        return self.finish(e, self.control(e, lines), lines, root=True)

    def nested(self, e: Any, lines: list[str]) -> str:
        """Text of `e` used as an operand: calls and control nodes get a binding."""
        if isinstance(e, _ATOMIC):
            return self.atom(e)
        if id(e) in self.text:
            return self.text[id(e)]
        if isinstance(e, _DATAFLOW):
            self.dataflow_region(e, lines, root_bound=True)
            return self.text[id(e)]
        return self.finish(e, self.control(e, lines), lines, root=False)

    def finish(self, e: Expr, text: str, lines: list[str], root: bool) -> str:
        shared = self.refs.get(id(e), 0) > 1
        # Constructor applications read best inline: Cons(1, Cons(2, Nil)).
        ctor_call = isinstance(e, Call) and isinstance(e.op, Constructor)
        nest = not ctor_call and isinstance(e, _BIND_WHEN_NESTED)
        # Text holding a block (a function, say) is bound at once when nested: a binding
        # made inside that block must come, in the text, before any later line using it.
        if shared or (not root and (nest or "\n" in text)):
            name = f"%{self.counter}"
            self.counter += 1
            lines.append(f"{name} = {text};{self.type_comment(e)}")
            text = name
        self.text[id(e)] = text
        self.keep.append(e)
        return text

    def dataflow_region(self, root: Expr, lines: list[str], root_bound: bool = False) -> None:
        # Post order without recursion, so long chains of calls print fine.
        stack: list[tuple[Any, bool]] = [(root, False)]
        seen: set[int] = set()
        while stack:
            node, expanded = stack.pop()
            if expanded:
                if id(node) not in self.text:
                    text = self.dataflow_text(node, lines)
                    self.finish(node, text, lines, root=node is root and not root_bound)
                continue
            if id(node) in seen:
                continue
            seen.add(id(node))
            stack.append((node, True))
            for c in reversed(children(node)):
                if isinstance(c, _DATAFLOW) and id(c) not in self.text:
                    stack.append((c, False))

    def dataflow_text(self, e: Expr, lines: list[str]) -> str:
        if isinstance(e, Tuple):
            fields = [self.tuple_field(f, lines) for f in e.fields]
            return f"({fields[0]},)" if len(fields) == 1 else f"({', '.join(fields)})"
        if isinstance(e, TupleGetItem):
            return f"{self.postfix_operand(e.tuple_value, lines)}.{e.index}"
        if isinstance(e, Call):
            return self.call_text(e, lines)
        if isinstance(e, RefCreate):
            return f"ref({self.nested(e.value, lines)})"
        if isinstance(e, RefRead):
            return f"ref_read({self.nested(e.ref, lines)})"
        assert isinstance(e, RefWrite)
        return f"ref_write({self.nested(e.ref, lines)}, {self.nested(e.value, lines)})"

    def tuple_field(self, f: Any, lines: list[str]) -> str:
        return self.nested(f, lines)

    def postfix_operand(self, e: Any, lines: list[str]) -> str:
        text = self.nested(e, lines)
        # `12.0` would read as a float, `fn {...}(x)` as a call of the body: parenthesize.
        if isinstance(e, Constant) or text.startswith(("fn ", "fn[", "{", "if ", "match", "-")):
            return f"({text})"
        return text

    def call_text(self, call: Call, lines: list[str]) -> str:
        op = call.op
        if isinstance(op, Expr):
            callee = self.postfix_operand(op, lines)
        else:
            callee = op.name
        args = [self.nested(a, lines) for a in call.args]
        if not isinstance(op, Expr):
            args += _op_attrs_text(call.attrs)
        targs = ""
        if call.type_args:
            targs = "[" + ", ".join(type_text(t) for t in call.type_args) + "]"
        if isinstance(op, Constructor) and not op.inputs and not call.args and not targs:
            return op.name_hint  # `Nil` reads back as Nil()
        return f"{callee}{targs}({', '.join(args)})"

    def atom(self, e: Any) -> str:
        if isinstance(e, Var):
            return self.name_of(e)
        if isinstance(e, GlobalVar):
            return "@" + e.name_hint
        if isinstance(e, Constructor):
            return e.name_hint
        assert isinstance(e, Constant)
        lit = scalar_literal(e.data)
        if lit is not None:
            return lit
        if id(e) not in self.meta_index:
            if e.data.dtype.kind not in "biufc":
                raise RelayError(f"cannot print a constant of dtype {e.data.dtype}")
            self.meta_index[id(e)] = len(self.meta)
            self.meta.append(e.data)
            self.keep.append(e)
        return f"meta[relay.Constant][{self.meta_index[id(e)]}]"

    def control(self, e: Expr, lines: list[str]) -> str:
        if isinstance(e, Function):
            return self.function_text(e, "fn ")
        if isinstance(e, If):
            cond = self.expr(e.cond, lines)
            then = _indent(self.block(e.true_branch))
            other = _indent(self.block(e.false_branch))
            return f"if ({cond}) {{\n{then}\n}} else {{\n{other}\n}}"
        if isinstance(e, Match):
            data = self.expr(e.data, lines)
            if not isinstance(e.data, Tuple) or data.startswith("%"):
                data = f"({data})"
            kw = "match" if e.complete else "match?"
            clauses = []
            for c in e.clauses:
                pat = self.pattern(c.lhs)
                body = self.block(c.rhs)
                if "\n" in body or isinstance(c.rhs, Let):
                    body = "{\n" + _indent(body) + "\n}"
                clauses.append(f"{pat} => {body},")
            inner = _indent("\n".join(clauses))
            return f"{kw} {data} {{\n{inner}\n}}"
        if isinstance(e, Let):
            return "{\n" + _indent(self.block(e, own_let=True)) + "\n}"
        raise RelayError(f"astext: cannot print a {type(e).__name__} node")

    def function_text(self, fn: Function, head: str) -> str:
        tparams = ""
        if fn.type_params:
            tparams = "[" + ", ".join(tv.name for tv in fn.type_params) + "]"
        params = [self.binder(p) for p in fn.params]
        params += [f"{k}={attr_value_text(v)}" for k, v in fn.attrs]
        ret = f" -> {type_text(fn.ret_type)}" if fn.ret_type is not None else ""
        body = _indent(self.block(fn.body))
        return f"{head}{tparams}({', '.join(params)}){ret} {{\n{body}\n}}"

    def pattern(self, p: Pattern) -> str:
        if isinstance(p, PatternWildcard):
            return "_"
        if isinstance(p, PatternVar):
            return self.binder(p.var)
        if isinstance(p, PatternConstructor):
            if not p.patterns:
                return p.constructor.name_hint
            inner = ", ".join(self.pattern(q) for q in p.patterns)
            return f"{p.constructor.name_hint}({inner})"
        if isinstance(p, PatternTuple):
            inner = ", ".join(self.pattern(q) for q in p.patterns)
            return f"({inner},)" if len(p.patterns) == 1 else f"({inner})"
        raise RelayError(f"astext: cannot print pattern {type(p).__name__}")

    # --- top level -----------------------------------------------------------------------

    def typedef_text(self, td: TypeData) -> str:
        head = td.header.name
        if td.type_vars:
            head += "[" + ", ".join(tv.name for tv in td.type_vars) + "]"
        ctors = []
        for c in td.constructors:
            if c.inputs:
                ctors.append(f"{c.name_hint}({', '.join(type_text(t) for t in c.inputs)}),")
            else:
                ctors.append(f"{c.name_hint},")
        if not ctors:
            return f"type {head} {{}}"
        return f"type {head} {{\n" + _indent("\n".join(ctors)) + "\n}"

    def metadata_text(self) -> str:
        if not self.meta:
            return ""
        out = [METADATA_HEADER]
        for i, arr in enumerate(self.meta):
            # Native byte order, C order (tobytes); keeps 0-d arrays 0-d, unlike
            # np.ascontiguousarray.
            data = arr.astype(arr.dtype.newbyteorder("="), copy=False)
            shape = "(" + ",".join(str(d) for d in data.shape) + ")"
            b64 = base64.b64encode(data.tobytes()).decode("ascii") or "-"
            out.append(f"relay.Constant {i} {data.dtype} {shape} {b64}")
        return "\n".join(out)


def astext(obj: Any, show_types: bool = False) -> str:
    """Relay text of a module, expression or type; `parse` reads it back (graph form).

    With `show_types`, each binding carries its checked type in a comment.

    >>> from relay_ir.expr import Var, Function
    >>> x = Var("x")
    >>> print(astext(Function((x,), x)))
    fn (%x) {
      %x
    }
    """
    if isinstance(obj, Type):
        return type_text(obj)
    p = _Printer(show_types)
    if isinstance(obj, IRModule):
        parts = [VERSION_HEADER]
        for td in obj.type_definitions.values():
            parts.append(p.typedef_text(td))
        for gv, fn in obj.functions.items():
            p.start(fn)
            parts.append(p.function_text(fn, f"def @{gv.name_hint}"))
        meta = p.metadata_text()
        return "\n".join(parts + ([meta] if meta else [])) + "\n"
    if isinstance(obj, Expr):
        p.start(obj)
        p.free_annot = {id(v) for v in free_vars(obj)}
        text = p.block(obj)
        meta = p.metadata_text()
        return text + (f"\n{meta}\n" if meta else "")
    raise RelayError(f"astext takes a module, an expression or a type, got {type(obj).__name__}")


__all__ = ["astext", "attr_value_text", "dim_text", "scalar_literal", "type_text"]
