"""An `onnx.backend` backend that imports with relay_ir.frontend and runs the interpreter.

Used by the ONNX backend test suite (tests/relay_ir/frontend/test_onnx_backend.py):
models with unsupported ops are skipped in `prepare()` (the runner checks `is_compatible`
only for file-based models, so the skip has to happen here). Node tests often feed shapes,
axes or pads as graph inputs; when the import needs such a value statically
(NonStaticInput), the model is converted again at run time with its integer and scalar inputs
frozen as initializers, as a serving system specialises on those values.

    rep = TesselBackend.prepare(model)
    outputs = rep.run([x])          # a list of numpy arrays, one per graph output

TesselCompiledBackend runs the same import through relay_ir.build (target "llvm") and the
compiled model, so the suite checks the generated kernels. Where build rejects the program
as not dataflow (If, Loop, Scan) or for a reshape to a shape known only at run time
(dyn.reshape), it is compiled with relay_ir.vm.compile and run by the VM; the reason is kept
in TesselCompiledBackend.vm_runs[model graph name].

    rep = TesselCompiledBackend.prepare(model)
    outputs = rep.run([x])          # compiled kernels
"""

from __future__ import annotations

import unittest
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep

import relay_ir
import relay_ir.vm
from relay_ir.frontend import NonStaticInput, UnsupportedOnnxOps, from_onnx
from tessel_errors import RelayError

# the part of relay_ir.build's "not a dataflow program" message that marks a rejection
_NOT_DATAFLOW = "compiles dataflow-only programs"


def graph_input_names(model: onnx.ModelProto) -> list[str]:
    """The names of the graph inputs that are not initializers, in order."""
    inits = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def freeze_inputs(model: onnx.ModelProto, values: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of `model` whose inputs named in `values` are initializers with those values."""
    frozen = onnx.ModelProto()
    frozen.CopyFrom(model)
    keep = [i for i in frozen.graph.input if i.name not in values]
    del frozen.graph.input[:]
    frozen.graph.input.extend(keep)
    frozen.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), n)
                                    for n, v in values.items())
    return frozen


class TesselRep(BackendRep):
    """A converted model: run(inputs) feeds the graph inputs in order (or by name)."""

    def __init__(self, model: onnx.ModelProto, converted: Any) -> None:
        self.model = model
        self.converted = converted  # (mod, params), or None: convert per run (frozen ints)
        self.input_names = graph_input_names(model)
        self.n_outputs = len(model.graph.output)

    def execute(self, mod: Any, params: dict[str, np.ndarray], feeds: dict[str, Any]) -> Any:
        """Run the converted module (here: the interpreter)."""
        return relay_ir.interpret(mod, **feeds, **params)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """The graph outputs as a tuple of numpy arrays."""
        if isinstance(inputs, Mapping):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feeds = dict(zip(self.input_names, inputs))
        feeds = {k: numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v
                 for k, v in feeds.items()}
        if self.converted is not None:
            mod, params = self.converted
        else:
            ints = {k: v for k, v in feeds.items()
                    if np.asarray(v).dtype.kind in "iu" or np.ndim(v) == 0}
            mod, params = from_onnx(freeze_inputs(self.model, ints))
            feeds = {k: v for k, v in feeds.items() if k not in ints}
        out = self.execute(mod, params, feeds)
        outs = out if self.n_outputs > 1 else (out,)
        return tuple(np.asarray(o) for o in outs)


class TesselBackend(Backend):
    """The relay_ir reference path (ONNX import, then the interpreter) as an ONNX backend."""

    rep_class: type[TesselRep] = TesselRep

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> TesselRep:
        """Convert `model`; unittest.SkipTest when it uses unsupported ops."""
        super().prepare(model, device, **kwargs)
        try:
            converted = from_onnx(model)
        except UnsupportedOnnxOps as e:
            raise unittest.SkipTest(str(e).splitlines()[1].strip()) from None
        except NonStaticInput:
            converted = None
        return cls.rep_class(model, converted)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """Only the CPU (the interpreter runs numpy)."""
        return device == "CPU"

    @classmethod
    def run_node(cls, node: Any, inputs: Sequence[Any], device: str = "CPU",
                 outputs_info: Any = None, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Not used by the suite here (node tests arrive as models)."""
        raise NotImplementedError("TesselBackend runs whole models; use prepare().run()")


class TesselCompiledRep(TesselRep):
    """A converted model run through relay_ir.build: compiled once per module, then run."""

    def __init__(self, model: onnx.ModelProto, converted: Any) -> None:
        super().__init__(model, converted)
        self.compiled: dict[int, Any] = {}  # id(mod) -> CompiledModel (kept with its module)

    def execute(self, mod: Any, params: dict[str, np.ndarray], feeds: dict[str, Any]) -> Any:
        """The compiled model's outputs; where build rejects the program as not dataflow
        (If, Loop, Scan), relay_ir.vm.compile's, run by the VM."""
        key = id(mod)
        if key not in self.compiled:
            try:
                self.compiled[key] = (mod, relay_ir.build(mod, target="llvm", params=params))
            except RelayError as e:
                # (build refuses a dyn.reshape whose new shape is only known at run time, a
                # Reshape fed its shape as a graph input, the same way; the VM runs both)
                if _NOT_DATAFLOW not in str(e):
                    raise
                TesselCompiledBackend.vm_runs[self.model.graph.name] = str(e)
                exe = relay_ir.vm.compile(mod, target="llvm", params=params)
                self.compiled[key] = (mod, relay_ir.vm.VirtualMachine(exe))
        return self.compiled[key][1].run(**feeds)  # a CompiledModel or a VirtualMachine


class TesselCompiledBackend(TesselBackend):
    """ONNX import, relay_ir.build(target="llvm"), then the compiled model, as a backend."""

    rep_class = TesselCompiledRep
    # model graph name -> why build rejected it (the VM ran it instead)
    vm_runs: dict[str, str] = {}
