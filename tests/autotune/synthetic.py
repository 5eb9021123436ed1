"""Test templates: a small synthetic space, and one whose candidates crash or hang.

Imported by the tests and, by name, by measurement workers (`imports=[__name__]`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import tensor_expr as te
from schedule.schedule import create_schedule
from schedule.templates import TEMPLATES
from schedule.templates.registry import register_template


def _compute(cfg: Any, args: Any, attrs: dict[str, Any]) -> Any:
    (shape, dtype), = args
    a = te.placeholder(shape, dtype, name="A")
    b = te.compute(shape, lambda i, j: a[i, j] * 2.0 + 1.0, name="B")
    cfg.add_flop(2.0 * shape[0] * shape[1])
    return [a], [b]


def _schedule(cfg: Any, outs: Any) -> Any:
    b = outs[0]
    s = create_schedule(b.op)
    i, j = s[b].op.axis
    cfg.define_split("tile_i", int(b.shape[0].value), num_outputs=2)
    cfg.define_split("tile_j", int(b.shape[1].value), num_outputs=2)
    cfg.define_knob("unroll", [0, 1, 2, 3, 4, 5])
    cfg.define_knob("mode", ["ok", "crash", "hang"] if "crash" in _current else ["ok"])
    cfg["tile_i"].apply(s, b, i)
    cfg["tile_j"].apply(s, b, j)
    mode = cfg["mode"].val
    if mode == "crash":
        os.abort()
    if mode == "hang":
        time.sleep(3600)
    return s


_current: set[str] = set()


def _schedule_crashy(cfg: Any, outs: Any) -> Any:
    _current.add("crash")
    try:
        return _schedule(cfg, outs)
    finally:
        _current.discard("crash")


def _compute_slowpoke(cfg: Any, args: Any, attrs: dict[str, Any]) -> Any:
    """B = A * (sum over `work` ones): the knob `work` sets the run time, not the result."""
    (shape, dtype), = args
    cfg.define_knob("work", [1, 1 << 16])
    a = te.placeholder(shape, dtype, name="A")
    k = te.reduce_axis((0, cfg["work"].val), name="k")
    b = te.compute(shape, lambda i, j: te.sum(a[i, j] + te.const(0.0, dtype) * k, axis=k),
                   name="B")
    cfg.add_flop(float(shape[0] * shape[1]))
    return [a], [b]


def _schedule_slowpoke(cfg: Any, outs: Any) -> Any:
    return create_schedule(outs[0].op)


if "synthetic.test" not in TEMPLATES:
    register_template("synthetic.test", "llvm", compute=_compute)(_schedule)
    register_template("crashy.test", "llvm", compute=_compute)(_schedule_crashy)
    register_template("slowpoke.test", "llvm", compute=_compute_slowpoke)(_schedule_slowpoke)


class CurveRunner:
    """A runner for scheduler tests: the n-th candidate measured of a task (by its name)
    takes `curves[name](n)` seconds, whatever its config, so a task's best time follows
    a curve the test chooses. `.order` lists the task names as measured."""

    def __init__(self, curves: dict[str, Any]) -> None:
        self.curves = curves
        self.counts: dict[str, int] = {}
        self.order: list[str] = []

    def run(self, inputs: Any) -> list[Any]:
        """One result per input from its task's curve."""
        from autotune.measure import MeasureResult

        out = []
        for inp in inputs:
            name = inp.task.name
            n = self.counts.get(name, 0)
            self.counts[name] = n + 1
            self.order.append(name)
            out.append(MeasureResult((float(self.curves[name](n)),)))
        return out
