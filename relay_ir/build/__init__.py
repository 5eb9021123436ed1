"""relay_ir.build: compile a dataflow model into fused kernels run by a graph executor.

    >>> import relay_ir                                          # doctest: +SKIP
    >>> lib = relay_ir.build(mod, target="llvm", params=params)  # doctest: +SKIP
    >>> y = lib.run(x=x); print(lib.profile(x=x)); lib.memory_plan   # doctest: +SKIP
    >>> lib.save("m.tessel"); relay_ir.load_compiled("m.tessel").run(x=x)  # doctest: +SKIP
"""

from relay_ir.build.executor import KernelFn
from relay_ir.build.memory_plan import MemoryPlan, plan_memory
from relay_ir.build.model import CompiledModel
from relay_ir.build.pipeline import build
from relay_ir.build.profile import ProfileTable
from relay_ir.build.serialize import load

__all__ = ["build", "load", "CompiledModel", "MemoryPlan", "plan_memory", "ProfileTable",
           "KernelFn"]
