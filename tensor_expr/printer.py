"""Readable text of expressions: infix arithmetic, function-style floordiv/min/max/calls.

    >>> import tensor_expr as te
    >>> i = te.var("i")
    >>> te.expr_to_str(te.max(i, 0) % 4)
    'floormod(max(i, 0), 4)'
"""

from __future__ import annotations

from typing import Any

from tensor_expr import expr as E

_FUNC_STYLE = (E.FloorDiv, E.FloorMod, E.Min, E.Max)


def expr_to_str(e: Any) -> str:
    """The text of an expression (buffers and tensors print as `name[indices]`)."""
    if isinstance(e, E.IterVar):
        return e.var.name
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.IntImm):
        if e.dtype == "bool":
            return "True" if e.value else "False"
        return str(e.value) if e.dtype in ("int32",) else f"{e.value}{_suffix(e.dtype)}"
    if isinstance(e, E.FloatImm):
        text = repr(float(e.value))
        return text if e.dtype == "float32" else f"{text}{_suffix(e.dtype)}"
    if isinstance(e, E.StringImm):
        return repr(e.value)
    if isinstance(e, _FUNC_STYLE):
        return f"{e.symbol}({expr_to_str(e.a)}, {expr_to_str(e.b)})"
    if isinstance(e, E.BinaryOp):
        return f"({expr_to_str(e.a)} {e.symbol} {expr_to_str(e.b)})"
    if isinstance(e, E.Not):
        return f"!{expr_to_str(e.a)}"
    if isinstance(e, E.Select):
        return (f"select({expr_to_str(e.condition)}, {expr_to_str(e.true_value)}, "
                f"{expr_to_str(e.false_value)})")
    if isinstance(e, E.Cast):
        return f"{e.dtype}({expr_to_str(e.value)})"
    if isinstance(e, E.Call):
        return f"{e.name}({', '.join(expr_to_str(a) for a in e.args)})"
    if isinstance(e, E.Reduce):
        src = ", ".join(expr_to_str(s) for s in e.source)
        axes = ", ".join(f"{a.var.name} in [{expr_to_str(a.dom.min)}, "
                         f"{expr_to_str(a.dom.min + a.dom.extent)})" for a in e.axis)
        cond = "" if _is_true(e.condition) else f", where={expr_to_str(e.condition)}"
        idx = f"[{e.value_index}]" if len(e.source) > 1 else ""
        return f"{e.combiner.name}({src}, axis=[{axes}]{cond}){idx}"
    if isinstance(e, E.ProducerLoad):
        return f"{e.producer.name}[{', '.join(expr_to_str(i) for i in e.indices)}]"
    if isinstance(e, E.Let):
        return f"(let {e.var.name} = {expr_to_str(e.value)} in {expr_to_str(e.body)})"
    # nodes of later layers (BufferLoad) print themselves
    to_text = getattr(e, "to_text", None)
    if to_text is not None:
        return to_text(expr_to_str)
    return f"<{type(e).__name__}>"


def _is_true(e: Any) -> bool:
    return isinstance(e, E.IntImm) and e.dtype == "bool" and e.value == 1


def _suffix(dtype: str) -> str:
    short = {"int64": "i64", "int16": "i16", "int8": "i8", "uint8": "u8", "uint16": "u16",
             "uint32": "u32", "uint64": "u64", "float16": "f16", "float64": "f64"}
    return short.get(dtype, f":{dtype}")
