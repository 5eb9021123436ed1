"""The NCHW conv schedules (schedule/templates/x86_conv2d.py) on a group whose output is
stored blocked: a ScheduleError that names the way out, which lets relay_ir's group
lowering go on to its next schedule and report this one, not a failed unpacking."""

from __future__ import annotations

import pytest

from relay_ir.backend.blocked import to_blocked
from schedule.space import FallbackConfig
from schedule.templates.x86_conv2d import schedule_conv2d_nchw, schedule_depthwise_nchw
from tensor_expr import ops
from tensor_expr import tensor as T
from tessel_errors import ScheduleError


@pytest.mark.parametrize("depthwise", [False, True])
def test_a_blocked_output_is_a_schedule_error_naming_the_nchwc_template(depthwise: bool) -> None:
    data = T.placeholder((1, 16, 8, 8), name="data")
    if depthwise:
        conv = ops.depthwise_conv2d_nchw(data, T.placeholder((16, 1, 3, 3), name="w"), 1, 1)
        schedule = schedule_depthwise_nchw
    else:
        conv = ops.conv2d_nchw(data, T.placeholder((16, 16, 3, 3), name="w"), 1, 1)
        schedule = schedule_conv2d_nchw
    out = to_blocked(conv, 8)
    with pytest.raises(ScheduleError, match=r"5-D tensor .*conv2d_NCHWc\.x86"):
        schedule(FallbackConfig("llvm"), [out])
