"""Templates size themselves by the target they are given, not by the build host: an AVX2
target gets AVX2 tiles and AVX2 code on an AVX-512 machine, and the other way round."""

from __future__ import annotations

import numpy as np
import pytest

import lowering
from schedule.templates import config_space, instantiate
from tessel_target import Target

AVX2, AVX512 = "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"
DENSE = [((64, 96), "float32"), ((128, 96), "float32")]
CONV = [((1, 16, 14, 14), "float32"), ((128, 16, 3, 3), "float32")]


def _kernel(template: str, args, attrs, target: str):
    s, tensors = instantiate(template, args, attrs, target=target)
    return lowering.build(s, tensors, target=target), tensors


@pytest.mark.parametrize("template, args, attrs", [("dense.x86", DENSE, {}),
                                                   ("conv2d_NCHWc.x86", CONV, {"padding": 1})])
def test_an_avx2_and_an_avx512_target_get_different_spaces(template, args, attrs) -> None:
    a, b = config_space(template, args, attrs, AVX2), config_space(template, args, attrs, AVX512)
    assert a.target == Target.parse(AVX2) and b.target == Target.parse(AVX512)
    assert {k: len(v.entities) for k, v in a.knobs.items()} != \
        {k: len(v.entities) for k, v in b.knobs.items()}


@pytest.mark.parametrize("template, args, attrs", [("dense.x86", DENSE, {}),
                                                   ("conv2d_NCHWc.x86", CONV, {"padding": 1}),
                                                   ("injective.x86", [((4, 256), "float32")],
                                                    {"op": "relu"})])
def test_code_for_an_avx2_target_uses_no_512_bit_registers(template, args, attrs) -> None:
    k2, _ = _kernel(template, args, attrs, AVX2)
    k5, _ = _kernel(template, args, attrs, AVX512)
    assert "zmm" not in k2.source("asm") and "ymm" in k2.source("asm")
    assert "zmm" in k5.source("asm")


