"""The loop IR: statements over PrimExpr, the language every backend consumes.

A kernel is a PrimFunc whose params are Buffers (shapes may hold symbolic Vars, bound from
the arrays at call time). Buffers are multi-dimensional; indices are flattened row-major
(or by explicit strides) by the backend or the flatten pass.

    >>> import tensor_expr as te
    >>> from lowering.ir import Buffer, BufferLoad, BufferStore, For, ForKind, PrimFunc
    >>> A = Buffer("A", (te.const(8),), "float32")
    >>> B = Buffer("B", (te.const(8),), "float32")
    >>> i = te.var("i")
    >>> body = For(i, te.const(0), te.const(8), ForKind.SERIAL,
    ...            BufferStore(B, BufferLoad(A, (i,)) * 2.0, (i,)))
    >>> f = PrimFunc("double", (A, B), body)
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tensor_expr.dtype import check_dtype
from tensor_expr.expr import PrimExpr, Var, as_expr
from tensor_expr.visitor import ExprMutator

_node = dataclass(frozen=True, slots=True, eq=False)


class ForKind(enum.Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    THREAD_BINDING = "thread_binding"


@_node
class Buffer:
    """A region of memory: name, shape, dtype, storage scope ("global", "local", "shared").

    `strides` None means compact row-major; otherwise one stride (in elements) per dim,
    e.g. from storage_align. `align` is the byte alignment of local allocations.
    """

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str
    scope: str = "global"
    strides: tuple[PrimExpr, ...] | None = None
    align: int = 64

    def __post_init__(self) -> None:
        check_dtype(self.dtype)
        object.__setattr__(self, "shape", tuple(as_expr(d) for d in self.shape))
        if self.strides is not None:
            object.__setattr__(self, "strides", tuple(as_expr(d) for d in self.strides))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices: Any) -> BufferLoad:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return BufferLoad(self, tuple(as_expr(i) for i in indices))

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {[str(d) for d in self.shape]}, {self.dtype}, {self.scope})"

    def __hash__(self) -> int:
        return id(self)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class BufferLoad(PrimExpr):
    """`buffer[indices]` as an expression."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.buffer.dtype

    def to_text(self, show: Callable[[Any], str]) -> str:
        return f"{self.buffer.name}[{', '.join(show(i) for i in self.indices)}]"


class Stmt:
    """Base class of loop-IR statements."""

    __slots__ = ()

    def __str__(self) -> str:
        from lowering.printer import stmt_to_str

        return stmt_to_str(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


@_node
class For(Stmt):
    """`for var in [min, min + extent)` of a kind; thread-bound loops carry their tag."""

    var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    thread_tag: str = ""
    annotations: tuple[tuple[str, Any], ...] = ()  # pragmas, e.g. ("unroll_explicit", 1)


@_node
class SeqStmt(Stmt):
    """Statements run in order."""

    stmts: tuple[Stmt, ...]


@_node
class BufferStore(Stmt):
    """`buffer[indices] = value`."""

    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]


@_node
class Allocate(Stmt):
    """Allocate `buffer` (local or shared scope) for the duration of `body`."""

    buffer: Buffer
    body: Stmt


@_node
class IfThenElse(Stmt):
    """`if condition: then_case else: else_case` (else_case may be None)."""

    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@_node
class LetStmt(Stmt):
    """Bind `var = value` in `body`."""

    var: Var
    value: PrimExpr
    body: Stmt


@_node
class Evaluate(Stmt):
    """Evaluate an expression for its effect (an intrinsic call, e.g. from tensorize)."""

    value: PrimExpr


@_node
class AssertStmt(Stmt):
    """Check `condition` at run time; fail with `message` when it is false."""

    condition: PrimExpr
    message: str
    body: Stmt


@_node
class PrimFunc:
    """A kernel: buffer parameters (in call order), a body, and attributes."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    attrs: tuple[tuple[str, Any], ...] = field(default=())

    def __str__(self) -> str:
        from lowering.printer import func_to_str

        return func_to_str(self)

    def attr(self, key: str, default: Any = None) -> Any:
        """The value of attribute `key`, or `default`."""
        return dict(self.attrs).get(key, default)


def seq(*stmts: Stmt | None) -> Stmt:
    """A SeqStmt of the non-None statements, flattened; a single statement stays as is."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


# ---------------------------------------------------------------------------------------
# Generic statement traversal


def stmt_children(s: Stmt) -> list[Stmt]:
    """The direct sub-statements of `s`."""
    out: list[Stmt] = []
    for f in dataclasses.fields(s):  # type: ignore[arg-type]
        v = getattr(s, f.name)
        if isinstance(v, Stmt):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, Stmt))
    return out


def post_order_visit_stmt(s: Stmt, fn: Callable[[Stmt], None]) -> None:
    """Call `fn` on every statement under `s`, children first."""
    stack: list[tuple[Stmt, bool]] = [(s, False)]
    while stack:
        node, done = stack.pop()
        if done:
            fn(node)
            continue
        stack.append((node, True))
        for c in reversed(stmt_children(node)):
            stack.append((c, False))


class StmtMutator:
    """Rebuilds statements bottom-up; override `visit_<Class>`; `expr_mutator` (optional)
    rewrites every expression. Returns the node itself when nothing changed."""

    def __init__(self, expr_mutator: ExprMutator | None = None) -> None:
        self.expr_mutator = expr_mutator

    def visit(self, s: Any) -> Any:
        if s is None:
            return None
        method = getattr(self, "visit_" + type(s).__name__, None)
        return method(s) if method is not None else self.generic_visit(s)

    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        return e if self.expr_mutator is None else self.expr_mutator.visit(e)

    def generic_visit(self, s: Stmt) -> Stmt:
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(s):  # type: ignore[arg-type]
            v = getattr(s, f.name)
            nv: Any = v
            if isinstance(v, Stmt):
                nv = self.visit(v)
            elif isinstance(v, PrimExpr):
                nv = self.visit_expr(v)
            elif isinstance(v, tuple) and v:
                if isinstance(v[0], Stmt):
                    nv = tuple(self.visit(x) for x in v)
                elif isinstance(v[0], PrimExpr):
                    nv = tuple(self.visit_expr(x) for x in v)
                if isinstance(nv, tuple) and all(a is b for a, b in zip(nv, v)):
                    nv = v
            if nv is not v:
                changes[f.name] = nv
        return dataclasses.replace(s, **changes) if changes else s  # type: ignore[type-var]


def has_loop(s: Stmt, kind: ForKind) -> bool:
    """Whether `s` holds a loop of `kind`.

        >>> import tensor_expr as te
        >>> i = te.var("i")
        >>> has_loop(For(i, te.const(0), te.const(4), ForKind.SERIAL, Evaluate(i)),
        ...          ForKind.SERIAL)
        True
    """
    found = False

    def f(n: Stmt) -> None:
        nonlocal found
        found = found or (isinstance(n, For) and n.kind is kind)

    post_order_visit_stmt(s, f)
    return found
