"""Save and load a VM Executable without pickle: a folder as relay_ir.build's artifacts.

- `vm.json`: the bytecode (per function: name, parameter and register counts, and each
  instruction as its opcode and fields), the ADT constructors, the parameters' checks,
  the constants' shapes and dtypes, and per kernel: a static kernel's symbols, check
  messages and argument specs (its object file `kernel_<i>.o`), or the Relay text of a
  group with `?` dims (compiled per input shape at run time, so a `?`-dim model saves),
  or the Relay text of a group or op call run through the numpy references;
- `consts.npz` (read with allow_pickle=False), the object files, and `manifest.json`
  (relay_ir.backend.artifact_manifest: format, target CPU, size and SHA-256 of every file).

Loading checks the manifest and hashes, vm.json's shape (schema), every index an
instruction holds (registers, functions, kernels, constants, constructors, jump targets)
and each object file's ELF structure before LLVM sees a byte; a fault is a RelayError
naming the file. Object code is native code: load only folders you trust.

    >>> exe.save("model.tvm")                                   # doctest: +SKIP
    >>> relay_ir.vm.VirtualMachine(relay_ir.vm.load("model.tvm")).run(x)   # doctest: +SKIP
"""

from __future__ import annotations

import io
import json
import math
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from relay_ir.backend.artifact_manifest import MANIFEST, read_verified
from relay_ir.backend.artifact_schema import load_consts
from relay_ir.backend.json_check import Int, ListOf, Nested, Obj, Str
from relay_ir.backend.serialize import _check_object, _load_kernel, read_desc, write_folder
from relay_ir.op.shape_of import INT_DTYPES
from relay_ir.vm import bytecode as B
from relay_ir.vm.dynamic import DynamicKernel
from relay_ir.vm.kernels import InterpretedGroup, OpKernel, StaticKernel
from tessel_errors import RelayError

VM_FILE, CONSTS = "vm.json", "consts.npz"
VM_FORMAT, VM_VERSION = "tessel-vm-executable", 1
OPCODES: dict[str, type] = {cls.opcode: cls for cls in (
    B.Move, B.Ret, B.Invoke, B.InvokeClosure, B.InvokePacked, B.AllocStorage,
    B.AllocTensor, B.AllocADT, B.AllocClosure, B.GetField, B.GetTag, B.If, B.Goto,
    B.LoadConst, B.LoadConsti, B.ShapeOf, B.ReshapeTensor, B.Fatal, B.RefNew, B.RefRead,
    B.RefWrite)}

_NAME = Str(max_len=1024)
_SPECS = ListOf(Obj({"shape": ListOf(Int()), "dtype": Str(max_len=32)}))
_KERNEL = Obj({"kind": Str(choices=("static", "dynamic", "interpreted", "op")),
               "name": _NAME}, {
    "entry": _NAME, "object": _NAME, "num_threads_symbol": _NAME, "launch_symbol": _NAME,
    "messages": ListOf(Str()), "in_specs": _SPECS, "out_specs": _SPECS,
    "text": Str(max_len=1 << 24), "in_blocks": ListOf(Int(lo=0, hi=1 << 16)),
    "out_blocks": ListOf(Int(lo=0, hi=1 << 16))})
VM_SCHEMA = Obj({
    "format": Str(max_len=64), "version": Int(), "target": Str(max_len=1024),
    "tuning_db": Str(max_len=4096),
    "functions": ListOf(Obj({
        "name": _NAME, "num_params": Int(), "num_registers": Int(hi=1 << 24),
        "instructions": ListOf(Obj({"op": Str(choices=tuple(OPCODES)),
                                    "ints": Nested(Int(lo=-(1 << 31), hi=1 << 40))},
                                   {"text": Str(max_len=1 << 16)}))})),
    "entry_points": ListOf(Obj({"name": _NAME, "function": Int(), "params": ListOf(Obj({
        "name": _NAME, "kind": Str(choices=("tensor", "tuple", "any")),
        "shape": ListOf(Str(max_len=128)), "dtype": Str(max_len=32)}))})),
    "constructors": ListOf(Obj({"type": _NAME, "name": _NAME, "arity": Int()})),
    "constants": _SPECS,
    "kernels": ListOf(_KERNEL),
})