def test_an_avx2_kernel_runs_right_on_a_host_with_avx2(monkeypatch) -> None:
    if not {"avx2", "fma"} <= Target.parse("llvm").features:
        pytest.skip("the host has no AVX2")
    monkeypatch.setenv("TESSEL_ALLOW_FOREIGN_CPU", "1")  # haswell code on a newer host
    k, tensors = _kernel("dense.x86", DENSE, {}, AVX2)
    rng = np.random.default_rng(7)
    x = rng.standard_normal(DENSE[0][0]).astype("float32")
    w = rng.standard_normal(DENSE[1][0]).astype("float32")
    out = np.full((64, 128), np.nan, "float32")
    k(x, w, out)
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target, n, tile", [(AVX512, 1024, 64), (AVX2, 1024, 32),
                                             (AVX512, 1000, 40), (AVX2, 1000, 40 // 2)])
def test_a_batch_1_dense_gets_a_column_tile_of_several_independent_accumulators(
        target, n, tile) -> None:
    # one row: the tile's vectors are the only independent FMA chains the k loop has
    from schedule.space import FallbackConfig

    cfg = FallbackConfig(target)
    instantiate("dense.x86", [((1, 512), "float32"), ((n, 512), "float32")], {},
                target=target, cfg=cfg)
    assert cfg["tile_x"].size[-1] == tile


def test_a_batch_1_dense_with_an_odd_width_computes_x_times_w_transposed() -> None:
    k, _ = _kernel("dense.x86", [((1, 96), "float32"), ((1000, 96), "float32")], {}, "llvm")
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 96)).astype("float32")
    w = rng.standard_normal((1000, 96)).astype("float32")
    out = np.full((1, 1000), np.nan, "float32")
    k(x, w, out)
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target, tile", [(AVX512, 64), (AVX2, 32)])
def test_a_batch_1_dense_with_a_packed_weight_takes_full_vectors_past_the_last_column(
        target, tile) -> None:
    # 1000 columns: 16 tiles of 64 (the packed weight's last panel zero-padded) beat 25 of 40
    from schedule.space import FallbackConfig

    cfg = FallbackConfig(target)
    _, tensors = instantiate("dense.x86", [((1, 512), "float32"), ((1000, 512), "float32")],
                             {"weight_layout": "packed"}, target=target, cfg=cfg)
    assert cfg["tile_x"].size[-1] == tile
    assert tuple(d.value for d in tensors[1].shape) == (-(-1000 // tile), 512, tile)


def test_a_built_batch_1_dense_with_a_padded_packed_weight_matches_numpy() -> None:
    import relay_ir

    mod = relay_ir.parse("def @main(%x: Tensor[(1, 96), float32], "
                         "%w: Tensor[(1000, 96), float32]) { nn.dense(%x, %w) }")
    rng = np.random.default_rng(13)
    w = rng.standard_normal((1000, 96)).astype("float32")
    x = rng.standard_normal((1, 96)).astype("float32")
    lib = relay_ir.build(mod, params={"w": w})
    np.testing.assert_allclose(lib.run(x), x @ w.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", [AVX2, AVX512])
def test_a_batch_1_dense_with_a_padded_packed_weight_has_its_default_in_the_space(
        target) -> None:
    # so the first tuning batch measures it and a slower record never replaces it
    from autotune import Task

    t = Task("dense.x86", [((1, 512), "float32"), ((1000, 512), "float32")],
             {"weight_layout": "packed"}, target)
    default = t.default_config()
    assert default is not None and 1000 % default["tile_x"].size[-1] != 0
    assert str(t.lower(default)) == str(t.lower(None))


def test_every_padded_column_tile_of_the_space_matches_numpy() -> None:
    from schedule.templates import config_space, input_packers

    args = [((2, 24), "float32"), ((1000, 24), "float32")]
    attrs = {"weight_layout": "packed"}
    space = config_space("dense.x86", args, attrs, AVX512)
    padded = [e for e in space.knobs["tile_x"].entities if 1000 % e.size[-1]]
    assert {e.size[-1] for e in padded} == {16, 32, 48, 64}  # 1008, 1024, 1008, 1024
    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, 24)).astype("float32")
    w = rng.standard_normal((1000, 24)).astype("float32")
    for ent in padded[:: max(1, len(padded) // 4)]:
        values = {k: v.entities[0] for k, v in space.knobs.items()}
        values["tile_x"] = ent
        idx = space.index_of([space.knobs[k].entities.index(v) for k, v in values.items()])
        s, ts = instantiate("dense.x86", args, attrs, cfg=space.get(idx), target=AVX512)
        pack = input_packers("dense.x86", args, ts[:2], attrs)[1]
        k = lowering.build(s, ts, target=AVX512)
        if k.foreign:
            continue
        out = np.full((2, 1000), np.nan, "float32")
        k(x, pack(w), out)
        np.testing.assert_allclose(out, x @ w.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", [AVX2, AVX512])
@pytest.mark.parametrize("acc_cols", ["panel", "block"])
def test_a_batch_1_dense_with_accumulators_across_the_panels_matches_numpy(
        target, acc_cols, monkeypatch) -> None:
    # the default of a batch-1 dense with a packed weight reads several weight panels side
    # by side (acc_cols "block"); both values on both targets, the last panel padded
    import json

    from autotune import Task
    from schedule.templates import input_packers

    if not Target.parse(target).features <= Target.parse("llvm").features:
        pytest.skip(f"the host cannot run code for {target}")
    monkeypatch.setenv("TESSEL_ALLOW_FOREIGN_CPU", "1")
    args = [((1, 96), "float32"), ((1000, 96), "float32")]
    t = Task("dense.x86", args, {"weight_layout": "packed"}, target)
    default = t.default_config()
    assert default is not None and default["acc_cols"].val == "block"
    vecs = default["tile_x"].size[-1] // Target.parse(target).fp32_lanes
    assert 1 < default["tile_x"].size[-2] and default["tile_x"].size[-2] * vecs <= 16
    knobs = json.loads(default.to_json())["knobs"]
    cfg = t.space.from_json({"knobs": {**knobs, "acc_cols": acc_cols}})
    s, tensors = t.instantiate(cfg)
    k = lowering.build(s, tensors, target=target)
    rng = np.random.default_rng(19)
    x = rng.standard_normal((1, 96)).astype("float32")
    w = rng.standard_normal((1000, 96)).astype("float32")
    out = np.full((1, 1000), np.nan, "float32")
    k(x, input_packers("dense.x86", args, tensors[:2], t.attrs)[1](w), out)
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("template, args, attrs", [
    ("matmul.x86", [((1, 64), "float32"), ((64, 200), "float32")], {}),
    ("batch_matmul.x86", [((3, 1, 64), "float32"), ((3, 64, 96), "float32")], {}),
    ("dense.x86", [((1, 64), "float32"), ((1000, 64), "float32")], {})])
def test_every_batch_1_gemm_with_accumulators_across_the_panels_matches_numpy(
        template, args, attrs) -> None:
    # acc_cols "block" without a packed weight (the packing stage) and with a batch axis
    import json

    from autotune import Task

    t = Task(template, args, attrs, "llvm")
    knobs = json.loads(t.default_config().to_json())["knobs"]
    cfg = t.space.from_json({"knobs": {**knobs, "acc_cols": "block"}})
    s, tensors = t.instantiate(cfg)
    k = lowering.build(s, tensors, target="llvm")
    rng = np.random.default_rng(23)
    a, b = (rng.standard_normal(shape).astype("float32") for shape, _ in args)
    out = np.full([int(d.value) for d in tensors[-1].shape], np.nan, "float32")
    k(a, b, out)
    want = a @ b.T if template == "dense.x86" else a @ b
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
