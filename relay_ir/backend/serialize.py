"""Save and load a CompiledModel without recompiling: a folder with `model.json` (the
graph: values, steps, inputs, outputs, and per kernel its symbols, check messages and
argument specs), one relocatable object file per kernel (`kernel_<i>.o`, from llvmlite's
target machine; MCJIT loads it back), `consts.npz` (loaded with allow_pickle=False) and
`manifest.json` (format version, target CPU, the size and SHA-256 of every other file).
A model built for "cuda" or "cuda -sim" keeps per kernel its CUDA C, PTX, cubin and loop
IR instead of object files (relay_ir.backend.serialize_cuda). Each CPU kernel records the
(input, output) parameter pairs its loop IR proved may share storage (`inplace`:
relay_ir.backend.inplace), which the loaded model has no loop IR to prove again: it plans
exactly the memory the built one did. A folder saved without them loads and plans without
sharing (best fit).

Loading checks the manifest and hashes, then model.json against its schema and its graph
for consistency, the constants against the values table, and each object file's ELF
structure, before LLVM sees a byte; anything wrong is a RelayError naming the file. An
artifact is native code: load only folders you trust (the hashes catch damage, not forgery).

    >>> lib.save("resnet.tessel")                          # doctest: +SKIP
    >>> lib2 = relay_ir.load_compiled("resnet.tessel")     # doctest: +SKIP
    >>> lib2.run(x=x)                                      # doctest: +SKIP
"""

from __future__ import annotations

import io
import json
import os
from typing import Any

import numpy as np

from relay_ir.backend.artifact_manifest import (
    FORMAT,
    MANIFEST,
    VERSION,
    parse_json,
    read_verified,
    write_manifest,
)
from relay_ir.backend.artifact_schema import (
    CUDA_MODEL_SCHEMA,
    MODEL_SCHEMA,
    check_plan,
    load_consts,
)
from relay_ir.backend.executor import GraphPlan, KernelFn, Step, Value
from relay_ir.backend.json_check import check
from tessel_errors import CodegenError, RelayError

MODEL, CONSTS = "model.json", "consts.npz"


def save(model: Any, path: str) -> None:
    """Write `model` (static shapes) to folder `path` (created if needed)."""
    if len(model._plans) != 1 or any(d is None or isinstance(d, str)
                                     for _, s, _ in model.input_specs for d in s):
        raise RelayError("save(): only models with static input shapes can be saved; build "
                         "the model with concrete shapes (no `?` dims)")
    plan: GraphPlan = model._last
    files: dict[str, bytes] = {}
    kernels = []
    gpu = _kind(model.target) == "cuda"
    for i, k in enumerate(plan.kernels):
        if gpu:  # CUDA C, PTX, cubin and loop IR (relay_ir.backend.serialize_cuda)
            from relay_ir.backend.serialize_cuda import cuda_kernel_files

            entry, kfiles = cuda_kernel_files(i, k)
            kernels.append(entry)
            files.update(kfiles)
            continue
        fname = f"kernel_{i}.o"
        files[fname] = k.object_code()
        kd = {"name": k.name, "entry": k.entry, "object": fname,
              "num_threads_symbol": k.num_threads_symbol, "launch_symbol": k.launch_symbol,
              "messages": k.messages, "specs": [[list(s), dt] for s, dt in k.specs]}
        pairs = k.inplace_pairs()
        if pairs is not None:  # the loaded model plans memory as this one did
            kd["inplace"] = [[ip, op] for ip, op in pairs]
        kernels.append(kd)
    consts = {f"c{v}": val.data for v, val in enumerate(plan.values) if val.kind == "const"}
    buf = io.BytesIO()
    np.savez(buf, **consts)
    files[CONSTS] = buf.getvalue()
    desc = {
        "format": FORMAT, "version": VERSION, "target": str(model.target),
        "inputs": [[n, list(s), dt] for n, s, dt in model.input_specs],
        "values": [{"kind": v.kind, "shape": list(v.shape), "dtype": v.dtype, "name": v.name}
                   for v in plan.values],
        "steps": [{"kernel": s.kernel, "inputs": s.inputs, "outputs": s.outputs,
                   "group": s.group} for s in plan.steps],
        "graph_inputs": plan.inputs, "outputs": plan.outputs, "kernels": kernels,
        "group_schedules": [list(g) for g in model.group_schedules],
    }
    files[MODEL] = json.dumps(desc, indent=1).encode()
    write_folder(path, files, model.target)


def _kind(target: Any) -> str:
    from tessel_target import Target

    return Target.parse(target).kind