# --- instructions --------------------------------------------------------------------------


def _encode(ins: B.Instruction) -> dict[str, Any]:
    ints: list[Any] = []
    out: dict[str, Any] = {"op": ins.opcode, "ints": ints}
    for f in fields(ins):  # type: ignore[arg-type]
        v = getattr(ins, f.name)
        if isinstance(v, str):
            out["text"] = v
        elif isinstance(v, tuple):
            ints.append(list(v))
        else:
            ints.append(-1 if v is None else int(v))
    return out


def _decode(d: dict[str, Any], where: str) -> B.Instruction:
    cls = OPCODES[d["op"]]
    ints = list(d["ints"])
    values: list[Any] = []
    for f in fields(cls):
        kind = str(f.type)
        if kind == "str":
            if "text" in d:
                values.append(d["text"])
            elif isinstance(f.default, str):  # (files from before the field was added)
                values.append(f.default)
            else:
                raise RelayError(f"{where}: a {d['op']} instruction without its text")
            continue
        if not ints:
            raise RelayError(f"{where}: a {d['op']} instruction with too few fields")
        v = ints.pop(0)
        if kind.startswith("tuple"):
            if not isinstance(v, list) or not all(isinstance(x, int) for x in v):
                raise RelayError(f"{where}: {d['op']}.{f.name} must be a list of ints")
            values.append(tuple(v))
        elif not isinstance(v, int):
            raise RelayError(f"{where}: {d['op']}.{f.name} must be an int")
        elif kind == "bool":
            values.append(bool(v))
        else:
            values.append(None if kind == "int | None" and v == -1 else v)
    if ints:
        raise RelayError(f"{where}: a {d['op']} instruction with too many fields")
    return cls(*values)


_REGISTER_FIELDS = ("dst", "src", "result", "test", "target", "obj", "closure", "tensor",
                    "storage", "ref", "shape_reg")


