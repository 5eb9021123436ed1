"""FuseOps: cut each function's dataflow into groups and make each group a Primitive
function, following the post-dominator rules of Relay's fuse_ops.

1. An indexed forward graph of the function body (nodes in post-DFS order, each with its
   pattern kind and its consumers; every edge carries a pattern too: a broadcast op's
   edge from an argument of the result's shape is elementwise). Results of lets, ifs,
   matches and functions, and the body itself, are "external" and end groups.
2. The post-dominator tree: a node's parent is the least common ancestor of its
   consumers, and the tree node records the strongest pattern on the way there.
3. Groups (union-find) merged in three phases, each node trying to join the group of
   its immediate post-dominator when every path to it keeps to the rules:
   - phase 0: an out-elemwise-fusable op (conv2d, dense) takes elementwise/broadcast
     consumers; an elementwise/broadcast op joins an injective or reduction consumer;
   - phase 1: injective ops and tuples join through injective paths;
   - phase 2: injective ops join a tuple that was fused into an injective consumer.
   A group never grows beyond `max_depth` nodes.
4. Each group becomes `Function(params, body, attrs=(("Primitive", 1),))` called where
   its root was; values from other groups (and non-scalar constants) become params.
   Non-computational ops (run-time shape checks, shape_of, dyn.reshape) and
   dyn.strided_slice (its result's shape comes from run-time values) stay plain calls
   outside the groups.

    >>> FuseOps(max_depth=4).max_depth
    4
"""

from __future__ import annotations

from dataclasses import dataclass, field

from relay_ir.expr import Call, Constant, Constructor, Expr, Function, Tuple, TupleGetItem, Var
from relay_ir.module import IRModule
from relay_ir.op.registry import PATTERNS, Op, OpPattern
from relay_ir.transform.analysis import children, post_order
from relay_ir.transform.infer_type import ensure_typed
from relay_ir.transform.pass_manager import Pass, PassContext
from relay_ir.transform.rewrite import rebuild
from relay_ir.ty import RefType, TensorType, TupleType, Type
from tessel_errors import RelayError

P = OpPattern
_SIMPLE_CONST_DTYPES = {"int32", "int64", "float32", "float64", "bool"}
DEFAULT_MAX_DEPTH = 256
# Ops that compute nothing a kernel would: they stay plain calls, outside every group (as
# Relay's TNonComputational ops). A run-time shape check inside a Primitive function would
# make the function's parameter look refined and the caller grow a second check.
# dyn.strided_slice joins them: no kernel can be compiled for a shape read from a
# tensor's values, and the VM runs it by its host-side reference (an OpKernel).
NON_COMPUTATIONAL = {"runtime.check_shape", "runtime.relax_shape", "shape_of", "dyn.reshape",
                     "dyn.strided_slice"}


# --- 1. the indexed forward graph --------------------------------------------------------


@dataclass(eq=False)
class GraphNode:
    """A dataflow node: the expression, its post-DFS index, pattern and consumers."""

    ref: Expr
    index: int
    pattern: OpPattern = P.OPAQUE
    extern_ref: bool = False
    outputs: list[tuple[GraphNode, OpPattern]] = field(default_factory=list)


def _is_primitive(e: Expr) -> bool:
    return isinstance(e, Function) and bool(e.attr("Primitive"))


def _has_ref(t: Type | None) -> bool:
    if isinstance(t, RefType):
        return True
    if isinstance(t, TupleType):
        return any(_has_ref(f) for f in t.fields)
    return False


