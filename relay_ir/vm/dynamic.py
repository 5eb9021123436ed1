"""Kernels for fused groups with `?` dims: one kernel with symbolic extents serves every
batch size, and shape functions give the output shapes before allocation.

At a call with new input shapes, the group is type-checked on those concrete shapes: the
op type relations are the shape function (the output shapes to allocate), and they are
the gradual check too: a shape the type system could not prove at compile time that is
wrong at run time fails here, with the operator and the two shapes in the message, before
any kernel reads out of bounds. Both are cached by input shapes.

The kernel itself is compiled once per *pattern* of the `?` dims: each `?` becomes a
symbolic extent (a tensor_expr var), dims of equal value at the call sharing one var (so
`add(x: (?, 3), y: (?, 3))` with equal batches is one kernel for every batch; the TE
broadcast rules need to know which extents are the same). A group whose ops or schedule
need constant extents, or a pattern the TE rules refuse (a `?` of 1 broadcast against
another), compiles for the concrete shapes instead, as relay_ir.build does; a warning says
so once per group.

Symbolic kernels get the plain schedule (injective stages inlined, nothing tiled or
vectorized): the templates and group schedules need constant extents. So a group whose
only `?` is a batch that its ops keep apart (relay_ir.vm.batch_split: a conv, a dense, a
pool, elementwise ops) runs instead once per image with the kernel built for batch 1,
templates and tuning records included: one kernel for every batch size still, at the
specialised kernel's speed per image.

Such a kernel may be given a layout (relay_ir.vm.layouts plans a `?`-batch function as its
batch-1 copy): its blocked inputs and outputs are NCHW[x]c with the batch outermost, so
image b is still one contiguous run of bytes, and the batch-1 kernel is lowered in that
layout, as relay_ir.build lowers the static model's group.

    >>> import relay_ir, relay_ir.vm
    >>> mod = relay_ir.parse("def @main(%x: Tensor[(?, 2), float32]) { exp(%x) }")
    >>> vm = relay_ir.vm.VirtualMachine(relay_ir.vm.compile(mod))
    >>> [vm.run(np.zeros((b, 2), "float32")).shape for b in (1, 3)]   # one kernel for both
    [(1, 2), (3, 2)]
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from lowering.kernel import array_address
from relay_ir.backend.executor import aligned, kernel_fn
from relay_ir.backend.lower_group import (
    GroupLayout,
    _evaluate,
    _flat,
    flatten_types,
    lower_group,
    physical_spec,
)
from relay_ir.expr import Function, Var
from relay_ir.transform.rewrite import substitute
from relay_ir.ty import TensorType, TupleType, Type
from relay_ir.vm.batch_split import has_batch, per_image
from relay_ir.vm.kernels import StaticKernel
from relay_ir.vm.runtime import fresh
from tessel_errors import KernelArgumentError, RelayError, RelayRuntimeError, TesselError

Shapes = tuple[tuple[int, ...], ...]


class DynamicKernel:
    """A group with `?` dims: `kernel(inputs + output slots)` returns the outputs.

    `layout`: how its flattened inputs and outputs are stored (None: all logical); only
    for a group that runs per image (relay_ir.vm.batch_split)."""

    dynamic = True

    def __init__(self, fn: Function, name: str, target: Any, tuning_source: Any,
                 layout: GroupLayout | None = None) -> None:
        self.fn, self.name, self.target = fn, name, target
        self.layout = layout if layout is not None and layout.blocked else None
        self.tuning_source = tuning_source
        self.in_types = [t for p in fn.params
                         for t in flatten_types(p.checked_type or p.type_annotation)]
        self.num_outputs = len(flatten_types(fn.body.checked_type))
        self.out_specs_by_shape: dict[Shapes, list[tuple[tuple[int, ...], str]]] = {}
        self.by_pattern: dict[tuple[Any, ...], Any] = {}  # pattern -> lowering.Kernel/None
        # the concrete-shape kernels (the fallback, and the per-image batch-1 kernel), by
        # shapes and constant params
        self.by_shape: dict[tuple[Shapes, frozenset[int]], StaticKernel] = {}
        self.packed: dict[tuple[int, Any], np.ndarray] = {}
        self.warned = False
        self.per_image = per_image(fn)
        self.batched = [has_batch(t) for t in self.in_types]
        self.flat = len(self.in_types) == len(self.fn.params)  # param k is input k
        self.plans: dict[Any, _ImagePlan] = {}  # per-image runs by input signature
        lay = self.layout
        if lay is not None and (not self.per_image or len(lay.in_blocks) != len(self.in_types)
                                or len(lay.out_blocks) != self.num_outputs):
            raise RelayError(f"the fused group {name} cannot take the layout {lay}: only a "
                             "group that runs per image takes one, a block per input and "
                             "output")

    # shape functions and the gradual check

    def specialise(self, shapes: Shapes) -> Function:
        """The group re-typed for these flattened input shapes; a RelayRuntimeError naming
        the operator and the shapes when they do not fit it."""
        from relay_ir.module import IRModule
        from relay_ir.transform.infer_type import InferType

        it = iter(shapes)
        new = [Var(p.name_hint, _concrete(p.checked_type or p.type_annotation, it))
               for p in self.fn.params]
        body = substitute(self.fn.body, dict(zip(self.fn.params, new)))
        try:
            typed = InferType()(IRModule.from_expr(Function(tuple(new), body)))["main"]
        except RelayError as e:
            given = ", ".join(str(s) for s in shapes)
            raise RelayRuntimeError(f"the fused group {self.name} got inputs of shapes {given}, "
                                    f"which its operators do not accept (a shape the type "
                                    f"system could not prove at compile time): {e}") from None
        return Function(typed.params, typed.body, typed.ret_type, (), self.fn.attrs)

    def out_specs(self, shapes: Shapes) -> list[tuple[tuple[int, ...], str]]:
        """The output shapes and dtypes for these input shapes (cached)."""
        specs = self.out_specs_by_shape.get(shapes)
        if specs is None:
            typed = self.specialise(shapes)
            specs = [(tuple(int(d) for d in t.shape), t.dtype)
                     for t in flatten_types(typed.body.checked_type)]
            self.out_specs_by_shape[shapes] = specs
        return specs

    # running

    def __call__(self, args: list[Any], known: dict[int, int] | None = None
                 ) -> list[np.ndarray]:
        ins = args[:len(args) - self.num_outputs]
        if not all(isinstance(a, np.ndarray) for a in ins) or len(ins) != len(self.in_types):
            raise KernelArgumentError(f"kernel '{self.name}' takes {len(self.in_types)} tensors")
        ins = [np.require(a, requirements="CA") for a in ins]
        shapes = tuple(tuple(a.shape) for a in ins)
        if self.layout is not None:
            return self._call_blocked(ins, shapes, known)
        outs = [fresh(s, np.dtype(d), _nbytes(s, d))[0] for s, d in self.out_specs(shapes)]
        if self.per_image and self._run_per_image(ins, shapes, outs, known):
            return outs
        kernel = self.symbolic(shapes)
        if kernel is not None:
            kernel(*ins, *outs)
        else:
            self.concrete(shapes)(list(ins) + outs)
        return outs

    def _call_blocked(self, ins: list[np.ndarray], stored: Shapes,
                      known: dict[int, int] | None) -> list[np.ndarray]:
        """The per-image run on blocked values: the shape functions see the logical shapes,
        the outputs are allocated in their stored layout."""
        assert self.layout is not None
        shapes = tuple(self._logical(k, s, b)
                       for k, (s, b) in enumerate(zip(stored, self.layout.in_blocks)))
        specs = [physical_spec(sp, b)
                 for sp, b in zip(self.out_specs(shapes), self.layout.out_blocks)]
        outs = [fresh(s, np.dtype(d), _nbytes(s, d))[0] for s, d in specs]
        if not self._run_per_image(ins, shapes, outs, known):
            given = ", ".join(str(s) for s in stored)
            raise RelayRuntimeError(f"the fused group {self.name} runs per image on blocked "
                                    f"values, but its inputs' batches differ: {given}")
        return outs

    def _logical(self, k: int, shape: tuple[int, ...], block: int) -> tuple[int, ...]:
        if not block:
            return shape
        if len(shape) != 5 or shape[4] != block:
            raise KernelArgumentError(f"kernel '{self.name}': input {k} must be stored "
                                      f"NCHW{block}c (5 dims, the last {block}), got shape "
                                      f"{list(shape)}")
        n, c, h, w, _ = shape
        return (n, c * block, h, w)

    def _run_per_image(self, ins: list[np.ndarray], shapes: Shapes, outs: list[np.ndarray],
                       known: dict[int, int] | None) -> bool:
        """Run the batch-1 kernel on every image; False (nothing run) when the batched
        inputs disagree on the batch, which the symbolic path then reports. The
        executable's constants (their ids in `known`) are the kernel's constant params,
        packed once into the template's layout and kept."""
        batched = self.batched
        sizes = {s[0] for s, b in zip(shapes, batched) if b}
        if len(sizes) != 1:
            return False
        consts = frozenset(k for k, (a, b) in enumerate(zip(ins, batched))
                           if self.flat and not b and known and id(a) in known)
        # the constants' ids too: structurally equal groups share this kernel (the
        # compiler's dynamic cache), e.g. a ResNet stage's 3x3 convs, each with a weight of
        # its own, and a plan holds its call's constants packed
        key = (shapes, tuple(a.dtype for a in ins), consts,
               tuple(id(ins[k]) for k in sorted(consts)))
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = self._image_plan(ins, shapes, consts, outs)
        plan.run(ins, outs, sizes.pop())
        return True

    def _image_plan(self, ins: list[np.ndarray], shapes: Shapes, consts: frozenset[int],
                    outs: list[np.ndarray]) -> _ImagePlan:
        one = tuple((1, *s[1:]) if b else s for s, b in zip(shapes, self.batched))
        kernel = self.concrete(one, consts)
        want = [(1, *o.shape[1:]) for o in outs]
        if [tuple(s) for s, _ in kernel.out_specs] != want:
            # a conv's output block is its config's: a tuning database other than the one
            # the layouts were planned with (a saved executable loaded with another)
            raise RelayRuntimeError(f"the fused group {self.name} compiled to outputs of "
                                    f"shapes {[s for s, _ in kernel.out_specs]} per image, not "
                                    f"the planned {want}: compile the model again with the "
                                    f"tuning database it runs with")
        packs = kernel.group.prepack if kernel.group is not None else {}
        fixed = {k: self._packed(ins[k], packs[k]) for k in packs}
        for k, (a, (_, dtype)) in enumerate(zip(ins, kernel.in_specs)):
            got = fixed[k].dtype if k in fixed else a.dtype
            if got != np.dtype(dtype):
                raise KernelArgumentError(f"kernel '{self.name}': input {k} must be {dtype}, "
                                          f"got {got}")
        return _ImagePlan(kernel, self.batched, fixed, [a.shape for a in ins],
                          [o.shape for o in outs])

    def _packed(self, const: np.ndarray, pack: Any) -> np.ndarray:
        # keyed by the constant's id: the executable keeps its constants alive, so the id
        # names one array for as long as this kernel exists
        key = (id(const), pack)
        hit = self.packed.get(key)
        if hit is None:
            hit = self.packed[key] = aligned(np.asarray(pack(const)))
        return hit

    def pattern(self, shapes: Shapes) -> tuple[Any, ...]:
        """Per input dim: its constant, or the class of its value among the `?` dims."""
        classes: dict[int, int] = {}
        out: list[Any] = []
        for t, shape in zip(self.in_types, shapes):
            for d, n in zip(t.shape, shape):
                out.append(d if isinstance(d, int) else ("?", classes.setdefault(n, len(classes))))
        return tuple(out)

    def symbolic(self, shapes: Shapes) -> Any:
        """The symbolic-extent kernel for the pattern of these shapes, or None."""
        key = self.pattern(shapes)
        if key not in self.by_pattern:
            self.by_pattern[key] = self._compile_symbolic(key)
        return self.by_pattern[key]

    def _compile_symbolic(self, key: tuple[Any, ...]) -> Any:
        import lowering
        import tensor_expr as te
        from schedule.schedule import create_schedule
        from schedule.templates.common import inline_injective
        from tensor_expr.tensor import placeholder

        dims = iter(key)
        extents: dict[int, Any] = {}
        flat = []
        env: dict[Var, Any] = {}
        k = 0
        for p in self.fn.params:
            phs = []
            for t in flatten_types(p.checked_type or p.type_annotation):
                shape = []
                for _ in t.shape:
                    d = next(dims)
                    if isinstance(d, tuple):
                        d = extents.setdefault(d[1], te.var(f"n{d[1]}"))
                    shape.append(d)
                phs.append(placeholder(tuple(shape), t.dtype, name=f"p{k}"))
                k += 1
            flat += phs
            t = p.checked_type or p.type_annotation
            env[p] = phs[0] if isinstance(t, TensorType) else _nest(t, iter(phs))
        try:
            outs = _flat(_evaluate(self.fn, env, {}))
            s = create_schedule(outs)
            inline_injective(s, outs)
            return lowering.build(s, flat + outs, target=self.target, name=self.name)
        except TesselError as e:
            if not self.warned:
                warnings.warn(f"fused group {self.name} compiles per input shape (no kernel "
                              f"with symbolic extents: {e})", stacklevel=2)
                self.warned = True
            return None

    def concrete(self, shapes: Shapes, consts: frozenset[int] = frozenset()
                 ) -> StaticKernel:
        """The group lowered for these concrete shapes, as relay_ir.build lowers it;
        `consts`: the params that are constants at the call (packed once, see
        lower_group)."""
        hit = self.by_shape.get((shapes, consts))
        if hit is None:
            spec_fn = self.specialise(shapes)
            with self.tuning_source.opened() as scope:
                group = lower_group(spec_fn, self.target, consts, scope, self.layout)
            hit = StaticKernel.of_group(group, kernel_fn(group.kernel, group.in_specs +
                                                         group.out_specs))
            self.by_shape[(shapes, consts)] = hit
        return hit


