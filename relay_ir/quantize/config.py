"""The quantization options: a frozen value, and a context manager that makes it current
(as TVM's relay.quantize.qconfig).

    >>> from relay_ir.quantize import qconfig, current_qconfig
    >>> with qconfig(calibrate="kl", skip_conv_layers=[]):
    ...     current_qconfig().calibrate, current_qconfig().skip_conv_layers
    ('kl', ())
    >>> current_qconfig().calibrate, current_qconfig().requantize
    ('minmax', 'shift')

- calibrate: how each quantized activation's scale is chosen: "minmax" (from its largest
  magnitude over the dataset), "kl" (the threshold that minimises the KL divergence of
  its int8 histogram, TVM's _find_scale_by_kl) or a positive float g (every activation
  taken to lie in [-g, g], no dataset needed; TVM's global_scale).
- nbit: bits of the quantized activations and weights (2..8, stored as int8); values are
  clipped to the symmetric range [-(2**(nbit-1) - 1), 2**(nbit-1) - 1].
- skip_conv_layers: conv2d indices (counted from 0 in the order the printed graph lists
  them) that stay float32; [0] keeps the first, the one that sees the raw image.
- requantize: "shift" (the default: every scale is a power of two, so an int32
  accumulator goes back to int8 by a rounding right shift, what the accelerator's ALU can
  do) or "float" (weights get one scale per output channel and activations their
  calibrated scale exactly; requantization multiplies by a float; CPU only, more accurate).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any

from tessel_errors import RelayError

CALIBRATE_MODES = ("minmax", "kl")
REQUANTIZE_MODES = ("shift", "float")


@dataclass(frozen=True)
class QConfig:
    """How `quantize` quantizes (see the module doc); `with cfg:` makes it current."""

    calibrate: str | float = "minmax"
    nbit: int = 8
    skip_conv_layers: tuple[int, ...] = (0,)
    requantize: str = "shift"

    def __post_init__(self) -> None:
        c = self.calibrate
        if isinstance(c, (int, float)) and not isinstance(c, bool):
            if not c > 0:
                raise RelayError(f"qconfig: a global-scale calibrate must be positive, got {c}")
            object.__setattr__(self, "calibrate", float(c))
        elif c not in CALIBRATE_MODES:
            raise RelayError(f"qconfig: unknown calibrate mode {c!r}; use 'minmax', 'kl' or a "
                             "positive float (the global scale: activations in [-g, g])")
        if self.requantize not in REQUANTIZE_MODES:
            raise RelayError(f"qconfig: unknown requantize mode {self.requantize!r}; use "
                             "'shift' (power-of-two scales) or 'float' (per-channel scales)")
        if isinstance(self.nbit, bool) or not isinstance(self.nbit, int) \
                or not 2 <= self.nbit <= 8:
            raise RelayError(f"qconfig: nbit={self.nbit!r}; quantized values are int8, so "
                             "use an int in 2..8")
        skip = tuple(self.skip_conv_layers or ())
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in skip):
            raise RelayError(f"qconfig: skip_conv_layers must be conv2d indices (ints >= 0), "
                             f"got {list(skip)}")
        object.__setattr__(self, "skip_conv_layers", skip)

    def replace(self, **changes: Any) -> QConfig:
        """A copy with some options changed: `cfg.replace(calibrate="kl")`."""
        known = [f.name for f in dataclasses.fields(self)]
        unknown = sorted(k for k in changes if k not in known)
        if unknown:
            raise RelayError(f"quantize: unknown option(s) {', '.join(unknown)}; the options "
                             f"are {', '.join(known)}")
        return dataclasses.replace(self, **changes)

    @property
    def qmax(self) -> int:
        """The largest quantized magnitude, 127 for 8 bits."""
        return 2 ** (self.nbit - 1) - 1

    @property
    def needs_dataset(self) -> bool:
        """Whether calibration runs the float model (minmax, kl) or not (a global scale)."""
        return isinstance(self.calibrate, str)

    def __enter__(self) -> QConfig:
        _stack().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()


_local = threading.local()


def _stack() -> list[QConfig]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def qconfig(**options: Any) -> QConfig:
    """A QConfig from the defaults and `options`; use it as a value or in a with-block.

    `with qconfig(calibrate="kl", skip_conv_layers=[]): quantize(mod, params, data)`
    """
    return QConfig().replace(**options)


def current_qconfig() -> QConfig:
    """The innermost active qconfig (the defaults when none is active)."""
    stack = _stack()
    return stack[-1] if stack else QConfig()
