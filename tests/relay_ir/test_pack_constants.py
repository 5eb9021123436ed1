"""The graph executor's constants lie in one arena, in the order the steps first read them,
each on a cache line, their values unchanged; a second plan over the same values keeps
them; TESSEL_PACK_CONSTANTS=0 leaves one aligned allocation per constant."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from relay_ir.backend.executor import (
    ALIGN,
    CONST_ARENA_ALIGN,
    GraphPlan,
    Step,
    Value,
    pack_constants,
)
from relay_ir.backend.pipeline import bind_params
from relay_ir.frontend.onnx import from_onnx
from tests.e2e import onnx_models
from tests.rng import seeded_rng


def _consts(n: int) -> list[Value]:
    rng = seeded_rng()
    shapes = [(), (3,), (17, 5), (2, 3, 4)][:n]
    dts = ["float32", "int8", "float32", "float64"]
    return [Value("const", s, dt, data=np.asarray(rng.standard_normal(s) * 9).astype(dt))
            for s, dt in zip(shapes, dts)]


def test_constants_lie_in_first_use_order_on_cache_lines_with_their_values() -> None:
    vals = _consts(4) + [Value("temp", (4,), "float32")]
    before = [v.data.copy() for v in vals[:4]]
    steps = [Step(0, [2, 4], [4], "a"), Step(0, [0, 2], [4], "b"), Step(0, [3], [4], "c")]
    pack_constants(vals, steps)
    order = [2, 0, 3, 1]  # first read by the steps, then the unread constant
    addrs = [vals[v].data.ctypes.data for v in order]
    assert addrs[0] % CONST_ARENA_ALIGN == 0
    assert all(a % ALIGN == 0 for a in addrs) and addrs == sorted(addrs)
    for a, b, v in zip(addrs, addrs[1:], order):
        assert b - a == -(-vals[v].data.nbytes // ALIGN) * ALIGN  # no gaps but the line
    for v, want in enumerate(before):
        assert vals[v].data.shape == want.shape and vals[v].data.dtype == want.dtype
        np.testing.assert_array_equal(vals[v].data, want)


def test_packing_twice_moves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    vals = _consts(3)
    steps = [Step(0, [1, 0, 2], [], "a")]
    pack_constants(vals, steps)
    first = [v.data for v in vals]
    pack_constants(vals, steps)
    assert all(v.data is d for v, d in zip(vals, first))
    apart = _consts(3)
    monkeypatch.setenv("TESSEL_PACK_CONSTANTS", "0")
    pack_constants(apart, steps)
    assert all(v.data.ctypes.data % ALIGN == 0 for v in apart)
    owners = {id(v.data if v.data.base is None else v.data.base) for v in apart}
    assert len(owners) == 3  # an allocation each


def test_a_resnet_with_packed_constants_equals_the_interpreter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    m = onnx_models.resnet18(image=32, width=8, classes=10)
    mod, params = from_onnx(m)
    x = seeded_rng().standard_normal((1, 3, 32, 32)).astype("float32")
    lib = relay_ir.build(mod, params=params)
    plan = lib.plan
    consts = [v for v, val in enumerate(plan.values) if val.kind == "const"]
    bases = {id(plan.values[v].data.base) for v in consts}
    assert len(bases) == 1  # one arena
    want = relay_ir.interpret(bind_params(mod, params), input=x)
    got = lib.run(input=x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    again = GraphPlan(plan.kernels, plan.values, plan.steps, plan.inputs, plan.outputs)
    np.testing.assert_array_equal(again.result(again.execute([x])), got)
    monkeypatch.setenv("TESSEL_PACK_CONSTANTS", "0")
    np.testing.assert_array_equal(relay_ir.build(mod, params=params).run(input=x), got)
