"""tensor_expr.arith: the arithmetic analyzer (ranges, simplify, bounds, modular sets,
interval sets).

    >>> import tensor_expr as te
    >>> ana = te.arith.Analyzer()
    >>> i = te.var("i"); ana.bind(i, (0, 16))
    >>> ana.can_prove(i // 16 == 0)
    True
"""

from tensor_expr.arith.analyzer import Analyzer, ConstIntBound, simplify
from tensor_expr.arith.int_set import IntervalSet
from tensor_expr.arith.modular import ModularSet
from tensor_expr.arith.structural import struct_key, structural_equal

__all__ = ["Analyzer", "ConstIntBound", "IntervalSet", "ModularSet", "simplify", "struct_key",
           "structural_equal"]
