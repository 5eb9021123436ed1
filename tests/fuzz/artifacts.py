"""Fuzz target: damaged saved models through relay_ir.load_compiled and run.

One tiny model (two kernels, one constant) is built and saved once per process; each input
is a copy of its folder with one damage: bytes flipped in a file or the file truncated,
a key of model.json or manifest.json renamed, deleted or retyped, a file deleted or swapped
for another, the constants rewritten with a wrong shape or dtype. Damage to a file other
than the manifest is usually "re-hashed" (the manifest updated to match), as a careless
tool or a hand edit would, so that the checks behind the hashes are reached too. Object
files are re-hashed only for damage to their ELF header or for a whole foreign file:
well-formed but altered machine code is a forgery, which no check can catch (README).

    >>> import numpy as np
    >>> what, thunk = one_input(np.random.default_rng(0))  # doctest: +SKIP
    >>> thunk()                                             # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable

import numpy as np

from tests.json_mutations import mutate_json

NAME = "artifacts"

_PROGRAM = """
def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(4, 3), float32]) {
  nn.softmax(nn.relu(nn.dense(%x, %w)))
}
"""


@functools.lru_cache(maxsize=1)
def base_files() -> dict[str, bytes]:
    """The files of the saved tiny model, by name (built once per process)."""
    import relay_ir

    w = np.random.default_rng(1).standard_normal((4, 3)).astype("float32")
    lib = relay_ir.build(relay_ir.parse(_PROGRAM), params={"w": w})
    folder = tempfile.mkdtemp(prefix="tessel-fuzz-base-")
    atexit.register(shutil.rmtree, folder, True)
    lib.save(folder)
    files = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            files[name] = f.read()
    return files


def _rehash(files: dict[str, bytes | None]) -> None:
    manifest = json.loads(files["manifest.json"])
    for name, data in files.items():
        if name != "manifest.json" and data is not None and name in manifest["files"]:
            manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(),
                                       "size": len(data)}
    files["manifest.json"] = json.dumps(manifest).encode()


def _flip(data: bytes, rng: np.random.Generator, hi: int | None = None) -> bytes:
    buf = bytearray(data)
    for _ in range(int(rng.integers(1, 9))):
        buf[int(rng.integers(min(len(buf), hi or len(buf))))] ^= 1 << int(rng.integers(8))
    return bytes(buf)


def _bad_consts(rng: np.random.Generator) -> tuple[bytes, str]:
    arrays = dict(np.load(io.BytesIO(base_files()["consts.npz"])))
    name = sorted(arrays)[0]
    how = str(rng.choice(["dtype", "shape", "extra", "missing", "fortran"]))
    if how == "dtype":
        arrays[name] = arrays[name].astype(rng.choice(["float64", "int32", ">f4"]))
    elif how == "shape":
        arrays[name] = arrays[name].reshape(-1)
    elif how == "extra":
        arrays["c999"] = np.zeros(3, "float32")
    elif how == "missing":
        del arrays[name]
    else:
        arrays[name] = np.asfortranarray(arrays[name].T).T.copy(order="F")
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue(), f"consts.npz rewritten ({how} of {name})"


def _damage(rng: np.random.Generator) -> tuple[dict[str, bytes | None], str]:
    files: dict[str, bytes | None] = dict(base_files())
    names = sorted(files)
    kind = str(rng.choice(["flip", "truncate", "model_json", "manifest_json", "delete",
                           "swap", "consts", "elf_header"]))
    name = names[int(rng.integers(len(names)))]
    objects = [n for n in names if n.endswith(".o")]
    rehash = bool(rng.integers(2))
    if kind == "flip":
        files[name] = _flip(files[name], rng)
        what = f"{name}: bytes flipped"
        rehash = rehash and not name.endswith(".o")
    elif kind == "truncate":
        files[name] = files[name][:int(rng.integers(len(files[name])))]
        what = f"{name}: truncated to {len(files[name])} bytes"
    elif kind == "model_json":
        doc, change = mutate_json(json.loads(files["model.json"]), rng)
        files["model.json"] = json.dumps(doc).encode()
        what, rehash, name = f"model.json: {change}", True, "model.json"
    elif kind == "manifest_json":
        doc, change = mutate_json(json.loads(files["manifest.json"]), rng)
        files["manifest.json"] = json.dumps(doc).encode()
        what, rehash = f"manifest.json: {change}", False
    elif kind == "delete":
        files[name] = None
        what = f"{name} deleted"
    elif kind == "swap":
        others = [n for n in names if n != name]
        other = others[int(rng.integers(len(others)))]
        files[name] = files[other]
        what = f"{name} replaced by {other}"
    elif kind == "consts":
        files["consts.npz"], what = _bad_consts(rng)
        rehash, name = True, "consts.npz"
    else:
        obj = objects[int(rng.integers(len(objects)))]
        files[obj] = _flip(files[obj], rng, hi=64)
        what, name = f"{obj}: ELF header bytes flipped", obj
    if rehash and name != "manifest.json" and files.get("manifest.json") is not None:
        _rehash(files)
        what += " (re-hashed)"
    return files, what


def _write(folder: str, files: dict[str, bytes | None]) -> None:
    for name, data in files.items():
        if data is not None:
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)


def one_input(rng: np.random.Generator) -> tuple[str, Callable[[], object]]:
    """A damaged copy of the saved model and a thunk loading and running it."""
    files, what = _damage(rng)
    seed = int(rng.integers(2**32))

    def thunk() -> object:
        import relay_ir

        folder = tempfile.mkdtemp(prefix="tessel-fuzz-artifact-")
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
