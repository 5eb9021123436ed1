"""The one error hierarchy of Tessel: every error a user can cause derives from TesselError.

This package imports nothing of ours, so every layer (even tuning_logs) can raise these.

    >>> from tessel_errors import TesselError, ScheduleError
    >>> try:
    ...     raise ScheduleError("split factor must be a positive integer, got 0")
    ... except TesselError as e:
    ...     print(type(e).__name__)
    ScheduleError
"""


class TesselError(Exception):
    """Base class of every error Tessel raises on bad input."""


class TensorExprError(TesselError):
    """A tensor expression is malformed (wrong dtype mix, bad shape, bad reduction)."""


class ScheduleError(TesselError):
    """A schedule primitive was used illegally; the message names stage and primitive."""


class LoweringError(TesselError):
    """A schedule cannot be lowered to loops (unsupported construct, unbound iteration)."""


class CodegenError(TesselError):
    """A backend cannot generate code for a loop-IR program."""


class KernelArgumentError(TesselError):
    """A compiled kernel was called with arrays of the wrong shape, dtype or layout."""


class RelayError(TesselError):
    """Base of relay_ir errors."""


class ParseError(RelayError):
    """Relay text could not be parsed; carries line and column."""


class RelayTypeError(RelayError):
    """Type inference failed; names the operator, the argument and both types."""


class RelayRuntimeError(RelayError):
    """A run-time check (e.g. of a gradual shape) failed while evaluating a program."""


class FrontendError(RelayError):
    """A model in another format (ONNX) could not be imported; names the file or the node."""


class DeviceError(TesselError):
    """A device (a GPU) is missing, or failed while running a kernel; says which and how."""


class RaceError(TesselError):
    """Two GPU threads touched one memory element between barriers, at least one writing;
    names the buffer, the index and both threads (found by the GPU simulator)."""


class ResourceError(TesselError):
    """The work needs more of a resource (memory) than the machine has; says how much."""


class TuningLogError(TesselError):
    """The tuning database is corrupt, foreign, or was given a bad record."""


__all__ = [
    "TesselError",
    "TensorExprError",
    "ScheduleError",
    "LoweringError",
    "CodegenError",
    "KernelArgumentError",
    "RelayError",
    "ParseError",
    "RelayTypeError",
    "RelayRuntimeError",
    "FrontendError",
    "DeviceError",
    "RaceError",
    "ResourceError",
    "TuningLogError",
]
