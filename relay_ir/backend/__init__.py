"""relay_ir.backend, behind relay_ir.build: a dataflow model -> fused kernels + graph executor.

    >>> import relay_ir                                          # doctest: +SKIP
    >>> lib = relay_ir.build(mod, target="llvm", params=params)  # doctest: +SKIP
    >>> y = lib.run(x=x); print(lib.profile(x=x)); lib.memory_plan   # doctest: +SKIP
    >>> lib.save("m.tessel"); relay_ir.load_compiled("m.tessel").run(x=x)  # doctest: +SKIP
"""

from relay_ir.backend.executor import KernelFn
from relay_ir.backend.memory_plan import MemoryPlan, plan_memory
from relay_ir.backend.model import CompiledModel
from relay_ir.backend.pipeline import build
from relay_ir.backend.profile import ProfileTable
from relay_ir.backend.serialize import load

__all__ = ["build", "load", "CompiledModel", "MemoryPlan", "plan_memory", "ProfileTable",
           "KernelFn"]
