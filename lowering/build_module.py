"""`build`: schedule (or PrimFunc) -> compiled Kernel, with a compile cache.

For a schedule, `build` calls `lowering.lower(s, args, name)`; a PrimFunc is compiled as
is. The cache is keyed by the exact lowered IR (its text plus the identity and dtype of
every var and buffer) and the target, so building the same kernel twice skips LLVM.

    >>> import tensor_expr as te, lowering
    >>> from lowering.ir import Buffer, BufferStore, For, ForKind, PrimFunc
    >>> A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    >>> i = te.var("i")
    >>> f = PrimFunc("inc", (A, B), For(i, te.const(0), te.const(4), ForKind.SERIAL,
    ...              BufferStore(B, A[i] + 1.0, (i,))))
    >>> k = lowering.build(f, target="llvm")
"""

from __future__ import annotations

import hashlib
import os
import threading
import warnings
from collections import OrderedDict
from typing import Any

from lowering import ir as lir
from lowering.kernel import Kernel, fingerprint, num_threads
from tessel_errors import CodegenError
from tessel_target import Target

_CACHE_SIZE = 256
_cache: OrderedDict[str, tuple[Any, Any]] = OrderedDict()
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0}


def build(sch_or_func: Any, args: Any = None, target: Any = "llvm", name: str = "main", *,
          partition: bool | None = None) -> Kernel:
    """Compile a schedule (with its argument tensors) or a PrimFunc into a Kernel.

    `f = build(s, [A, B, C], target="llvm"); f(a, b, c)`
    """
    t = Target.parse(target)
    if t.kind == "accel":
        from lowering.accel.build import build as accel_build

        return accel_build(sch_or_func, args, t, name)
    if isinstance(sch_or_func, lir.PrimFunc):
        func = sch_or_func
    else:
        if args is None:
            raise CodegenError("build(schedule, args): give the argument tensors, e.g. "
                               "build(s, [A, B, C])")
        from lowering import lower

        if partition is None:
            partition = t.kind != "cuda"
        func = lower(sch_or_func, args, name=name, partition=partition)
    if t.kind == "cuda":
        from lowering import cuda

        return cuda.build(func, t)
    if t.kind != "llvm":
        raise CodegenError(
            f"build() compiles for the CPU ('llvm'), NVIDIA GPUs ('cuda') and the "
            f"accelerator ('accel'), not '{t}'")
    return _compile(func, t)


def debug_level() -> int:
    """`TESSEL_DEBUG` as a number (unset or empty: 0); at 2 and above `build` prints the
    generated code. A value that is not an integer warns and counts as 0.

        >>> import os; os.environ["TESSEL_DEBUG"] = "2"; debug_level()
        2
        >>> del os.environ["TESSEL_DEBUG"]; debug_level()
        0
    """
    text = os.environ.get("TESSEL_DEBUG", "").strip()
    if not text:
        return 0
    try:
        return int(text)
    except ValueError:
        warnings.warn(f"TESSEL_DEBUG={text!r} is not a number; ignoring it (use e.g. "
                      f"TESSEL_DEBUG=2 to print generated code)", stacklevel=2)
        return 0


def cache_key(func: lir.PrimFunc, target: Target) -> str:
    """The compile-cache key of `func` for `target`, at this thread count and pool choice
    ($TESSEL_NUM_THREADS, $TESSEL_THREAD_POOL): a Kernel writes them into its compiled
    module's globals, which every Kernel of one cache entry shares, so a kernel built for
    one thread would otherwise run on as many threads as a later build of the same code
    asked for."""
    pool = os.environ.get("TESSEL_THREAD_POOL", "1") != "0"
    text = fingerprint(func) + "\n" + repr(func.attrs) + "\n" + str(target) + "\n" + \
        target.mcpu + "|" + target.mattr + f"\nthreads {num_threads()} pool {pool}"
    return hashlib.sha256(text.encode()).hexdigest()


def _compile(func: lir.PrimFunc, target: Target) -> Kernel:
    from lowering.llvm.codegen import generate
    from lowering.llvm.jit import compile_ir

    key = cache_key(func, target)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            stats["hits"] += 1
    if hit is not None:
        generated, jit = hit
        return Kernel(func, target, generated, jit)
    generated = generate(func, target)
    if debug_level() >= 2:
        print(generated.text)
    jit = compile_ir(generated.text, target)
    with _lock:
        stats["misses"] += 1
        _cache[key] = (generated, jit)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return Kernel(func, target, generated, jit)


def compile_object(func: lir.PrimFunc, target: Any = "llvm") -> tuple[Any, bytes]:
    """Generate and optimise `func` into an object file: (codegen result, object bytes),
    for `load_object` in another process (autotuning builds in one, measures in another).

        >>> gen, obj = compile_object(f, "llvm")      # doctest: +SKIP
        >>> k = load_object(f, "llvm", gen, obj)      # doctest: +SKIP
    """
    from lowering.llvm.codegen import generate
    from lowering.llvm.jit import compile_object as emit

    t = Target.parse(target)
    if t.kind != "llvm":
        raise CodegenError(f"compile_object() compiles for the CPU ('llvm'), not '{t}'")
    generated = generate(func, t)
    return generated, emit(generated.text, t)


def load_object(func: lir.PrimFunc, target: Any, generated: Any, data: bytes) -> Kernel:
    """The Kernel of an object file that `compile_object(func, target)` made (`func` must
    be the same lowered function: its parameters check the arrays at each call)."""
    from lowering.llvm.jit import ObjectModule

    t = Target.parse(target)
    return Kernel(func, t, generated, ObjectModule(data, t))


def clear_cache() -> None:
    """Forget every compiled kernel (kernels already built keep working)."""
    with _lock:
        _cache.clear()
