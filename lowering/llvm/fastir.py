"""Cheaper llvmlite bookkeeping for the functions the code generator fills, same IR text.

A kernel is tens of thousands of llvmlite instructions; llvmlite names each one through
`NameScope.deduplicate` (a loop of set lookups and `str.format`) and computes its reference
text (`%"name"`) lazily behind a caught AttributeError. `fast_scope(fn)` gives `fn` a scope
that names values by the same rule in fewer steps, and `Builder` stores each instruction's
reference text as it inserts it. Both produce exactly the names and text llvmlite would
(benchmarks/codegen_speed.py --hash checks a corpus old vs new).

    >>> from llvmlite import ir
    >>> fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), []), "f")
    >>> fast_scope(fn)
    >>> b = Builder(fn.append_basic_block("entry"))
    >>> x = b.add(ir.Constant(ir.IntType(32), 1), ir.Constant(ir.IntType(32), 2))
    >>> x.get_reference()
    '%".2"'
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from llvmlite.ir import _utils


class _FastScope(_utils.NameScope):
    """NameScope.register with llvmlite's deduplication rule, in fewer Python steps."""

    def register(self, name: str, deduplicate: bool = False) -> str:
        used = self._useset
        if name in used:
            if not deduplicate:
                raise _utils.DuplicatedNameError(name)
            base, counts = name, self._basenamemap
            while name in used:  # same sequence as NameScope.deduplicate: base.1, base.2, ...
                ident = counts[base] + 1
                counts[base] = ident
                name = f"{base}.{ident}"
        used.add(name)
        return name


def fast_scope(fn: ir.Function) -> None:
    """Give `fn` (before its blocks are added) a faster scope holding the same names."""
    old = fn.scope
    new = _FastScope()
    new._useset = set(old._useset)
    new._basenamemap = old._basenamemap.copy()
    fn.scope = new


class Builder(ir.IRBuilder):
    """An IRBuilder that fills each named instruction's reference text as it inserts it
    (what NamedValue._get_reference would compute on first use)."""

    def _insert(self, instr: Any) -> None:
        super()._insert(instr)
        name = instr._name
        if "\\" not in name and '"' not in name:
            instr._StringReferenceCaching__cached_refstr = f'%"{name}"'
