"""Reading a quantized module: its op calls, and the float reference it approximates."""

from __future__ import annotations

from typing import Any

import numpy as np

import relay_ir as R
from relay_ir.backend.pipeline import bind_params
from relay_ir.op.registry import Op


def op_calls(mod: R.IRModule, name: str) -> list[R.Call]:
    """The calls of op `name` in @main, in post order."""
    return [e for e in R.post_order(mod["main"].body)
            if isinstance(e, R.Call) and isinstance(e.op, Op) and e.op.name == name]


def float_outputs(mod: R.IRModule, params: dict[str, Any],
                  samples: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """The float model's outputs on `samples` (the interpreter's reference semantics)."""
    fmod = bind_params(mod, params)
    return [np.asarray(R.interpret(fmod, **s)) for s in samples]


def relative_error(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    """||got - want|| / ||want|| over all the outputs together."""
    g, w = np.concatenate([a.ravel() for a in got]), np.concatenate([a.ravel() for a in want])
    return float(np.linalg.norm(g - w) / np.linalg.norm(w))
