"""Outputs written over a dying input (relay_ir.backend.inplace, memory_plan's `share`):
the loop-IR proof accepts only kernels that read each element of the input for the same
element of the output, the planner never lets two live values share bytes otherwise, and
models built so equal the interpreter and the build without it."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import tensor_expr as te
from lowering.ir import Buffer, BufferStore, For, ForKind, IfThenElse, LetStmt, PrimFunc, seq
from relay_ir.backend.inplace import inplace_pairs
from relay_ir.backend.memory_plan import _best_fit, block_offsets, plan_memory
from relay_ir.backend.pipeline import bind_params
from relay_ir.frontend.onnx import from_onnx
from tests.e2e import onnx_models
from tests.relay_ir.test_memory_plan_offsets import _overlap, _random_spans
from tests.rng import seeded_rng

N = 8


def _loop(body_of_i) -> tuple[te.Var, object]:
    i = te.var("i")
    return i, For(i, te.const(0), te.const(N), ForKind.SERIAL, body_of_i(i))


def _func(body_of_i, shapes=((N,), (N,), (N,))) -> PrimFunc:
    X, R, O = (Buffer(n, s, "float32") for n, s in zip("XRO", shapes))
    _, loop = _loop(lambda i: body_of_i(X, R, O, i))
    return PrimFunc("f", (X, R, O), loop)


def test_an_elementwise_epilogue_may_write_over_its_input() -> None:
    f = _func(lambda X, R, O, i: BufferStore(O, te.max(X[N - 1 - i] + R[i], 0.0), (i,)))
    assert inplace_pairs(f) == [(1, 2)]


@pytest.mark.parametrize("case", [
    # the output accumulates: a later read of R would see the partial sum
    "accumulate",
    # R read at another element than the one stored
    "shifted",
    # R read outside the stored value (a condition)
    "condition",
    # R read through a let: not proven
    "let",
    # shapes differ
    "shape",
    # the kernel also writes R
    "writes_input",
])
def test_a_kernel_that_could_read_a_clobbered_element_is_refused(case: str) -> None:
    def body(X, R, O, i):
        if case == "accumulate":
            return seq(BufferStore(O, X[i], (i,)), BufferStore(O, O[i] + R[i], (i,)))
        if case == "shifted":
            return BufferStore(O, R[(i + 1) % N], (i,))
        if case == "condition":
            return IfThenElse(R[i] > 0.0, BufferStore(O, X[i], (i,)))
        if case == "let":
            v = te.var("v", "float32")
            return LetStmt(v, R[i], BufferStore(O, v * 2.0, (i,)))
        if case == "writes_input":
            return seq(BufferStore(O, R[i], (i,)), BufferStore(R, X[i], (i,)))
        return BufferStore(O, R[i], (i,))

    shapes = ((N,), (N, 1), (N,)) if case == "shape" else ((N,), (N,), (N,))
    pairs = inplace_pairs(_func(body, shapes))
    assert (1, 2) not in pairs


def test_shared_storage_only_for_the_value_that_dies_where_the_other_is_written() -> None:
    # 0 dies at step 1, where 1 is written: shared; 2 is written at step 1 too but asks
    # for 3's storage, which is not free yet (3 is defined later): a block of its own
    values = [(0, 1, 4096), (1, 2, 4096), (1, 3, 4096), (2, 3, 4096)]
    plan = plan_memory(values, share={1: 0, 2: 3})
    assert plan.storage_of[1] == plan.storage_of[0]
    assert len(set(plan.storage_of[:3])) == 2
    # 0 is read after step 1 as well: not shared
    plan = plan_memory([(0, 2, 4096), (1, 2, 4096)], share={1: 0})
    assert plan.storage_of[0] != plan.storage_of[1]


def test_random_shares_never_let_live_values_overlap() -> None:
    spans = _random_spans(120)
    rng = seeded_rng()
    share = {}
    for v, (start, _, _) in enumerate(spans):
        dying = [u for u, s in enumerate(spans) if s[1] == start and u != v]
        if dying and rng.random() < 0.7:
            share[v] = int(rng.choice(dying))
    fit = _best_fit(spans, share)  # every share that applies, kept
    storage_of, blocks = fit.storage_of, fit.blocks
    assert sum(storage_of[v] == storage_of[u] for v, u in share.items()) > 10
    offs = [block_offsets(blocks)[b] for b in storage_of]
    for i in range(len(spans)):
        for j in range(i):
            if not _overlap(spans[i], spans[j]):
                continue
            if share.get(i) == j or share.get(j) == i:
                continue  # the one overlap allowed: the step that reads one writes the other
            lo, hi = sorted([(offs[i], spans[i][2]), (offs[j], spans[j][2])])
            assert lo[0] + lo[1] <= hi[0], (i, j)
    assert plan_memory(spans, share=share).peak_bytes <= plan_memory(spans).peak_bytes


def test_sharing_that_would_raise_the_peak_is_dropped() -> None:
    # best fit: 2 and 3 take one 8 KiB block in turn, 1 a 4 KiB one, 0 the 8 KiB again;
    # 1 over 3 holds the 8 KiB block at step 3, and 0 needs another 8 KiB
    values = [(3, 4, 8192), (2, 3, 4096), (0, 0, 8192), (1, 2, 4096)]
    assert _best_fit(values, {1: 3}).peak > plan_memory(values).peak_bytes == 12288
    plan = plan_memory(values, share={1: 3})
    assert plan.peak_bytes == 12288 and plan.storage_of[1] != plan.storage_of[3]


def _small_resnet():
    m = onnx_models.resnet18(image=32, width=8, classes=10)
    mod, params = from_onnx(m)
    return mod, params, m.graph.input[0].name


AVX2, AVX512 = "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"


def _residual_steps_share(lib) -> None:
    plan = lib.plan
    at = {v: i for i, v in enumerate(plan._temps)}
    where = lib.memory_plan.storage_of
    residual = [s for s in plan.steps if s.group.endswith("add_add_relu")]
    assert len(residual) == 8  # two per stage
    for s in residual:
        r, o = s.inputs[-1], s.outputs[0]
        assert where[at[o]] == where[at[r]], s.group


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_residual_convs_write_over_their_residual_for_each_x86_target(target: str) -> None:
    # planned from the kernels' loop IR, whatever their vector width: built, not run (an
    # AVX2 host builds AVX-512 code too)
    mod, params, _ = _small_resnet()
    _residual_steps_share(relay_ir.build(mod, target=target, params=params))


def test_resnet_residual_convs_write_over_their_residual_and_equal_the_interpreter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    mod, params, name = _small_resnet()
    x = seeded_rng().standard_normal((1, 3, 32, 32)).astype("float32")
    lib = relay_ir.build(mod, target="llvm", params=params)
    _residual_steps_share(lib)
    want = relay_ir.interpret(bind_params(mod, params), **{name: x})
    got = lib.run(**{name: x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(lib.run(**{name: x}), got)  # a second run: the same
    monkeypatch.setenv("TESSEL_NUM_THREADS", "1")  # threads split the rows: the same
    np.testing.assert_array_equal(
        relay_ir.build(mod, target="llvm", params=params).run(**{name: x}), got)
    monkeypatch.setenv("TESSEL_PLAN_INPLACE", "0")
    apart = relay_ir.build(mod, target="llvm", params=params)
    assert apart.memory_plan.peak_bytes > lib.memory_plan.peak_bytes
    np.testing.assert_array_equal(apart.run(**{name: x}), got)
