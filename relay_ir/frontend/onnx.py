"""ONNX frontend: `from_onnx(model) -> (mod, params)` builds relay_ir from an ONNX graph.

Graph inputs become the first parameters of @main (in graph order), then one parameter per
initializer that the graph uses as a tensor; `params` maps those names to numpy arrays.
Dynamic input dims (a dim_param or no dim at all) become `?`. Values known at conversion
time (Constant nodes, integer initializers, Shape of a static tensor, and small
computations on them) are folded, so that Reshape, Slice, Pad, Expand and friends see
their shape inputs as numbers; where such an input is not static the error names the node,
except for Reshape, which then reshapes at run time (relay's dyn.reshape), and Slice, whose
starts, ends and steps may then be run-time values (relay's dyn.strided_slice).

    >>> import onnx
    >>> from onnx import helper, TensorProto
    >>> g = helper.make_graph(
    ...     [helper.make_node("Relu", ["x"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    >>> mod, params = from_onnx(helper.make_model(g))
    >>> print(mod["main"].params[0].type_annotation)
    Tensor[(?, 4), float32]
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from relay_ir.builder import const, var
from relay_ir.expr import Call, Constant, Expr, Function, Let, Tuple, TupleGetItem, Var
from relay_ir.frontend import (  # noqa: F401  (importing registers the converters)
    onnx_control_flow,
    onnx_misc_ops,
    onnx_nn_ops,
    onnx_tensor_ops,
)
from relay_ir.frontend.onnx_checks import check_node, read_initializers, topological_order
from relay_ir.frontend.onnx_common import (
    CONVERTERS,
    NonStaticInput,
    OnnxImportError,
    OnnxNode,
    UnsupportedOnnxOps,
    onnx_dtype,
)
from relay_ir.module import IRModule
from relay_ir.op._common import NotReady, Refined, RelationError
from relay_ir.op.registry import TYPE_RELATIONS
from relay_ir.ty import ANY, Dim, TensorType, TupleType, Type
from tessel_errors import RelayError, TesselError

__all__ = ["NonStaticInput", "OnnxImportError", "UnsupportedOnnxOps", "from_onnx",
           "supported_ops"]

_DIM_MAX = 2**63 - 1
FOLD_LIMIT = 4096  # elements: larger results stay computations (e.g. ConstantOfShape weights)
_DEFAULT_DOMAINS = ("", "ai.onnx")


def supported_ops() -> list[str]:
    """The ONNX op types (default domain) this frontend converts.

    >>> "Conv" in supported_ops()
    True
    """
    return sorted(CONVERTERS)


def from_onnx(
    model_or_path: Any,
    shape: Mapping[str, Sequence[Any]] | None = None,
    dtype: str | Mapping[str, str] = "float32",
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Convert an ONNX model (ModelProto or file path) to (IRModule, params).

    `shape` overrides graph input shapes by name (None, -1 or "?" for a dynamic dim);
    `dtype` is the dtype of inputs whose ONNX type leaves it open, or a dict by name.

        mod, params = from_onnx("resnet50.onnx", shape={"data": (1, 3, 224, 224)})
        out = relay_ir.interpret(mod, data=x, **params)
    """
    model = _load(model_or_path)
    opset = _default_opset(model)
    graph = model.graph
    _check_supported(graph)
    conv = _GraphConverter(graph, opset, dict(shape or {}), dtype)
    return conv.convert()


def _load(model_or_path: Any) -> Any:
    import onnx
    from google.protobuf.message import DecodeError

    if isinstance(model_or_path, (str, os.PathLike)):
        path = os.fspath(model_or_path)
        try:
            model = onnx.load(path)
        except (OSError, DecodeError,
                onnx.onnx_cpp2py_export.checker.ValidationError) as e:  # type: ignore
            raise OnnxImportError(f"cannot load ONNX model {path}: {e}") from e
        if not model.HasField("graph"):
            raise OnnxImportError(f"cannot load ONNX model {path}: it has no graph "
                                  f"(an empty or truncated file?)")
        return model
    if isinstance(model_or_path, onnx.ModelProto):
        return model_or_path
    raise OnnxImportError(f"from_onnx expects an onnx.ModelProto or a path, "
                          f"got {type(model_or_path).__name__}")