class _ImagePlan:
    """The per-image run of one input signature: the batch-1 kernel called once per image
    through one pointer array, each batched argument's address stepping by its bytes per
    image (a view per image and its checks cost more than the kernel on small images)."""

    def __init__(self, kernel: StaticKernel, batched: list[bool], fixed: dict[int, Any],
                 in_shapes: list[tuple[int, ...]], out_shapes: list[tuple[int, ...]]) -> None:
        # the shapes as stored (blocked or logical): an image is all but axis 0 either way
        self.kernel, self.fixed = kernel, fixed
        self.steps = [_image_bytes(s, dt) if b and k not in fixed else 0
                      for k, ((s, dt), b) in enumerate(zip(zip(in_shapes, [
                          np.dtype(d) for _, d in kernel.in_specs]), batched))]
        self.steps += [_image_bytes(s, np.dtype(d))
                       for s, (_, d) in zip(out_shapes, kernel.out_specs)]

    def run(self, ins: list[np.ndarray], outs: list[np.ndarray], batch: int) -> None:
        fn = self.kernel.fn
        arrays = [self.fixed.get(k, a) for k, a in enumerate(ins)] + outs
        bases = [array_address(a) for a in arrays]
        slots = fn.pointer_array()
        pairs = list(enumerate(zip(bases, self.steps)))
        for i in range(batch):
            for j, (base, step) in pairs:
                slots[j] = base + i * step
            fn.call_pointers(slots)


def _nbytes(shape: tuple[int, ...], dtype: Any) -> int:
    return int(np.dtype(dtype).itemsize) * math.prod(shape)


def _image_bytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    return int(dtype.itemsize) * math.prod(shape[1:])


def _concrete(t: Type, shapes: Any) -> Type:
    if isinstance(t, TupleType):
        return TupleType(tuple(_concrete(f, shapes) for f in t.fields))
    assert isinstance(t, TensorType)
    return TensorType(next(shapes), t.dtype)


def _nest(t: Type, it: Any) -> Any:
    return [_nest(f, it) for f in t.fields] if isinstance(t, TupleType) else next(it)


__all__ = ["DynamicKernel"]
