"""Kernel arguments resolved in native code: a call site puts the *objects* of its
arguments that are not known to be right (a parameter, an ADT field) or whose address is
not yet known (a fresh output) into its pointer array, and `tessel_vm_call` checks each
(a numpy array of the expected rank, dims, dtype, C-contiguous and aligned), replaces it by
its data address and calls the kernel. In Python the same took a check (about 0.6 us) and
an address lookup (0.35 us) per argument; here it is a few loads.

The checks read numpy's array header as numpy's own C macros do (PyArray_DATA,
PyArray_NDIM, PyArray_DIMS, PyArray_DESCR, PyArray_FLAGS: data, nd, dimensions, descr and
flags of PyArrayObject_fields after the object header). `available()` probes that layout
on real arrays once per process; where it does not hold (another Python build), the VM
checks and looks addresses up in Python instead. Anything the native check refuses (a
subclass, a dtype object that is equal but not numpy's canonical one, a strided view)
goes to the Python check, which accepts what lib.run accepts and words the error.

A table row per object argument: (slot, check, ndim, dims address, descr address,
required flags); `check` 0 means the object is the VM's own fresh array (only its address
is read).

    >>> available() in (True, False)
    True
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

_RECORD = 6  # int64 fields per table row
C_CONTIGUOUS, ALIGNED, WRITEABLE = 0x1, 0x100, 0x400
# PyArrayObject_fields after PyObject_HEAD (refcount, type): data, nd, dimensions,
# strides, base, descr, flags
_TYPE, _DATA, _ND, _DIMS, _DESCR, _FLAGS = 8, 16, 24, 32, 56, 64

_lock = threading.Lock()
_state: dict[str, Any] = {}


def _ir() -> str:
    from llvmlite import ir

    i32, i64 = ir.IntType(32), ir.IntType(64)
    ptr = ir.PointerType(ir.IntType(8))
    m = ir.Module(name="tessel_vm_native")
    array_type = ir.GlobalVariable(m, i64, "tessel_vm_array_type")
    array_type.initializer = ir.Constant(i64, 0)
    kernel_t = ir.FunctionType(i32, [ptr, ptr])
    fn = ir.Function(m, ir.FunctionType(i32, [ptr, ptr, ptr, ptr, i64]), "tessel_vm_call")
    kernel, slots, dims, table, n = fn.args
    entry, head, body, check, dimloop, dimbody, fields, resolve, call, fail = (
        fn.append_basic_block(x) for x in ("entry", "head", "body", "check", "dimloop",
                                           "dimbody", "fields", "resolve", "call", "fail"))
    b = ir.IRBuilder(entry)
    slots64 = b.bitcast(slots, i64.as_pointer())
    table64 = b.bitcast(table, i64.as_pointer())
    b.branch(head)

    b.position_at_end(head)
    i = b.phi(i64, "i")
    i.add_incoming(ir.Constant(i64, 0), entry)
    b.cbranch(b.icmp_signed("<", i, n), body, call)

    def row(k: int) -> ir.Value:
        at = b.add(b.mul(i, ir.Constant(i64, _RECORD)), ir.Constant(i64, k))
        return b.load(b.gep(table64, [at]))

    def field(obj: ir.Value, offset: int, typ: ir.Type) -> ir.Value:
        addr = b.add(obj, ir.Constant(i64, offset))
        return b.load(b.inttoptr(addr, typ.as_pointer()))

    b.position_at_end(body)
    slot = row(0)
    slot_ptr = b.gep(slots64, [slot])
    obj = b.load(slot_ptr)
    b.cbranch(b.icmp_signed("!=", row(1), ir.Constant(i64, 0)), check, resolve)

    b.position_at_end(check)
    ndim = row(2)
    ok = b.and_(b.icmp_unsigned("==", field(obj, _TYPE, i64), b.load(array_type)),
                b.icmp_signed("==", b.sext(field(obj, _ND, i32), i64), ndim))
    want_dims = b.inttoptr(row(3), i64.as_pointer())
    got_dims_at = field(obj, _DIMS, i64)
    b.cbranch(ok, dimloop, fail)

    b.position_at_end(dimloop)
    d = b.phi(i64, "d")
    d.add_incoming(ir.Constant(i64, 0), check)
    b.cbranch(b.icmp_signed("<", d, ndim), dimbody, fields)

    b.position_at_end(dimbody)
    got = b.load(b.gep(b.inttoptr(got_dims_at, i64.as_pointer()), [d]))
    same = b.icmp_signed("==", got, b.load(b.gep(want_dims, [d])))
    d.add_incoming(b.add(d, ir.Constant(i64, 1)), dimbody)
    b.cbranch(same, dimloop, fail)

    b.position_at_end(fields)
    need = row(5)
    flags = b.sext(field(obj, _FLAGS, i32), i64)
    good = b.and_(b.icmp_unsigned("==", field(obj, _DESCR, i64), row(4)),
                  b.icmp_unsigned("==", b.and_(flags, need), need))
    b.cbranch(good, resolve, fail)

    b.position_at_end(resolve)
    b.store(field(obj, _DATA, i64), slot_ptr)
    i.add_incoming(b.add(i, ir.Constant(i64, 1)), resolve)
    b.branch(head)

    b.position_at_end(call)
    b.ret(b.call(b.bitcast(kernel, kernel_t.as_pointer()), [slots, dims]))

    b.position_at_end(fail)
    b.ret(b.trunc(b.sub(ir.Constant(i64, -1), i), i32))
    return str(m)


def _build() -> Any:
    from lowering.llvm.jit import compile_ir

    jit = compile_ir(_ir(), "llvm")
    ctypes.c_int64.from_address(jit.address("tessel_vm_array_type")).value = id(np.ndarray)
    call = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_void_p, ctypes.c_int64)(jit.address("tessel_vm_call"))
    return jit, call


def _probe(call: Any) -> bool:
    """Whether the header layout holds: arrays of several shapes resolve to their data
    address, and a wrong dim, dtype or layout is refused."""
    ret = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)
    seen: list[int] = []

    @ret
    def kernel(slots: Any, dims: Any) -> int:
        seen.append(ctypes.cast(slots, ctypes.POINTER(ctypes.c_void_p))[0] or 0)
        return 7

    fn = ctypes.cast(kernel, ctypes.c_void_p).value
    cases = [(np.zeros((2, 3), "float32"), (2, 3), "float32", 0),
             (np.zeros((5,), "int64"), (5,), "int64", 0),
             (np.zeros((1, 4, 2), "float32"), (1, 4, 2), "float32", 0),
             (np.zeros((2, 3), "float32"), (3, 2), "float32", -1),
             (np.zeros((2, 3), "float64"), (2, 3), "float32", -1),
             (np.zeros((3, 4), "float32")[:, :3], (3, 3), "float32", -1)]
    for a, shape, dtype, want in cases:
        t = Table([(0, True, shape, np.dtype(dtype), C_CONTIGUOUS | ALIGNED)])
        slots = (ctypes.c_void_p * 1)(id(a))
        seen.clear()
        rc = call(fn, slots, None, t.array, t.rows)
        if want == 0 and (rc != 7 or seen != [a.ctypes.data]):
            return False
        if want == -1 and rc != -1:
            return False
    return True


def available() -> bool:
    """Whether native argument resolution works in this process (probed once)."""
    with _lock:
        if "ok" not in _state:
            try:
                jit, call = _build()
                _state.update(jit=jit, call=call)
                _state["ok"] = _probe(call)
            except Exception:  # noqa: BLE001 - no native path: the Python checks serve
                _state["ok"] = False
        return bool(_state["ok"])


def caller() -> Any:
    """The ctypes function `tessel_vm_call(kernel, slots, dims, table, rows)`."""
    if not available():
        raise RuntimeError("native kernel arguments are not available in this process")
    return _state["call"]


class Table:
    """The object rows of one call site: (slot, check, shape, dtype, required flags)."""

    def __init__(self, rows: list[tuple[int, bool, tuple[int, ...], Any, int]]) -> None:
        self.rows = len(rows)
        self._keep: list[Any] = []
        data = []
        for slot, check, shape, dtype, flags in rows:
            dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
            dt = np.dtype(dtype) if dtype is not None else None
            self._keep += [dims, dt]
            data += [slot, int(check), len(shape), ctypes.addressof(dims),
                     id(dt) if dt is not None else 0, flags]
        self.array = (ctypes.c_int64 * max(1, len(data)))(*data)


class CallSite:
    """A call site's object rows (relay_ir.vm.native.Table) and what a refusal needs: the
    Python check of its unproven inputs, then the kernel called with plain addresses."""

    def __init__(self, kernel: Any, rows: list[Any], checks: list[tuple[int, Any]]) -> None:
        self.kernel, self.rows, self.checks = kernel, rows, dict(checks)
        self.table = Table(rows)

    def retry(self, rc: int, slots: Any, objects: tuple[Any, ...]) -> tuple[Any, ...]:
        """After `tessel_vm_call` returned rc: a kernel's own failure is raised; a refused
        argument is checked in Python (a clear error, or a contiguous copy) and the kernel
        run with the addresses; the objects come back (copies where one was made)."""
        from relay_ir.vm.runtime import check_tensor, kernel_failed

        if rc > 0:
            kernel_failed(self.kernel, rc)
        out = list(objects)
        for row, (slot, *_) in enumerate(self.rows):
            spec = self.checks.get(row)
            if spec is not None:
                out[row], addr = check_tensor(out[row], spec)
            else:
                addr = out[row].ctypes.data
            slots[slot] = addr
        entry, dims = self.kernel.fn.entry_point()
        rc = entry(slots, dims)
        if rc:
            kernel_failed(self.kernel, rc)
        return tuple(out)


__all__ = ["ALIGNED", "C_CONTIGUOUS", "WRITEABLE", "CallSite", "Table", "available", "caller"]
