"""One measurement of one schedule config: the MeasureRecord and its JSON-line form.

A record is plain data (strings, numbers, JSON objects), validated when it is made, so that a
bad value is caught where it is produced rather than when the database is read back. Configs
and task attributes are kept as canonical JSON text (sorted keys, no spaces): two configs are
the same config exactly when their texts are equal, which is what resume relies on.

    >>> r = MeasureRecord("matmul_1024", "matmul_x86", "llvm", "llvm/rocketlake",
    ...                   {"tile_i": [32, 32]}, costs=(0.002, 0.004), timestamp=1.0)
    >>> r.mean, r.config_json
    (0.003, '{"tile_i":[32,32]}')
    >>> MeasureRecord.from_json(r.to_json()) == r
    True
"""

from __future__ import annotations

import enum
import hashlib
import importlib.metadata
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tessel_errors import TuningLogError


def _installed_version() -> str:
    # Records say which Tessel measured them; a source checkout that is not installed says so.
    try:
        return importlib.metadata.version("tessel")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


TESSEL_VERSION: str = _installed_version()
# The version of the JSON-line form: exported lines carry it as "schema_version", and
# a line of another version is refused by name (lines without one are version 1).
RECORD_SCHEMA_VERSION = 1


class ErrorKind(str, enum.Enum):
    """How a measurement ended: `none` means it ran and produced the right result."""

    NONE = "none"
    BUILD_ERROR = "build_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    WRONG_RESULT = "wrong_result"
    WORKER_CRASH = "worker_crash"


ERROR_KINDS: tuple[str, ...] = tuple(k.value for k in ErrorKind)


