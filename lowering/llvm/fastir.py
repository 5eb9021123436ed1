"""Cheaper llvmlite bookkeeping for the functions the code generator fills, same IR text.

A kernel is tens of thousands of llvmlite instructions; llvmlite names each one through
`NameScope.deduplicate` (a loop of set lookups and `str.format`) and computes its reference
text (`%"name"`) lazily behind a caught AttributeError. `fast_scope(fn)` gives `fn` a scope
that names values by the same rule in fewer steps, and `Builder` stores each instruction's
reference text as it inserts it. Both produce exactly the names and text llvmlite would
(benchmarks/codegen_speed.py --hash checks a corpus old vs new). On an llvmlite whose
internals differ, a self-check at import turns the shortcuts off (FAST_OK) with a warning.

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
    if not FAST_OK:
        return
    old = fn.scope
    new = _FastScope()
    new._useset = set(old._useset)
    new._basenamemap = old._basenamemap.copy()
    fn.scope = new


# Instructions without side effects whose result depends only on their operands: an
# identical earlier one in the same block can stand in for a new one (local value
# numbering). Loads and calls are not here (a store or call may come between).
_PURE_OPS = ("add", "sub", "mul", "sdiv", "srem", "udiv", "urem", "and_", "or_", "xor",
             "shl", "ashr", "lshr", "icmp_signed", "icmp_unsigned", "select", "sext",
             "zext", "trunc", "gep", "insert_element", "shuffle_vector")


def _key(x: Any) -> Any:
    """Identity of an operand: the object itself for plain Python values, its id for
    llvmlite values (the entry holds the operands, so that no id is reused meanwhile)."""
    if x is None or isinstance(x, (str, int, bool)):
        return x
    if isinstance(x, (list, tuple)):
        return tuple(_key(y) for y in x)
    return id(x)


class Builder(ir.IRBuilder):
    """An IRBuilder that fills each named instruction's reference text as it inserts it
    (what NamedValue._get_reference would compute on first use), and that returns the
    earlier result for a pure instruction already emitted in the current block with the
    same operands. Index arithmetic repeats a lot (each access of each unrolled
    iteration computes its flat offset from the loop variables); emitting it once is less
    text to make here and less for LLVM's O3 to remove again. The earlier instruction
    dominates the new position because both are in one block and the builder appends
    at its end; the table is dropped whenever the block changes or the builder does not
    append at the end."""

    def __init__(self, block: ir.Block | None = None) -> None:
        super().__init__(block)
        self._vn: dict[tuple[Any, ...], tuple[Any, ir.Value]] = {}
        self._vn_block: ir.Block | None = None

    def _numbered(self, op: str, args: tuple[Any, ...], kw: dict[str, Any]) -> ir.Value:
        blk = self._block if FAST_OK else None
        if kw.get("name") or blk is None or self._anchor != len(blk.instructions):
            return getattr(ir.IRBuilder, op)(self, *args, **kw)
        if blk is not self._vn_block:
            self._vn, self._vn_block = {}, blk
        key = (op, _key(args), _key(sorted(kw.items())))
        hit = self._vn.get(key)
        if hit is not None:
            return hit[1]
        out = getattr(ir.IRBuilder, op)(self, *args, **kw)
        self._vn[key] = ((args, kw), out)
        return out

    def _insert(self, instr: Any) -> None:
        super()._insert(instr)
        if not FAST_OK:
            return
        name = instr._name
        if "\\" not in name and '"' not in name:
            instr._StringReferenceCaching__cached_refstr = f'%"{name}"'


def _make_numbered(op: str) -> Any:
    def method(self: Builder, *args: Any, **kw: Any) -> ir.Value:
        return self._numbered(op, args, kw)

    method.__name__ = op
    method.__doc__ = getattr(ir.IRBuilder, op).__doc__
    return method


for _op in _PURE_OPS:
    setattr(Builder, _op, _make_numbered(_op))


def _same_text_as_llvmlite() -> bool:
    """Whether the shortcuts above, which lean on llvmlite internals (NameScope's fields,
    the name-mangled reference cache), still give llvmlite's own text. The project pins
    llvmlite only from below: a release that renames those internals must cost speed,
    never a crash or different IR, so a mismatch turns the shortcuts off (with a
    warning) and every kernel is built through llvmlite's plain path."""
    def emit(fast: bool) -> str:
        i32 = ir.IntType(32)
        fn = ir.Function(ir.Module(), ir.FunctionType(i32, [i32]), "f")
        if fast:
            fast_scope(fn)
        b = (Builder if fast else ir.IRBuilder)(fn.append_basic_block("entry"))
        x = b.add(fn.args[0], ir.Constant(i32, 1), name="x")
        y = b.add(x, x, name="x")
        b.ret(b.mul(y, b.add(x, ir.Constant(i32, 2))))
        return str(fn)

    global FAST_OK
    FAST_OK = True
    try:
        same = emit(True) == emit(False)
    except (AttributeError, TypeError, KeyError):
        same = False
    if not same:
        import warnings
        warnings.warn("lowering.llvm.fastir: this llvmlite's internals differ from the ones "
                      "the fast IR builder relies on; kernels build through llvmlite's plain "
                      "path (slower, same code)", RuntimeWarning, stacklevel=2)
    FAST_OK = same
    return same


FAST_OK = _same_text_as_llvmlite()
