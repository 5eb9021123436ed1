"""ONNX converters, part 4: control flow (If, Loop, Scan) over subgraphs.

Each subgraph (a branch, a body) is converted by a child of the graph converter with the
same node converters (`ctx.subgraph`); the outer values it reads are let-bound once outside
the control flow (`sub.wrap`). If becomes a relay `if` on a scalar bool. Loop and Scan
become a local recursive function, let-bound and called in tail position, so the VM runs
a loop of any trip count in one frame:

    let %loop = fn (%i, %cond, %carried..., %scan...) {
      if (%i < %M && %cond) { <body>; %loop(%i + 1, %cond', %carried'..., %scan ++ [%y]...) }
      else { (%carried..., %scan...) }
    };
    %loop(0, %cond0, %initial..., <empty>...)

Loop-carried values keep one type (the initial value's). A scan output grows by one slice
an iteration from an empty tensor typed `?` along the growing axis (runtime.relax_shape);
that dim stays `?` in the result (one accumulator type serves every iteration).

    >>> from relay_ir.frontend.onnx_common import CONVERTERS
    >>> sorted(k for k in CONVERTERS if CONVERTERS[k].__module__ == __name__)
    ['If', 'Loop', 'Scan']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import relay_ir.op.tensor as T
import relay_ir.op.transform as tf
from relay_ir.builder import const, var
from relay_ir.expr import Call, Expr, Function, If, Let, Tuple, TupleGetItem, Var
from relay_ir.frontend.onnx_common import OnnxNode, converter, normalize_axis
from relay_ir.op._common import shape_str
from relay_ir.op.runtime import check_shape, relax_shape
from relay_ir.ty import ANY, Dim, TensorType, TupleType, Type

Ctx = Any  # relay_ir.frontend.onnx._GraphConverter


def _scalar_bool(ctx: Ctx, e: Expr, node: OnnxNode, what: str) -> Expr:
    t = ctx.tensor_type(e, node)
    if t.dtype != "bool" or not all(d == 1 for d in t.shape):
        raise node.error(f"{what} must be a bool tensor of one element, got {t}")
    return e if not t.shape else tf.reshape(e, ())


def _types(sub: Ctx, outs: Sequence[Expr], node: OnnxNode, what: str) -> list[TensorType]:
    types = []
    for k, o in enumerate(outs):
        t = sub.type_of(o)
        if not isinstance(t, TensorType):
            raise node.error(f"{what} output {k} is {t}, not a tensor (sequences and "
                             f"optionals are not supported)")
        types.append(t)
    return types


def _results(ctx: Ctx, e: Expr, types: Sequence[Type]) -> list[Expr]:
    """One expression per output of a control-flow node whose value `e` is a tuple."""
    ctx.types[e] = TupleType(tuple(types))
    return [TupleGetItem(e, k) for k in range(len(types))]


def _subgraph_arity(node: OnnxNode, attr: str, n_in: int, n_out: int, how: str) -> Any:
    g = node.attr(attr)
    if len(g.input) != n_in or len(g.output) < n_out:
        raise node.error(f"its {attr} takes {len(g.input)} inputs and gives {len(g.output)} "
                         f"outputs, but {how}; make the subgraph's inputs and outputs match "
                         f"the node's")
    return g


# --- If ---------------------------------------------------------------------------------

def _branch(ctx: Ctx, node: OnnxNode, attr: str) -> tuple[Ctx, list[Expr], list[TensorType]]:
    g = node.attr(attr)
    if len(g.output) != len(node.outputs):
        raise node.error(f"its {attr} produces {len(g.output)} outputs, but the If node has "
                         f"{len(node.outputs)}; each branch must produce one value per If "
                         f"output")
    if len(g.input):
        raise node.error(f"its {attr} declares {len(g.input)} inputs; an If branch takes "
                         f"none (it reads outer values by name)")
    sub = ctx.subgraph(g, [])
    outs = sub.convert_outputs()
    return sub, outs, _types(sub, outs, node, attr)


def _packed(outs: Sequence[Expr]) -> Expr:
    return outs[0] if len(outs) == 1 else Tuple(tuple(outs))


@converter("If")
def _if(ctx: Ctx, node: OnnxNode) -> list[Expr]:
    cond = _scalar_bool(ctx, ctx.input(node, 0), node, "the condition (input 0)")
    known = ctx.maybe_static(node, 0)
    if known is not None:  # only the branch taken is converted
        sub, outs, types = _branch(ctx, node, "then_branch" if bool(known.reshape(()))
                                   else "else_branch")
        if len(outs) == 1:
            e = sub.wrap(outs[0])
            ctx.types[e] = types[0]
            return [e]
        return _results(ctx, sub.wrap(Tuple(tuple(outs))), types)
    then, then_outs, then_types = _branch(ctx, node, "then_branch")
    other, else_outs, else_types = _branch(ctx, node, "else_branch")
    types = []
    for k, (a, b) in enumerate(zip(then_types, else_types)):
        if a.dtype != b.dtype or a.ndim != b.ndim:
            raise node.error(f"output {k} is {a} in then_branch but {b} in else_branch; the "
                             f"branches must agree in element type and rank")
        differ = [i for i, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y]
        if differ:  # ONNX allows branch shapes to differ: those dims are `?`
            then_outs[k] = relax_shape(then_outs[k], differ)
            else_outs[k] = relax_shape(else_outs[k], differ)
            a = TensorType(tuple(ANY if i in differ else d for i, d in enumerate(a.shape)),
                           a.dtype)
        types.append(a)
    e = If(cond, then.wrap(_packed(then_outs)), other.wrap(_packed(else_outs)))
    if len(types) == 1:
        ctx.types[e] = types[0]
        return [e]
    return _results(ctx, e, types)


# --- the recursion Loop and Scan share ----------------------------------------------------

def _empty_scan(t: TensorType, axis: int, node: OnnxNode, k: int) -> Expr:
    if not all(isinstance(d, int) for d in t.shape):
        raise node.error(f"scan output {k} has a dynamic per-iteration shape {t}; give the "
                         f"model static input shapes with from_onnx(shape=...)")
    shape = list(t.shape)
    shape.insert(axis, 0)
    return relax_shape(const(np.zeros(shape, t.dtype)), [axis])


def _grown(acc: Var, y: Expr, axis: int, reverse: bool) -> Expr:
    row = tf.expand_dims(y, axis)
    return tf.concatenate([row, acc] if reverse else [acc, row], axis)


def _recursion(node: OnnxNode, sub: Ctx, counter: Var, params: Sequence[Var],
               go_on: Expr | None, step_args: Sequence[Expr], init: Sequence[Expr],
               results: Sequence[Var], step_lets: Sequence[tuple[Var, Expr]] = ()) -> Expr:
    """let %f = fn (counter, params...) { if (go_on) { step_lets; f(counter + 1,
    step_args...) } else { results } }; f(0, init...), inside the captured outer values'
    lets."""
    f = Var(f"loop_{node.name or node.index}")
    one = const(np.array(1, counter.type_annotation.dtype))
    step: Expr = Call(f, (T.add(counter, one), *step_args))
    for v, value in reversed(step_lets):
        step = Let(v, value, step)
    done = Tuple(tuple(results))
    body = step if go_on is None else If(go_on, step, done)
    fn = Function((counter, *params), body)
    zero = const(np.array(0, counter.type_annotation.dtype))
    return sub.wrap(Let(f, fn, Call(f, (zero, *init))))


def _finish_scan(e: Expr, t: TensorType, axis: int, length: int | None, node: OnnxNode,
                 k: int) -> tuple[Expr, TensorType]:
    # the grown axis stays `?` even for a known trip count: a check_shape to `length`
    # would refine the recursion's one accumulator type and contradict the shorter ones
    del length, node, k
    shape = list(t.shape)
    shape.insert(axis, ANY)
    return e, TensorType(tuple(shape), t.dtype)


def _carried_types(ctx: Ctx, node: OnnxNode, init: Sequence[Expr]) -> list[TensorType]:
    types = []
    for j, e in enumerate(init):
        t = ctx.type_of(e)
        if not isinstance(t, TensorType):
            raise node.error(f"loop-carried value {j} is {t}, not a tensor (sequences and "
                             f"optionals are not supported)")
        types.append(t)
    return types


def _check_fixed(node: OnnxNode, want: Sequence[TensorType], got: Sequence[TensorType],
                 what: str) -> None:
    for j, (a, b) in enumerate(zip(want, got)):
        if a != b:
            raise node.error(f"{what} {j} enters the body as {a} but leaves it as {b}; a "
                             f"loop-carried value must keep one type across iterations")


def _declared(vi: Any) -> tuple[int, ...] | None:
    """The static shape a subgraph output's value info declares, else None."""
    tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if tt is None or not tt.HasField("shape") or \
            not all(d.HasField("dim_value") for d in tt.shape.dim):
        return None
    return tuple(int(d.dim_value) for d in tt.shape.dim)