def _check_indices(fn: B.Function, sizes: dict[str, int], where: str) -> None:
    """Every register, table index and jump target of `fn` in range (so a damaged file
    cannot make the VM index out of its tables)."""
    n = len(fn.instructions)
    if fn.num_params > fn.num_registers:
        raise RelayError(f"{where}: {fn.num_params} params but {fn.num_registers} registers")
    storage_bytes: dict[int, int] = {}  # register -> the smallest AllocStorage writing it
    for ins in fn.instructions:
        if isinstance(ins, B.AllocStorage):
            storage_bytes[ins.dst] = min(ins.size, storage_bytes.get(ins.dst, ins.size))
    for pc, ins in enumerate(fn.instructions):
        at = f"{where}: instruction {pc} ({ins.opcode})"
        regs = [getattr(ins, f) for f in _REGISTER_FIELDS if hasattr(ins, f)]
        if isinstance(ins, (B.Fatal, B.RefNew, B.RefWrite)) and ins.value is not None:
            regs.append(ins.value)
        for f in ("args", "fields", "captured"):
            regs += list(getattr(ins, f, ()))
        if any(not 0 <= r < fn.num_registers for r in regs):
            raise RelayError(f"{at}: a register outside 0..{fn.num_registers - 1}")
        table = {B.Invoke: ("func", "functions"), B.AllocClosure: ("func", "functions"),
                 B.InvokePacked: ("kernel", "kernels"), B.LoadConst: ("index", "constants")}
        if type(ins) in table:
            attr, name = table[type(ins)]
            if not 0 <= getattr(ins, attr) < sizes[name]:
                raise RelayError(f"{at}: {attr} {getattr(ins, attr)} is not one of the "
                                 f"{sizes[name]} {name}")
        if isinstance(ins, B.AllocADT) and not (ins.tag == B.TUPLE_TAG
                                                 or 0 <= ins.tag < sizes["constructors"]):
            raise RelayError(f"{at}: tag {ins.tag} is not a constructor")
        if isinstance(ins, B.InvokePacked) and not (
                0 <= ins.output_size <= ins.arity == len(ins.args)):
            raise RelayError(f"{at}: arity {ins.arity} / outputs {ins.output_size} do not fit "
                             f"{len(ins.args)} args")
        if isinstance(ins, (B.AllocStorage, B.AllocTensor)):
            if isinstance(ins, B.AllocTensor):
                np.dtype(ins.dtype)  # a bad dtype name raises TypeError, caught by load
                if any(d < 0 for d in ins.shape) or ins.offset < 0:
                    raise RelayError(f"{at}: a negative extent or offset")
                end = ins.offset + np.dtype(ins.dtype).itemsize * math.prod(ins.shape)
                if end > storage_bytes.get(ins.storage, end):
                    raise RelayError(f"{at}: the tensor ends at byte {end}, past the end of "
                                     f"its {storage_bytes[ins.storage]}-byte storage")
        if isinstance(ins, B.ShapeOf) and ins.dtype not in INT_DTYPES:
            raise RelayError(f"{at}: dtype {ins.dtype!r} is not one of {', '.join(INT_DTYPES)}")
        if isinstance(ins, B.ReshapeTensor) and ins.mode not in B.RESHAPE_MODES:
            raise RelayError(f"{at}: mode {ins.mode!r} is not one of "
                             f"{', '.join(repr(m) for m in B.RESHAPE_MODES)}")
        offsets = (ins.true_offset, ins.false_offset) if isinstance(ins, B.If) else \
            (ins.offset,) if isinstance(ins, B.Goto) else ()
        if any(not 0 <= pc + o < n for o in offsets):
            raise RelayError(f"{at}: a jump outside the function's {n} instructions")
    if n == 0 or not isinstance(fn.instructions[-1], (B.Ret, B.Fatal, B.Goto, B.Invoke,
                                                      B.InvokeClosure)):
        raise RelayError(f"{where}: the last instruction does not leave the function")


# --- save -----------------------------------------------------------------------------------


def _dim_text(d: Any) -> str:
    return "?" if d is None else str(d)


def save(exe: Any, path: str) -> None:
    """Write `exe` to folder `path` (created if needed)."""
    from relay_ir.printer import astext

    files: dict[str, bytes] = {}
    kernels = []
    tuning_db = ""
    for i, k in enumerate(exe.kernels):
        if isinstance(k, StaticKernel):
            fname = f"kernel_{i}.o"
            files[fname] = k.fn.object_code()
            kernels.append({"kind": "static", "name": k.name, "entry": k.fn.entry,
                            "object": fname, "num_threads_symbol": k.fn.num_threads_symbol,
                            "launch_symbol": k.fn.launch_symbol, "messages": k.fn.messages,
                            "in_specs": _specs(k.in_specs), "out_specs": _specs(k.out_specs)})
        elif isinstance(k, DynamicKernel):
            kd = {"kind": "dynamic", "name": k.name, "text": astext(k.fn)}
            if k.layout is not None:  # a per-image group on blocked values (vm.layouts)
                kd.update(in_blocks=list(k.layout.in_blocks),
                          out_blocks=list(k.layout.out_blocks))
            kernels.append(kd)
            if k.tuning_source.path is not None:
                tuning_db = str(k.tuning_source.path)
        elif isinstance(k, InterpretedGroup):
            kernels.append({"kind": "interpreted", "name": k.name, "text": astext(k.fn)})
        elif isinstance(k, OpKernel):
            kernels.append({"kind": "op", "name": k.name, "text": astext(k.function())})
        else:
            raise RelayError(f"save(): kernel {i} is a {type(k).__name__}, which does not save")
    buf = io.BytesIO()
    np.savez(buf, **{f"c{i}": np.asarray(c) for i, c in enumerate(exe.constants)})
    files[CONSTS] = buf.getvalue()
    desc = {
        "format": VM_FORMAT, "version": VM_VERSION, "target": str(exe.target),
        "tuning_db": tuning_db,
        "functions": [{"name": f.name, "num_params": f.num_params,
                       "num_registers": f.num_registers,
                       "instructions": [_encode(i) for i in f.instructions]}
                      for f in exe.functions],
        "entry_points": [{"name": name, "function": exe.function_index[name], "params": [
            {"name": n, "kind": kind, "shape": [_dim_text(d) for d in shape or ()],
             "dtype": dtype} for n, kind, shape, dtype in specs]}
            for name, specs in exe.params.items()],
        "constructors": [{"type": c.belong_to.name, "name": c.name_hint,
                          "arity": len(c.inputs)} for c in exe.constructors],
        "constants": _specs([(c.shape, str(c.dtype)) for c in exe.constants]),
        "kernels": kernels,
    }
    files[VM_FILE] = json.dumps(desc, indent=1).encode()
    write_folder(path, files, exe.target)


