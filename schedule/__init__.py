"""schedule: stages, loop primitives and dataflow rewrites on TE programs (TVM-style).

    >>> import tensor_expr as te
    >>> from schedule import create_schedule
    >>> A = te.placeholder((64, 64), name="A")
    >>> B = te.compute((64, 64), lambda i, j: A[i, j] + 1.0, name="B")
    >>> s = create_schedule(B)
    >>> xo, yo, xi, yi = s[B].tile(B.op.axis[0], B.op.axis[1], 8, 8)
    >>> s[B].vectorize(yi)
"""

from schedule.relations import Fuse, Rebase, Split
from schedule.schedule import Schedule, create_schedule
from schedule.serialize import apply_json
from schedule.stage import IterAttr, Stage
from schedule.tensorize import TensorIntrin, decl_tensor_intrin
from tessel_errors import ScheduleError

__all__ = [
    "Schedule", "Stage", "IterAttr", "Split", "Fuse", "Rebase", "create_schedule",
    "apply_json", "ScheduleError", "TensorIntrin", "decl_tensor_intrin",
]
