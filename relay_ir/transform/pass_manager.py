"""The pass manager: named passes with opt levels, Sequential, and PassContext.

A pass is a named function from IRModule to IRModule. `Sequential` runs a list of passes,
skipping those the current `PassContext` does not enable: a pass runs when its name is in
`required_pass`, or when its opt_level is at most the context's and it is not in
`disabled_pass` (disabled wins), as in TVM. A Sequential may also name passes its result
cannot do without (`Sequential(..., required=["FuseOps"])`, as relay_ir.build's does):
those run under every context, and disabling one is an error rather than a silently
broken result. Calling a pass directly always runs it.

After every pass (direct or inside a Sequential) the manager
- records its wall time when the context has `timing=True` (`ctx.timing_report()`);
- prints the IR when the environment variable `TESSEL_DUMP_IR` names the pass
  (`TESSEL_DUMP_IR=fuse_ops` or `FuseOps`; a comma-separated list; `all` for every pass);
- verifies the result when the context has `verify=True`: each variable bound once, no
  unbound variables, and type inference succeeds.

    >>> from relay_ir.transform import PassContext, Sequential, InferType, FoldConstant
    >>> with PassContext(opt_level=3, disabled_pass=["FoldConstant"]):
    ...     seq = Sequential([InferType(), FoldConstant()])
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Self

from relay_ir.expr import Function
from relay_ir.module import IRModule
from tessel_errors import RelayError, TesselError

# Every pass name ever constructed, so that a misspelt name in required/disabled_pass is
# reported instead of silently ignored.
KNOWN_PASSES: set[str] = set()
# build's layout planning is not a module pass (it decides how kernels store values, see
# relay_ir.backend.layout_plan) but is switched off by this name, as in TVM
KNOWN_PASSES.add("AlterOpLayout")


def normalise_pass_name(name: str) -> str:
    """Compare pass names loosely: `FuseOps`, `fuse_ops` and `fuseops` are one name.

    >>> normalise_pass_name("Fuse_Ops") == normalise_pass_name("FuseOps")
    True
    """
    return name.replace("_", "").replace("-", "").lower()


@dataclass
class PassTiming:
    """One timed pass run: the pass name, its nesting depth and its wall time."""

    name: str
    depth: int
    seconds: float


class PassContext:
    """The options passes run under; use it as a context manager.

    >>> with PassContext(opt_level=3, timing=True) as ctx:
    ...     PassContext.current() is ctx
    True
    """

    _local = threading.local()

    def __init__(
        self,
        opt_level: int = 2,
        required_pass: Iterable[str] = (),
        disabled_pass: Iterable[str] = (),
        verify: bool = False,
        timing: bool = False,
    ) -> None:
        if not isinstance(opt_level, int) or not 0 <= opt_level <= 4:
            raise RelayError(f"PassContext opt_level must be an int in 0..4, got {opt_level!r}")
        self.opt_level = opt_level
        self.required_pass = tuple(required_pass)
        self.disabled_pass = tuple(disabled_pass)
        self.verify = verify
        self.timing = timing
        self.timings: list[PassTiming] = []
        self._depth = 0

    # scoping

    @classmethod
    def _stack(cls) -> list[PassContext]:
        stack = getattr(cls._local, "stack", None)
        if stack is None:
            stack = cls._local.stack = []
        return stack

    @classmethod
    def current(cls) -> PassContext:
        """The innermost active context (a default one when none is active)."""
        stack = cls._stack()
        if not stack:
            stack.append(PassContext())
        return stack[-1]

    def __enter__(self) -> Self:
        self._check_names()
        self._stack().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        stack = self._stack()
        if stack and stack[-1] is self:
            stack.pop()

    def _check_names(self) -> None:
        import difflib

        known = {normalise_pass_name(n): n for n in KNOWN_PASSES}
        for kind, names in (("required_pass", self.required_pass),
                            ("disabled_pass", self.disabled_pass)):
            for name in names:
                if normalise_pass_name(name) not in known:
                    near = difflib.get_close_matches(name, sorted(KNOWN_PASSES), n=3)
                    hint = f"; did you mean {', '.join(near)}?" if near else ""
                    raise RelayError(
                        f"PassContext {kind} names unknown pass {name!r}{hint} "
                        f"(known passes: {', '.join(sorted(KNOWN_PASSES))})"
                    )

    # decisions

    def pass_disabled(self, p: Pass) -> bool:
        """Whether `disabled_pass` names pass `p`."""
        return _names_contain(self.disabled_pass, p.name)

    def pass_enabled(self, p: Pass) -> bool:
        """Whether a Sequential under this context runs pass `p` (unless it requires it)."""
        if self.pass_disabled(p):
            return False
        if _names_contain(self.required_pass, p.name):
            return True
        return p.opt_level <= self.opt_level

    # timing

    def timing_report(self) -> str:
        """A table of the timed passes, nested passes indented, with total times.

        >>> print(PassContext(timing=True).timing_report().splitlines()[-1])
        (no passes ran)
        """
        lines = [f"{'pass':<34} {'time (ms)':>12}"]
        if not self.timings:
            lines.append("(no passes ran)")
        for t in self.timings:
            label = "  " * t.depth + t.name
            lines.append(f"{label:<34} {t.seconds * 1e3:>12.3f}")
        return "\n".join(lines)


def _names_contain(names: Iterable[str], name: str) -> bool:
    return normalise_pass_name(name) in {normalise_pass_name(n) for n in names}


class Pass:
    """A named module-to-module transformation with an opt level.

    Subclasses implement `transform_module(mod, ctx)`; call the pass object on a module.
    """

    name: str = "Pass"
    opt_level: int = 0

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:  # built-in passes are known as soon as they are defined
            KNOWN_PASSES.add(cls.name)

    def __init__(self, name: str | None = None, opt_level: int | None = None) -> None:
        if name is not None:
            self.name = name
        if opt_level is not None:
            self.opt_level = opt_level
        KNOWN_PASSES.add(self.name)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Apply the pass (override in subclasses)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement transform_module")

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise RelayError(
                f"pass {self.name} expects an IRModule, got {type(mod).__name__}; "
                f"wrap an expression with IRModule.from_expr"
            )
        return _run(self, mod, PassContext.current())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, opt_level={self.opt_level})"


def _run(p: Pass, mod: IRModule, ctx: PassContext) -> IRModule:
    start = time.perf_counter()
    index = len(ctx.timings)
    if ctx.timing:
        ctx.timings.append(PassTiming(p.name, ctx._depth, 0.0))
    ctx._depth += 1
    try:
        out = p.transform_module(mod, ctx)
    finally:
        ctx._depth -= 1
    if not isinstance(out, IRModule):
        raise RelayError(f"pass {p.name} returned a {type(out).__name__}, not an IRModule")
    if ctx.timing:
        ctx.timings[index].seconds = time.perf_counter() - start
    if not isinstance(p, Sequential):
        _maybe_dump(p, out)
        if ctx.verify:
            verify_module(out, p.name)
    return out


def _maybe_dump(p: Pass, mod: IRModule) -> None:
    wanted = os.environ.get("TESSEL_DUMP_IR", "").strip()
    if not wanted:
        return
    names = {normalise_pass_name(n) for n in wanted.split(",") if n.strip()}
    if "all" not in names and normalise_pass_name(p.name) not in names:
        return
    try:
        from relay_ir.printer import astext

        text = astext(mod)
    except (ImportError, AttributeError):
        text = repr(mod)
    sys.stdout.write(f"// TESSEL_DUMP_IR: IR after pass {p.name}\n{text}\n")
    sys.stdout.flush()


def verify_module(mod: IRModule, after: str = "") -> None:
    """Check well-formedness of every function and re-run type inference.

    >>> from relay_ir.expr import Var, Function
    >>> from relay_ir.ty import TensorType
    >>> x = Var("x", TensorType((2,)))
    >>> verify_module(IRModule.from_expr(Function((x,), x)))
    """
    from relay_ir.transform.analysis import check_well_formed

    what = f"after pass {after}: " if after else ""
    for gv, fn in mod.functions.items():
        try:
            check_well_formed(fn, f"@{gv.name_hint}")
        except RelayError as e:
            raise RelayError(f"verification failed {what}{e}") from None
    try:
        from relay_ir.typing import infer_type
    except ImportError:
        return
    try:
        infer_type(mod)
    except TesselError as e:
        raise RelayError(f"verification failed {what}type inference: {e}") from None


class Sequential(Pass):
    """Run passes in order, skipping those the current PassContext does not enable.

    `required` names passes of the list that run under every context because the
    sequence's result needs them (a PassContext disabling one raises a RelayError).

    >>> from relay_ir.transform import InferType, FoldConstant
    >>> seq = Sequential([InferType(), FoldConstant()], name="fold", required=["InferType"])
    >>> seq.name, seq.required
    ('fold', ('InferType',))
    """

    def __init__(
        self, passes: Sequence[Pass], opt_level: int = 0, name: str = "Sequential",
        required: Iterable[str] = (),
    ) -> None:
        for p in passes:
            if not isinstance(p, Pass):
                raise RelayError(f"Sequential expects Pass objects, got {type(p).__name__}")
        self.passes = list(passes)
        self.required = tuple(required)
        missing = [n for n in self.required
                   if not any(_names_contain([n], p.name) for p in self.passes)]
        if missing:
            raise RelayError(f"Sequential {name!r} requires {', '.join(missing)}, which is "
                             f"not among its passes ({', '.join(p.name for p in passes)})")
        super().__init__(name, opt_level)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Run each enabled or required pass in turn."""
        for p in self.passes:
            if _names_contain(self.required, p.name):
                if ctx.pass_disabled(p):
                    raise RelayError(
                        f"PassContext disables {p.name}, which {self.name} needs (it "
                        f"always runs {', '.join(self.required)}); remove {p.name} from "
                        f"disabled_pass")
                mod = _run(p, mod, ctx)
            elif ctx.pass_enabled(p):
                mod = _run(p, mod, ctx)
        return mod


