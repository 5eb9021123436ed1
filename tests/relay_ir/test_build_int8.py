"""relay_ir.build on integer graphs: int8 x int8 -> int32 conv2d and dense through the x86
templates (conv2d_NCHWc, depthwise, dense with plain and packed constant weights) and the
integer shifts, bit for bit against relay_ir.interpret on seeded random int8 inputs that
include the extremes -128 and 127."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import relay_ir as R
from relay_ir import nn
from tests.relay_ir import programs as P
from tests.rng import int8_values, seeded_rng


def _build_and_compare(shapes: list[tuple[int, ...]], body: Callable[..., Any],
                       const_weight: bool) -> None:
    rng = seeded_rng()
    values = [int8_values(rng, s) for s in shapes]
    x = P.tvar("x", shapes[0], "int8")
    if const_weight:  # a model's weight: packed once at build into the template's layout
        mod = P.main_module([x], body(x, R.Constant(values[1])))
        ins = values[:1]
    else:
        w = P.tvar("w", shapes[1], "int8")
        mod = P.main_module([x, w], body(x, w))
        ins = values
    got = R.build(mod).run(*ins)
    want = R.interpret(mod, *ins)
    assert got.dtype == want.dtype == np.dtype("int32")
    np.testing.assert_array_equal(got, want)


CONV_CASES = {
    "3x3_pad1": ((1, 8, 9, 9), (16, 8, 3, 3), {"padding": (1, 1)}),
    "strided_odd_channels": ((2, 3, 10, 10), (5, 3, 3, 3), {"strides": (2, 2),
                                                            "padding": (1, 1)}),
    "1x1": ((1, 16, 6, 6), (24, 16, 1, 1), {}),
    "depthwise": ((1, 8, 7, 7), (8, 1, 3, 3), {"padding": (1, 1), "groups": 8}),
}


@pytest.mark.parametrize("const_weight", [False, True], ids=["weight_arg", "weight_const"])
@pytest.mark.parametrize("name", sorted(CONV_CASES))
def test_int8_conv2d_accumulates_in_int32_like_interpreter(name: str,
                                                           const_weight: bool) -> None:
    dshape, kshape, attrs = CONV_CASES[name]
    _build_and_compare([dshape, kshape], lambda x, w: nn.conv2d(
        x, w, out_dtype="int32", **attrs), const_weight)


@pytest.mark.parametrize("const_weight", [False, True], ids=["weight_arg", "weight_const"])
@pytest.mark.parametrize("shapes", [((3, 40), (17, 40)), ((1, 64), (16, 64)),
                                    ((8, 5), (32, 5))], ids=str)
def test_int8_dense_accumulates_in_int32_like_interpreter(shapes: Any,
                                                          const_weight: bool) -> None:
    _build_and_compare(list(shapes), lambda x, w: nn.dense(x, w, out_dtype="int32"),
                       const_weight)


def test_int8_conv2d_with_requantize_epilogue_like_interpreter() -> None:
    # the realized graph's shape: int32 bias, relu, add-half-then-shift, clip, cast to int8
    rng = seeded_rng()
    bias = rng.integers(-2000, 2000, (8, 1, 1)).astype("int32")

    def body(x: Any, w: Any) -> Any:
        acc = R.add(nn.conv2d(x, w, padding=(1, 1), out_dtype="int32"), R.Constant(bias))
        acc = R.right_shift(R.add(nn.relu(acc), P.const(64, "int32")), P.const(7, "int32"))
        return R.cast(R.clip(acc, -127, 127), "int8")

    values = [int8_values(rng, (1, 4, 8, 8)), int8_values(rng, (8, 4, 3, 3))]
    x, w = P.tvar("x", (1, 4, 8, 8), "int8"), P.tvar("w", (8, 4, 3, 3), "int8")
    mod = P.main_module([x, w], body(x, w))
    got = R.build(mod).run(*values)
    want = R.interpret(mod, *values)
    assert got.dtype == np.dtype("int8")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype, conv, dense", [
    ("int8", "conv2d_int8.x86", "dense_int8.x86"),
    ("float32", "conv2d_NCHWc.x86", "dense.x86")])
def test_int8_anchors_take_the_int8_dot_templates_and_float_ones_do_not(
        dtype: str, conv: str, dense: str) -> None:
    rng = seeded_rng()
    x = P.tvar("x", (1, 8, 6, 6), dtype)
    w = R.Constant(int8_values(rng, (16, 8, 3, 3)).astype(dtype))
    v = R.Constant(int8_values(rng, (10, 16 * 36)).astype(dtype))
    out = "int32" if dtype == "int8" else ""
    y = R.reshape(nn.conv2d(x, w, padding=(1, 1), out_dtype=out), (1, 16 * 36))
    if dtype == "int8":
        y = R.cast(R.clip(R.right_shift(y, P.const(8, "int32")), -127, 127), "int8")
    mod = P.main_module([x], nn.dense(y, v, out_dtype=out))
    lib = R.build(mod)
    assert [how for _, how in lib.group_schedules if how.endswith(".x86")] == [conv, dense]
    xv = int8_values(rng, (1, 8, 6, 6)).astype(dtype)
    if dtype == "int8":
        np.testing.assert_array_equal(lib.run(xv), R.interpret(mod, xv))


def test_int8_convs_chained_by_requantize_stay_blocked_and_match_interpreter() -> None:
    # conv -> shift, clip, cast to int8 -> conv: the int8 value between them is stored
    # NCHW[x]c, written by the first conv's output stage and read as is by the second
    rng = seeded_rng()
    x = P.tvar("x", (1, 16, 8, 8), "int8")
    w1 = R.Constant(int8_values(rng, (32, 16, 3, 3)))
    w2 = R.Constant(int8_values(rng, (32, 32, 1, 1)))

    def requantize(acc: Any) -> Any:
        return R.cast(R.clip(R.right_shift(acc, P.const(9, "int32")), -127, 127), "int8")

    mid = requantize(nn.conv2d(x, w1, padding=(1, 1), out_dtype="int32"))
    mod = P.main_module([x], requantize(nn.conv2d(mid, w2, out_dtype="int32")))
    lib = R.build(mod)
    assert [how for _, how in lib.group_schedules] == ["conv2d_int8.x86"] * 2
    assert lib.layout_changes == [("fused_conv2d_right_shift_clip_cast", "input 0",
                                   "NCHW -> NCHWc"),
                                  ("fused_conv2d_right_shift_clip_cast", "output",
                                   "NCHWc -> NCHW")]
    xv = int8_values(rng, (1, 16, 8, 8))
    np.testing.assert_array_equal(lib.run(xv), R.interpret(mod, xv))


def _int8_cnn(rng: np.random.Generator) -> Any:
    """int8 conv (3x3, pad 1) -> requantize -> flatten -> int8 dense, constant weights."""
    x = P.tvar("x", (1, 16, 8, 8), "int8")
    w = R.Constant(int8_values(rng, (32, 16, 3, 3)))
    v = R.Constant(int8_values(rng, (10, 32 * 64)))
    acc = nn.conv2d(x, w, padding=(1, 1), out_dtype="int32")
    mid = R.cast(R.clip(R.right_shift(acc, P.const(9, "int32")), -127, 127), "int8")
    return P.main_module([x], nn.dense(R.reshape(mid, (1, 32 * 64)), v, out_dtype="int32"))


def test_tuned_configs_of_a_quantized_models_int8_tasks_apply_and_stay_exact(
        tmp_path: Any) -> None:
    from autotune.extract import extract_tasks
    from tuning_logs import MeasureRecord, TuningDatabase

    rng = seeded_rng()
    mod = _int8_cnn(rng)
    tasks = [t for t, _ in extract_tasks(mod, "llvm")]
    assert [t.template for t in tasks] == ["conv2d_int8.x86", "dense_int8.x86"]
    assert {"tile_ic", "tile_oc", "tile_ow", "unroll_kw"} <= set(tasks[0].space.knobs)
    with TuningDatabase(tmp_path / "t.db") as db:
        for t in tasks:  # a config far from the fallback's
            cfg = t.space.get(t.space.size - 1)
            db.add(MeasureRecord(t.workload_key, t.template, t.target, t.device_key,
                                 cfg.to_json(), costs=(1e-4,), tuner="test"))
    lib = R.build(mod, tuning_db=tmp_path / "t.db")
    xv = int8_values(rng, (1, 16, 8, 8))
    np.testing.assert_array_equal(lib.run(xv), R.interpret(mod, xv))


@pytest.mark.slow
def test_a_quantized_models_int8_tasks_tune_on_the_measuring_runner(tmp_path: Any) -> None:
    from autotune import LocalRunner, RandomTuner, tune
    from autotune.extract import extract_tasks
    from tuning_logs import ErrorKind, TuningDatabase

    rng = seeded_rng()
    mod = _int8_cnn(rng)
    with TuningDatabase(tmp_path / "t.db") as db, LocalRunner(timeout=30) as runner:
        for task, _ in extract_tasks(mod, "llvm"):
            progress = tune(task, RandomTuner(task, seed=1), 3, db, runner, batch_size=3)
            kinds = [r.error_kind for r in db.history(task.workload_key)]
            assert progress.trials == 3 and kinds == [ErrorKind.NONE] * 3
    lib = R.build(mod, tuning_db=tmp_path / "t.db")
    xv = int8_values(rng, (1, 16, 8, 8))
    np.testing.assert_array_equal(lib.run(xv), R.interpret(mod, xv))


def test_a_saved_int8_model_loads_and_runs_bit_exact(tmp_path: Any) -> None:
    # the packed weights are int32 words of the int8 constants: saved with their own dtype
    rng = seeded_rng()
    mod = _int8_cnn(rng)
    R.build(mod).save(str(tmp_path / "m"))
    lib = R.load_compiled(str(tmp_path / "m"))
    xv = int8_values(rng, (1, 16, 8, 8))
    np.testing.assert_array_equal(lib.run(xv), R.interpret(mod, xv))


def test_an_int8_conv_for_a_gpu_takes_the_gpu_conv_templates() -> None:
    # the int8 families are the CPU's; a GPU keeps computing int8 conv2d with its own
    rng = seeded_rng()
    x = P.tvar("x", (1, 8, 6, 6), "int8")
    mod = P.main_module([x], nn.conv2d(x, R.Constant(int8_values(rng, (16, 8, 3, 3))),
                                       padding=(1, 1), out_dtype="int32"))
    lib = R.build(mod, target="cuda -sim")
    assert [how for _, how in lib.group_schedules] == ["conv2d_nchw_gemm.cuda"]
    xv = int8_values(rng, (1, 8, 6, 6))
    np.testing.assert_array_equal(lib.run(xv), R.interpret(mod, xv))
