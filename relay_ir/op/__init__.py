"""Relay operators: each module defines ops, their attrs, type relations and references."""

from relay_ir.op.registry import OPS, PATTERNS, REFERENCES, TYPE_RELATIONS, Op, OpPattern, get_op

__all__ = ["OPS", "PATTERNS", "REFERENCES", "TYPE_RELATIONS", "Op", "OpPattern", "get_op"]
