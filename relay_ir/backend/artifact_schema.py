"""What `model.json` and `consts.npz` of a saved model must hold, checked before loading.

`MODEL_SCHEMA` (data, for relay_ir.backend.json_check) fixes the types, keys and ranges;
`check_plan` then checks what a schema cannot say: every index points at something that
exists, every kernel is called with values of the shapes and dtypes it was compiled for,
every temporary is written before it is read, inputs and constants are never written,
every in-place pair of a kernel (optional `inplace`: absent in folders saved before it
was recorded) names an input and an output of one shape and dtype.
Object code trusts all of that (a wrong shape is a write past the end of a buffer), so a
folder that breaks any of it is refused.

    >>> check_plan({"inputs": [], "values": [], "steps": [], "graph_inputs": [],
    ...             "outputs": [], "kernels": []}, "model.json")
"""

from __future__ import annotations

import io
import zipfile
from typing import Any

import numpy as np

from relay_ir.backend.artifact_manifest import FILE_NAME
from relay_ir.backend.json_check import Int, ListOf, Nested, Obj, Str, Tuple
from tensor_expr.dtype import DTYPES
from tessel_errors import RelayError

VALUE_KINDS = ("input", "const", "temp", "output")
_DTYPE = Str(choices=tuple(d for d in DTYPES if d != "handle"))
_SHAPE = ListOf(Int(hi=1 << 40), max_len=32)
_ID = Int()
_SYMBOL = Str(pattern=r"[A-Za-z_.$][A-Za-z0-9_.$]{0,255}")
_TEXT = Str(max_len=1 << 16)

# the graph of a saved model, whatever its target
_GRAPH = {
    "format": Str(max_len=128),
    "version": Int(),
    "target": Str(max_len=1024),
    "inputs": ListOf(Tuple((Str(max_len=256), _SHAPE, _DTYPE))),
    "values": ListOf(Obj({"kind": Str(choices=VALUE_KINDS), "shape": _SHAPE,
                          "dtype": _DTYPE, "name": _TEXT})),
    "steps": ListOf(Obj({"kernel": _ID, "inputs": ListOf(_ID), "outputs": ListOf(_ID),
                         "group": _TEXT})),
    "graph_inputs": ListOf(_ID),
    "outputs": Nested(_ID),
}
_SPECS = ListOf(Tuple((_SHAPE, _DTYPE)))

MODEL_SCHEMA = Obj({
    **_GRAPH,
    "kernels": ListOf(Obj({
        "name": _TEXT, "entry": _SYMBOL, "object": FILE_NAME,
        "num_threads_symbol": _SYMBOL, "launch_symbol": _SYMBOL,
        "messages": ListOf(_TEXT), "specs": _SPECS,
    }, optional={"inplace": ListOf(Tuple((_ID, _ID)))})),
}, optional={"group_schedules": ListOf(Tuple((_TEXT, _TEXT)))})

# a model compiled for target "cuda" / "cuda -sim": per kernel its CUDA C, PTX, cubin (where
# the compiler made one) and loop IR (lowering.ir_json), each a file of the folder
CUDA_MODEL_SCHEMA = Obj({
    **_GRAPH,
    "kernels": ListOf(Obj({
        "name": _TEXT, "arch": Str(pattern=r"sm_[0-9]{2,3}[a-z]?"), "source": FILE_NAME,
        "ptx": FILE_NAME, "loop_ir": FILE_NAME, "specs": _SPECS,
    }, optional={"cubin": FILE_NAME})),
}, optional={"group_schedules": ListOf(Tuple((_TEXT, _TEXT)))})


def _leaves(o: Any) -> list[int]:
    return [x for y in o for x in _leaves(y)] if isinstance(o, list) else [o]


