"""Targets as values: `Target.parse("llvm -mcpu=sapphirerapids -fast-math")`, host detection,
the device facts schedules size themselves by, and the device key tuning records are filed
under.

This is the one place that reads the machine (LLVM's host CPU name and features, the CPU
model from /proc/cpuinfo, $TESSEL_VECTOR_BITS). Everything else reads the target it is
given: a template sized for `llvm -mcpu=haswell` uses AVX2's 8 fp32 lanes and 16 vector
registers on any host, one for `llvm -mcpu=skylake-avx512` AVX-512's 16 and 32. It sits
below every package but tessel_errors, so that schedule templates (which may not import
lowering) can read it.

A target string is a kind followed by options: `-key=value` sets an attribute, a bare
`-flag` sets it to True. `str(target)` gives the canonical string back (kind first, then
attributes sorted), so equal targets print alike and can key caches.

    >>> from tessel_target import Target
    >>> t = Target.parse("llvm -mcpu=sapphirerapids -fast-math")
    >>> t.kind, t.attrs["mcpu"], t.fast_math
    ('llvm', 'sapphirerapids', True)
    >>> str(Target.parse("cuda  -arch=sm_90"))
    'cuda -arch=sm_90'
    >>> Target.parse("llvm -mcpu=haswell").fp32_lanes, Target.parse("llvm -mcpu=znver4").fp32_lanes
    (8, 16)

The accelerator's options are its hardware configuration (tessel_target.accel), ints with
VTA's defaults filled in; the string shows only what differs from them:

    >>> a = Target.parse("accel -batch=4 -block=16")
    >>> str(a), a.attrs["batch"], a.attrs["acc_buf_kib"]
    ('accel -batch=4', 4, 128)
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

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
        shown = attrs
        if kind == "accel":  # every option as an int; the string names only non-defaults
            from tessel_target.accel import ACCEL_DEFAULTS, accel_attrs

            attrs = accel_attrs(attrs)
            shown = {k: v for k, v in attrs.items() if v != ACCEL_DEFAULTS[k]}
        parts = [kind] + [
            f"-{k}" if v is True else f"-{k}={v}" for k, v in sorted(shown.items())
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

    @functools.cached_property
    def features(self) -> frozenset[str]:  # cached: templates ask for it at every knob
        """The CPU features code for this target may use (LLVM names: "avx2", "avx512f",
        ...): the host's for the host CPU, what a named CPU is known to have otherwise,
        with `-mattr`'s `+feature` / `-feature` applied on top.

            >>> "avx512f" in Target.parse("llvm -mcpu=haswell -mattr=+avx512f").features
            True
        """
        if self.kind != "llvm":
            return frozenset()
        if self.mcpu == host_cpu()[0] and "mattr" not in self.attrs:
            return frozenset(host_features())
        have = set(_KNOWN_CPU_FEATURES.get(self.mcpu, ()))
        for f in str(self.attrs.get("mattr", "")).split(","):
            f = f.strip()
            if f.startswith("+"):
                have.add(f[1:])
            elif f.startswith("-"):
                have.discard(f[1:])
        return frozenset(have)

    @property
    def vector_bits(self) -> int:
        """The width of the vector registers schedules should fill: 512 with AVX-512, 256
        with AVX2 and FMA, else 128. For the host target (no -mcpu, -mattr),
        $TESSEL_VECTOR_BITS (128 / 256 / 512) overrides what the CPU reports.

            >>> Target.parse("llvm -mcpu=skylake-avx512").vector_bits
            512
        """
        if self.kind == "llvm" and not ({"mcpu", "mattr"} & set(self.attrs)):
            env = os.environ.get("TESSEL_VECTOR_BITS", "")
            if env in ("128", "256", "512"):
                return int(env)
        feats = self.features
        if "avx512f" in feats:
            return 512
        if "avx2" in feats and "fma" in feats:
            return 256
        return 128

    @property
    def fp32_lanes(self) -> int:
        """float32 elements per vector register (16 with AVX-512, 8 with AVX2)."""
        return self.vector_bits // 32

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers (32 with AVX-512, 16 with AVX2 and SSE)."""
        return 32 if self.vector_bits == 512 else 16

    @property
    def l2_bytes(self) -> int:
        """The L2 cache of one core: `-l2-kib` if given, else what the named (or host) CPU
        is known to have, else 256 KiB, the smallest of the x86 cores schedules meet.

            >>> Target.parse("llvm -mcpu=haswell").l2_bytes // 1024
            256
            >>> Target.parse("llvm -mcpu=znver4 -l2-kib=512").l2_bytes // 1024
            512
        """
        kib = self.attrs.get("l2-kib")
        if kib is None:
            return (_L2_KIB.get(self.mcpu, 256) if self.kind == "llvm" else 256) * 1024
        if not str(kib).isdigit() or int(kib) == 0:
            raise CodegenError(f"target option -l2-kib={kib} in '{self}' must be the L2 size "
                               "of one core in KiB, a positive integer (e.g. -l2-kib=2048)")
        return int(kib) * 1024

    def with_attr(self, key: str, value: Any = True) -> Target:
        """A copy with one attribute set: `t.with_attr("fast-math")`."""
        attrs = dict(self.attrs)
        attrs[key] = value
        return Target._make(self.kind, attrs)


