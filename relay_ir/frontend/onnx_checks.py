"""Checks of an ONNX graph before any converter sees it, each failure an OnnxImportError
naming the node (or initializer) and what is wrong: nodes against their op's schema (the
op exists at the model's opset, input and output counts, attribute names and types),
initializers whose data contradicts their dims or type, and cycles. Nodes out of order
but acyclic are sorted, as ONNX Runtime accepts them.

    >>> from onnx import helper
    >>> node = helper.make_node("Relu", ["x", "extra"], ["y"], name="act")
    >>> try:
    ...     check_node(node, 0, 17)
    ... except OnnxImportError as e:
    ...     print(e)
    node "act" (Relu, index 0): Relu takes 1 input, got 2 (opset 17)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from relay_ir.frontend.onnx_common import OnnxImportError, onnx_dtype

DEFAULT_DOMAINS = ("", "ai.onnx")


def _where(proto: Any, index: int) -> str:
    label = f'"{proto.name}"' if proto.name else "<unnamed>"
    return f"node {label} ({proto.op_type}, index {index})"


def _count(lo: int, hi: int, what: str) -> str:
    if lo == hi:
        return f"{lo} {what}" + ("" if lo == 1 else "s")
    if hi >= 2**31 - 1:
        return f"at least {lo} {what}s"
    return f"{lo} to {hi} {what}s"


def check_node(proto: Any, index: int, opset: int) -> None:
    """The node fits its op's schema at `opset` (default-domain ops only)."""
    from onnx import AttributeProto, defs

    if proto.domain not in DEFAULT_DOMAINS:
        return
    where = _where(proto, index)
    try:
        schema = defs.get_schema(proto.op_type, opset, "")
    except defs.SchemaError:
        raise OnnxImportError(
            f"{where}: {proto.op_type} does not exist at opset {opset} (the model's "
            f"opset_import for the default domain); re-export with a current opset"
        ) from None
    ins, outs = len(proto.input), len(proto.output)
    if not schema.min_input <= ins <= schema.max_input:
        raise OnnxImportError(f"{where}: {proto.op_type} takes "
                              f"{_count(schema.min_input, schema.max_input, 'input')}, got "
                              f"{ins} (opset {opset})")
    if not schema.min_output <= outs <= schema.max_output:
        raise OnnxImportError(f"{where}: {proto.op_type} has "
                              f"{_count(schema.min_output, schema.max_output, 'output')}, got "
                              f"{outs} (opset {opset})")
    seen: set[str] = set()
    for attr in proto.attribute:
        if attr.name in seen:
            raise OnnxImportError(f"{where}: attribute {attr.name!r} is given twice")
        seen.add(attr.name)
        spec = schema.attributes.get(attr.name)
        if spec is None:
            legal = ", ".join(sorted(schema.attributes)) or "none"
            raise OnnxImportError(f"{where}: {proto.op_type} has no attribute {attr.name!r} "
                                  f"at opset {opset} (its attributes: {legal})")
        if int(attr.type) != int(spec.type):
            want = AttributeProto.AttributeType.Name(int(spec.type))
            got = (AttributeProto.AttributeType.Name(attr.type)
                   if attr.type in AttributeProto.AttributeType.values() else str(attr.type))
            raise OnnxImportError(f"{where}: attribute {attr.name!r} must be {want}, got {got}")
    for name, spec in schema.attributes.items():
        if spec.required and name not in seen:
            raise OnnxImportError(f"{where}: {proto.op_type} needs the attribute {name!r}")


def read_initializers(graph: Any) -> dict[str, np.ndarray]:
    """Every initializer as a numpy array, or an error naming the one that cannot be read."""
    from onnx import TensorProto, numpy_helper

    out: dict[str, np.ndarray] = {}
    for init in graph.initializer:
        where = f"initializer {init.name!r}"
        if init.name in out:
            raise OnnxImportError(f"{where} is given twice")
        onnx_dtype(init.data_type, where)  # a dtype we support, else a clear error
        try:
            value = numpy_helper.to_array(init)
        except (ValueError, TypeError, KeyError) as e:
            kind = (TensorProto.DataType.Name(init.data_type)
                    if init.data_type in TensorProto.DataType.values() else init.data_type)
            raise OnnxImportError(
                f"{where} ({kind}, dims {list(init.dims)}) cannot be read: {e}; its data "
                f"and its dims or type disagree (a damaged file?)") from None
        out[init.name] = value
    return out


def topological_order(graph: Any, known: set[str]) -> list[int]:
    """Node indices in an order where each reads only values made before it (the file's
    order when it already is one); a cycle is an error naming its nodes."""
    producer: dict[str, int] = {}
    for i, n in enumerate(graph.node):
        for o in n.output:
            if not o:
                continue
            if o in producer or o in known:
                first = (_where(graph.node[producer[o]], producer[o]) if o in producer
                         else "a graph input or initializer")
                raise OnnxImportError(
                    f"{_where(n, i)}: its output {o!r} is already produced by {first}; "
                    f"every ONNX value has exactly one producer (rename one of them)")
            producer[o] = i
    deps = [sorted({producer[x] for x in n.input if x in producer and x not in known})
            for n in graph.node]
    if all(d < i for i, ds in enumerate(deps) for d in ds):
        return list(range(len(deps)))
    state = [0] * len(deps)  # 0 new, 1 on the stack, 2 done
    order: list[int] = []
    for root in range(len(deps)):
        if state[root]:
            continue
        stack = [(root, 0)]
        state[root] = 1
        while stack:  # an explicit stack: a 100,000-node chain needs no recursion
            i, k = stack[-1]
            if k < len(deps[i]):
                stack[-1] = (i, k + 1)
                j = deps[i][k]
                if state[j] == 1:
                    cycle = [s for s, _ in stack[[s for s, _ in stack].index(j):]]
                    names = " -> ".join(_where(graph.node[c], c) for c in cycle + [j])
                    raise OnnxImportError(f"the graph has a cycle (each node reads the "
                                          f"next one's output): {names}; an ONNX graph "
                                          f"must be acyclic (loops belong in a Loop node)")
                if state[j] == 0:
                    state[j] = 1
                    stack.append((j, 0))
            else:
                state[i] = 2
                order.append(i)
                stack.pop()
    return order
