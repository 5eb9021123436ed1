"""Bytecode emission for one function in A-normal form (relay_ir.vm.compiler drives it).

- Each variable gets a register; a let aliases its variable to its value's register.
- `if` compares the condition with a loaded 1; in tail position each branch ends in its
  own Ret (or tail call), elsewhere both branches move their value into one register and
  the true branch jumps over the false one.
- `match` is decision code: per clause, GetTag/If tests of each constructor pattern (a
  failed test jumps to the next clause) and GetField for the sub-values; after the last
  clause, a Fatal naming the function.
- A call in tail position (`let %t = f(...); %t` ends a function, a branch or an arm) is
  an Invoke / InvokeClosure with tail=True: the VM reuses the frame.
- Closure conversion: a local function becomes a lifted VM function whose parameters
  are its free variables then its own; the value is an AllocClosure over the free
  variables' registers. A function that calls itself through its let variable rebuilds
  its own closure on entry from the captured values.
- `shape_of` (which FuseOps leaves outside the groups) is a ShapeOf; `dyn.reshape`
  (likewise) a ReshapeTensor in a dyn mode, which resolves and checks the new shape.
- A fused group's call allocates its outputs (one storage each) and InvokePacked's the
  group's kernel; groups with `?` dims return fresh outputs instead. A group that only
  reshapes (reshape, squeeze, expand_dims of static shapes; a reshape with `?` dims, in
  the dyn mode) is a ReshapeTensor: the same data under the new shape, no kernel and no
  copy.

    >>> import relay_ir, relay_ir.vm
    >>> mod = relay_ir.parse("def @main(%x: (int32, int32)) { %x.1 }")
    >>> print(relay_ir.vm.compile(mod).functions[0])
    fn @main(%0) [2 registers]
      0: get_field obj=%0 index=1 dst=%1
      1: ret %1
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from relay_ir.backend.lower_group import flatten_types, physical_spec
from relay_ir.expr import (
    Call,
    Constant,
    Constructor,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from relay_ir.op.dyn_reshape import dyn_reshape_op
from relay_ir.op.registry import Op
from relay_ir.op.shape_of import shape_of_op
from relay_ir.ty import TensorType, TupleType
from relay_ir.visitor import free_vars
from relay_ir.vm import bytecode as B
from tessel_errors import RelayError


class FunctionCompiler:
    """Emits one VM function; `ctx` (the module compiler) owns the tables it indexes:
    functions, constants, constructors, kernels."""

    def __init__(self, ctx: Any, name: str, params: list[Var],
                 self_closure: tuple[Var, int, int] | None = None) -> None:
        self.ctx, self.name = ctx, name
        self.code: list[B.Instruction] = []
        self.regs: dict[Var, int] = {}
        self.num_regs = 0
        self.groups: dict[Var, Function] = {}  # let-bound fused groups
        for p in params:
            self.regs[p] = self.fresh()
        self.num_params = len(params)
        if self_closure is not None:  # (self var, its function index, captured count)
            var, func, n = self_closure
            self.regs[var] = self.emit_dst(lambda d: B.AllocClosure(func, tuple(range(n)), d))

    # registers and emission

    def fresh(self) -> int:
        self.num_regs += 1
        return self.num_regs - 1

    def emit(self, ins: B.Instruction) -> int:
        self.code.append(ins)
        return len(self.code) - 1

    def emit_dst(self, make: Any) -> int:
        dst = self.fresh()
        self.emit(make(dst))
        return dst

    def patch(self, at: int, **offsets: int) -> None:
        self.code[at] = replace(self.code[at], **offsets)

    def finish(self) -> B.Function:
        return B.Function(self.name, self.num_params, tuple(self.code), self.num_regs)

    # tail position

    def tail(self, e: Expr) -> None:
        """Code that returns the value of `e`."""
        while isinstance(e, Let):
            if e.body is e.var and not isinstance(e.value, Function):
                e = e.value  # `let %t = X; %t`: X is in tail position
                break
            self.bind(e)
            e = e.body
        if isinstance(e, If):
            self.branch(e, None)
        elif isinstance(e, Match):
            self.match(e, None)
        elif isinstance(e, Call) and self.is_call_of_function(e):
            self.call_function(e, tail=True)
        else:
            self.emit(B.Ret(self.value(e)))

    # values

    def bind(self, let: Let) -> None:
        if isinstance(let.value, Function) and let.value.attr("Primitive"):
            self.groups[let.var] = let.value  # A-normal form names the group; no code
        elif isinstance(let.value, Function):
            self.regs[let.var] = self.closure(let.value, let.var)
        else:
            self.regs[let.var] = self.value(let.value)

    def value(self, e: Expr) -> int:
        """A register holding the value of `e` (code evaluating it is emitted first)."""
        if isinstance(e, Var):
            if e not in self.regs:
                raise RelayError(f"VM compiler: unbound variable %{e.name_hint} in @{self.name}")
            return self.regs[e]
        if isinstance(e, Let):
            while isinstance(e, Let):
                self.bind(e)
                e = e.body
            return self.value(e)
        if isinstance(e, Constant):
            return self.emit_dst(lambda d: B.LoadConst(self.ctx.constant(e.data), d))
        if isinstance(e, GlobalVar):
            return self.emit_dst(lambda d: B.AllocClosure(self.ctx.function_index(e), (), d))
        if isinstance(e, Constructor):
            if not e.inputs:
                return self.emit_dst(lambda d: B.AllocADT(self.ctx.constructor(e), (), d))
            func = self.ctx.constructor_function(e)
            return self.emit_dst(lambda d: B.AllocClosure(func, (), d))
        if isinstance(e, Function):
            if e.attr("Primitive"):
                raise RelayError(f"VM compiler: a fused group used as a value in @{self.name}")
            return self.closure(e, None)
        if isinstance(e, If):
            dst = self.fresh()
            self.branch(e, dst)
            return dst
        if isinstance(e, Match):
            dst = self.fresh()
            self.match(e, dst)
            return dst
        if isinstance(e, Tuple):
            fields = tuple(self.value(f) for f in e.fields)
            return self.emit_dst(lambda d: B.AllocADT(B.TUPLE_TAG, fields, d))
        if isinstance(e, TupleGetItem):
            obj = self.value(e.tuple_value)
            return self.emit_dst(lambda d: B.GetField(obj, e.index, d))
        if isinstance(e, RefCreate):
            v = self.value(e.value)
            return self.emit_dst(lambda d: B.RefNew(v, d))
        if isinstance(e, RefRead):
            r = self.value(e.ref)
            return self.emit_dst(lambda d: B.RefRead(r, d))
        if isinstance(e, RefWrite):
            r, v = self.value(e.ref), self.value(e.value)
            self.emit(B.RefWrite(r, v))
            return self.emit_dst(lambda d: B.AllocADT(B.TUPLE_TAG, (), d))
        if isinstance(e, Call):
            return self.call(e)
        raise RelayError(f"VM compiler: cannot compile a {type(e).__name__} in @{self.name}")

    # calls

    def is_call_of_function(self, call: Call) -> bool:
        return not isinstance(call.op, (Op, Constructor)) and self.group(call) is None

    def group(self, call: Call) -> Call | None:
        """The call with its fused group as the callee, if it calls one."""
        op = call.op
        if isinstance(op, Var) and op in self.groups:
            return Call(self.groups[op], call.args, call.attrs)
        return call if isinstance(op, Function) and op.attr("Primitive") else None

    def call(self, call: Call) -> int:
        group = self.group(call)
        if group is not None:
            return self.call_group(group)
        op = call.op
        if isinstance(op, Constructor):
            fields = tuple(self.value(a) for a in call.args)
            return self.emit_dst(lambda d: B.AllocADT(self.ctx.constructor(op), fields, d))
        if op is shape_of_op:
            tensor = self.value(call.args[0])
            return self.emit_dst(lambda d: B.ShapeOf(tensor, d, call.attrs.dtype))
        if op is dyn_reshape_op:
            tensor, shape = self.value(call.args[0]), self.value(call.args[1])
            mode = "dyn_allowzero" if call.attrs.allowzero else "dyn"
            return self.emit_dst(lambda d: B.ReshapeTensor(tensor, shape, d, mode))
        if isinstance(op, Op):
            args = tuple(self.value(a) for a in call.args)
            k = self.ctx.op_kernel(call)
            dst = self.fresh()
            self.emit(B.InvokePacked(k, len(args) + 1, 1, (*args, dst)))
            return dst
        return self.call_function(call, tail=False)

    def call_function(self, call: Call, tail: bool) -> int:
        args = tuple(self.value(a) for a in call.args)
        dst = self.fresh()
        if isinstance(call.op, GlobalVar):
            self.emit(B.Invoke(self.ctx.function_index(call.op), args, dst, tail))
        else:
            clo = self.value(call.op)
            self.emit(B.InvokeClosure(clo, args, dst, tail))
        return dst

    def call_group(self, call: Call) -> int:
        fn: Function = call.op  # type: ignore[assignment]
        layout = self.ctx.layout_of(fn)
        shape, mode = view_shape(fn), ""
        if shape is None:
            shape, mode = dyn_view_shape(fn), "dyn"
        # a view of a blocked value is not its data reshaped: its kernel reads it logically
        if shape is not None and layout is None:  # no kernel: the same data, another shape
            src = self.value(call.args[0])
            const = np.asarray(shape, dtype="int64")
            shape_reg = self.emit_dst(lambda d: B.LoadConst(self.ctx.constant(const), d))
            return self.emit_dst(lambda d: B.ReshapeTensor(src, shape_reg, d, mode))
        k, prepacked = self.ctx.group_kernel(call)
        ins: list[int] = []
        for i, (p, a) in enumerate(zip(fn.params, call.args)):
            if i in prepacked:
                data = prepacked[i]
                ins.append(self.emit_dst(lambda d, x=data: B.LoadConst(self.ctx.constant(x), d)))
            else:
                ins += self.flatten(self.value(a), p.checked_type or p.type_annotation)
        out_types = flatten_types(fn.body.checked_type)
        if self.ctx.kernels[k].dynamic:
            outs = [self.fresh() for _ in out_types]
        else:
            blocks = layout.out_blocks if layout else (0,) * len(out_types)
            outs = [self.alloc_tensor(t, b) for t, b in zip(out_types, blocks)]
        self.emit(B.InvokePacked(k, len(ins) + len(outs), len(outs), (*ins, *outs)))
        return self.nest(fn.body.checked_type, iter(outs))

    def alloc_tensor(self, t: TensorType, block: int = 0) -> int:
        # stored blocked NCHW[block]c where the layout plan says so (relay_ir.vm.layouts)
        shape, _ = physical_spec((tuple(int(d) for d in t.shape), t.dtype), block)
        nbytes = int(np.dtype(t.dtype).itemsize * int(np.prod(shape, dtype=np.int64)))
        align = 64 if nbytes >= 64 else 16  # kernels read whole vectors of large tensors
        storage = self.emit_dst(lambda d: B.AllocStorage(nbytes, align, d))
        return self.emit_dst(lambda d: B.AllocTensor(storage, 0, shape, t.dtype, d))

    def flatten(self, reg: int, t: Any) -> list[int]:
        if not isinstance(t, TupleType):
            return [reg]
        out: list[int] = []
        for i, f in enumerate(t.fields):
            field_reg = self.emit_dst(lambda d, i=i: B.GetField(reg, i, d))
            out += self.flatten(field_reg, f)
        return out

    def nest(self, t: Any, regs: Any) -> int:
        if not isinstance(t, TupleType):
            return next(regs)
        fields = tuple(self.nest(f, regs) for f in t.fields)
        return self.emit_dst(lambda d: B.AllocADT(B.TUPLE_TAG, fields, d))

    # closures

    def closure(self, fn: Function, self_var: Var | None) -> int:
        captured = [v for v in free_vars(fn) if v is not self_var]
        recursive = self_var is not None and self_var in free_vars(fn)
        func = self.ctx.lift(self.name, fn, captured, self_var if recursive else None)
        regs = tuple(self.value(v) for v in captured)
        return self.emit_dst(lambda d: B.AllocClosure(func, regs, d))

    # control flow

    def one(self) -> int:
        return self.emit_dst(lambda d: B.LoadConsti(1, d))

    def branch(self, e: If, dst: int | None) -> None:
        cond = self.value(e.cond)
        test = self.emit(B.If(cond, self.one(), 1, 0))
        ends = self.arm(e.true_branch, dst)
        self.patch(test, false_offset=len(self.code) - test)
        self.arm(e.false_branch, dst, last=True)
        for at in ends:
            self.patch(at, offset=len(self.code) - at)

    def arm(self, e: Expr, dst: int | None, last: bool = False) -> list[int]:
        """An arm's code: in tail position it returns; else it moves its value to dst and
        (unless it is the last arm) jumps to the end; the jumps to patch are returned."""
        if dst is None:
            self.tail(e)
            return []
        self.emit(B.Move(self.value(e), dst))
        return [] if last else [self.emit(B.Goto(0))]

    def match(self, m: Match, dst: int | None) -> None:
        data = self.value(m.data)
        ends: list[int] = []
        tags: dict[int, int] = {}  # the matched value's tag, read once for every clause
        if any(isinstance(c.lhs, PatternConstructor) for c in m.clauses):
            tags[data] = self.emit_dst(lambda d: B.GetTag(data, d))
        for clause in m.clauses:
            fails: list[int] = []
            self.pattern(clause.lhs, data, fails, tags)
            ends += self.arm(clause.rhs, dst)
            for at in fails:
                self.patch(at, false_offset=len(self.code) - at)
        self.emit(B.Fatal(f"match failure in @{self.name}: no clause matches the value", data))
        for at in ends:
            self.patch(at, offset=len(self.code) - at)

    def pattern(self, p: Pattern, reg: int, fails: list[int], tags: dict[int, int]) -> None:
        if isinstance(p, PatternWildcard):
            return
        if isinstance(p, PatternVar):
            self.regs[p.var] = reg
            return
        if isinstance(p, PatternConstructor):
            tag = tags.get(reg)
            if tag is None:
                tag = self.emit_dst(lambda d: B.GetTag(reg, d))
            want = self.emit_dst(lambda d: B.LoadConsti(self.ctx.constructor(p.constructor), d))
            fails.append(self.emit(B.If(tag, want, 1, 0)))
            subs = p.patterns
        elif isinstance(p, PatternTuple):
            subs = p.patterns
        else:
            raise RelayError(f"VM compiler: unknown pattern {type(p).__name__}")
        for i, q in enumerate(subs):
            if isinstance(q, PatternWildcard):
                continue
            field = self.emit_dst(lambda d, i=i: B.GetField(reg, i, d))
            self.pattern(q, field, fails, tags)


# ops whose result is their input's data, in order, under another shape
VIEW_OPS = frozenset({"reshape", "squeeze", "expand_dims"})


def _one_view(fn: Function) -> tuple[Call, TensorType, TensorType] | None:
    """The call, input and output types when a fused group is one view op of its one
    input, with one dtype."""
    body = fn.body
    if len(fn.params) != 1 or not isinstance(body, Call) or not isinstance(body.op, Op) or \
            body.op.name not in VIEW_OPS or len(body.args) != 1 or body.args[0] is not fn.params[0]:
        return None
    src, out = fn.params[0].checked_type, body.checked_type
    if not (isinstance(src, TensorType) and isinstance(out, TensorType)) or \
            src.dtype != out.dtype:
        return None
    return body, src, out


def view_shape(fn: Function) -> tuple[int, ...] | None:
    """The output shape when a fused group is one view op of its one input and both shapes
    are static (the VM reshapes instead of copying: ReshapeTensor), else None."""
    view = _one_view(fn)
    if view is None or not all(isinstance(d, int) for d in (*view[1].shape, *view[2].shape)):
        return None
    return tuple(int(d) for d in view[2].shape)


def dyn_view_shape(fn: Function) -> tuple[int, ...] | None:
    """The newshape of a group that is one reshape with `?` dims (0 copies a dim, -1
    infers one: what ReshapeTensor's dyn mode resolves at run time), else None."""
    view = _one_view(fn)
    if view is None or view[0].op.name != "reshape":
        return None
    return tuple(int(d) for d in view[0].attrs.newshape)


__all__ = ["VIEW_OPS", "FunctionCompiler", "dyn_view_shape", "view_shape"]