def build_graph(body: Expr) -> list[GraphNode]:
    """The forward graph of `body` in post-DFS order (children before consumers)."""
    order = post_order(body, skip=_is_primitive)
    nodes = {id(e): GraphNode(e, i) for i, e in enumerate(order)}

    def update(child: Expr, parent: GraphNode | None, pattern: OpPattern) -> None:
        node = nodes[id(child)]
        if parent is None:
            node.extern_ref = True
        else:
            node.outputs.append((parent, pattern))

    for e in order:
        node = nodes[id(e)]
        if isinstance(e, Constant):
            simple = e.data.ndim == 0 and str(e.data.dtype) in _SIMPLE_CONST_DTYPES
            node.pattern = P.ELEMWISE if simple else P.OPAQUE
        elif isinstance(e, Call) and isinstance(e.op, Op):
            node.pattern = PATTERNS.get(e.op, P.OPAQUE)
            rtype = e.checked_type
            for arg in e.args:
                edge = node.pattern
                atype = arg.checked_type
                if (edge == P.BROADCAST and isinstance(rtype, TensorType)
                        and isinstance(atype, TensorType) and atype.shape == rtype.shape):
                    edge = P.ELEMWISE
                update(arg, node, edge)
        elif isinstance(e, Call):
            node.pattern = P.OPAQUE
            if isinstance(e.op, Constructor):
                args = list(e.args)
            else:
                update(e.op, None, P.OPAQUE)
                args = list(e.args)
            for arg in args:
                update(arg, node, P.OPAQUE)
        elif isinstance(e, Tuple):
            node.pattern = P.TUPLE
            for f in e.fields:
                if isinstance(f.checked_type, TensorType):
                    update(f, node, P.INJECTIVE)
                else:
                    update(f, None, P.OPAQUE)
        elif isinstance(e, TupleGetItem):
            if _has_ref(e.tuple_value.checked_type):
                update(e.tuple_value, None, P.OPAQUE)
            else:
                node.pattern = P.INJECTIVE
                update(e.tuple_value, node, P.INJECTIVE)
        else:  # Var, GlobalVar, Function, Let, If, Match, refs: fusion stops here
            node.pattern = P.OPAQUE
            if not _is_primitive(e):
                for c in children(e):
                    update(c, None, P.OPAQUE)
            if isinstance(e, Function) and not _is_primitive(e):
                for p in e.params:
                    if id(p) in nodes:
                        update(p, None, P.OPAQUE)
    nodes[id(body)].extern_ref = True
    return [nodes[id(e)] for e in order]


# --- 2. the post-dominator tree ----------------------------------------------------------


@dataclass(eq=False)
class DomNode:
    """A post-dominator tree node: parent, depth, and the pattern of the way up."""

    gnode: GraphNode
    parent: DomNode | None = None
    depth: int = 1
    pattern: OpPattern = P.OPAQUE


def _combine(a: OpPattern, b: OpPattern) -> OpPattern:
    return a if a > b else b


def post_dominators(graph: list[GraphNode]) -> list[DomNode]:
    """The immediate post-dominator of every node (None for external nodes)."""
    tree: list[DomNode | None] = [None] * len(graph)
    for g in reversed(graph):  # consumers first
        if g.extern_ref or not g.outputs:
            tree[g.index] = DomNode(g, None, 1, P.OPAQUE)
            continue
        pattern = P.ELEMWISE
        parent: DomNode | None = None
        for i, (out, edge) in enumerate(g.outputs):
            onode = tree[out.index]
            assert onode is not None
            if i == 0:
                parent = onode
            else:
                parent, pattern = _lca(parent, onode, pattern)
            pattern = _combine(pattern, edge)
        depth = parent.depth + 1 if parent is not None else 1
        tree[g.index] = DomNode(g, parent, depth, pattern)
    return tree  # type: ignore[return-value]


def _lca(a: DomNode | None, b: DomNode | None, pattern: OpPattern
         ) -> tuple[DomNode | None, OpPattern]:
    while a is not b:
        if a is None or b is None:
            return None, pattern
        if a.depth < b.depth:
            pattern = _combine(pattern, b.pattern)
            b = b.parent
        elif b.depth < a.depth:
            pattern = _combine(pattern, a.pattern)
            a = a.parent
        else:
            pattern = _combine(_combine(pattern, a.pattern), b.pattern)
            a, b = a.parent, b.parent
    return a, pattern


# --- 3. groups ---------------------------------------------------------------------------


@dataclass(eq=False)
class Group:
    """A union-find set of graph nodes that become one Primitive function."""

    pattern: OpPattern
    root_ref: Expr
    parent: Group | None = None
    anchor_ref: Expr | None = None
    num_nodes: int = 1

    def find_root(self) -> Group:
        """The representative of this group (with path compression)."""
        root = self
        while root.parent is not None:
            root = root.parent
        node = self
        while node.parent is not None and node.parent is not root:
            node.parent, node = root, node.parent
        return root