def _check_ids(desc: dict[str, Any], where: str) -> None:
    n, nk = len(desc["values"]), len(desc["kernels"])
    for k, s in enumerate(desc["steps"]):
        if s["kernel"] >= nk:
            raise RelayError(f"{where}: steps[{k}].kernel is {s['kernel']}, but there are "
                             f"{nk} kernels")
        for v in s["inputs"] + s["outputs"]:
            if v >= n:
                raise RelayError(f"{where}: steps[{k}] uses value {v}, but there are {n}")
    for what, ids in (("graph_inputs", desc["graph_inputs"]),
                      ("outputs", _leaves(desc["outputs"]))):
        bad = [v for v in ids if v >= n]
        if bad:
            raise RelayError(f"{where}: {what} names value {bad[0]}, but there are {n}")
    temps = [v for v in _leaves(desc["outputs"]) if desc["values"][v]["kind"] == "temp"]
    if temps:  # a temporary's storage is reused by the next run
        raise RelayError(f"{where}: outputs names value {temps[0]}, a temporary")


def _check_inputs(desc: dict[str, Any], where: str) -> None:
    values, ins = desc["values"], desc["graph_inputs"]
    if len(ins) != len(desc["inputs"]) or len(set(ins)) != len(ins):
        raise RelayError(f"{where}: graph_inputs {ins} do not name {len(desc['inputs'])} "
                         "distinct values, one per input")
    names = [name for name, _, _ in desc["inputs"]]
    if len(set(names)) != len(names):
        raise RelayError(f"{where}: inputs has a name twice: {names}")
    for v, (name, shape, dtype) in zip(ins, desc["inputs"]):
        val = values[v]
        if val["kind"] != "input" or val["shape"] != shape or val["dtype"] != dtype:
            raise RelayError(f"{where}: input {name!r} is {shape} {dtype}, but its value {v} "
                             f"is a {val['kind']} of {val['shape']} {val['dtype']}")
    stray = [v for v, val in enumerate(values) if val["kind"] == "input" and v not in ins]
    if stray:
        raise RelayError(f"{where}: value {stray[0]} is an input that graph_inputs omits")


def _check_steps(desc: dict[str, Any], where: str) -> None:
    values = desc["values"]
    ready = {v for v, val in enumerate(values) if val["kind"] in ("input", "const")}
    for k, s in enumerate(desc["steps"]):
        specs = desc["kernels"][s["kernel"]]["specs"]
        args = s["inputs"] + s["outputs"]
        if len(args) != len(specs):
            raise RelayError(f"{where}: steps[{k}] passes {len(args)} values to kernel "
                             f"{s['kernel']}, which takes {len(specs)}")
        for pos, (v, (shape, dtype)) in enumerate(zip(args, specs)):
            val = values[v]
            if val["shape"] != shape or val["dtype"] != dtype:
                raise RelayError(f"{where}: steps[{k}] argument {pos} is value {v} of "
                                 f"{val['shape']} {val['dtype']}; kernel {s['kernel']} was "
                                 f"compiled for {shape} {dtype}")
        unready = [v for v in s["inputs"] if v not in ready]
        if unready:
            raise RelayError(f"{where}: steps[{k}] reads value {unready[0]} before any step "
                             "writes it")
        for v in s["outputs"]:
            if values[v]["kind"] not in ("temp", "output") or v in ready:
                raise RelayError(f"{where}: steps[{k}] writes value {v}, a "
                                 f"{values[v]['kind']} that is already set")
            ready.add(v)
    unwritten = [v for v in range(len(values)) if v not in ready]
    if unwritten:
        raise RelayError(f"{where}: value {unwritten[0]} ({values[unwritten[0]]['kind']}) is "
                         "never written by a step")


def check_plan(desc: dict[str, Any], where: str) -> None:
    """Raise RelayError (naming `where`) unless the graph of a schema-checked model.json
    is one the executor can run safely.

    `check_plan(json.load(open("m.tessel/model.json")), "m.tessel/model.json")`
    """
    _check_ids(desc, where)
    _check_inputs(desc, where)
    _check_steps(desc, where)
    _check_inplace(desc, where)


