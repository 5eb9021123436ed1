"""The fuzz driver: runs targets' inputs, sorts outcomes, keeps findings replayable.

A target is a module of tests/fuzz/ with `NAME: str` and
`one_input(rng) -> (description, thunk)`. The thunk runs one mutated input through an
entry point: returning is "ok", raising a TesselError subclass is counted by its class
name, anything else (or running past the per-input time limit) is a finding. Input `i` of
seed `s` is drawn from `numpy.random.default_rng([s, i])`, so (target, seed, index) replays
it exactly, whatever ran before it.

    >>> import types
    >>> t = types.SimpleNamespace(NAME="demo", one_input=lambda rng: ("noop", lambda: None))
    >>> fuzz(t, seed=0, count=3).counts
    Counter({'ok': 3})
"""

from __future__ import annotations

import collections
import faulthandler
import importlib
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

from tessel_errors import TesselError

# Every target module; one not written yet is skipped with a note.
TARGET_MODULES = ("relay_text", "onnx_models", "artifacts", "tuning_import", "cuda_artifacts")

TIME_LIMIT_S = 20.0  # per input: longer is a hang (a finding)
OK = "ok"
FINDING = "finding"


class InputTimedOut(BaseException):
    """Raised into a thunk that ran past the time limit (a BaseException, so code under test
    that catches Exception cannot swallow it)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One input that raised something other than a TesselError (or hung)."""

    target: str
    seed: int
    index: int
    description: str
    error: str  # "KeyError: 'x'" or "hang: ran past 20 s"
    traceback: str

    def replay_command(self) -> str:
        """The command line that runs this one input again."""
        return (f"python -m tests.fuzz --target {self.target} --seed {self.seed} "
                f"--replay {self.index}")


@dataclass(slots=True)
class Report:
    """What one target's run gave: inputs tried, counts by outcome, the findings."""

    target: str
    seed: int
    tried: int = 0
    counts: collections.Counter = field(default_factory=collections.Counter)
    findings: list[Finding] = field(default_factory=list)

    def summary(self) -> str:
        """One line: inputs tried, ok, each Tessel error kind with its count, findings."""
        kinds = sorted((k, n) for k, n in self.counts.items() if k not in (OK, FINDING))
        parts = [f"{self.tried} inputs", f"ok {self.counts[OK]}"]
        parts += [f"{k} {n}" for k, n in kinds]
        parts.append(f"findings {self.counts[FINDING]}")
        return f"{self.target} (seed {self.seed}): " + ", ".join(parts)


def load_targets(names: Sequence[str] | None = None,
                 note: Callable[[str], object] = print) -> list[ModuleType]:
    """The target modules named (default: all of TARGET_MODULES) that exist."""
    out = []
    for name in names or TARGET_MODULES:
        if name not in TARGET_MODULES:
            raise SystemExit(f"unknown fuzz target {name!r}; known: {', '.join(TARGET_MODULES)}")
        try:
            out.append(importlib.import_module(f"tests.fuzz.{name}"))
        except ModuleNotFoundError as e:
            if e.name != f"tests.fuzz.{name}":
                raise  # the target exists but imports something missing: a real error
            note(f"fuzz target {name}: not written yet (tests/fuzz/{name}.py), skipped")
    return out


def input_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of input `index` of a run seeded with `seed`."""
    return np.random.default_rng([seed, index])


def run_input(target: ModuleType, seed: int, index: int,
              time_limit: float = TIME_LIMIT_S) -> tuple[str, str, Finding | None]:
    """(description, outcome, finding or None) of one input; never raises for the input."""
    name = target.NAME
    try:
        description, thunk = target.one_input(input_rng(seed, index))
    except Exception as e:  # the target's own bug: report it, keep going
        return "<the target failed to make an input>", FINDING, Finding(
            name, seed, index, "<one_input raised>", _one_line(e), traceback.format_exc())
    try:
        with _time_limit(time_limit):
            thunk()
    except TesselError as e:
        return description, type(e).__name__, None
    except InputTimedOut:
        return description, FINDING, Finding(
            name, seed, index, description, f"hang: ran past {time_limit:g} s",
            traceback.format_exc())
    except Exception as e:
        return description, FINDING, Finding(
            name, seed, index, description, _one_line(e), traceback.format_exc())
    return description, OK, None


def fuzz(target: ModuleType, seed: int, count: int | None = None,
         seconds: float | None = None, findings_dir: Path | None = None,
         time_limit: float = TIME_LIMIT_S) -> Report:
    """Run inputs 0, 1, ... of `target` until `count` inputs or `seconds` have passed.

    Each finding is written to `findings_dir/<target>/seed<S>-input<I>.txt` (when given)
    with its description, error, traceback and the command that replays it.
    """
    if count is None and seconds is None:
        raise ValueError("give count, seconds or both")
    report = Report(target.NAME, seed)
    deadline = None if seconds is None else time.monotonic() + seconds
    index = 0
    while (count is None or index < count) and (deadline is None
                                                 or time.monotonic() < deadline):
        _, outcome, finding = run_input(target, seed, index, time_limit)
        report.tried += 1
        report.counts[outcome] += 1
        if finding is not None:
            report.findings.append(finding)
            if findings_dir is not None:
                save_finding(finding, findings_dir)
        index += 1
    return report


def save_finding(finding: Finding, findings_dir: Path) -> Path:
    """Write one finding to a file under `findings_dir`; returns its path."""
    path = Path(findings_dir) / finding.target / f"seed{finding.seed}-input{finding.index}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"target: {finding.target}\nseed: {finding.seed}\nindex: {finding.index}\n"
        f"replay: {finding.replay_command()}\ninput: {finding.description}\n"
        f"error: {finding.error}\n\n{finding.traceback}",
        encoding="utf-8", errors="backslashreplace")
    return path


def _one_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text[:300]}"


class _time_limit:  # noqa: N801 (used as a context manager, reads like one)
    """Raise InputTimedOut in the main thread after `seconds` (SIGALRM), and dump every
    thread's stack if the input is still stuck in native code well after that."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.armed = (hasattr(signal, "setitimer")
                      and threading.current_thread() is threading.main_thread())

    def __enter__(self) -> None:
        if not self.armed:
            return
        self.old = signal.signal(signal.SIGALRM, _raise_timeout)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        faulthandler.dump_traceback_later(self.seconds * 3, exit=False, file=sys.stderr)

    def __exit__(self, *exc: object) -> None:
        if not self.armed:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, self.old)


def _raise_timeout(signum: int, frame: object) -> None:
    raise InputTimedOut()