class GraphPartitioner:
    """Runs the three fusion phases over a graph and its post-dominator tree."""

    def __init__(self, graph: list[GraphNode], max_depth: int) -> None:
        self.graph = graph
        self.max_depth = max_depth
        self.groups = [
            Group(g.pattern, g.ref, anchor_ref=g.ref if g.pattern == P.OUT_ELEMWISE_FUSABLE
                  else None)
            for g in graph
        ]

    def partition(self, fuse: bool = True) -> list[Group]:
        """The group of every node (index-aligned with the graph)."""
        if fuse:
            tree = post_dominators(self.graph)
            for phase in range(3):
                self._run(tree, phase)
        return self.groups

    # path checks

    def _check_path(self, src: GraphNode, sink: GraphNode, cond) -> bool:
        visited: set[int] = set()
        stack = [out for out, _ in src.outputs]
        while stack:
            node = stack.pop()
            if node.index in visited:
                continue
            visited.add(node.index)
            if not cond(self.groups[node.index].find_root().pattern, node is sink):
                return False
            if node is not sink:
                stack.extend(out for out, _ in node.outputs)
        return True

    def _path_nodes(self, src: GraphNode, sink: GraphNode) -> list[GraphNode]:
        seen: set[int] = set()
        out: list[GraphNode] = []
        stack = [src]
        while stack:
            node = stack.pop()
            if node is sink or node.index in seen:
                continue
            seen.add(node.index)
            out.append(node)
            stack.extend(o for o, _ in node.outputs)
        return out

    def _fused_size(self, src: GraphNode, sink: GraphNode) -> int:
        target = self.groups[sink.index].find_root()
        roots = {id(target): target}
        for node in self._path_nodes(src, sink):
            r = self.groups[node.index].find_root()
            roots[id(r)] = r
        return sum(r.num_nodes for r in roots.values())

    def _merge(self, child: Group, parent: Group) -> None:
        child, parent = child.find_root(), parent.find_root()
        if child is parent:
            return
        parent.num_nodes += child.num_nodes
        child.parent = parent
        if child.anchor_ref is not None:
            parent.anchor_ref = child.anchor_ref
            parent.pattern = _combine(child.pattern, parent.pattern)

    def _commit(self, src: GraphNode, sink: GraphNode) -> None:
        target = self.groups[sink.index]
        for node in self._path_nodes(src, sink):
            self._merge(self.groups[node.index], target)

    # the phases

    def _run(self, tree: list[DomNode], phase: int) -> None:
        for g in self.graph:
            dom = tree[g.index]
            group = self.groups[g.index]
            if group.pattern == P.OPAQUE or dom.parent is None:
                continue
            sink = dom.parent.gnode
            if self._fused_size(g, sink) > self.max_depth:
                continue
            parent_group = self.groups[sink.index]
            if phase == 2:
                self._phase2(g, sink, group, parent_group)
                continue
            if group.find_root() is parent_group.find_root():
                continue
            if parent_group.pattern == P.TUPLE:
                continue  # do not fuse into a tuple (phase 2 may, from the other side)
            if group.pattern == P.OUT_ELEMWISE_FUSABLE:
                if phase == 0 and dom.pattern == P.ELEMWISE:
                    if self._check_path(g, sink, lambda k, _s: k <= P.BROADCAST):
                        self._commit(g, sink)
            elif group.pattern <= P.BROADCAST:
                if dom.pattern <= P.INJECTIVE or dom.pattern == P.COMM_REDUCE:

                    def cond(kind: OpPattern, is_sink: bool) -> bool:
                        if not is_sink:
                            return kind <= P.INJECTIVE
                        return kind <= P.OUT_ELEMWISE_FUSABLE

                    if self._check_path(g, sink, cond):
                        self._commit(g, sink)
            elif group.pattern in (P.INJECTIVE, P.TUPLE):
                if phase == 1 and self._check_path(g, sink, lambda k, _s: k <= P.INJECTIVE):
                    self._commit(g, sink)

    def _phase2(self, g: GraphNode, sink: GraphNode, group: Group, parent_group: Group) -> None:
        # Fuse injective ops into an intermediate tuple that joined an injective consumer.
        if group.pattern > P.INJECTIVE:
            return
        root = parent_group.find_root()
        if root.pattern == P.TUPLE:
            return
        if parent_group.pattern == P.TUPLE and root.pattern <= P.INJECTIVE:
            if group.find_root() is root:
                return
            if self._check_path(g, sink, lambda k, _s: k <= P.INJECTIVE):
                self._commit(g, sink)


# --- 4. rewriting groups into Primitive functions ------------------------------------------


