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
        if self.per_image and len(ins) == len(self.in_types):
            # the common call: a plan made for these inputs runs with no shape work
            plan = self.plans.get(self._signature(ins, known))
            outs = plan.run(ins) if plan is not None else None
            if outs is not None:
                return outs
        if not all(isinstance(a, np.ndarray) for a in ins) or len(ins) != len(self.in_types):
            raise KernelArgumentError(f"kernel '{self.name}' takes {len(self.in_types)} tensors")
        # (a subclass, e.g. a memmap, as a plain array: a signature takes only those)
        ins = [a if type(a) is np.ndarray else a.view(np.ndarray)
               for a in (np.require(a, requirements="CA") for a in ins)]
        shapes = tuple(tuple(a.shape) for a in ins)
        if self.per_image:
            outs = self._run_per_image(ins, shapes, known)
            if outs is not None:
                return outs
        if self.layout is not None:
            given = ", ".join(str(s) for s in shapes)
            why = "its inputs' batches differ" if self.per_image else \
                "its per-image run is turned off (per_image = False)"
            raise RelayRuntimeError(f"the fused group {self.name} stores blocked values, "
                                    f"which only its per-image kernel reads, but {why}: "
                                    f"{given}; compile with AlterOpLayout disabled for "
                                    "symbolic-extent kernels on NCHW values")
        outs = [fresh(s, np.dtype(d), _nbytes(s, d))[0] for s, d in self.out_specs(shapes)]
        kernel = self.symbolic(shapes)
        if kernel is not None:
            kernel(*ins, *outs)
        else:
            self.concrete(shapes)(list(ins) + outs)
        return outs

    def _signature(self, ins: list[Any], known: dict[int, int] | None) -> Any:
        """What a per-image plan depends on: per input, its image's shape and dtype, or for
        an executable's constant (its id in `known`) outside the batch, its id; None when
        an input is not a C-contiguous aligned array (of the class itself, not a
        subclass)."""
        sig: list[Any] = []
        for a, b in zip(ins, self.batched):
            if not b and known and id(a) in known:
                # the constants' ids: structurally equal groups share this kernel (the
                # compiler's dynamic cache), e.g. a ResNet stage's 3x3 convs, each with a
                # weight of its own, and a plan holds its call's constants packed
                sig.append(id(a))
                continue
            if type(a) is not np.ndarray:
                return None
            flags = a.flags
            if not (flags.c_contiguous and flags.aligned):
                return None
            sig.append((a.shape[1:] if b else a.shape, a.dtype.num))
        return tuple(sig)

    def _run_per_image(self, ins: list[np.ndarray], shapes: Shapes,
                       known: dict[int, int] | None) -> list[np.ndarray] | None:
        """Run the batch-1 kernel on every image (the plan for these inputs made now);
        None (nothing run) when the batched inputs disagree on the batch, which the
        symbolic path then reports. The executable's constants (their ids in `known`) are
        the kernel's constant params, packed once into the template's layout and kept."""
        if len({s[0] for s, b in zip(shapes, self.batched) if b}) != 1:
            return None
        key = self._signature(ins, known)
        plan = self.plans.get(key)
        if plan is None:
            if self.layout is not None:
                shapes = tuple(self._logical(k, s, b)
                               for k, (s, b) in enumerate(zip(shapes, self.layout.in_blocks)))
            consts = frozenset(k for k, (a, b) in enumerate(zip(ins, self.batched))
                               if self.flat and not b and known and id(a) in known)
            plan = self.plans[key] = self._image_plan(ins, shapes, consts, known or {})
        return plan.run(ins)

    def _logical(self, k: int, shape: tuple[int, ...], block: int) -> tuple[int, ...]:
        # a blocked input's logical shape, for the shape functions
        if not block:
            return shape
        if len(shape) != 5 or shape[4] != block:
            raise KernelArgumentError(f"kernel '{self.name}': input {k} must be stored "
                                      f"NCHW{block}c (5 dims, the last {block}), got shape "
                                      f"{list(shape)}")
        n, c, h, w, _ = shape
        return (n, c * block, h, w)

    def _image_plan(self, ins: list[np.ndarray], shapes: Shapes, consts: frozenset[int],
                    known: dict[int, int]) -> _ImagePlan:
        # `shapes`: the logical ones; the batch-1 kernel is lowered in the group's layout
        one = tuple((1, *s[1:]) if b else s for s, b in zip(shapes, self.batched))
        self.out_specs(one)  # the gradual check, for the image
        kernel = self.concrete(one, consts)
        packs = kernel.group.prepack if kernel.group is not None else {}
        fixed = {k: self._packed(ins[k], packs[k]) for k in packs}
        for k, (a, (_, dtype)) in enumerate(zip(ins, kernel.in_specs)):
            got = fixed[k].dtype if k in fixed else a.dtype
            if got != np.dtype(dtype):
                raise KernelArgumentError(f"kernel '{self.name}': input {k} must be {dtype}, "
                                          f"got {got}")
        addresses = {k: array_address(a) for k, a in fixed.items()}
        addresses.update({k: known[id(ins[k])] for k in consts if k not in fixed})
        return _ImagePlan(kernel, self.batched, addresses)

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
    image (a view per image and its checks cost more than the kernel on small images);
    the constants' addresses (`fixed`, by input) are set once. Shapes are the stored ones
    (blocked or logical): an image is all but axis 0 either way."""

    def __init__(self, kernel: StaticKernel, batched: list[bool], fixed: dict[int, int]
                 ) -> None:
        self.fn, self.fixed = kernel.fn, list(fixed.items())
        steps = [_image_bytes(s, np.dtype(d)) for s, d in kernel.in_specs]
        self.moving = [(k, steps[k] if b else 0) for k, b in enumerate(batched)
                       if k not in fixed]
        self.batched = [k for k, b in enumerate(batched) if b]
        self.outs = [(s[1:], np.dtype(d), _image_bytes(s, np.dtype(d)))
                     for s, d in kernel.out_specs]

    def run(self, ins: list[np.ndarray]) -> list[np.ndarray] | None:
        """The outputs, or None (nothing run) when the batched inputs' batches differ."""
        first, *rest = self.batched
        batch = ins[first].shape[0]
        for k in rest:
            if ins[k].shape[0] != batch:
                return None
        slots = self.fn.pointer_array()
        for j, address in self.fixed:
            slots[j] = address
        moving = [(j, array_address(ins[j]), step) for j, step in self.moving]
        outs = []
        for o, (shape, dtype, step) in enumerate(self.outs, len(ins)):
            a, address = fresh((batch, *shape), dtype, step * batch)
            outs.append(a)
            moving.append((o, address, step))
        call = self.fn.call_pointers
        for i in range(batch):
            for j, base, step in moving:
                slots[j] = base + i * step
            call(slots)
        return outs


def _nbytes(shape: tuple[int, ...], dtype: Any) -> int:
    return int(np.dtype(dtype).itemsize) * math.prod(shape)


def _image_bytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    # of a batch-1 kernel's argument: an image of a batched one
    return int(dtype.itemsize) * math.prod(shape)


def _concrete(t: Type, shapes: Any) -> Type:
    if isinstance(t, TupleType):
        return TupleType(tuple(_concrete(f, shapes) for f in t.fields))
    assert isinstance(t, TensorType)
    return TensorType(next(shapes), t.dtype)


def _nest(t: Type, it: Any) -> Any:
    return [_nest(f, it) for f in t.fields] if isinstance(t, TupleType) else next(it)


__all__ = ["DynamicKernel"]
