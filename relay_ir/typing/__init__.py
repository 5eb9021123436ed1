"""Type inference for relay_ir: unification, relation solving, gradual shapes, run-time checks.

`infer_type(mod)` returns a new module whose every expression has its `checked_type`
(nodes rebuilt with dataclasses.replace; sharing kept). The result also carries what
inference learned about the `?` dims:

- `mod.refinements`: human-readable lines, e.g.
  "%x: dim 1 refined from ? to 3 by nn.dense at line 3";
- `mod.type_report`: a TypeInferenceReport with those lines and the messages of the
  run-time checks inserted (`runtime.check_shape` calls, see checks.py).

Layout: unify.py (unknown types and dims), infer.py (constraints and the fixpoint
solver), checks.py (rebuild + run-time checks), errors.py (messages with carets).

    >>> from relay_ir.expr import Function, Var
    >>> from relay_ir.module import IRModule
    >>> from relay_ir.ty import TensorType
    >>> from relay_ir.op.tensor import add
    >>> x = Var("x", TensorType((2, 3)))
    >>> print(infer_expr_type(Function((x,), add(x, x))))
    fn (Tensor[(2, 3), float32]) -> Tensor[(2, 3), float32]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from relay_ir.expr import Expr
from relay_ir.module import IRModule
from relay_ir.ty import Type
from relay_ir.typing.checks import Rebuilder, is_checked
from relay_ir.typing.infer import Inferencer
from tessel_errors import RelayTypeError


@dataclass
class TypeInferenceReport:
    """What inference learned: refined `?` dims and the run-time checks it inserted."""

    refinements: list[str] = field(default_factory=list)
    runtime_checks: list[str] = field(default_factory=list)


def infer_type(mod: IRModule, insert_checks: bool = True) -> IRModule:
    """Type-check `mod`: a new module with checked_type everywhere (RelayTypeError if not).

    >>> import relay_ir
    >>> m = relay_ir.parse("def @main(%x: Tensor[(2,), float32]) { add(%x, %x) }")
    >>> print(infer_type(m)["main"].checked_type)
    fn (Tensor[(2,), float32]) -> Tensor[(2,), float32]
    """
    return _deep(lambda: _infer_module(mod, insert_checks))


def _infer_module(mod: IRModule, insert_checks: bool) -> IRModule:
    inf = Inferencer(mod)
    inf.infer_module()
    rb = Rebuilder(inf, insert_checks)
    functions = {}
    for gv, fn in mod.functions.items():
        functions[rb.global_var(gv)] = rb.rebuild(fn)
    new = mod.with_functions(functions)
    new.type_report = TypeInferenceReport(
        [str(r) for r in inf.u.refinements if not is_checked(r)], list(rb.inserted)
    )
    new.refinements = new.type_report.refinements
    return new


def infer_expr_type(expr: Expr, mod: IRModule | None = None) -> Type:
    """The type of one expression (its free variables typed by their annotations).

    >>> from relay_ir.expr import Var
    >>> from relay_ir.ty import TensorType
    >>> from relay_ir.op.nn import dense
    >>> x, w = Var("x", TensorType((None, 3))), Var("w", TensorType((16, 3)))
    >>> print(infer_expr_type(dense(x, w)))
    Tensor[(?, 16), float32]
    """

    def work() -> Type:
        inf = Inferencer(mod)
        if mod is not None:
            inf.infer_module()
        t = inf.visit(expr)
        inf.solve()
        return inf.u.resolve_final(t)

    return _deep(work)


def _deep(work: Callable[[], Any]) -> Any:
    """Run `work` under the caller's own stack and recursion limit: dataflow, let chains
    and the rebuild are walked with explicit stacks, so only nesting of functions, ifs
    and matches recurses, and nesting past Python's limit is a RelayTypeError."""
    try:
        return work()
    except RecursionError:
        raise RelayTypeError(
            f"the program nests functions, ifs or matches deeper than type inference can "
            f"follow (Python's recursion limit, {sys.getrecursionlimit()}); flatten the "
            "nesting, e.g. with let bindings") from None


__all__ = ["TypeInferenceReport", "infer_expr_type", "infer_type"]
