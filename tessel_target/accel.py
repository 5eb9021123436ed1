"""The accelerator's hardware configuration as target attributes: `accel -batch=4 -block=16`.

Defaults are VTA's (batch 1, a 16x16 GEMM core, 32 KiB input, 256 KiB weight, 128 KiB
accumulator and 32 KiB micro-op buffers), plus the two numbers the cycle model needs: DRAM
bytes per cycle and the latency of one DRAM transfer, and the clock that turns cycles into
the seconds tuning records hold. The buffer sizes and the core's
shape are powers of two, as the hardware's address fields require.

    >>> accel_attrs({"batch": "4"})["batch"], accel_attrs({})["wgt_buf_kib"]
    (4, 256)
    >>> accel_config({})
    'batch=1,block=16,inp_buf_kib=32,wgt_buf_kib=256,acc_buf_kib=128,uop_buf_kib=32,dram_bytes_per_cycle=8,dram_latency=64,clock_mhz=100'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tessel_errors import CodegenError

ACCEL_DEFAULTS: dict[str, int] = {
    "batch": 1,                 # rows of the input block (VTA's BATCH)
    "block": 16,                # BLOCK_IN = BLOCK_OUT
    "inp_buf_kib": 32,
    "wgt_buf_kib": 256,
    "acc_buf_kib": 128,
    "uop_buf_kib": 32,
    "dram_bytes_per_cycle": 8,  # one 64-bit AXI beat per cycle
    "dram_latency": 64,         # cycles from a DMA request to its first beat
    "clock_mhz": 100,           # what a cycle lasts, for seconds in tuning records (PYNQ's)
}
_POWERS_OF_TWO = ("batch", "block", "inp_buf_kib", "wgt_buf_kib", "acc_buf_kib", "uop_buf_kib")


def accel_attrs(attrs: Mapping[str, Any]) -> dict[str, int]:
    """Every accelerator attribute as an int, defaults filled in, values checked."""
    unknown = sorted(set(attrs) - set(ACCEL_DEFAULTS))
    if unknown:
        raise CodegenError(f"unknown accel target option -{unknown[0]}; the options are "
                           + ", ".join(f"-{k}" for k in ACCEL_DEFAULTS))
    out = dict(ACCEL_DEFAULTS)
    for key, value in attrs.items():
        try:
            n = int(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            n = None
        if n is None:
            raise CodegenError(f"accel target option -{key} needs an integer, got {value!r}")
        minimum = 0 if key == "dram_latency" else 1
        if n < minimum:
            raise CodegenError(f"accel target option -{key} must be at least {minimum}, got {n}")
        if key in _POWERS_OF_TWO and n & (n - 1):
            raise CodegenError(f"accel target option -{key} must be a power of two (the "
                               f"hardware's address fields are), got {n}")
        out[key] = n
    return out


def accel_config(attrs: Mapping[str, Any]) -> str:
    """The whole configuration, defaults included, as `key=value,...` (for device keys)."""
    full = accel_attrs(attrs)
    return ",".join(f"{k}={full[k]}" for k in ACCEL_DEFAULTS)


__all__ = ["ACCEL_DEFAULTS", "accel_attrs", "accel_config"]
