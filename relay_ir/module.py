"""IRModule: the global functions and ADT definitions of a program.

Treat a module as immutable: `with_function` / `with_type_definition` return new modules.

    >>> from relay_ir.expr import Var, Function
    >>> x = Var("x")
    >>> mod = IRModule.from_expr(Function((x,), x))
    >>> mod["main"].params[0] is x
    True
"""

from __future__ import annotations

from typing import Any

from relay_ir.expr import Constructor, Expr, Function, GlobalVar
from relay_ir.ty import GlobalTypeVar, TypeData
from tessel_errors import RelayError


class IRModule:
    """Global functions (GlobalVar -> Function) and type definitions (GlobalTypeVar -> TypeData)."""

    def __init__(
        self,
        functions: dict[GlobalVar, Function] | None = None,
        type_definitions: dict[GlobalTypeVar, TypeData] | None = None,
    ) -> None:
        self.functions: dict[GlobalVar, Function] = dict(functions or {})
        self.type_definitions: dict[GlobalTypeVar, TypeData] = dict(type_definitions or {})
        names = [gv.name_hint for gv in self.functions]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise RelayError(f"module defines global function(s) {sorted(dup)} more than once")

    # --- lookups -------------------------------------------------------------------------

    def get_global_var(self, name: str) -> GlobalVar:
        """The GlobalVar called `name` (without the `@`)."""
        for gv in self.functions:
            if gv.name_hint == name:
                return gv
        raise RelayError(
            f"module has no global function @{name}; it has "
            f"{sorted('@' + g.name_hint for g in self.functions)}"
        )

    def has_function(self, name: str) -> bool:
        """Whether a global function called `name` exists."""
        return any(gv.name_hint == name for gv in self.functions)

    def get_global_type_var(self, name: str) -> GlobalTypeVar:
        """The GlobalTypeVar of the ADT called `name`."""
        for gtv in self.type_definitions:
            if gtv.name == name:
                return gtv
        raise RelayError(
            f"module has no type definition {name!r}; it has "
            f"{sorted(g.name for g in self.type_definitions)}"
        )

    def get_constructor(self, name: str) -> Constructor:
        """The ADT constructor called `name` (e.g. "Cons")."""
        for td in self.type_definitions.values():
            for c in td.constructors:
                if c.name_hint == name:
                    return c
        raise RelayError(f"module has no constructor {name!r}")

    def __getitem__(self, key: str | GlobalVar | GlobalTypeVar) -> Any:
        if isinstance(key, GlobalTypeVar):
            return self.type_definitions[key]
        if isinstance(key, GlobalVar):
            if key not in self.functions:
                raise RelayError(f"module has no global function @{key.name_hint}")
            return self.functions[key]
        return self.functions[self.get_global_var(key)]

    def __contains__(self, key: str | GlobalVar) -> bool:
        if isinstance(key, GlobalVar):
            return key in self.functions
        return self.has_function(key)

    def __iter__(self):
        return iter(self.functions.items())

    def __len__(self) -> int:
        return len(self.functions)

    # --- building new modules ------------------------------------------------------------

    def copy(self) -> IRModule:
        """A shallow copy (same nodes, new dicts)."""
        new = IRModule(self.functions, self.type_definitions)
        for k, v in self.__dict__.items():  # keep what inference attaches (type_report, ...)
            if k not in ("functions", "type_definitions"):
                setattr(new, k, v)
        return new

    def with_function(self, gv_or_name: GlobalVar | str, fn: Function) -> IRModule:
        """A new module where `gv_or_name` is bound to `fn` (a name reuses its GlobalVar)."""
        if not isinstance(fn, Function):
            raise RelayError(f"a global must be a Function, got {type(fn).__name__}")
        if isinstance(gv_or_name, str):
            gv = (
                self.get_global_var(gv_or_name)
                if self.has_function(gv_or_name)
                else GlobalVar(gv_or_name)
            )
        else:
            gv = gv_or_name
            for old in self.functions:
                if old.name_hint == gv.name_hint and old is not gv:
                    raise RelayError(f"module already has a different @{gv.name_hint}")
        new = self.copy()
        new.functions[gv] = fn
        return new

    def with_functions(self, functions: dict[GlobalVar, Function]) -> IRModule:
        """A new module with the same types and these functions (for passes)."""
        new = self.copy()
        new.functions = dict(functions)
        return new

    def with_type_definition(self, td: TypeData) -> IRModule:
        """A new module with the ADT `td` added (or replaced)."""
        new = self.copy()
        new.type_definitions[td.header] = td
        return new

    @staticmethod
    def from_expr(
        expr: Expr,
        functions: dict[GlobalVar, Function] | None = None,
        type_definitions: dict[GlobalTypeVar, TypeData] | None = None,
    ) -> IRModule:
        """Wrap `expr` as @main; a non-function becomes a function of its free vars.

        >>> from relay_ir.expr import Var
        >>> IRModule.from_expr(Var("y"))["main"].params[0].name_hint
        'y'
        """
        if not isinstance(expr, Function):
            from relay_ir.visitor import free_vars

            expr = Function(tuple(free_vars(expr)), expr)
        mod = IRModule(functions, type_definitions)
        return mod.with_function("main", expr)

    def import_prelude(self) -> IRModule:
        """A new module with the prelude's types (List, Option, Tree) and functions added."""
        from relay_ir.prelude import load_prelude

        return load_prelude(self)

    def __str__(self) -> str:
        from relay_ir.printer import astext

        return astext(self)

    def __repr__(self) -> str:
        fns = ", ".join("@" + gv.name_hint for gv in self.functions)
        tys = ", ".join(t.name for t in self.type_definitions)
        return f"IRModule(functions=[{fns}], types=[{tys}])"
