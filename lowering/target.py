"""Targets as values: `Target.parse("llvm -mcpu=sapphirerapids -fast-math")`, host detection,
and the device key that tuning records are filed under.

A target string is a kind followed by options: `-key=value` sets an attribute, a bare
`-flag` sets it to True. `str(target)` gives the canonical string back (kind first, then
attributes sorted), so equal targets print alike and can key caches.

    >>> from lowering.target import Target
    >>> t = Target.parse("llvm -mcpu=sapphirerapids -fast-math")
    >>> t.kind, t.attrs["mcpu"], t.fast_math
    ('llvm', 'sapphirerapids', True)
    >>> str(Target.parse("cuda  -arch=sm_90"))
    'cuda -arch=sm_90'
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

from tessel_errors import CodegenError

KINDS: dict[str, tuple[str, ...]] = {
    # kind -> keys (what a schedule template may dispatch on)
    "llvm": ("cpu",),
    "cuda": ("cuda", "gpu"),
    "accel": ("accel",),
}


@dataclass(frozen=True)
class Target:
    """A compilation target: kind ("llvm", "cuda", "accel") plus attributes."""

    kind: str
    attrs: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    _key: str = field(default="", repr=False)

    @staticmethod
    def parse(text: str | Target) -> Target:
        """Parse `"llvm -mcpu=skylake-avx512 -fast-math"` (a Target is returned as is)."""
        if isinstance(text, Target):
            return text
        if not isinstance(text, str) or not text.strip():
            raise CodegenError(f"target must be a non-empty string such as 'llvm', got {text!r}")
        words = text.split()
        kind = words[0]
        if kind not in KINDS:
            raise CodegenError(
                f"unknown target kind {kind!r} in {text!r}; expected one of {', '.join(KINDS)}"
            )
        attrs: dict[str, Any] = {}
        for w in words[1:]:
            if not w.startswith("-") or w == "-":
                raise CodegenError(
                    f"target option {w!r} in {text!r} must look like -key=value or -flag"
                )
            key, eq, value = w.lstrip("-").partition("=")
            attrs[key] = value if eq else True
        return Target._make(kind, attrs)

    @staticmethod
    def _make(kind: str, attrs: dict[str, Any]) -> Target:
        parts = [kind] + [
            f"-{k}" if v is True else f"-{k}={v}" for k, v in sorted(attrs.items())
        ]
        return Target(kind, dict(attrs), " ".join(parts))

    def __str__(self) -> str:
        return self._key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    @property
    def keys(self) -> tuple[str, ...]:
        """Dispatch keys of the kind, e.g. ("cuda", "gpu")."""
        return KINDS[self.kind]

    @property
    def fast_math(self) -> bool:
        """True when the target allows reassociation and other fast-math rewrites."""
        return bool(self.attrs.get("fast-math", False))

    @property
    def mcpu(self) -> str:
        """The CPU to generate code for: `-mcpu` if given, else the (corrected) host CPU."""
        value = self.attrs.get("mcpu")
        return str(value) if value and value != "native" else host_cpu()[0]

    @property
    def mattr(self) -> str:
        """LLVM feature string: `-mattr` if given, else the host's when compiling for it."""
        value = self.attrs.get("mattr")
        if value:
            return str(value)
        if self.mcpu != host_cpu()[0]:
            return ""  # a named foreign CPU: its own default features
        return host_cpu()[1]

    def with_attr(self, key: str, value: Any = True) -> Target:
        """A copy with one attribute set: `t.with_attr("fast-math")`."""
        attrs = dict(self.attrs)
        attrs[key] = value
        return Target._make(self.kind, attrs)


@functools.lru_cache(maxsize=1)
def host_cpu() -> tuple[str, str]:
    """(cpu name, LLVM feature string) of this machine, as LLVM should see it.

    >>> name, features = host_cpu()
    """
    import llvmlite.binding as llvm

    from lowering.llvm.jit import ensure_llvm

    ensure_llvm()
    name = llvm.get_host_cpu_name()
    feats = llvm.get_host_cpu_features()
    flags = {k for k, v in feats.items() if v}
    # The machines we run on mask CPUID: Sapphire Rapids cores report themselves as
    # "rocketlake". With the real name LLVM uses the right scheduling model and cost
    # tables (e.g. for 512-bit vectors), so we correct it when AVX-512 is present.
    if name == "rocketlake" and "avx512f" in flags:
        name = "sapphirerapids"
    return name, feats.flatten()


def host_features() -> set[str]:
    """The set of feature names this CPU has (e.g. {"avx2", "avx512f", ...})."""
    return {f[1:] for f in host_cpu()[1].split(",") if f.startswith("+")}


def _cpuinfo_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def device_key(target: str | Target) -> str:
    """The key tuning records are filed under: target, CPU model and a features hash.

    >>> device_key("llvm")  # doctest: +SKIP
    'llvm -mcpu=sapphirerapids|Intel(R) Xeon(R) Platinum 8480+|f3a9c2d1'
    """
    t = Target.parse(target)
    if t.kind != "llvm":
        return f"{t}|{t.attrs.get('arch', t.kind)}"
    if "mcpu" not in t.attrs:
        t = t.with_attr("mcpu", host_cpu()[0])
    digest = hashlib.sha256(t.mattr.encode()).hexdigest()[:8]
    return f"{t}|{_cpuinfo_model()}|{digest}"
