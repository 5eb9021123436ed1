"""relay_ir.vm: whole programs (control flow, ADTs, closures, references, recursion)
compiled to bytecode over fused kernels, run by a virtual machine, as TVM's Relay VM.

    >>> import relay_ir.vm
    >>> exe = relay_ir.vm.compile(mod, target="llvm")    # doctest: +SKIP
    >>> print(exe.bytecode)                              # doctest: +SKIP
    >>> relay_ir.vm.VirtualMachine(exe).run(x)           # doctest: +SKIP
"""

from relay_ir.vm.compiler import Executable, compile
from relay_ir.vm.serialize import load
from relay_ir.vm.vm import VirtualMachine, VMClosure, VMProfile

__all__ = ["Executable", "VMClosure", "VMProfile", "VirtualMachine", "compile", "load"]