def _model_desc(path: str, manifest: dict[str, Any], files: dict[str, bytes]) -> dict:
    where = f"load_compiled: {os.path.join(path, MODEL)!r}"
    missing = [n for n in (MODEL, CONSTS) if n not in files]
    if missing:
        raise RelayError(f"load_compiled: {os.path.join(path, MANIFEST)!r} does not list "
                         f"{', '.join(missing)}: not a saved Tessel model")
    if _kind(manifest["target"]) == "cuda":
        return read_desc(files[MODEL], CUDA_MODEL_SCHEMA, manifest, (FORMAT, VERSION), where)
    desc = read_desc(files[MODEL], MODEL_SCHEMA, manifest, (FORMAT, VERSION), where)
    check_plan(desc, where)
    for k, kd in enumerate(desc["kernels"]):
        if kd["object"] not in files or kd["object"] in (MODEL, CONSTS):
            raise RelayError(f"{where}: kernels[{k}].object {kd['object']!r} is not an "
                             "object file the manifest lists")
    return desc


def read_desc(data: bytes, schema: Any, manifest: dict[str, Any], format_: tuple[str, int],
              where: str) -> dict[str, Any]:
    """A folder's description document parsed, checked against `schema`, its (format,
    version) and its target against the manifest's; a RelayError naming `where` if not."""
    desc = parse_json(data, where)
    # first: the manifest's target chose the schema (a CPU or a GPU model's)
    target = desc.get("target") if isinstance(desc, dict) else None
    if isinstance(target, str) and target != manifest["target"]:
        raise RelayError(f"{where}: target {target[:200]!r} differs from the manifest's "
                         f"{manifest['target']!r}")
    check(schema, desc, where)
    if (desc["format"], desc["version"]) != format_:
        raise RelayError(f"{where}: format {desc['format']!r} version {desc['version']}; "
                         f"expected {format_[0]!r} version {format_[1]}")
    return desc


def write_folder(path: str, files: dict[str, bytes], target: Any) -> None:
    """Write `files` into folder `path` (created if needed), then their manifest."""
    os.makedirs(path, exist_ok=True)
    # the old manifest goes first, so a save cut short leaves a folder that load refuses
    if os.path.lexists(os.path.join(path, MANIFEST)):
        os.remove(os.path.join(path, MANIFEST))
    for name, data in files.items():
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)
    write_manifest(path, files, target)


def _check_object(path: str, kd: dict[str, Any], data: bytes) -> None:
    from lowering.llvm.elf_check import check_object

    try:
        check_object(data, [kd["entry"]], {kd["num_threads_symbol"]: 4,
                                           kd["launch_symbol"]: 8})
    except CodegenError as e:
        raise RelayError(f"load_compiled: {os.path.join(path, kd['object'])!r} (kernel "
                         f"{kd['name']!r}): {e}") from None


def _load_kernel(kd: dict[str, Any], data: bytes, target: str) -> KernelFn:
    from lowering.llvm.jit import ObjectModule

    kfn = KernelFn(ObjectModule(data, target), kd["name"], kd["entry"],
                   kd["num_threads_symbol"], kd["launch_symbol"], kd["messages"],
                   [(tuple(s), dt) for s, dt in kd["specs"]])
    kfn.object_bytes = data
    if "inplace" in kd:  # absent in a folder saved before they were recorded: no sharing
        kfn.inplace = [(ip, op) for ip, op in kd["inplace"]]
    return kfn


def load(path: str) -> Any:
    """Load a model written by `CompiledModel.save` (no LLVM compilation happens); a
    damaged, foreign or incomplete folder is a RelayError naming the file and the fault.

    `lib = load("model.tessel"); lib.run(x=x)`
    """
    from relay_ir.backend.model import CompiledModel

    path = os.fspath(path)
    manifest, files = read_verified(path, ("llvm", "cuda"))
    desc = _model_desc(path, manifest, files)
    consts = load_consts(files[CONSTS], desc["values"],
                         f"load_compiled: {os.path.join(path, CONSTS)!r}")
    values = [Value(d["kind"], tuple(d["shape"]), d["dtype"], d["name"], consts.get(v))
              for v, d in enumerate(desc["values"])]
    steps = [Step(s["kernel"], s["inputs"], s["outputs"], s["group"]) for s in desc["steps"]]
    if _kind(desc["target"]) == "cuda":
        from relay_ir.backend.serialize_cuda import load_cuda_plan

        plan = load_cuda_plan(path, desc, files, values, steps)
    else:
        for kd in desc["kernels"]:  # every object is checked before MCJIT loads any
            _check_object(path, kd, files[kd["object"]])
        kernels = [_load_kernel(kd, files[kd["object"]], desc["target"])
                   for kd in desc["kernels"]]
        plan = GraphPlan(kernels, values, steps, desc["graph_inputs"], desc["outputs"])
    specs = [(n, tuple(s), dt) for n, s, dt in desc["inputs"]]
    model = CompiledModel(None, desc["target"], specs)
    model._add(tuple(s for _, s, _ in specs), plan)
    model.group_schedules = [tuple(g) for g in desc.get("group_schedules", [])]
    return model
