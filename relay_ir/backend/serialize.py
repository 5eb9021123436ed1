"""Save and load a CompiledModel without recompiling: a folder with `model.json` (the
graph: values, steps, inputs, outputs, and per kernel its symbols, check messages and
argument specs), one relocatable object file per kernel (`kernel_<i>.o`, from llvmlite's
target machine; MCJIT loads it back) and `consts.npz` (loaded with allow_pickle=False).

    >>> lib.save("resnet.tessel")                          # doctest: +SKIP
    >>> lib2 = relay_ir.load_compiled("resnet.tessel")     # doctest: +SKIP
    >>> lib2.run(x=x)                                      # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from relay_ir.backend.executor import GraphPlan, KernelFn, Step, Value
from tessel_errors import RelayError

FORMAT = "tessel-compiled-model"
VERSION = 1


def save(model: Any, path: str) -> None:
    """Write `model` (static shapes) to folder `path` (created if needed)."""
    if len(model._plans) != 1 or any(d is None or isinstance(d, str)
                                     for _, s, _ in model.input_specs for d in s):
        raise RelayError("save(): only models with static input shapes can be saved; build "
                         "the model with concrete shapes (no `?` dims)")
    plan: GraphPlan = model._last
    os.makedirs(path, exist_ok=True)
    kernels = []
    for i, k in enumerate(plan.kernels):
        fname = f"kernel_{i}.o"
        with open(os.path.join(path, fname), "wb") as f:
            f.write(k.object_code())
        kernels.append({"name": k.name, "entry": k.entry, "object": fname,
                        "num_threads_symbol": k.num_threads_symbol,
                        "launch_symbol": k.launch_symbol, "messages": k.messages,
                        "specs": [[list(s), dt] for s, dt in k.specs]})
    consts = {f"c{v}": val.data for v, val in enumerate(plan.values) if val.kind == "const"}
    np.savez(os.path.join(path, "consts.npz"), **consts)
    desc = {
        "format": FORMAT, "version": VERSION, "target": str(model.target),
        "inputs": [[n, list(s), dt] for n, s, dt in model.input_specs],
        "values": [{"kind": v.kind, "shape": list(v.shape), "dtype": v.dtype, "name": v.name}
                   for v in plan.values],
        "steps": [{"kernel": s.kernel, "inputs": s.inputs, "outputs": s.outputs,
                   "group": s.group} for s in plan.steps],
        "graph_inputs": plan.inputs, "outputs": plan.outputs, "kernels": kernels,
        "group_schedules": model.group_schedules,
    }
    with open(os.path.join(path, "model.json"), "w") as f:
        json.dump(desc, f, indent=1)


def load(path: str) -> Any:
    """Load a model written by `CompiledModel.save` (no LLVM compilation happens).

    `lib = load("model.tessel"); lib.run(x=x)`
    """
    from lowering.llvm.jit import ObjectModule
    from relay_ir.backend.model import CompiledModel

    try:
        with open(os.path.join(path, "model.json")) as f:
            desc = json.load(f)
    except (OSError, ValueError) as e:
        raise RelayError(f"load_compiled: {path!r} is not a saved Tessel model ({e})") from e
    if desc.get("format") != FORMAT or desc.get("version") != VERSION:
        raise RelayError(f"load_compiled: {path!r} has format {desc.get('format')!r} version "
                         f"{desc.get('version')!r}; expected {FORMAT!r} version {VERSION}")
    kernels = []
    for k in desc["kernels"]:
        with open(os.path.join(path, k["object"]), "rb") as f:
            data = f.read()
        kfn = KernelFn(ObjectModule(data, desc["target"]), k["name"], k["entry"],
                       k["num_threads_symbol"], k["launch_symbol"], k["messages"],
                       [(tuple(s), dt) for s, dt in k["specs"]])
        kfn.object_bytes = data
        kernels.append(kfn)
    with np.load(os.path.join(path, "consts.npz"), allow_pickle=False) as z:
        consts = {name: z[name] for name in z.files}
    values = []
    for v, d in enumerate(desc["values"]):
        values.append(Value(d["kind"], tuple(d["shape"]), d["dtype"], d["name"],
                            consts.get(f"c{v}")))
    steps = [Step(s["kernel"], s["inputs"], s["outputs"], s["group"]) for s in desc["steps"]]
    plan = GraphPlan(kernels, values, steps, desc["graph_inputs"], desc["outputs"])
    specs = [(n, tuple(s), dt) for n, s, dt in desc["inputs"]]
    model = CompiledModel(None, desc["target"], specs)
    model._add(tuple(s for _, s, _ in specs), plan)
    model.group_schedules = [tuple(g) for g in desc.get("group_schedules", [])]
    return model