def canonical_json(value: Any, what: str = "config") -> str:
    """Return the canonical JSON text of a JSON object (sorted keys, no spaces).

    A string is parsed first, so a config given as text and as a dict normalise alike.

        >>> canonical_json({"b": 1, "a": [2, 3]})
        '{"a":[2,3],"b":1}'
        >>> canonical_json('{"b": 1, "a": [2, 3]}')
        '{"a":[2,3],"b":1}'
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise TuningLogError(f"bad measure record: field '{what}' is not valid JSON "
                                 f"({e.msg} at char {e.pos}): {value[:80]!r}") from None
    if not isinstance(value, Mapping):
        raise TuningLogError(f"bad measure record: field '{what}' must be a JSON object "
                             f"(a dict of knob name to value), got {type(value).__name__}")
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TuningLogError(f"bad measure record: field '{what}' holds a value JSON cannot "
                             f"store ({e}); use ints, floats, strings, bools and lists") from None


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python will print
        return f"an integer of {value.bit_length()} bits"
    return text if len(text) <= 80 else text[:77] + "..."


def _fail(name: str, expected: str, got: Any) -> TuningLogError:
    return TuningLogError(f"bad measure record: field '{name}' must be {expected}, "
                          f"got {_short(got)}")


def _check_str(name: str, value: Any, nonempty: bool) -> None:
    if not isinstance(value, str) or (nonempty and not value):
        raise _fail(name, "a non-empty string" if nonempty else "a string", value)
    try:
        value.encode("utf-8")  # SQLite stores UTF-8: a lone surrogate ("\ud800") cannot be
    except UnicodeEncodeError:
        raise _fail(name, "valid Unicode text (no lone surrogates)", value) from None


def _check_number(name: str, value: Any, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(name, "a finite number", value)
    try:
        value = float(value)  # a JSON integer may have hundreds of digits
    except OverflowError:
        raise _fail(name, "a finite number", value) from None
    if not math.isfinite(value):
        raise _fail(name, "a finite number", value)
    if positive and value <= 0:
        raise _fail(name, "a positive number", value)
    return float(value)


# the tuner of a confirm record: a candidate (or the default) measured again beside the
# task's default (autotune.confirm); once a task has them, best() chooses among them only
CONFIRM_TUNER = "confirm"

@dataclass(frozen=True, slots=True)
class MeasureRecord:
    """One measured config of one task; `mean` is computed from `costs` (seconds).

    `config_json` and `attrs_json` accept a dict or JSON text and are stored canonically;
    `config` and `attrs` give them back as dicts. `record_id` is the database row id (None
    for a record not read from a database) and takes no part in equality.

        >>> r = MeasureRecord("w", "dense_x86", "llvm", "dev", {"k": 1}, costs=(),
        ...                   error_kind="timeout", error_msg="ran past 10 s")
        >>> r.error_kind, r.mean, r.ok
        (<ErrorKind.TIMEOUT: 'timeout'>, None, False)
    """

    workload_key: str
    template: str
    target: str
    device_key: str
    config_json: str | Mapping[str, Any]
    costs: Sequence[float] = ()
    error_kind: ErrorKind | str = ErrorKind.NONE
    error_msg: str = ""
    timestamp: float = field(default_factory=time.time)
    tuner: str = ""
    tessel_version: str = TESSEL_VERSION
    flops: float | None = None
    attrs_json: str | Mapping[str, Any] = "{}"
    record_id: int | None = field(default=None, compare=False)
    mean: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        for name in ("workload_key", "template", "target", "device_key"):
            _check_str(name, getattr(self, name), nonempty=True)
        for name in ("error_msg", "tuner", "tessel_version"):
            _check_str(name, getattr(self, name), nonempty=False)
        set_ = object.__setattr__  # frozen: normalise once, here, and never again
        set_(self, "config_json", canonical_json(self.config_json, "config"))
        set_(self, "attrs_json", canonical_json(self.attrs_json, "attrs"))
        try:
            kind = ErrorKind(self.error_kind)
        except ValueError:
            raise _fail("error_kind", f"one of {', '.join(ERROR_KINDS)}",
                        self.error_kind) from None
        set_(self, "error_kind", kind)
        if isinstance(self.costs, (str, bytes)) or not isinstance(self.costs, Sequence):
            raise _fail("costs", "a list of seconds", self.costs)
        costs = tuple(_check_number("costs", c, positive=kind is ErrorKind.NONE)
                      for c in self.costs)
        if kind is ErrorKind.NONE and not costs:
            raise _fail("costs", "a non-empty list of seconds when error_kind is 'none'",
                        self.costs)
        if any(c < 0 for c in costs):
            raise _fail("costs", "a list of non-negative seconds", self.costs)
        set_(self, "costs", costs)
        set_(self, "timestamp", _check_number("timestamp", self.timestamp, positive=False))
        if self.flops is not None:
            set_(self, "flops", _check_number("flops", self.flops, positive=True))
        if self.record_id is not None and (isinstance(self.record_id, bool)
                                           or not isinstance(self.record_id, int)):
            raise _fail("record_id", "an int or None", self.record_id)
        set_(self, "mean", math.fsum(costs) / len(costs) if costs else None)

    @property
    def ok(self) -> bool:
        """True when the candidate ran and gave the right result.

            >>> MeasureRecord("w", "t", "llvm", "d", {}, costs=(1e-3,)).ok
            True
        """
        return self.error_kind is ErrorKind.NONE

    @property
    def config(self) -> dict[str, Any]:
        """The config as a fresh dict.

            >>> MeasureRecord("w", "t", "llvm", "d", '{"a": 1}', costs=(1.0,)).config
            {'a': 1}
        """
        return json.loads(self.config_json)

    @property
    def attrs(self) -> dict[str, Any]:
        """The task attributes as a fresh dict.

            >>> MeasureRecord("w", "t", "llvm", "d", {}, (1.0,), attrs_json={"n": 8}).attrs
            {'n': 8}
        """
        return json.loads(self.attrs_json)

    @property
    def gflops(self) -> float | None:
        """GFLOP/s of this measurement, when flops are known and it succeeded.

            >>> MeasureRecord("w", "t", "llvm", "d", {}, costs=(0.5,), flops=2e9).gflops
            4.0
        """
        if self.flops is None or self.mean is None or not self.ok:
            return None
        return self.flops / self.mean / 1e9

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the record (config and attrs as objects; mean included).

            >>> sorted(MeasureRecord("w", "t", "llvm", "d", {}, costs=(1.0,)).to_dict())[:3]
            ['attrs', 'config', 'costs']
        """
        return {
            "workload_key": self.workload_key, "template": self.template,
            "target": self.target, "device_key": self.device_key,
            "config": self.config, "costs": list(self.costs), "mean": self.mean,
            "error_kind": self.error_kind.value, "error_msg": self.error_msg,
            "timestamp": self.timestamp, "tuner": self.tuner,
            "tessel_version": self.tessel_version, "flops": self.flops, "attrs": self.attrs,
        }

    def to_json(self, versioned: bool = False) -> str:
        """The record as one line of JSON (no newline), keys sorted; `versioned` adds
        "schema_version" (as export does; the digest is of the line without it).

            >>> MeasureRecord("w", "t", "llvm", "d", {}, (1.0,), timestamp=0).to_json()[:26]
            '{"attrs":{},"config":{},"c'
        """
        data = self.to_dict()
        if versioned:
            data["schema_version"] = RECORD_SCHEMA_VERSION
        return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MeasureRecord:
        """Build a record from `to_dict()` output; unknown or missing keys are errors.

            >>> r = MeasureRecord("w", "t", "llvm", "d", {}, costs=(1.0,))
            >>> MeasureRecord.from_dict(r.to_dict()) == r
            True
        """
        if not isinstance(data, Mapping):
            raise TuningLogError(f"bad measure record: expected a JSON object, "
                                 f"got {type(data).__name__}")
        version = data.get("schema_version", RECORD_SCHEMA_VERSION)
        if version != RECORD_SCHEMA_VERSION or isinstance(version, bool):
            raise TuningLogError(f"bad measure record: schema_version {_short(version)} is "
                                 f"not one this Tessel reads (version {RECORD_SCHEMA_VERSION})"
                                 f"; export the records again with this Tessel's version")
        unknown = sorted(set(data) - _JSON_KEYS - {"mean", "id", "schema_version"})
        if unknown:
            raise TuningLogError(f"bad measure record: unknown field(s) {', '.join(unknown)}; "
                                 f"known fields are {', '.join(sorted(_JSON_KEYS))}")
        missing = sorted(_REQUIRED_KEYS - set(data))
        if missing:
            raise TuningLogError(f"bad measure record: missing field(s) {', '.join(missing)}")
        kwargs = {_JSON_TO_FIELD.get(k, k): v for k, v in data.items() if k in _JSON_KEYS}
        return cls(**kwargs)

    @classmethod
    def from_json(cls, line: str) -> MeasureRecord:
        """Parse one JSON line written by `to_json()`.

            >>> MeasureRecord.from_json('{"workload_key": "w", "template": "t", '
            ...     '"target": "llvm", "device_key": "d", "config": {}, "costs": [2.0]}').mean
            2.0
        """
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            raise TuningLogError(f"bad measure record: not valid JSON ({e.msg} at char "
                                 f"{e.pos}): {line[:80]!r}") from None
        except (ValueError, RecursionError) as e:  # a 5,000-digit number; nesting too deep
            raise TuningLogError(f"bad measure record: not a JSON line this reader accepts "
                                 f"({type(e).__name__}: {str(e)[:80]})") from None
        return cls.from_dict(data)

    def digest(self) -> str:
        """A hash of everything but the row id: equal records have equal digests.

            >>> r = MeasureRecord("w", "t", "llvm", "d", {}, costs=(1.0,), timestamp=5.0)
            >>> r.digest() == MeasureRecord.from_json(r.to_json()).digest()
            True
        """
        return hashlib.sha256(self.to_json().encode()).hexdigest()