class _GroupInfo:
    def __init__(self) -> None:
        self.params: list[Var] = []
        self.args: list[Expr] = []
        self.by_arg: dict[int, Var] = {}

    def param_for(self, arg: Expr, ty: Type | None) -> Var:
        var = self.by_arg.get(id(arg))
        if var is None:
            var = Var(f"p{len(self.params)}", ty)
            self.by_arg[id(arg)] = var
            self.params.append(var)
            self.args.append(arg)
        return var


def _outside_type(e: Expr) -> Type | None:
    """The type a group parameter gets: a variable's declared type when it has one (with
    gradual shapes, inference may refine a variable's checked type to a number that only
    a run-time check inside the group guarantees)."""
    if isinstance(e, Var) and e.type_annotation is not None:
        return e.type_annotation
    return e.checked_type


def fuse_expr(body: Expr, max_depth: int = DEFAULT_MAX_DEPTH, fuse: bool = True) -> Expr:
    """`body` with every op call placed in a Primitive function of its fusion group."""
    graph = build_graph(body)
    groups = GraphPartitioner(graph, max_depth).partition(fuse)
    group_of = {id(g.ref): groups[g.index].find_root() for g in graph}
    info: dict[int, _GroupInfo] = {}
    memo: dict[int, Expr] = {}
    inner: set[int] = set()  # nodes whose memo is only valid inside their group

    def fusable(e: Expr) -> bool:
        if isinstance(e, Call) and isinstance(e.op, Op):
            return e.op.name not in NON_COMPUTATIONAL
        return isinstance(e, (Tuple, TupleGetItem))

    for g in graph:
        e = g.ref
        kids = [] if _is_primitive(e) else children(e)
        if not fusable(e):
            for k in kids:
                if id(k) in inner:
                    raise RelayError(f"FuseOps internal error: {type(e).__name__} consumes "
                                     f"an intermediate value of another group")
            memo[id(e)] = rebuild(e, [memo[id(k)] for k in kids]) if kids else e
            continue
        group = group_of[id(e)]
        ginfo = info.setdefault(id(group), _GroupInfo())
        new_kids = []
        for k in kids:
            if group_of[id(k)] is group:
                new_kids.append(memo[id(k)])
            else:
                if id(k) in inner:
                    raise RelayError("FuseOps internal error: a group consumes an "
                                     "intermediate value of another group")
                new_kids.append(ginfo.param_for(memo[id(k)], _outside_type(k)))
        new = rebuild(e, new_kids) if kids else e
        if group.root_ref is not e:
            memo[id(e)] = new
            inner.add(id(e))
            continue
        if isinstance(e, Tuple) and group.num_nodes == 1:
            memo[id(e)] = rebuild(e, [memo[id(k)] for k in kids])  # a lone tuple stays
            continue
        if isinstance(e, TupleGetItem) and group_of[id(e.tuple_value)] is not group:
            memo[id(e)] = rebuild(e, [memo[id(k)] for k in kids])  # a lone projection
            continue
        fn = Function(tuple(ginfo.params), new, attrs=(("Primitive", 1),))
        memo[id(e)] = Call(fn, tuple(ginfo.args))
    return memo[id(body)]


class FuseOps(Pass):
    """Fuse op calls into Primitive functions (fuse_opt_level 0: one op per function)."""

    name = "FuseOps"
    opt_level = 0

    def __init__(self, fuse_opt_level: int | None = 2, max_depth: int = DEFAULT_MAX_DEPTH
                 ) -> None:
        if max_depth < 1:
            raise RelayError(f"FuseOps max_depth must be at least 1, got {max_depth}")
        super().__init__()
        self.fuse_opt_level = fuse_opt_level
        self.max_depth = max_depth

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Fuse every non-Primitive global function, then re-infer types."""
        level = ctx.opt_level if self.fuse_opt_level is None else self.fuse_opt_level
        mod = ensure_typed(mod)
        functions = {}
        for gv, fn in mod.functions.items():
            if fn.attr("Primitive"):
                functions[gv] = fn
                continue
            body = fuse_expr(fn.body, self.max_depth, fuse=level >= 1)
            functions[gv] = rebuild(fn, [body])  # type: ignore[assignment]
        return ensure_typed(mod.with_functions(functions))


__all__ = [
    "DomNode",
    "FuseOps",
    "GraphNode",
    "GraphPartitioner",
    "Group",
    "build_graph",
    "fuse_expr",
    "post_dominators",
]