def _settled(sub: Ctx, node: OnnxNode, outs: Sequence[Expr],
             want: Sequence[tuple[Dim, ...] | None], what: str) -> list[Expr]:
    """The body's outputs, each of the shape it must have (a carried value's entry shape,
    a scan output's declared static shape): one that leaves with `?` where a number is
    wanted (e.g. y + Slice(x, i, i + 1) with run-time bounds) gets the run-time check of
    gradual typing (runtime.check_shape, naming the node and value); a contradiction is
    left to the callers' errors."""
    out = list(outs)
    for j, (e, shape) in enumerate(zip(outs, want)):
        t = sub.type_of(e)
        if shape is None or not isinstance(t, TensorType) or t.shape == shape or \
                len(shape) != t.ndim or any(not (d == w or d is ANY)
                                            for w, d in zip(shape, t.shape)):
            continue
        out[j] = check_shape(e, [w if isinstance(w, int) else -1 for w in shape],
                             f"ONNX {node.where()}: {what} {j} must keep its shape "
                             f"{shape_str(shape)} across iterations")
        sub.types[out[j]] = TensorType(tuple(shape), t.dtype)
    return out


# --- Loop -------------------------------------------------------------------------------

@converter("Loop")
def _loop(ctx: Ctx, node: OnnxNode) -> list[Expr]:
    n = len(node.inputs) - 2
    body = _subgraph_arity(node, "body", 2 + n, 1 + n,
                           f"the Loop node has {n} loop-carried values, so the body must "
                           f"take 2 + {n} inputs (iteration number, condition, the values) "
                           f"and give 1 + {n} outputs (condition, the values) and then its "
                           f"scan outputs")
    n_scan = len(body.output) - 1 - n
    if len(node.outputs) != n + n_scan:
        raise node.error(f"it has {len(node.outputs)} outputs, but its body gives {n} "
                         f"loop-carried values and {n_scan} scan outputs; the node needs "
                         f"one output for each")
    if not ctx.has(node, 0) and not ctx.has(node, 1):
        raise node.error("it has neither a trip count (input 0) nor a condition (input 1), "
                         "so it never ends; give one of them")
    init = [ctx.input(node, 2 + j) for j in range(n)]
    carried_types = _carried_types(ctx, node, init)
    counter = var(body.input[0].name, TensorType((), "int64"))
    cond_in = var(body.input[1].name, TensorType((), "bool"))
    carried = [var(body.input[2 + j].name, t) for j, t in enumerate(carried_types)]
    sub = ctx.subgraph(body, [(v.name_hint, v) for v in (counter, cond_in, *carried)])
    outs = sub.convert_outputs()
    outs[1:1 + n] = _settled(sub, node, outs[1:1 + n], [t.shape for t in carried_types],
                             "loop-carried value")
    outs[1 + n:] = _settled(sub, node, outs[1 + n:],
                            [_declared(vi) for vi in body.output[1 + n:]], "scan output")
    cond_out = _scalar_bool(sub, outs[0], node, "the body's condition (output 0)")
    _check_fixed(node, carried_types, _types(sub, outs[1:1 + n], node, "body"),
                 "loop-carried value")
    scan_types = _types(sub, outs[1 + n:], node, "body")
    scans = [var(f"scan_{k}", TensorType((ANY, *t.shape), t.dtype))
             for k, t in enumerate(scan_types)]

    tests = []
    trip = None
    if ctx.has(node, 0):
        m = ctx.input(node, 0)
        mt = ctx.tensor_type(m, node)
        if mt.dtype != "int64" or not all(d == 1 for d in mt.shape):
            raise node.error(f"the trip count (input 0) must be an int64 tensor of one "
                             f"element, got {mt}")
        tests.append(T.less(counter, m if not mt.shape else tf.reshape(m, ())))
        known = ctx.maybe_static(node, 0)
        trip = None if known is None else max(int(known.reshape(())), 0)
    cond0: Expr = const(np.array(True))
    if ctx.has(node, 1):
        cond0 = _scalar_bool(ctx, ctx.input(node, 1), node, "the condition (input 1)")
        tests.append(cond_in)
        trip = None  # the body's condition may end the loop early
    go_on = tests[0] if len(tests) == 1 else T.logical_and(tests[0], tests[1])
    step = [cond_out, *outs[1:1 + n],
            *(_grown(acc, y, 0, False) for acc, y in zip(scans, outs[1 + n:]))]
    e = _recursion(node, sub, counter, [cond_in, *carried, *scans], go_on, step,
                   [cond0, *init, *(_empty_scan(t, 0, node, k)
                                    for k, t in enumerate(scan_types))],
                   [*carried, *scans])
    ctx.types[e] = TupleType((*carried_types, *(s.type_annotation for s in scans)))
    results = [TupleGetItem(e, k) for k in range(n + n_scan)]
    for k, t in enumerate(scan_types):
        results[n + k], ctx.types[results[n + k]] = _finish_scan(
            results[n + k], t, 0, trip, node, k)
    for r, t in zip(results[:n], carried_types):
        ctx.types[r] = t
    return results