def _specs(specs: Any) -> list[dict[str, Any]]:
    return [{"shape": [int(d) for d in s], "dtype": str(dt)} for s, dt in specs]


def _layout(kd: dict[str, Any], group: Any, where: str) -> Any:
    """A dynamic kernel's saved layout (None: logical), checked against its group."""
    from relay_ir.backend.lower_group import GroupLayout, flatten_types

    if "in_blocks" not in kd and "out_blocks" not in kd:
        return None
    ins = [t for p in group.params for t in flatten_types(p.checked_type)]
    outs = flatten_types(group.body.checked_type)
    got_in, got_out = kd.get("in_blocks", []), kd.get("out_blocks", [])
    if len(got_in) != len(ins) or len(got_out) != len(outs):
        raise RelayError(f"{where}: kernel {kd['name']!r} has {len(got_in)} input and "
                         f"{len(got_out)} output blocks for a group of {len(ins)} inputs and "
                         f"{len(outs)} outputs")
    return GroupLayout(tuple(got_in), tuple(got_out))


# --- load -----------------------------------------------------------------------------------


def load(path: str) -> Any:
    """The Executable saved in folder `path` (no LLVM compilation for its static kernels);
    a damaged, foreign or incomplete folder is a RelayError naming the file and the fault.

        >>> exe = relay_ir.vm.load("model.tvm")     # doctest: +SKIP
    """
    path = os.fspath(path)
    manifest, files = read_verified(path)
    where = f"relay_ir.vm.load: {os.path.join(path, VM_FILE)!r}"
    if VM_FILE not in files or CONSTS not in files:
        raise RelayError(f"relay_ir.vm.load: {os.path.join(path, MANIFEST)!r} does not list "
                         f"{VM_FILE} and {CONSTS}: not a saved VM executable")
    desc = read_desc(files[VM_FILE], VM_SCHEMA, manifest, (VM_FORMAT, VM_VERSION), where)
    try:
        return _build(path, desc, files, where)
    except (TypeError, ValueError) as e:  # e.g. a dtype numpy does not know
        raise RelayError(f"{where}: {type(e).__name__}: {e}") from None


