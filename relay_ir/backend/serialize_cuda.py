"""Save and load a CompiledModel built for target "cuda" or "cuda -sim", without compiling
again: the folder holds the graph (`model.json`, the same graph as a CPU model's, checked
by the same `check_plan`), `consts.npz`, and per kernel its CUDA C (`kernel_<i>.cu`), the
PTX (`kernel_<i>.ptx`), the cubin (`kernel_<i>.cubin`, where the compiler made one) and
the loop IR (`kernel_<i>.ir.json`, lowering.ir_json), all hashed in `manifest.json`.

Loading checks the manifest and hashes, the graph, then per kernel: the loop IR against
its schema and the kernel's argument specs; the CUDA C that lowering.cuda.codegen
generates from that loop IR (pure Python, no compiler) must equal the saved source; the
PTX must target the kernel's architecture and define every `__global__` function; the
cubin must be an ELF file. NVRTC / nvcc never run: a GPU loads the cubin (or the PTX,
which the driver compiles, when the GPU's architecture differs from the cubin's), and
"cuda -sim" runs the loop IR in the simulator, as the built model did. A GPU older than the
kernels' architecture is refused at load.

    >>> lib = relay_ir.build(mod, target="cuda -sim"); lib.save("m.tessel")  # doctest: +SKIP
    >>> relay_ir.load_compiled("m.tessel").run(x=x)                          # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
from typing import Any

from relay_ir.backend.artifact_manifest import parse_json
from relay_ir.backend.artifact_schema import check_plan
from relay_ir.backend.executor import GraphPlan, kernel_fn
from tensor_expr import expr as E
from tessel_errors import RelayError, TesselError

_ELF = b"\x7fELF"


def cuda_kernel_files(i: int, kernel: Any) -> tuple[dict[str, Any], dict[str, bytes]]:
    """(model.json's entry, the files) of kernel `i` of a plan: a lowering.cuda
    CudaKernel wrapped by the executor.

    `entry, files = cuda_kernel_files(0, lib.plan.kernels[0])`
    """
    import json

    from lowering.ir_json import to_json

    ck = kernel.kernel
    names = {"source": f"kernel_{i}.cu", "ptx": f"kernel_{i}.ptx",
             "loop_ir": f"kernel_{i}.ir.json"}
    files = {names["source"]: ck.source.encode(), names["ptx"]: ck.ptx.encode(),
             names["loop_ir"]: json.dumps(to_json(ck.func), separators=(",", ":")).encode()}
    if ck.cubin:
        names["cubin"] = f"kernel_{i}.cubin"
        files[names["cubin"]] = bytes(ck.cubin)
    entry = {"name": ck.name, "arch": ck.program.arch, **names,
             "specs": [[list(s), dt] for s, dt in kernel.specs]}
    return entry, files


def load_cuda_plan(path: str, desc: dict[str, Any], files: dict[str, bytes],
                   values: list[Any], steps: list[Any]) -> GraphPlan:
    """The graph plan of a schema-checked CUDA model.json (see the module doc); what
    relay_ir.backend.serialize.load calls for a "cuda" folder.

    `plan = load_cuda_plan("m.tessel", desc, files, values, steps)`
    """
    from tessel_target import Target

    where = f"load_compiled: {os.path.join(path, 'model.json')!r}"
    check_plan(desc, where)
    target = Target.parse(desc["target"])
    if target.kind != "cuda":
        raise RelayError(f"{where}: target {desc['target']!r} is not a 'cuda' target")
    kernels = [_load_kernel(path, k, kd, files, target) for k, kd in enumerate(desc["kernels"])]
    return GraphPlan(kernels, values, steps, desc["graph_inputs"], desc["outputs"])


def _file(path: str, files: dict[str, bytes], k: int, kd: dict[str, Any], key: str) -> bytes:
    name = kd[key]
    if name not in files or name in ("model.json", "consts.npz"):
        raise RelayError(f"load_compiled: {os.path.join(path, 'model.json')!r}: "
                         f"kernels[{k}].{key} {name!r} is not a kernel file the manifest "
                         "lists")
    return files[name]


def _text(path: str, name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RelayError(f"load_compiled: {os.path.join(path, name)!r}: not UTF-8 text "
                         f"({e.reason} at byte {e.start})") from None


def _load_kernel(path: str, k: int, kd: dict[str, Any], files: dict[str, bytes],
                 target: Any) -> Any:
    from lowering.cuda import CudaKernel
    from lowering.cuda.codegen import generate
    from lowering.ir_json import from_json

    arch = kd["arch"]
    given = target.attrs.get("arch")
    if isinstance(given, str) and given and given != arch:
        raise RelayError(f"load_compiled: {os.path.join(path, 'model.json')!r}: "
                         f"kernels[{k}] is for {arch}, the target says {given}")
    ir_name = kd["loop_ir"]
    ir_where = f"load_compiled: {os.path.join(path, ir_name)!r}"
    doc = parse_json(_file(path, files, k, kd, "loop_ir"), ir_where)
    try:
        func = from_json(doc, ir_where)
    except TesselError as e:
        raise RelayError(str(e)) from None
    _check_params(func, kd, ir_where)
    try:
        program = generate(func, arch)
    except TesselError as e:
        raise RelayError(f"{ir_where}: the CUDA backend refuses this loop IR: {e}") from None
    except Exception as e:  # noqa: BLE001 (a hand-edited loop IR the backend never makes)
        raise RelayError(f"{ir_where}: not a loop IR the CUDA backend can emit "
                         f"({type(e).__name__}: {str(e)[:100]}); compile the model "
                         "again") from None
    source = _text(path, kd["source"], _file(path, files, k, kd, "source"))
    if source != program.source:
        raise RelayError(
            f"load_compiled: {os.path.join(path, kd['source'])!r} differs from the CUDA C "
            f"generated from {ir_name}: the two were not saved together (or by another "
            "Tessel version); compile the model again")
    ptx = _text(path, kd["ptx"], _file(path, files, k, kd, "ptx"))
    _check_ptx(os.path.join(path, kd["ptx"]), ptx, arch, [d.name for d in program.kernels])
    cubin = b""
    if "cubin" in kd:
        cubin = _file(path, files, k, kd, "cubin")
        if not cubin.startswith(_ELF):
            raise RelayError(f"load_compiled: {os.path.join(path, kd['cubin'])!r} is not a "
                             "cubin (no ELF header)")
    if not target.attrs.get("sim"):
        _check_gpu(path, arch)
    kernel = CudaKernel(func, target, program, ptx, cubin)
    return kernel_fn(kernel, [(tuple(s), dt) for s, dt in kd["specs"]])


def _check_params(func: Any, kd: dict[str, Any], where: str) -> None:
    """The loop IR's parameters must be the buffers model.json calls the kernel with."""
    got = []
    for p in func.params:
        if p.scope != "global" or not all(isinstance(d, E.IntImm) for d in p.shape):
            raise RelayError(f"{where}: parameter {p.name!r} is not a global buffer of "
                             "constant shape")
        got.append([[int(d.value) for d in p.shape], p.dtype])
    if got != kd["specs"]:
        raise RelayError(f"{where}: the kernel's parameters are {got}; model.json calls it "
                         f"with {kd['specs']}")


def _check_ptx(where: str, ptx: str, arch: str, entries: list[str]) -> None:
    m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.MULTILINE)
    if m is None or m.group(1) != arch:
        found = m.group(1) if m else "no .target line"
        raise RelayError(f"load_compiled: {where!r}: PTX for {found}, the kernel is for {arch}")
    missing = [e for e in entries if not re.search(rf"\.entry\s+{re.escape(e)}\s*\(", ptx)]
    if missing:
        raise RelayError(f"load_compiled: {where!r}: the PTX defines no kernel "
                         f"{missing[0]!r}, which the loop IR launches")


def _check_gpu(path: str, arch: str) -> None:
    """A GPU older than the code's architecture cannot run it (PTX compiles only upward)."""
    from lowering.cuda.driver import gpu

    found = gpu()
    if found is None:
        return  # calls raise DeviceError, as for a model built here
    if _arch_number(found.arch) < _arch_number(arch):
        raise RelayError(f"load_compiled: {path!r} holds GPU code for {arch}; this GPU "
                         f"({found.name}) is {found.arch}: compile the model for it")


def _arch_number(arch: str) -> int:
    return int(re.sub(r"\D", "", arch) or 0)


__all__ = ["cuda_kernel_files", "load_cuda_plan"]