# --- Scan -------------------------------------------------------------------------------

def _axes(node: OnnxNode, name: str, count: int, ranks: Sequence[int]) -> list[int]:
    given = node.ints(name, [0] * count)
    if len(given) != count:
        raise node.error(f"attribute {name!r} has {len(given)} entries, one per scan "
                         f"{'input' if 'input' in name else 'output'} ({count}) is needed")
    return [normalize_axis(a, r, node, f"{name} entry") for a, r in zip(given, ranks)]


@converter("Scan")
def _scan(ctx: Ctx, node: OnnxNode) -> list[Expr]:
    if node.opset < 9:
        raise node.error("Scan before opset 9 (with a batch axis and sequence_lens) is not "
                         "supported; re-export with opset 9 or later")
    k_in = int(node.attr("num_scan_inputs"))
    n = len(node.inputs) - k_in
    if n < 0:
        raise node.error(f"num_scan_inputs is {k_in}, but the node has only "
                         f"{len(node.inputs)} inputs")
    body = _subgraph_arity(node, "body", n + k_in, n,
                           f"the Scan node has {n} state values and {k_in} scan inputs, so "
                           f"the body must take {n + k_in} inputs and give {n} states and "
                           f"then its scan outputs")
    k_out = len(body.output) - n
    if len(node.outputs) != n + k_out:
        raise node.error(f"it has {len(node.outputs)} outputs, but its body gives {n} states "
                         f"and {k_out} scan outputs; the node needs one output for each")
    init = [ctx.input(node, j) for j in range(n)]
    xs = [ctx.input(node, n + k) for k in range(k_in)]
    x_types = [ctx.tensor_type(x, node) for x in xs]
    in_axes = _axes(node, "scan_input_axes", k_in, [t.ndim for t in x_types])
    in_rev = node.ints("scan_input_directions", [0] * k_in)
    lengths = {t.shape[a] for t, a in zip(x_types, in_axes)}
    if len(lengths) != 1 or not all(isinstance(d, int) for d in lengths):
        raise node.error(f"the scan inputs' lengths along their scan axes are "
                         f"{sorted(map(str, lengths))}; they must be one static number "
                         f"(give static input shapes with from_onnx(shape=...))")
    length = int(next(iter(lengths)))
    state_types = _carried_types(ctx, node, init)
    counter = var("scan_iteration", TensorType((), "int64"))
    states = [var(body.input[j].name, t) for j, t in enumerate(state_types)]
    slice_vars = [var(body.input[n + k].name, TensorType(
        t.shape[:a] + t.shape[a + 1:], t.dtype)) for k, (t, a) in enumerate(zip(x_types,
                                                                             in_axes))]
    sub = ctx.subgraph(body, [(v.name_hint, v) for v in (*states, *slice_vars)])
    outs = sub.convert_outputs()
    _check_fixed(node, state_types, _types(sub, outs[:n], node, "body"), "state value")
    y_types = _types(sub, outs[n:], node, "body")
    out_axes = _axes(node, "scan_output_axes", k_out, [t.ndim + 1 for t in y_types])
    out_rev = node.ints("scan_output_directions", [0] * k_out)
    captured = [var(f"scan_input_{k}", t) for k, t in enumerate(x_types)]
    last = const(np.array(length - 1, "int64"))
    slices = [(v, tf.take(x, T.subtract(last, counter) if r else counter, a))
              for v, x, a, r in zip(slice_vars, captured, in_axes, in_rev)]
    accs = [var(f"scan_{k}", TensorType(tuple(ANY if i == a else d for i, d in enumerate(
        t.shape[:a] + (0,) + t.shape[a:])), t.dtype))
        for k, (t, a) in enumerate(zip(y_types, out_axes))]
    step = [*outs[:n], *(_grown(acc, y, a, bool(r)) for acc, y, a, r in
                         zip(accs, outs[n:], out_axes, out_rev))]
    go_on = T.less(counter, const(np.array(length, "int64")))
    e = _recursion(node, sub, counter, [*states, *accs], go_on, step,
                   [*init, *(_empty_scan(t, a, node, k)
                             for k, (t, a) in enumerate(zip(y_types, out_axes)))],
                   [*states, *accs], slices)
    for v, x in reversed(list(zip(captured, xs))):  # computed once, outside the recursion
        e = Let(v, x, e)
    ctx.types[e] = TupleType((*state_types, *(a.type_annotation for a in accs)))
    results = [TupleGetItem(e, k) for k in range(n + k_out)]
    for j, t in enumerate(state_types):
        ctx.types[results[j]] = t
    for k, (t, a) in enumerate(zip(y_types, out_axes)):
        results[n + k], ctx.types[results[n + k]] = _finish_scan(
            results[n + k], t, a, length, node, k)
    return results
