"""Fuzz target: damaged saved CUDA models ("cuda -sim") through relay_ir.load_compiled and
run in the simulator.

One tiny model (dense + relu + softmax, a constant weight) is built for "cuda -sim" and
saved once per process; each input is a copy of its folder with one damage: bytes flipped
in a file or the file truncated, model.json mutated, a file swapped for another, or the
loop IR of a kernel mutated (a field changed, a reference pointed at another earlier
node); the manifest is usually re-hashed to match. A mutated loop IR comes half the time
with the CUDA C generated from it, as a forger would write it, so that what lies behind
the source check (the simulator running that loop IR) is reached too.

    >>> import numpy as np
    >>> what, thunk = one_input(np.random.default_rng(0))  # doctest: +SKIP
    >>> thunk()                                             # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from tests.fuzz.artifacts import _flip, _rehash, _write
from tests.json_mutations import mutate_json

NAME = "cuda_artifacts"

_PROGRAM = """
def @main(%x: Tensor[(2, 8), float32], %w: Tensor[(4, 8), float32]) {
  nn.softmax(nn.relu(nn.dense(%x, %w)))
}
"""
_VALUES = [0, 1, -1, 3, 16, 1 << 31, 2.5, True, None, "float16", "int8", "bool", "shared",
           "global", "local.wmma.accumulator", "serial", "vectorized", "thread_binding",
           "threadIdx.x", "blockIdx.y", "vthread", "tessel.syncthreads"]


@functools.lru_cache(maxsize=1)
def base_files() -> dict[str, bytes]:
    """The files of the saved tiny CUDA model, by name (built once per process)."""
    import relay_ir

    w = np.random.default_rng(1).standard_normal((4, 8)).astype("float32")
    lib = relay_ir.build(relay_ir.parse(_PROGRAM), target="cuda -sim", params={"w": w})
    folder = tempfile.mkdtemp(prefix="tessel-fuzz-cuda-base-")
    atexit.register(shutil.rmtree, folder, True)
    lib.save(folder)
    files = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            files[name] = f.read()
    return files


def _mutate_loop_ir(doc: dict[str, Any], rng: np.random.Generator) -> str:
    nodes = doc["nodes"]
    k = int(rng.integers(len(nodes)))
    row = nodes[k]
    if len(row) < 2:
        return f"node {k} left alone"
    j = int(rng.integers(1, len(row)))
    v = row[j]
    if isinstance(v, int) and not isinstance(v, bool) and 0 < k and rng.integers(2):
        row[j] = int(rng.integers(k))  # another earlier node
    elif isinstance(v, list) and v and 0 < k:
        v[int(rng.integers(len(v)))] = int(rng.integers(k))
    else:
        row[j] = _VALUES[int(rng.integers(len(_VALUES)))]
    return f"node {k} ({row[0]}) field {j}: {str(v)[:40]} -> {str(row[j])[:40]}"


def _regenerated_source(doc: dict[str, Any]) -> bytes | None:
    """The CUDA C the backend makes of a loop IR, or None where it makes none."""
    from lowering.cuda.codegen import generate
    from lowering.ir_json import from_json

    try:
        return generate(from_json(doc), "sm_90").source.encode()
    except Exception:  # noqa: BLE001 (the loader's checks refuse it then)
        return None


def _damage(rng: np.random.Generator) -> tuple[dict[str, bytes | None], str]:
    files: dict[str, bytes | None] = dict(base_files())
    names = sorted(files)
    kind = str(rng.choice(["flip", "truncate", "model_json", "swap", "loop_ir", "loop_ir"]))
    name = names[int(rng.integers(len(names)))]
    rehash = bool(rng.integers(4))  # mostly: what lies behind the hashes is the point
    if kind == "flip":
        files[name] = _flip(files[name], rng)
        what = f"{name}: bytes flipped"
    elif kind == "truncate":
        files[name] = files[name][:int(rng.integers(len(files[name])))]
        what = f"{name}: truncated to {len(files[name])} bytes"
    elif kind == "model_json":
        doc, change = mutate_json(json.loads(files["model.json"]), rng)
        files["model.json"] = json.dumps(doc).encode()
        what, name = f"model.json: {change}", "model.json"
    elif kind == "swap":
        others = [n for n in names if n != name]
        other = others[int(rng.integers(len(others)))]
        files[name] = files[other]
        what = f"{name} replaced by {other}"
    else:
        irs = [n for n in names if n.endswith(".ir.json")]
        name = irs[int(rng.integers(len(irs)))]
        doc = json.loads(files[name])
        what = f"{name}: " + "; ".join(_mutate_loop_ir(doc, rng)
                                        for _ in range(int(rng.integers(1, 3))))
        files[name] = json.dumps(doc).encode()
        if rng.integers(2):
            source = _regenerated_source(doc)
            if source is not None:
                files[name.replace(".ir.json", ".cu")] = source
                what += " (with its CUDA C)"
        rehash = True
    if rehash and name != "manifest.json":
        _rehash(files)
        what += " (re-hashed)"
    return files, what


def one_input(rng: np.random.Generator) -> tuple[str, Callable[[], object]]:
    """A damaged copy of the saved CUDA model and a thunk loading and simulating it."""
    files, what = _damage(rng)
    seed = int(rng.integers(2**32))

    def thunk() -> object:
        import relay_ir

        folder = tempfile.mkdtemp(prefix="tessel-fuzz-cuda-artifact-")
        try:
            _write(folder, files)
            lib = relay_ir.load_compiled(folder)
            r = np.random.default_rng(seed)
            feed = {n: r.standard_normal(s).astype(dt) for n, s, dt in lib.input_specs}
            return lib.run(**feed)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    return what, thunk


__all__ = ["NAME", "base_files", "one_input"]
