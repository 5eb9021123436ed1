"""Inline: replace calls of globals marked ("Inline", 1) by the callee's body.

Each call site gets a fresh copy of the callee (new variables, so nothing is bound
twice). Atomic arguments (variables, constants, globals) are substituted for the
parameters; other arguments are let-bound first so they are still evaluated once, before
the body. Globals that call themselves (directly or through other inline globals) are
not inlined. An inlined global that is no longer referenced is removed from the module.

    >>> Inline().name
    'Inline'
"""

from __future__ import annotations

from relay_ir.expr import Call, Constant, Constructor, Expr, Function, GlobalVar, Var
from relay_ir.module import IRModule
from relay_ir.transform.analysis import post_order
from relay_ir.transform.pass_manager import Pass, PassContext
from relay_ir.transform.rewrite import fresh_copy, let_chain, rewrite, substitute


def _callees(fn: Function) -> set[GlobalVar]:
    return {n for n in post_order(fn) if isinstance(n, GlobalVar)}


def _recursive(mod: IRModule, candidates: set[GlobalVar]) -> set[GlobalVar]:
    """The candidates that can reach themselves through calls."""
    graph = {gv: _callees(mod.functions[gv]) for gv in mod.functions}
    out = set()
    for gv in candidates:
        stack, seen = list(graph[gv]), set()
        while stack:
            g = stack.pop()
            if g is gv:
                out.add(gv)
                break
            if g in seen or g not in graph:
                continue
            seen.add(g)
            stack.extend(graph[g])
    return out


def _inline_call(callee: Function, args: tuple[Expr, ...]) -> Expr:
    copy = fresh_copy(callee)
    mapping: dict[Var, Expr] = {}
    bindings: list[tuple[Var, Expr]] = []
    for param, arg in zip(copy.params, args):
        if isinstance(arg, (Var, Constant, GlobalVar, Constructor)):
            mapping[param] = arg
        else:
            bindings.append((param, arg))
    return let_chain(bindings, substitute(copy.body, mapping))


def inline_globals(mod: IRModule) -> IRModule:
    """`mod` with calls of its ("Inline", 1) globals inlined."""
    marked = {gv for gv, fn in mod.functions.items() if fn.attr("Inline")}
    marked -= _recursive(mod, marked)
    if not marked:
        return mod
    functions = dict(mod.functions)
    # Inline inside the inline globals first (in call-graph order: repeat to a fixpoint,
    # bounded because they are not recursive).
    for _ in range(len(marked) + 1):
        changed = False
        for gv in list(functions):
            new = _inline_in(functions[gv], functions, marked)
            if new is not functions[gv]:
                functions[gv], changed = new, True
        if not changed:
            break
    used = set()
    for gv, fn in functions.items():
        used |= {g for g in _callees(fn) if g is not gv}
    for gv in marked:
        if gv not in used and gv.name_hint != "main":
            del functions[gv]
    return mod.with_functions(functions)


def _inline_in(fn: Function, functions: dict[GlobalVar, Function], marked: set[GlobalVar]
               ) -> Function:
    def visit(old: Expr, new: Expr) -> Expr:
        if isinstance(new, Call) and isinstance(new.op, GlobalVar) and new.op in marked:
            callee = functions[new.op]
            if len(callee.params) == len(new.args):
                return _inline_call(callee, new.args)
        return new

    out = rewrite(fn, visit)
    assert isinstance(out, Function)
    return out


class Inline(Pass):
    """Inline the globals marked ("Inline", 1)."""

    name = "Inline"
    opt_level = 1

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Inline every call of a marked, non-recursive global."""
        return inline_globals(mod)


__all__ = ["Inline", "inline_globals"]
