"""lowering.accel."""