def _default_opset(model: Any) -> int:
    for imp in model.opset_import:
        if imp.domain in _DEFAULT_DOMAINS:
            return int(imp.version)
    return 1 if model.opset_import else 21


def _check_supported(graph: Any) -> None:
    """One error listing every unsupported op type and its first node, before converting."""
    first: dict[str, tuple[str, int]] = {}
    for i, n in _all_nodes(graph):
        key = n.op_type if n.domain in _DEFAULT_DOMAINS else f"{n.domain}::{n.op_type}"
        if (n.domain not in _DEFAULT_DOMAINS or n.op_type not in CONVERTERS) and key not in first:
            first[key] = (n.name, i)
    if not first:
        return
    lines = [f"  {op}: first at node {name!r} (index {i})" if name else
             f"  {op}: first at node index {i} (unnamed)" for op, (name, i) in first.items()]
    raise UnsupportedOnnxOps(
        f"the model uses {len(first)} unsupported ONNX op type(s):\n" + "\n".join(lines)
        + "\nsupported op types are listed by relay_ir.frontend.onnx.supported_ops()",
        first,
    )


def _all_nodes(graph: Any) -> Any:
    """(index in its own graph, node) of every node, those of subgraphs (If branches, Loop
    and Scan bodies) included, depth first."""
    from onnx import AttributeProto

    for i, n in enumerate(graph.node):
        yield i, n
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                yield from _all_nodes(a.g)


