"""lowering.accel: the VTA-style accelerator backend (ISA, schedule -> microcode, simulator)."""

from lowering.accel.env import Env
