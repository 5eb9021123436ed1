"""Pass verify_loops: check loop kinds the backends rely on (raises LoweringError): at most
one parallel loop on any path, constant extents for vectorized and unrolled loops, no
parallel or vectorized loop inside a vectorized one.

    >>> import tensor_expr as te
    >>> from lowering import ir
    >>> from lowering.passes.verify_loops import verify_loops
    >>> B = ir.Buffer("B", (te.const(4),), "float32"); i = te.var("i")
    >>> f = ir.PrimFunc("f", (B,), ir.For(i, te.const(0), te.const(4), ir.ForKind.PARALLEL,
    ...                                   ir.BufferStore(B, te.const(1.0), (i,))))
    >>> verify_loops(f) is f
    True
"""

from __future__ import annotations

from lowering import ir
from tensor_expr import expr as E
from tessel_errors import LoweringError


def verify_loops(func: ir.PrimFunc) -> ir.PrimFunc:
    """Return `func` unchanged when its loops are legal, else raise LoweringError."""
    stack: list[tuple[ir.Stmt, ir.For | None, ir.For | None]] = [(func.body, None, None)]
    while stack:
        s, par, vec = stack.pop()
        if isinstance(s, ir.For):
            if s.kind in (ir.ForKind.VECTORIZED, ir.ForKind.UNROLLED) and \
                    not isinstance(s.extent, E.IntImm):
                raise LoweringError(f"{s.kind.value} loop '{s.var.name}' has non-constant "
                                    f"extent {s.extent}")
            if s.kind is ir.ForKind.PARALLEL:
                if par is not None:
                    raise LoweringError(f"parallel loop '{s.var.name}' is nested inside "
                                        f"parallel loop '{par.var.name}'; parallelize one "
                                        "of them (fuse them first to use both)")
                if vec is not None:
                    raise LoweringError(f"parallel loop '{s.var.name}' is inside vectorized "
                                        f"loop '{vec.var.name}'")
                par = s
            if s.kind is ir.ForKind.VECTORIZED:
                if vec is not None:
                    raise LoweringError(f"vectorized loop '{s.var.name}' is inside vectorized "
                                        f"loop '{vec.var.name}'; vectorize only the innermost")
                vec = s
        for c in ir.stmt_children(s):
            stack.append((c, par, vec))
    return func