_AVX2 = ("sse4.2", "avx", "avx2", "fma", "f16c", "bmi2")
_AVX512 = _AVX2 + ("avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd")
# the int8 dot-product instructions (vpdpbusd): 512-bit with AVX-512, 256-bit VEX alone
_VNNI512, _AVXVNNI = ("avx512vnni",), ("avxvnni",)
# What named x86 CPUs have, for targets that name a CPU other than the host (LLVM knows
# this too, but llvmlite does not expose it); an unknown name gets SSE-width schedules.
_KNOWN_CPU_FEATURES: dict[str, tuple[str, ...]] = {
    **{c: _AVX2 for c in ("haswell", "broadwell", "skylake", "znver1", "znver2",
                          "znver3", "x86-64-v3")},
    **{c: _AVX2 + _AVXVNNI for c in ("alderlake", "raptorlake", "meteorlake", "arrowlake",
                                     "lunarlake")},
    **{c: _AVX512 for c in ("skylake-avx512", "x86-64-v4")},
    **{c: _AVX512 + _VNNI512 for c in ("cascadelake", "cooperlake", "icelake-client",
                                       "icelake-server", "tigerlake", "rocketlake",
                                       "znver4")},
    **{c: _AVX512 + _VNNI512 + _AVXVNNI for c in ("sapphirerapids", "emeraldrapids",
                                                  "graniterapids")},
    **{c: _AVX512 + _VNNI512 + _AVXVNNI + ("avx512bf16",) for c in ("znver5",)},
}


# L2 per core (KiB) of named x86 CPUs, for schedules that size a prefetch or a block by it
_L2_KIB: dict[str, int] = {
    **{c: 256 for c in ("haswell", "broadwell", "skylake")},
    **{c: 512 for c in ("znver1", "znver2", "znver3", "rocketlake", "icelake-client",
                        "tigerlake")},
    **{c: 1024 for c in ("skylake-avx512", "cascadelake", "cooperlake", "znver4", "znver5")},
    **{c: 1280 for c in ("icelake-server", "alderlake")},
    **{c: 2048 for c in ("sapphirerapids", "emeraldrapids", "graniterapids", "raptorlake",
                         "meteorlake", "arrowlake")},
}


def known_cpu(name: str) -> bool:
    """True when Tessel knows the features of the CPU LLVM calls `name`.

    >>> known_cpu("haswell"), known_cpu("bdver2")
    (True, False)
    """
    return name in _KNOWN_CPU_FEATURES


@functools.lru_cache(maxsize=1)
def host_cpu() -> tuple[str, str]:
    """(cpu name, LLVM feature string) of this machine, as LLVM should see it.

    >>> name, features = host_cpu()
    """
    import llvmlite.binding as llvm  # host queries need no initialised LLVM target

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


def host_memory_bytes() -> int:
    """The memory this process can have: physical RAM, or its cgroup's limit when lower.

    >>> host_memory_bytes() > 0
    True
    """
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def _cpuinfo_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


THREADS_PART = "|threads="  # the thread count part of a CPU's device key


