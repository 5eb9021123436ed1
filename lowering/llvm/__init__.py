"""lowering.llvm."""
