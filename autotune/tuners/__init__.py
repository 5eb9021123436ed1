"""Tuners: random, grid, genetic (ga) and the XGBoost model-based tuner (xgb on knob
features, xgb_loop on loop-IR features).

    >>> from autotune.tuners import make_tuner
    >>> from autotune.task import Task
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> make_tuner("ga", t).name
    'ga'
"""

from __future__ import annotations

from typing import Any

from autotune.task import Task
from autotune.tuners.base import Tuner, throughput
from autotune.tuners.genetic import GATuner
from autotune.tuners.simple import GridTuner, RandomTuner
from autotune.tuners.xgb import XGBLoopTuner, XGBTuner
from tessel_errors import TesselError

TUNERS: dict[str, type[Tuner]] = {"random": RandomTuner, "grid": GridTuner, "ga": GATuner,
                                  "genetic": GATuner, "xgb": XGBTuner,
                                  "xgb_loop": XGBLoopTuner}


def make_tuner(name: str, task: Task, seed: int | None = 0, **kwargs: Any) -> Tuner:
    """A tuner by name: random, grid, ga (genetic), xgb or xgb_loop."""
    try:
        cls = TUNERS[name]
    except KeyError:
        raise TesselError(f"unknown tuner {name!r}; choose one of "
                          f"{', '.join(sorted(TUNERS))}") from None
    return cls(task, seed=seed, **kwargs)


__all__ = ["TUNERS", "GATuner", "GridTuner", "RandomTuner", "Tuner", "XGBLoopTuner",
           "XGBTuner", "make_tuner", "throughput"]
