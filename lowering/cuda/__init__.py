"""lowering.cuda."""
