"""tensor_expr.ops."""
