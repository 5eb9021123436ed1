"""Fixed x86 schedules: injective, reductions, softmax, pooling give numpy's results."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from schedule.templates import instantiate
from tests.rng import seeded_rng
from tests.schedule.templates.refs import close, rand, run


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _maxpool3s2p1(x: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    oh = (x.shape[2] + 2 - 3) // 2 + 1
    win = [xp[:, :, i:i + 2 * oh:2, j:j + 2 * oh:2] for i in range(3) for j in range(3)]
    return np.max(np.stack(win), axis=0)


CASES: list[tuple[str, list[Any], dict[str, Any], Any]] = [
    ("injective.x86", [((6, 40), "float32")], {"op": "relu"}, lambda x: np.maximum(x, 0)),
    ("injective.x86", [((3, 5, 64), "float32"), ((64,), "float32")], {"op": "add"},
     lambda x, b: x + b),
    ("injective.x86", [((2, 4, 5, 5), "float32"), ((4,), "float32")], {"op": "bias_add"},
     lambda x, b: x + b[None, :, None, None]),
    ("reduce.x86", [((4, 16, 24), "float32")], {"op": "sum", "axis": 1},
     lambda x: x.sum(axis=1)),
    ("reduce.x86", [((4, 16, 24), "float32")], {"op": "mean", "axis": 2},
     lambda x: x.mean(axis=2)),
    ("reduce.x86", [((4, 16, 24), "float32")], {"op": "max", "axis": 2, "keepdims": True},
     lambda x: x.max(axis=2, keepdims=True)),
    ("softmax.x86", [((6, 50), "float32")], {"axis": -1}, lambda x: _softmax(x, -1)),
    ("softmax.x86", [((2, 6, 10), "float32")], {"axis": 1}, lambda x: _softmax(x, 1)),
    ("pool2d.x86", [((1, 3, 12, 12), "float32")],
     {"op": "max", "pool_size": 3, "strides": 2, "padding": 1}, _maxpool3s2p1),
    ("pool2d.x86", [((1, 3, 8, 8), "float32")], {"op": "avg", "pool_size": 2, "strides": 2},
     lambda x: x.reshape(1, 3, 4, 2, 4, 2).mean(axis=(3, 5))),
    ("global_pool2d.x86", [((1, 8, 7, 7), "float32")], {"op": "avg"},
     lambda x: x.mean(axis=(2, 3), keepdims=True)),
    ("global_pool2d.x86", [((2, 4, 5, 5), "float32")], {"op": "max"},
     lambda x: x.max(axis=(2, 3), keepdims=True)),
]


@pytest.mark.parametrize("name,args,attrs,ref", CASES,
                         ids=[f"{c[0]}-{n}" for n, c in enumerate(CASES)])
def test_fixed_schedule_equals_numpy(name: str, args: list[Any], attrs: dict[str, Any],
                                     ref: Any) -> None:
    rng = seeded_rng()
    s, tensors = instantiate(name, args, attrs)
    inputs = [rand(rng, shape) for shape, _ in args]
    close(run(s, tensors, inputs), ref(*inputs))


def test_softmax_rows_run_in_one_parallel_loop() -> None:
    import lowering

    s, tensors = instantiate("softmax.x86", [((64, 256), "float32")], {"axis": -1})
    text = str(lowering.lower(s, tensors))
    assert text.count("parallel") == 1 and "vectorized" in text
