"""lowering.accel: the VTA-style accelerator backend (ISA, microcode, simulator)."""

from lowering.accel.env import Env