class ModulePass(Pass):
    """A pass made from a function `f(mod, ctx) -> mod`."""

    def __init__(
        self, func: Callable[[IRModule, PassContext], IRModule], name: str, opt_level: int = 0
    ) -> None:
        self.func = func
        super().__init__(name, opt_level)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Apply the wrapped function."""
        return self.func(mod, ctx)


class FunctionPass(Pass):
    """A pass applying `f(fn, mod, ctx) -> fn` to every global function except fused
    (Primitive) ones; subclasses may override `transform_function` instead."""

    def __init__(
        self,
        func: Callable[[Function, IRModule, PassContext], Function] | None = None,
        name: str | None = None,
        opt_level: int | None = None,
    ) -> None:
        self.func = func
        super().__init__(name, opt_level)

    def transform_function(self, fn: Function, mod: IRModule, ctx: PassContext) -> Function:
        """Transform one function (override, or pass `func`)."""
        if self.func is None:
            raise NotImplementedError(f"{type(self).__name__} needs a function to apply")
        return self.func(fn, mod, ctx)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Apply `transform_function` to each non-Primitive global."""
        changed = False
        functions = {}
        for gv, fn in mod.functions.items():
            new = fn if fn.attr("Primitive") else self.transform_function(fn, mod, ctx)
            changed |= new is not fn
            functions[gv] = new
        return mod.with_functions(functions) if changed else mod


def module_pass(opt_level: int = 0, name: str | None = None) -> Callable[..., ModulePass]:
    """Decorator: turn `f(mod, ctx) -> mod` into a ModulePass.

    >>> @module_pass(opt_level=1, name="Nothing")
    ... def nothing(mod, ctx):
    ...     return mod
    >>> nothing.name, nothing.opt_level
    ('Nothing', 1)
    """

    def wrap(f: Callable[[IRModule, PassContext], IRModule]) -> ModulePass:
        return ModulePass(f, name or f.__name__, opt_level)

    return wrap


def function_pass(opt_level: int = 0, name: str | None = None) -> Callable[..., FunctionPass]:
    """Decorator: turn `f(fn, mod, ctx) -> fn` into a FunctionPass over every global."""

    def wrap(f: Callable[[Function, IRModule, PassContext], Function]) -> FunctionPass:
        return FunctionPass(f, name or f.__name__, opt_level)

    return wrap


__all__ = [
    "FunctionPass",
    "ModulePass",
    "Pass",
    "PassContext",
    "PassTiming",
    "Sequential",
    "function_pass",
    "module_pass",
    "normalise_pass_name",
    "verify_module",
]