def _check_inplace(desc: dict[str, Any], where: str) -> None:
    """Each kernel's in-place pairs name an input and an output parameter of one shape and
    dtype, at every step that calls it: the memory plan gives such an output the input's
    bytes, so a pair that named a larger output would have a kernel write past a block.
    (A pair that fits but is false, an input the kernel reads elsewhere too, cannot be
    told from the folder: that, like the object code, is trusted.)"""
    calls: dict[int, dict[int, int]] = {}  # kernel -> {number of inputs: a step passing so}
    for j, s in enumerate(desc["steps"]):
        calls.setdefault(s["kernel"], {}).setdefault(len(s["inputs"]), j)
    for k, kd in enumerate(desc["kernels"]):
        specs = kd["specs"]
        for ip, op in kd.get("inplace", ()):
            what = f"{where}: kernels[{k}].inplace pair [{ip}, {op}]"
            if ip >= len(specs) or op >= len(specs):
                raise RelayError(f"{what} names a parameter past the kernel's {len(specs)}")
            if specs[ip] != specs[op]:
                raise RelayError(f"{what}: parameter {ip} is {specs[ip][0]} {specs[ip][1]}, "
                                 f"parameter {op} {specs[op][0]} {specs[op][1]}; an output "
                                 "takes an input's storage only at the same shape and dtype")
            for n, j in calls.get(k, {}).items():
                if not ip < n <= op:
                    raise RelayError(f"{what}: steps[{j}] passes {n} inputs, so the pair is "
                                     "not (input, output)")


def load_consts(data: bytes, values: list[dict[str, Any]], where: str) -> dict[int, np.ndarray]:
    """The constants of consts.npz by value id, each checked against the values table
    (present, shape, dtype, C order, nothing extra) before and after reading.

    `load_consts(open("m.tessel/consts.npz", "rb").read(), desc["values"], "consts.npz")`
    """
    want = {f"c{v}": val for v, val in enumerate(values) if val["kind"] == "const"}
    try:
        return _read_consts(data, want, where)
    except RelayError:
        raise
    # zipfile, zlib and numpy's .npy header parser raise many kinds of error on damaged
    # bytes (BadZipFile, NotImplementedError for an odd zip version, zlib.error, ...)
    except Exception as e:  # noqa: BLE001
        raise RelayError(f"{where}: not a readable npz archive ({type(e).__name__}: "
                         f"{str(e)[:100]})") from None


def _read_consts(data: bytes, want: dict[str, dict[str, Any]],
                 where: str) -> dict[int, np.ndarray]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        sizes = {i.filename: i.file_size for i in z.infolist()}
    names = {n[:-4] if n.endswith(".npy") else n for n in sizes}
    if names != set(want) or len(names) != len(sizes):
        raise RelayError(f"{where}: holds arrays {sorted(names)}; the model's constants are "
                         f"{sorted(want)}")
    for name, size in sizes.items():
        val = want[name[:-4] if name.endswith(".npy") else name]
        nbytes = int(np.prod(val["shape"], dtype=object)) * np.dtype(val["dtype"]).itemsize
        if size > nbytes + 4096:  # the .npy header is at most a few hundred bytes
            raise RelayError(f"{where}: array {name!r} is {size} bytes; a {val['shape']} "
                             f"{val['dtype']} constant needs {nbytes}")
    out = {}
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        for name, val in want.items():
            a = z[name]
            if (a.shape != tuple(val["shape"]) or a.dtype != np.dtype(val["dtype"])
                    or not a.flags.c_contiguous):
                order = "C" if a.flags.c_contiguous else "Fortran"
                raise RelayError(f"{where}: array {name!r} is {a.shape} {a.dtype} in {order} "
                                 f"order; the model's constant is {tuple(val['shape'])} "
                                 f"{val['dtype']} in C order")
            out[int(name[1:])] = a
    return out


__all__ = ["CUDA_MODEL_SCHEMA", "MODEL_SCHEMA", "VALUE_KINDS", "check_plan", "load_consts"]
