"""Fixed x86 schedules: injective, reductions, softmax, pooling give numpy's results."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from schedule.templates import instantiate
from tests.rng import seeded_rng
from tests.schedule.templates.refs import blocked, close, rand, run


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


def _pool_ref(x: np.ndarray, op: str, k: int, st: int, pad: int) -> np.ndarray:
    """NCHW pooling in numpy; avg counts only the window's real elements."""
    fill = -np.inf if op == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    ones = np.pad(np.ones_like(x), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (x.shape[2] + 2 * pad - k) // st + 1
    ow = (x.shape[3] + 2 * pad - k) // st + 1
    win = [(xp[:, :, i:i + st * oh:st, j:j + st * ow:st], ones[:, :, i:i + st * oh:st,
                                                              j:j + st * ow:st])
           for i in range(k) for j in range(k)]
    if op == "max":
        return np.max(np.stack([v for v, _ in win]), axis=0)
    return sum(v for v, _ in win) / sum(c for _, c in win)


@pytest.mark.parametrize("op,target,block", [("max", "llvm -mcpu=haswell", 16),
                                             ("max", "llvm -mcpu=skylake-avx512", 32),
                                             ("avg", "llvm -mcpu=haswell", 8),
                                             ("avg", "llvm -mcpu=skylake-avx512", 48)])
def test_a_pool_over_the_blocked_layout_keeps_its_accumulators_in_registers(
        op: str, target: str, block: int, monkeypatch: Any) -> None:
    import lowering
    import tensor_expr as te
    from schedule.space import FallbackConfig
    from schedule.templates.x86_injective import schedule_reduce
    from tensor_expr import ops
    from tessel_target import Target

    monkeypatch.setenv("TESSEL_ALLOW_FOREIGN_CPU", "1")  # e.g. haswell code on a newer host
    x = te.placeholder((1, 2, 14, 14, block), "float32", name="x")
    pool = ops.max_pool2d if op == "max" else ops.avg_pool2d
    kw = {} if op == "max" else {"count_include_pad": False}
    y = pool(x, (3, 3), (2, 2), (1, 1, 1, 1), layout="NCHWc", **kw)
    s = schedule_reduce(FallbackConfig(target), [y])
    text = str(lowering.lower(s, [x, y]))
    # the window unrolled into a register tile, stored once per output element
    assert "in local" in text and "(ry, 0, 3) unrolled" in text and "(rx, 0, 3) unrolled" in text
    k = lowering.build(s, [x, y], target=target)
    if not Target.parse(target).features <= Target.parse("llvm").features:
        return  # code for a CPU this host is not: built and checked above, not run
    logical = rand(seeded_rng(), (1, 2 * block, 14, 14))
    out = np.full((1, 2, 7, 7, block), np.nan, "float32")
    k(blocked(logical, block), out)
    close(out, blocked(_pool_ref(logical, op, 3, 2, 1), block))
