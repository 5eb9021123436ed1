"""Loop passes, one per file: each is a function PrimFunc -> PrimFunc.

- simplify: tensor_expr.arith under the loop ranges, constant-condition ifs removed
- hoist_guards: each guard conjunct out to the loop of its innermost var (the loop's
  bounds where it is linear in a serial loop's var and guards much work)
- loop_partition: split off the guarded head/tail so the main loop body is guard-free
- remove_no_op: drop empty and zero-trip loops, inline unit loops
- verify_loops: legality of loop kinds (one parallel loop per path, constant vector extents)
"""

from lowering.passes.hoist_guards import hoist_guards
from lowering.passes.loop_partition import loop_partition
from lowering.passes.remove_no_op import remove_no_op
from lowering.passes.simplify import simplify
from lowering.passes.verify_loops import verify_loops

__all__ = ["simplify", "hoist_guards", "loop_partition", "remove_no_op", "verify_loops"]
