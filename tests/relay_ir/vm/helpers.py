"""Shared helpers of the VM tests: compile and run, prelude programs, list values
(`to_list` is the prelude tests' own)."""

from __future__ import annotations

from typing import Any

import relay_ir
import relay_ir.vm as vm
from relay_ir.interpreter import ConstructorValue
from relay_ir.module import IRModule
from tests.relay_ir.test_prelude import to_list


def run_vm(mod: IRModule, *args: Any, **kwargs: Any) -> Any:
    """Compile `mod` for the VM and run its @main."""
    return vm.VirtualMachine(vm.compile(mod)).run(*args, **kwargs)


def prelude_main(body: str, params: str = "") -> IRModule:
    """`def @main(params) { body }` in a module with the prelude."""
    prelude = IRModule().import_prelude()
    return relay_ir.parse(f"def @main({params}) {{ {body} }}", init_module=prelude)


def py_list(mod: IRModule, values: list[Any]) -> ConstructorValue:
    """A prelude List value of `values` (Cons cells ending in Nil)."""
    cons, nil = mod.get_constructor("Cons"), mod.get_constructor("Nil")
    out = ConstructorValue(nil, ())
    for v in reversed(values):
        out = ConstructorValue(cons, (v, out))
    return out


__all__ = ["prelude_main", "py_list", "run_vm", "to_list"]