class _GraphConverter:
    """Walks the (topologically sorted) graph once; see the module docstring.

    A subgraph (an If branch, a Loop or Scan body) is walked by a child converter
    (`subgraph`): its inputs are given as relay Vars, and a name it does not define is
    looked up in the enclosing converters (an outer-scope value), let-bound once outside
    the control flow (`wrap`) so it is computed once, not per iteration."""

    def __init__(self, graph: Any, opset: int, shape: dict[str, Any],
                 dtype: str | Mapping[str, str], parent: _GraphConverter | None = None,
                 inputs: Sequence[tuple[str, Var]] = ()) -> None:
        self.graph = graph
        self.opset = opset
        self.parent = parent
        self.exprs: dict[str, Expr] = {}
        self.statics: dict[str, np.ndarray] = dict(parent.statics) if parent else {}
        self.from_initializer: set[str] = set(parent.from_initializer) if parent else set()
        self.init_order: dict[str, int] = {}
        self.params: dict[str, np.ndarray] = {}
        self.param_vars: dict[str, Var] = {}
        self.types: dict[Expr, Type] = {}
        self.captures: list[tuple[Var, Expr]] = []
        self.folding = False
        self.used: set[str] | None = None
        own = read_initializers(graph)
        self.statics.update(own)
        if parent is not None:  # a subgraph's own initializers are constants of its body
            self.from_initializer -= set(own)
            for name, v in inputs:
                self.statics.pop(name, None)  # an input shadows an outer value
                self.exprs[name] = v
                self.types[v] = v.type_annotation
            self.inputs = [v for _, v in inputs]
            return
        for k, init in enumerate(graph.initializer):
            self.from_initializer.add(init.name)
            self.init_order[init.name] = k
        self.inputs = self._make_inputs(shape, dtype)

    # --- inputs --------------------------------------------------------------------------

    def _make_inputs(self, shape: dict[str, Any], dtype: str | Mapping[str, str]) -> list[Var]:
        for vi in self.graph.input:
            if vi.name in self.from_initializer:
                _check_declared(vi, self.statics[vi.name])
        real = [i for i in self.graph.input if i.name not in self.from_initializer]
        names = [i.name for i in real]
        unknown = sorted(set(shape) - set(names))
        if unknown:
            raise OnnxImportError(f"shape= names {unknown}, which are not graph inputs; "
                                  f"the graph inputs are {names}")
        out = []
        for vi in real:
            tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
            if tt is None:
                raise OnnxImportError(f"graph input {vi.name!r} is not a tensor "
                                      f"(sequences, maps and optionals are not supported)")
            where = f"graph input {vi.name!r}"
            if isinstance(dtype, Mapping) and vi.name in dtype:
                dt = str(dtype[vi.name])
            elif tt.elem_type:
                dt = onnx_dtype(tt.elem_type, where)
            else:
                dt = dtype if isinstance(dtype, str) else "float32"
            if vi.name in shape:
                dims = tuple(_user_dim(d, where) for d in shape[vi.name])
            elif tt.HasField("shape"):
                dims = tuple(d.dim_value if d.HasField("dim_value") else ANY
                             for d in tt.shape.dim)
            else:
                raise OnnxImportError(f"{where} has no shape (not even a rank); give one "
                                      f"with shape={{{vi.name!r}: (...)}}")
            v = var(vi.name, TensorType(dims, dt))
            self.exprs[vi.name] = v
            self.types[v] = v.type_annotation
            out.append(v)
        return out

    # --- the walk ------------------------------------------------------------------------

    def convert(self) -> tuple[IRModule, dict[str, np.ndarray]]:
        outs = self.convert_outputs()
        if not outs:
            raise OnnxImportError("the graph has no outputs")
        body = outs[0] if len(outs) == 1 else Tuple(tuple(outs))
        order = sorted(self.param_vars, key=lambda n: self.init_order[n])
        params = tuple(self.inputs) + tuple(self.param_vars[n] for n in order)
        mod = IRModule.from_expr(Function(params, body))
        return mod, {n: self.params[n] for n in order}

    def convert_outputs(self) -> list[Expr]:
        """Convert every node; the relay expressions of the graph's outputs, in order."""
        known = set(self.exprs) | set(self.statics)
        for i in topological_order(self.graph, known):
            proto = self.graph.node[i]
            check_node(proto, i, self.opset)
            node = OnnxNode.from_proto(proto, i, self.opset)
            self._convert_node(node)
        return [self.expr(o.name, None) for o in self.graph.output]

    def subgraph(self, graph: Any, inputs: Sequence[tuple[str, Var]]) -> _GraphConverter:
        """A converter for `graph` nested in this one: `inputs` bind its graph inputs by
        name; other names it reads resolve here (and further out)."""
        return _GraphConverter(graph, self.opset, {}, "float32", self, inputs)

    def wrap(self, body: Expr) -> Expr:
        """`body` inside lets of the outer values this subgraph captured."""
        for v, e in reversed(self.captures):
            body = Let(v, e, body)
        return body

    def _capture(self, name: str, node: OnnxNode | None) -> Expr:
        assert self.parent is not None
        e = self.parent.expr(name, node)
        if not isinstance(e, (Var, Constant)):
            v = var(f"outer_{name}", self.parent.type_of(e))
            self.captures.append((v, e))
            e = v
        self.types[e] = self.parent.type_of(e)
        self.exprs[name] = e
        return e

    def _convert_node(self, node: OnnxNode) -> None:
        fn = CONVERTERS[node.op_type]
        present = [n for n in node.inputs if n]
        for n in present:
            if n not in self.exprs and n not in self.statics and not self._outer(n):
                raise node.error(f"input {n!r} is not produced by any node, initializer "
                                 f"or graph input")
        # a node with subgraphs reads outer values its inputs do not list: never folded
        fold = (bool(present) and all(self._foldable(n) for n in present)
                and not node.has_subgraphs())
        self.folding = fold
        try:
            result = fn(self, node)
            results = list(result) if isinstance(result, (list, tuple)) else [result]
            for e in results:
                if e is not None:
                    self.type_of(e)
        except OnnxImportError:
            raise
        except (RelationError, RelayError) as e:
            msg = e.message if isinstance(e, RelationError) else str(e)
            raise node.error(msg) from None
        except TesselError:
            raise
        except Exception as e:  # a converter's own bug or an input it did not expect
            raise node.error(f"the {node.op_type} converter failed: "
                             f"{type(e).__name__}: {e}") from e
        finally:
            self.folding = False
        outputs = [o for o in node.outputs]
        for k, name in enumerate(outputs):
            if not name:
                continue
            if k >= len(results) or results[k] is None:
                if self._is_used(name):
                    raise node.error(f"output {k} ({name!r}) is not supported")
                continue
            e = results[k]
            if fold and self._small(e):
                from relay_ir.interpreter import interpret

                value = np.asarray(interpret(e))
                e = const(value)
                self.types[e] = TensorType(value.shape, value.dtype.name)
            if isinstance(e, Constant):
                self.statics[name] = e.data
            self.exprs[name] = e

    def _foldable(self, name: str) -> bool:
        if name not in self.statics:
            return False
        value = self.statics[name]
        if value.size > FOLD_LIMIT:
            return False
        # float initializers are weights: they stay parameters
        return name not in self.from_initializer or value.dtype.kind in "biu"

    def _small(self, e: Expr) -> bool:
        t = self.types.get(e)
        if not isinstance(t, TensorType) or not all(isinstance(d, int) for d in t.shape):
            return False
        return int(np.prod(t.shape, dtype=np.int64)) <= FOLD_LIMIT

    def _is_used(self, name: str) -> bool:
        if self.used is None:
            self.used = {o.name for o in self.graph.output}
            self.used.update(i for _, n in _all_nodes(self.graph) for i in n.input)
        return name in self.used

    def _outer(self, name: str) -> bool:
        p = self.parent
        return p is not None and (name in p.exprs or name in p.statics or p._outer(name))

    # --- the interface converters use ----------------------------------------------------

    def expr(self, name: str, node: OnnxNode | None) -> Expr:
        """The relay expression of ONNX value `name` (an initializer becomes a parameter)."""
        if name in self.exprs:
            return self.exprs[name]
        if name not in self.statics:
            if self._outer(name):
                return self._capture(name, node)
            where = node.where() if node else "graph output"
            raise OnnxImportError(f"{where}: value {name!r} is not defined")
        value = self.statics[name]
        if self.folding or name not in self.from_initializer:
            e: Expr = const(value)
            self.types[e] = TensorType(value.shape, value.dtype.name)
            return e
        if self.parent is not None:  # an outer weight: a parameter of @main
            return self._capture(name, node)
        v = var(name, TensorType(tuple(int(d) for d in value.shape), value.dtype.name))
        self.types[v] = v.type_annotation
        self.param_vars[name] = v
        self.params[name] = value
        self.exprs[name] = v
        return v

    def has(self, node: OnnxNode, i: int) -> bool:
        """Whether optional input `i` is given."""
        return i < len(node.inputs) and bool(node.inputs[i])

    def input(self, node: OnnxNode, i: int) -> Expr:
        """Input `i` of `node` as a relay expression (an error if it is missing)."""
        if not self.has(node, i):
            raise node.error(f"input {i} is required")
        return self.expr(node.inputs[i], node)

    def static(self, node: OnnxNode, i: int, what: str = "") -> np.ndarray:
        """Input `i` as a numpy value known at conversion time, or an error naming the node."""
        if not self.has(node, i):
            raise node.error(f"input {i} ({what or 'a static value'}) is required")
        name = node.inputs[i]
        if name not in self.statics:
            raise NonStaticInput(
                f"{node.where()}: input {i} ({what or repr(name)}) must be known at conversion "
                f"time (a constant, an initializer, or computed from them and static shapes), "
                f"but {name!r} "
                f"depends on graph inputs; give static input shapes with from_onnx(shape=...)")
        return self.statics[name]

    def static_ints(self, node: OnnxNode, i: int, what: str) -> list[int]:
        """Input `i` as a list of ints known now: a 1-D integer tensor (shape, axes, pads)."""
        value = np.asarray(self.static(node, i, what))
        if value.dtype.kind not in "iu" or value.ndim != 1:
            raise node.error(f"input {i} ({what}) must be a 1-D integer tensor, got "
                             f"{value.dtype.name} of shape {list(value.shape)}")
        return [int(v) for v in value]

    def maybe_static(self, node: OnnxNode, i: int) -> np.ndarray | None:
        """Input `i` as a numpy value if it is given and known now, else None."""
        if not self.has(node, i):
            return None
        return self.statics.get(node.inputs[i])

    def type_of(self, e: Expr) -> Type:
        """The relay type of an expression built during conversion (relations, memoised)."""
        t = self.types.get(e)
        if t is not None:
            return t
        if isinstance(e, Constant):
            t = TensorType(e.data.shape, e.data.dtype.name)
        elif isinstance(e, Var):
            t = e.type_annotation
        elif isinstance(e, Tuple):
            t = TupleType(tuple(self.type_of(f) for f in e.fields))
        elif isinstance(e, TupleGetItem):
            tup = self.type_of(e.tuple_value)
            assert isinstance(tup, TupleType)
            t = tup.fields[e.index]
        elif isinstance(e, Call):
            arg_types = [self.type_of(a) for a in e.args]
            try:
                t = TYPE_RELATIONS[e.op](arg_types, e.attrs)
            except NotReady:
                raise RelayError(f"{e.op.name}: argument types are not known") from None
            except RelationError as err:
                raise RelationError(f"{e.op.name}: {err.message}") from None
            if isinstance(t, Refined):
                t = t.ret
            if isinstance(t, TensorType) and any(
                    isinstance(d, int) and not 0 <= d <= _DIM_MAX for d in t.shape):
                raise RelayError(f"{e.op.name} would make a tensor of shape "
                                 f"{tuple(t.shape)}, whose dims do not fit int64 "
                                 f"(a shape, pad or repeat count out of range?)")
        else:
            raise RelayError(f"unexpected expression {type(e).__name__} during ONNX import")
        self.types[e] = t
        return t

    def tensor_type(self, e: Expr, node: OnnxNode) -> TensorType:
        """The TensorType of `e` (an error naming the node if it is a tuple)."""
        t = self.type_of(e)
        if not isinstance(t, TensorType):
            raise node.error(f"expected a tensor, got {t}")
        return t

    def shape(self, e: Expr, node: OnnxNode) -> tuple[Dim, ...]:
        """The shape of `e` (dims may be `?`)."""
        return self.tensor_type(e, node).shape

    def static_shape(self, e: Expr, node: OnnxNode, why: str) -> tuple[int, ...]:
        """The shape of `e` when every dim is known, else an error naming the node and why."""
        s = self.shape(e, node)
        if not all(isinstance(d, int) for d in s):
            raise node.error(f"{why} needs the input shape, which is dynamic "
                             f"({', '.join(str(d) for d in s)}); give static input shapes "
                             f"with from_onnx(shape=...)")
        return tuple(int(d) for d in s)