_JSON_TO_FIELD = {"config": "config_json", "attrs": "attrs_json"}
_JSON_KEYS = frozenset({"workload_key", "template", "target", "device_key", "config", "costs",
                        "error_kind", "error_msg", "timestamp", "tuner", "tessel_version",
                        "flops", "attrs"})
_REQUIRED_KEYS = frozenset({"workload_key", "template", "target", "device_key", "config",
                            "costs"})

__all__ = ["CONFIRM_TUNER", "ERROR_KINDS", "RECORD_SCHEMA_VERSION", "TESSEL_VERSION", "ErrorKind",
           "MeasureRecord", "canonical_json"]


@dataclass(frozen=True)
class ScheduleDecision:
    """One batch of a task scheduler's run over a model: which task it gave the batch to,
    why, and the model's estimated latency after it. `run_key` names the run (the model's
    set of tasks), so a resumed run finds its own decisions.

        >>> d = ScheduleDecision("r1", 1, "mm", "first batch", 1e-3, 2e-3, 8, model="m.onnx")
        >>> d.batch, d.trials_used
        (1, 8)
    """

    run_key: str
    batch: int
    workload_key: str
    reason: str
    best_s: float
    model_estimate_s: float
    trials_used: int
    model: str = ""
    task: str = ""
    gain_s: float = math.inf
    timestamp: float = field(default_factory=time.time)
