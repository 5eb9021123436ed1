"""DeadCodeElimination: drop `let` bindings whose variable is never used.

A binding is dropped when its variable is not live (not reachable from the function's
result once dead bindings are gone) and evaluating its value has no effect: no ref
writes and no calls of functions that might write refs (op, constructor and Primitive
calls are pure, and so are calls of globals whose bodies are pure). Liveness is computed
in one top-down walk: in a let chain the body is walked first, then the bindings from
last to first, so a chain of bindings that only feed each other disappears at once.

    >>> from relay_ir.transform import DeadCodeElimination
    >>> DeadCodeElimination().opt_level
    1
"""

from __future__ import annotations

from relay_ir.expr import Call, Expr, Function, GlobalVar, Let, Var
from relay_ir.module import IRModule
from relay_ir.transform.analysis import children, is_pure
from relay_ir.transform.pass_manager import FunctionPass, PassContext
from relay_ir.transform.rewrite import rewrite


def pure_globals(mod: IRModule) -> set[GlobalVar]:
    """The globals whose evaluation has no effect (fixpoint over the call graph)."""
    pure: set[GlobalVar] = set(mod.functions)
    changed = True
    while changed:
        changed = False
        for gv in list(pure):

            def known(call: Call) -> bool:
                return isinstance(call.op, GlobalVar) and call.op in pure

            if not is_pure(mod.functions[gv].body, known):
                pure.discard(gv)
                changed = True
    return pure


def eliminate_dead_code(expr: Expr, mod: IRModule | None = None) -> Expr:
    """`expr` without its dead pure let bindings.

    >>> from relay_ir.expr import Var, Let, Tuple
    >>> x, y = Var("x"), Var("y")
    >>> eliminate_dead_code(Let(y, Tuple(()), x)) is x
    True
    """
    pure = pure_globals(mod) if mod is not None else set()

    def pure_call(call: Call) -> bool:
        return isinstance(call.op, GlobalVar) and call.op in pure

    live: set[Var] = set()
    dead: set[Let] = set()
    seen: set[int] = set()

    def mark(root: Expr) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, Var):
                live.add(node)
            elif isinstance(node, Let):
                chain = []
                while isinstance(node, Let):
                    chain.append(node)
                    seen.add(id(node))
                    node = node.body
                mark(node)
                for let in reversed(chain):
                    if let.var in live or not is_pure(let.value, pure_call):
                        mark(let.value)
                    else:
                        dead.add(let)
            else:
                stack.extend(children(node))

    mark(expr)
    if not dead:
        return expr

    def visit(old: Expr, new: Expr) -> Expr:
        if isinstance(old, Let) and old in dead:
            return new.body  # type: ignore[attr-defined]
        return new

    return rewrite(expr, visit)


class DeadCodeElimination(FunctionPass):
    """Remove unused, effect-free let bindings from every function."""

    name = "DeadCodeElimination"
    opt_level = 1

    def transform_function(self, fn: Function, mod: IRModule, ctx: PassContext) -> Function:
        """Eliminate dead bindings in `fn`."""
        out = eliminate_dead_code(fn, mod)
        assert isinstance(out, Function)
        return out


__all__ = ["DeadCodeElimination", "eliminate_dead_code", "pure_globals"]
