"""LLVM set-up, the O3 pipeline (new pass manager) and MCJIT loading of generated modules.

llvmlite 0.50 (LLVM 22): `llvm.initialize()` raises, so only the native target and asm
printer are initialised; optimisation is pipeline tuning options -> pass builder -> module
pass manager.

    >>> from lowering.llvm.jit import compile_ir
    >>> mod = compile_ir("define i32 @one() { ret i32 1 }", "llvm")
    >>> import ctypes
    >>> ctypes.CFUNCTYPE(ctypes.c_int32)(mod.address("one"))()
    1
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import llvmlite.binding as llvm

from tessel_errors import CodegenError

_LOCK = threading.Lock()
_READY = False


def ensure_llvm() -> None:
    """Initialise the native target and asm printer once per process."""
    global _READY
    with _LOCK:
        if not _READY:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _READY = True


@functools.lru_cache(maxsize=16)
def target_machine(cpu: str, features: str) -> llvm.TargetMachine:
    """A shared host-triple target machine for `cpu` with LLVM feature string `features`
    (for optimisation and assembly; never handed to an engine, which would own it)."""
    return new_target_machine(cpu, features)


def new_target_machine(cpu: str, features: str) -> llvm.TargetMachine:
    """A fresh target machine (an MCJIT engine takes ownership of the one it is given)."""
    ensure_llvm()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=cpu, features=features, opt=3, jit=True)


def _cpu_features(target: Any) -> tuple[str, str]:
    from tessel_target import Target

    t = Target.parse(target)
    if t.kind != "llvm":
        raise CodegenError(f"the LLVM JIT compiles for 'llvm' targets, got '{t}'")
    return t.mcpu, t.mattr


def _machine_for(target: Any) -> llvm.TargetMachine:
    return target_machine(*_cpu_features(target))


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine) -> None:
    """Run the O3 pipeline with loop and SLP vectorization on `mod`, in place."""
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pto.loop_interleaving = True
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    mpm.run(mod, pb)


def parse(text: str, tm: llvm.TargetMachine) -> llvm.ModuleRef:
    """Parse and verify LLVM IR text; errors become CodegenError with LLVM's message."""
    ensure_llvm()
    try:
        mod = llvm.parse_assembly(text)
        mod.verify()
    except RuntimeError as e:
        raise CodegenError(f"generated LLVM IR is invalid (a Tessel bug): {e}") from e
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    return mod


class JitModule:
    """An optimised module loaded into its own MCJIT engine; keeps the engine alive."""

    def __init__(self, text: str, target: Any) -> None:
        tm = _machine_for(target)
        mod = parse(text, tm)
        optimize(mod, tm)
        self.optimized_ir = str(mod)
        self._tm = tm
        self._asm: str | None = None
        self._engine = llvm.create_mcjit_compiler(mod, new_target_machine(
            *_cpu_features(target)))
        self._engine.finalize_object()
        self._module = mod

    def address(self, name: str) -> int:
        """The address of function or global `name` in the loaded code."""
        addr = self._engine.get_function_address(name)
        if not addr:
            addr = self._engine.get_global_value_address(name)
        if not addr:
            raise CodegenError(f"symbol {name!r} is not in the compiled module")
        return addr

    def assembly(self) -> str:
        """The machine assembly of the optimised module."""
        if self._asm is None:
            self._asm = self._tm.emit_assembly(self._module)
        return self._asm

    def emit_object(self) -> bytes:
        """The optimised module as a relocatable object file (for `load_object` later)."""
        return self._tm.emit_object(parse(self.optimized_ir, self._tm))


class ObjectModule:
    """An object file (from `JitModule.emit_object`) loaded into its own MCJIT engine.

    `ObjectModule(data, "llvm").address("one")`
    """

    def __init__(self, data: bytes, target: Any) -> None:
        ensure_llvm()
        self._engine = llvm.create_mcjit_compiler(
            llvm.parse_assembly(""), new_target_machine(*_cpu_features(target)))
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(data)))
        self._engine.finalize_object()

    def address(self, name: str) -> int:
        """The address of function or global `name` in the loaded code."""
        addr = self._engine.get_function_address(name)
        if not addr:
            addr = self._engine.get_global_value_address(name)
        if not addr:
            raise CodegenError(f"symbol {name!r} is not in the loaded object code")
        return addr


def compile_object(text: str, target: Any = "llvm") -> bytes:
    """Parse, optimise (O3) and emit LLVM IR text as an object file for `target`, without
    loading it (a build worker does this; `ObjectModule` loads the bytes where they run)."""
    tm = _machine_for(target)
    mod = parse(text, tm)
    optimize(mod, tm)
    return tm.emit_object(mod)


def compile_ir(text: str, target: Any = "llvm") -> JitModule:
    """Parse, optimise (O3) and JIT-load LLVM IR text for `target`."""
    return JitModule(text, target)


def emit_assembly(text: str, target: Any) -> str:
    """Optimise IR text for `target` (possibly not the host) and return its assembly."""
    tm = _machine_for(target)
    mod = parse(text, tm)
    optimize(mod, tm)
    return tm.emit_assembly(mod)
