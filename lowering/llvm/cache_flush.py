"""Evict arrays from the CPU's caches, line by line (clflush), for cold-cache timing.

Inside a model a layer's weights were evicted by the layers before it while its data input
was just written by the one before: TVM times a CPU kernel "cold" by flushing every
argument but the first (`cache_flush_cpu_non_first_arg`) with clflush over the arrays'
own lines. Writing a buffer of twice the last-level cache instead (what Tessel did first)
costs time proportional to the cache the machine reports: a VM that reports a 480 MiB L3
spent about 100 ms a timed call on it, and it evicted the data input too.

The loop is a few lines of LLVM IR compiled once per process by the JIT the kernels use;
on a host that is not x86 (no clflush) `flush_arrays` returns False and does nothing.

    >>> import numpy as np
    >>> a = np.arange(1000, dtype="float32")
    >>> _ = flush_arrays([a]); float(a[999])   # the contents never change
    999.0
"""

from __future__ import annotations

import ctypes
import functools
import platform
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.lib.array_utils import byte_bounds

LINE = 64  # bytes a clflush evicts; x86 cache lines

# flush [p, p + n): from p's line down to the line of the last byte; mfence so that the
# flushes are done before the caller's clock starts
_IR = f"""
declare void @llvm.x86.sse2.clflush(ptr)

define void @tessel_clflush(ptr %p, i64 %n) {{
entry:
  %empty = icmp eq i64 %n, 0
  br i1 %empty, label %done, label %start
start:
  %base = ptrtoint ptr %p to i64
  %first = and i64 %base, -{LINE}
  %end = add i64 %base, %n
  br label %loop
loop:
  %a = phi i64 [ %first, %start ], [ %next, %loop ]
  %ptr = inttoptr i64 %a to ptr
  call void @llvm.x86.sse2.clflush(ptr %ptr)
  %next = add i64 %a, {LINE}
  %more = icmp ult i64 %next, %end
  br i1 %more, label %loop, label %fence
fence:
  fence seq_cst
  br label %done
done:
  ret void
}}
"""


@functools.lru_cache(maxsize=1)
def _flush_fn() -> Any:
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        return None
    from lowering.llvm.jit import compile_ir

    mod = compile_ir(_IR, "llvm")
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(mod.address("tessel_clflush"))
    return mod, fn  # the module keeps the code alive


def _byte_range(a: Any) -> tuple[int, int]:
    """(address, bytes) of the memory an array's elements span (its base's, for a view)."""
    arr = np.asarray(a)
    if arr.size == 0:
        return 0, 0
    lo, hi = byte_bounds(arr)
    return lo, hi - lo


def flush_arrays(arrays: Iterable[Any]) -> bool:
    """Evict every cache line of each array (a numpy array or an object numpy can view,
    such as a kernel's NDArray) from all cache levels; True where it was done, False on a
    host without clflush. The arrays' values do not change.

        >>> w = np.ones((256, 256), "float32")
        >>> _ = flush_arrays([w]); float(w.sum())
        65536.0
    """
    got = _flush_fn()
    if got is None:
        return False
    _, fn = got
    for a in arrays:
        addr, n = _byte_range(a)
        if n:
            fn(addr, n)
    return True
