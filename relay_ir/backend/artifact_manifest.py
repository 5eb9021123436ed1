"""The manifest of a saved model folder: what wrote it and a SHA-256 of every file in it.

`manifest.json` holds the format name and version, the Tessel version that wrote it, the
target with the triple, CPU and CPU features its object code was compiled for, and per
file its size and SHA-256. `read_verified` checks all of that before any byte of the folder
is parsed or handed to LLVM, and returns the files' contents (read once: what was hashed is
what gets loaded). The hashes catch damage (a truncated copy, a flipped bit); anyone can
re-hash a forged folder, so they say nothing about who wrote it.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> write_manifest(d, {"a.bin": b"abc"}, "llvm")
    >>> with open(os.path.join(d, "a.bin"), "wb") as f: _ = f.write(b"abc")
    >>> manifest, files = read_verified(d)
    >>> files
    {'a.bin': b'abc'}
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import Any

from relay_ir.backend.json_check import Int, ListOf, MapOf, Obj, Str, check
from tessel_errors import CodegenError, RelayError

FORMAT = "tessel-compiled-model"
VERSION = 2  # 2: manifest.json with hashes (version 1 folders had none)
MANIFEST = "manifest.json"
_MAX_MANIFEST_BYTES = 1 << 20

# A file of the folder: a plain name (no separators, no leading dot, so no "../x").
FILE_NAME = Str(pattern=r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
MANIFEST_SCHEMA = Obj({
    "format": Str(max_len=128),
    "format_version": Int(),
    "tessel_version": Str(max_len=128),
    "target": Str(max_len=1024),
    "triple": Str(max_len=128),
    "cpu": Str(max_len=128),
    "features": ListOf(Str(max_len=128), max_len=4096),
    "files": MapOf(FILE_NAME, Obj({"sha256": Str(pattern="[0-9a-f]{64}"),
                                   "size": Int(hi=1 << 40)})),
})


def _host_triple() -> str:
    import llvmlite.binding as llvm

    return llvm.get_default_triple()


def write_manifest(folder: str, files: dict[str, bytes], target: Any) -> None:
    """Write `manifest.json` into `folder` for `files` (name -> the bytes written).

    `write_manifest("m.tessel", {"model.json": text.encode()}, "llvm")`
    """
    from tessel_target import Target
    from tuning_logs import TESSEL_VERSION

    t = Target.parse(target)
    manifest = {
        "format": FORMAT, "format_version": VERSION, "tessel_version": TESSEL_VERSION,
        "target": str(t), "triple": _host_triple(), "cpu": t.mcpu,
        "features": sorted(t.features),
        "files": {name: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
                  for name, data in sorted(files.items())},
    }
    with open(os.path.join(folder, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)


def parse_json(data: bytes, where: str) -> Any:
    """The JSON document in `data`, or a RelayError naming `where` and what is wrong.

    `parse_json(b'{"a": 1}', "model.json")`
    """
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise RelayError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise RelayError(f"{where}: not valid JSON ({e.msg} at line {e.lineno} column "
                         f"{e.colno})") from None
    except (ValueError, RecursionError) as e:  # a 5,000-digit number; nesting too deep
        raise RelayError(f"{where}: not a JSON document this loader accepts "
                         f"({type(e).__name__}: {str(e)[:80]})") from None


def _read_file(folder: str, name: str, limit: int) -> bytes:
    """The bytes of `folder/name`, a regular file (a FIFO would block), at most limit + 1."""
    path = os.path.join(folder, name)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise RelayError(f"load_compiled: {path!r} is not a regular file")
        with open(path, "rb") as f:
            return f.read(limit + 1)
    except FileNotFoundError:
        raise RelayError(f"load_compiled: {path!r} is missing (the manifest lists it); the "
                         "saved model is incomplete: copy it again or compile it again") from None
    except OSError as e:
        raise RelayError(f"load_compiled: cannot read {path!r}: {e}") from None


def _read_manifest(folder: str) -> dict[str, Any]:
    where = os.path.join(folder, MANIFEST)
    if not os.path.isdir(folder):
        raise RelayError(f"load_compiled: {folder!r} is not a saved Tessel model (no such "
                         "folder)")
    if not os.path.lexists(where):
        old = os.path.exists(os.path.join(folder, "model.json"))
        raise RelayError(
            f"load_compiled: {folder!r} is not a saved Tessel model (no {MANIFEST})"
            + ("; it has a model.json, so it was saved by a Tessel before format version "
               f"{VERSION} or is incomplete: compile it again" if old else ""))
    data = _read_file(folder, MANIFEST, _MAX_MANIFEST_BYTES)
    if len(data) > _MAX_MANIFEST_BYTES:
        raise RelayError(f"load_compiled: {where!r} is over {_MAX_MANIFEST_BYTES} bytes: not "
                         "a manifest Tessel wrote")
    manifest = parse_json(data, f"load_compiled: {where!r}")
    check(MANIFEST_SCHEMA, manifest, f"load_compiled: {where!r}")
    if manifest["format"] != FORMAT or manifest["format_version"] != VERSION:
        raise RelayError(
            f"load_compiled: {where!r} describes format {manifest['format']!r} version "
            f"{manifest['format_version']} (written by Tessel {manifest['tessel_version']}); "
            f"this Tessel reads {FORMAT!r} version {VERSION}: compile the model again")
    return manifest


_KIND_WORDS = {"llvm": "CPU", "cuda": "GPU", "accel": "accelerator"}


def _check_host(manifest: dict[str, Any], where: str, kinds: tuple[str, ...]) -> None:
    from tessel_target import Target, host_cpu, host_features

    try:
        kind = Target.parse(manifest["target"]).kind
    except CodegenError as e:
        raise RelayError(f"load_compiled: {where!r}: {e}") from None
    if kind not in kinds:
        raise RelayError(f"load_compiled: {where!r}: target {manifest['target']!r} is not an "
                         f"{' or '.join(repr(k) for k in kinds)} target; only "
                         f"{' and '.join(_KIND_WORDS[k] for k in kinds)} models are saved and "
                         "loaded here")
    if kind != "llvm":
        return  # GPU code: no host object code (its architecture is checked at load)
    host = _host_triple().split("-")
    theirs = manifest["triple"].split("-")
    if theirs[:1] != host[:1] or theirs[2:3] != host[2:3]:
        raise RelayError(f"load_compiled: {where!r}: the object code is for "
                         f"{manifest['triple']!r}, this host is {'-'.join(host)!r}: compile "
                         "the model on (or for) this machine")
    missing = sorted(set(manifest["features"]) - host_features())
    if missing and os.environ.get("TESSEL_ALLOW_FOREIGN_CPU") != "1":
        shown = ", ".join(missing[:8]) + (", ..." if len(missing) > 8 else "")
        raise RelayError(
            f"load_compiled: {where!r}: the object code was compiled for CPU "
            f"{manifest['cpu']!r} and uses features this host ({host_cpu()[0]}) lacks: "
            f"{shown}; running it could crash on an illegal instruction. Compile the "
            "model on this machine (TESSEL_ALLOW_FOREIGN_CPU=1 loads it anyway)")


def read_verified(folder: str, kinds: tuple[str, ...] = ("llvm",)
                  ) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Check the manifest of `folder` (format, a target of one of `kinds`, for the CPU the
    host, every file's size and SHA-256) and return it with the contents of the files it
    lists; RelayError names the bad file.

    `manifest, files = read_verified("m.tessel")`
    """
    manifest = _read_manifest(folder)
    _check_host(manifest, os.path.join(folder, MANIFEST), kinds)
    files = {}
    for name, entry in manifest["files"].items():
        if name == MANIFEST:
            raise RelayError(f"load_compiled: {os.path.join(folder, MANIFEST)!r} lists "
                             "itself among the files it hashes")
        data = _read_file(folder, name, entry["size"])
        path = os.path.join(folder, name)
        if len(data) != entry["size"]:
            raise RelayError(f"load_compiled: {path!r} is damaged: "
                             f"{'over ' if len(data) > entry['size'] else ''}{len(data)} "
                             f"bytes where the manifest says {entry['size']} (truncated or "
                             "changed since it was saved)")
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise RelayError(f"load_compiled: {path!r} is damaged: its SHA-256 differs from "
                             "the manifest's (changed since it was saved)")
        files[name] = data
    return manifest, files


__all__ = ["FILE_NAME", "FORMAT", "MANIFEST", "VERSION", "parse_json", "read_verified",
           "write_manifest"]
