"""Relay operators: each module defines ops, their attrs, type relations and references.

Importing this package registers every op (tensor, nn, nn_norm, reduce, transform, runtime,
shape_of, dyn_reshape, dyn_strided_slice).

    >>> import relay_ir.op
    >>> relay_ir.op.get_op("nn.conv2d").num_inputs
    2
"""

from relay_ir.op import dyn_reshape, dyn_strided_slice, nn, nn_norm, reduce  # noqa: F401, I001
from relay_ir.op import runtime, shape_of, tensor, transform  # noqa: F401, I001
from relay_ir.op._common import ARG_NAMES, NotReady, Refined, RelationError
from relay_ir.op.registry import OPS, PATTERNS, REFERENCES, TYPE_RELATIONS, Op, OpPattern, get_op

__all__ = [
    "ARG_NAMES", "NotReady", "OPS", "PATTERNS", "REFERENCES", "Refined", "RelationError",
    "TYPE_RELATIONS", "Op", "OpPattern", "get_op",
]