def _build(path: str, desc: dict[str, Any], files: dict[str, bytes], where: str) -> Any:
    from relay_ir.backend.tuned import TuningSource
    from relay_ir.expr import Constructor
    from relay_ir.parser import parse_expr
    from relay_ir.ty import GlobalTypeVar, TypeVar
    from relay_ir.vm.compiler import Executable

    consts_where = f"relay_ir.vm.load: {os.path.join(path, CONSTS)!r}"
    table = [{"kind": "const", **c} for c in desc["constants"]]
    consts = load_consts(files[CONSTS], table, consts_where)
    constants = []
    for i in range(len(table)):
        c = consts[i].view()
        c.flags.writeable = False
        constants.append(c)
    source = TuningSource(Path(desc["tuning_db"]) if desc["tuning_db"] else None)
    kernels: list[Any] = []
    for i, kd in enumerate(desc["kernels"]):
        kw = f"{where}: kernels[{i}]"
        if kd["kind"] == "static":
            need = ("entry", "object", "num_threads_symbol", "launch_symbol", "messages",
                    "in_specs", "out_specs")
            if any(k not in kd for k in need) or kd["object"] not in files or \
                    kd["object"] in (VM_FILE, CONSTS):
                raise RelayError(f"{kw}: a static kernel needs {', '.join(need)} and an "
                                 "object file the manifest lists")
            _check_object(path, kd, files[kd["object"]])
        elif "text" not in kd:
            raise RelayError(f"{kw}: a {kd['kind']} kernel without its Relay text")
    for kd in desc["kernels"]:
        if kd["kind"] == "static":
            ins = [(tuple(s["shape"]), s["dtype"]) for s in kd["in_specs"]]
            outs = [(tuple(s["shape"]), s["dtype"]) for s in kd["out_specs"]]
            spec_kd = {**kd, "specs": [[list(s), d] for s, d in ins + outs]}
            fn = _load_kernel(spec_kd, files[kd["object"]], desc["target"])
            kernels.append(StaticKernel(kd["name"], ins, outs, fn))
        elif kd["kind"] == "dynamic":
            group = _typed(parse_expr(kd["text"]))
            kernels.append(DynamicKernel(group, kd["name"], desc["target"], source,
                                         _layout(kd, group, where)))
        elif kd["kind"] == "interpreted":
            group = _typed(parse_expr(kd["text"]))
            kernels.append(InterpretedGroup(group, kd["name"].removesuffix(" (interpreted)")))
        else:
            kernels.append(OpKernel(parse_expr(kd["text"]).body))
    ctors = [Constructor(c["name"], tuple(TypeVar(f"a{k}") for k in range(c["arity"])),
                         GlobalTypeVar(c["type"]), i)
             for i, c in enumerate(desc["constructors"])]
    functions = tuple(B.Function(f["name"], f["num_params"],
                                 tuple(_decode(d, f"{where}: @{f['name']}")
                                       for d in f["instructions"]), f["num_registers"])
                      for f in desc["functions"])
    sizes = {"functions": len(functions), "kernels": len(kernels),
             "constants": len(constants), "constructors": len(ctors)}
    for f in functions:
        _check_indices(f, sizes, f"{where}: @{f.name}")
    params, index = {}, {}
    for ep in desc["entry_points"]:
        if not 0 <= ep["function"] < len(functions):
            raise RelayError(f"{where}: entry point @{ep['name']} names function "
                             f"{ep['function']}, which does not exist")
        index[ep["name"]] = ep["function"]
        params[ep["name"]] = [(p["name"], p["kind"], tuple(_dim(d) for d in p["shape"]),
                               p["dtype"]) for p in ep["params"]]
    bytecode = B.Bytecode(functions, tuple(k.name for k in kernels))
    return Executable(bytecode, constants, ctors, kernels, params, desc["target"], index)


def _dim(text: str) -> Any:
    if text == "?":
        return None
    return int(text) if text.isdigit() else text


def _typed(fn: Any) -> Any:
    """A parsed group with its types inferred, as the compiler had it."""
    from relay_ir.expr import Function
    from relay_ir.module import IRModule
    from relay_ir.transform.infer_type import InferType

    typed = InferType()(IRModule.from_expr(fn))["main"]
    return Function(typed.params, typed.body, typed.ret_type, (), fn.attrs)


__all__ = ["load", "save"]
