"""`lowering.accel.Env`: the accelerator's configuration under VTA's names.

It is defined next to the accelerator's schedule templates (schedule.templates.accel_env),
which read it too and may not import lowering; the backend and its users import it here.

    >>> Env("accel -batch=4").BATCH
    4
"""

from schedule.templates.accel_env import GEMM_INTRIN, UOP_BYTES, Env

__all__ = ["Env", "GEMM_INTRIN", "UOP_BYTES"]
