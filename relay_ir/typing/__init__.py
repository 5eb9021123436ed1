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
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from relay_ir.expr import Expr
from relay_ir.module import IRModule
from relay_ir.ty import Type
from relay_ir.typing.checks import Rebuilder, is_checked
from relay_ir.typing.infer import Inferencer


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


_STACK_BYTES = 256 * 1024 * 1024
_lock = threading.Lock()
_active = [0, 0]  # [running inferences, the recursion limit before the first]


def _deep(work: Callable[[], Any]) -> Any:
    """Run `work` in a thread with a big stack and recursion limit (deep programs)."""
    result: list[Any] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(work())
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(e)

    with _lock:
        if _active[0] == 0:
            _active[1] = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_active[1], 200_000))
        _active[0] += 1
        old_size = threading.stack_size()
        threading.stack_size(_STACK_BYTES)
        try:
            worker = threading.Thread(target=target, name="relay-infer-type")
            worker.start()
        finally:
            threading.stack_size(old_size)
    try:
        worker.join()
    finally:
        with _lock:
            _active[0] -= 1
            if _active[0] == 0:
                sys.setrecursionlimit(_active[1])
    if error:
        raise error[0]
    return result[0]


__all__ = ["TypeInferenceReport", "infer_expr_type", "infer_type"]