def num_threads() -> int:
    """Threads a parallel loop uses: $TESSEL_NUM_THREADS, else the CPUs this process may
    use (lowering.kernel sets its kernels' count from it; device_key files records by it).

        >>> num_threads() >= 1
        True
    """
    env = os.environ.get("TESSEL_NUM_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def device_key(target: str | Target, threads: int | None = None) -> str:
    """The key tuning records are filed under: target, CPU model, a features hash and, for
    a CPU, the thread count the kernels are timed on (`threads`, else this process's:
    lowering.kernel.num_threads), since a schedule that wins on one thread can lose on
    two. Records filed before the count was part of the key have none
    (`legacy_device_key`): builds apply them at any count.

    >>> device_key("llvm", threads=2)  # doctest: +SKIP
    'llvm -mcpu=sapphirerapids|Intel(R) Xeon(R) Platinum 8480+|f3a9c2d1|threads=2'
    """
    t = Target.parse(target)
    if t.kind == "cuda":
        from tessel_target.gpu import gpu

        found = gpu()  # GPU name, compute capability and driver: records stay per GPU
        return f"{t}|{found.key if found is not None else 'no GPU'}"
    if t.kind == "accel":  # the simulated device is its configuration, defaults included
        from tessel_target.accel import accel_config

        return f"{t}|{accel_config(t.attrs)}"
    if "mcpu" not in t.attrs:
        t = t.with_attr("mcpu", host_cpu()[0])
    digest = hashlib.sha256(t.mattr.encode()).hexdigest()[:8]
    if threads is None:
        threads = num_threads()  # the count LocalRunner's workers inherit
    return f"{t}|{_cpuinfo_model()}|{digest}{THREADS_PART}{threads}"


def legacy_device_key(key: str) -> str:
    """`key` without its thread count: the key of records filed before the count was part
    of it (they apply at any count).

    >>> legacy_device_key("llvm|Xeon|0a1b2c3d|threads=2")
    'llvm|Xeon|0a1b2c3d'
    >>> legacy_device_key("llvm|Xeon|0a1b2c3d")
    'llvm|Xeon|0a1b2c3d'
    """
    head, sep, tail = key.rpartition(THREADS_PART)
    return head if sep and tail.isdigit() else key


def read_device_keys(key: str) -> tuple[str, ...]:
    """The device keys whose records a lookup at `key` reads, in order: `key` itself, then,
    for a key with a thread count, the legacy key (records filed before the count was
    part of it, which apply at any count).

    >>> read_device_keys("llvm|Xeon|0a1b2c3d|threads=2")
    ('llvm|Xeon|0a1b2c3d|threads=2', 'llvm|Xeon|0a1b2c3d')
    >>> read_device_keys("cuda|H200")
    ('cuda|H200',)
    """
    legacy = legacy_device_key(key)
    return (key,) if legacy == key else (key, legacy)


def device_threads(key: str) -> int | None:
    """The thread count in a device key, or None (a legacy key, or not a CPU's).

    >>> device_threads("llvm|Xeon|0a1b2c3d|threads=2"), device_threads("llvm|Xeon|0a1b2c3d")
    (2, None)
    """
    head, sep, tail = key.rpartition(THREADS_PART)
    return int(tail) if sep and tail.isdigit() else None


class _Keyed(Protocol):
    device_key: str


_R = TypeVar("_R", bound=_Keyed)


def at_other_thread_counts(records: Iterable[_R], here: str) -> list[_R]:
    """The records (anything with a `device_key`, e.g. tuning_logs.MeasureRecord) of the
    device of key `here` at a thread count other than `here`'s: not `here`'s own, not
    legacy ones (no count: they apply at any count), not other devices'. A build at
    `here` does not apply them (relay_ir.backend.tuned.other_thread_counts names their
    counts); a confirmation at `here` with no trials of its own takes its candidates from
    them (autotune.confirm.candidates).

        >>> from types import SimpleNamespace as R
        >>> here = "llvm|Xeon|0a1b2c3d|threads=2"
        >>> found = at_other_thread_counts([R(device_key=k) for k in (
        ...     "llvm|Xeon|0a1b2c3d|threads=1", here, "llvm|Xeon|0a1b2c3d",
        ...     "llvm|Epyc|9e8f7a6b|threads=1")], here)
        >>> [r.device_key for r in found]
        ['llvm|Xeon|0a1b2c3d|threads=1']
    """
    base = legacy_device_key(here)
    return [r for r in records
            if r.device_key != here and device_threads(r.device_key) is not None
            and legacy_device_key(r.device_key) == base]
