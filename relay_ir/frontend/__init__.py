"""relay_ir.frontend."""