def _check_declared(vi: Any, value: np.ndarray) -> None:
    """A graph input that an initializer fills must agree with it in rank, dims and dtype."""
    if not vi.type.HasField("tensor_type"):
        return
    tt = vi.type.tensor_type
    where = f"graph input {vi.name!r}"
    if tt.elem_type:
        declared = onnx_dtype(tt.elem_type, where)
        if declared != value.dtype.name:
            raise OnnxImportError(f"{where} is declared {declared}, but its initializer holds "
                                  f"{value.dtype.name}; make the two agree")
    if not tt.HasField("shape"):
        return
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    if len(dims) != value.ndim or any(d is not None and d != s
                                      for d, s in zip(dims, value.shape)):
        shown = ", ".join("?" if d is None else str(d) for d in dims)
        raise OnnxImportError(f"{where} is declared with shape ({shown}), but its initializer "
                              f"has shape {tuple(value.shape)}; make the two agree")


def _user_dim(d: Any, where: str) -> Dim:
    if d is None or d == "?" or (isinstance(d, (int, np.integer)) and d == -1):
        return ANY
    if isinstance(d, (int, np.integer)) and d >= 0:
        return int(d)
    if isinstance(d, str):
        return ANY  # a named dim: dynamic
    raise OnnxImportError(f"{where}: bad dim {d!r} in shape= (legal: an int >= 0, None, -1 "
                          f"or '?' for a dynamic dim)")
