"""conv2d_NCHWc.x86's micro-kernel space: the register tile (tile_oh x tile_ow), where the
accumulators live (acc_scope), the strided 1x1 layout stage, on AVX2 and AVX-512 targets
by their flags. Every built kernel is checked against numpy on fresh random inputs where
the host can run its code; where it cannot, its assembly is checked instead."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import lowering
from autotune.task import Task
from lowering.kernel import _foreign_cpu
from schedule.templates import config_space, input_packers, instantiate
from tests.rng import seeded_rng
from tests.schedule.templates.refs import blocked, close, conv2d_nchw, rand, unblocked

AVX2, AVX512 = "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512"
TARGETS = [AVX2, AVX512]


def _with(space: Any, target: str, args: list, attrs: dict, **knobs: Any) -> Any:
    """The point of `space` that is the template's default but for `knobs`."""
    import json

    base = Task("conv2d_NCHWc.x86", args, attrs, target).default_config()
    assert base is not None, "the default must be a point of the space"
    values = json.loads(base.to_json())["knobs"]
    values.update(knobs)
    return space.from_json({"knobs": values})


def _check(target: str, args: list, attrs: dict, cfg: Any, x: np.ndarray, w: np.ndarray,
           want: np.ndarray) -> None:
    """Build at `cfg` for `target`; run and compare where the host runs its code."""
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, cfg=cfg, target=target)
    k = lowering.build(s, ts, target=target)
    if _foreign_cpu(target):
        assert ("zmm" in k.source("asm")) == (target == AVX512)
        return
    packers = input_packers("conv2d_NCHWc.x86", args, ts[:2], attrs)
    wk = packers[1](w) if 1 in packers else w
    out = np.full([int(d.value) for d in ts[-1].shape], np.nan, "float32")
    k(x, wk, out)
    close(unblocked(out) if out.ndim == 5 else out, want)


# data (1, 32, 8, 8), 3x3 pad 1: OH = 8 offers 1, 2 and 4 register rows
LOGICAL = [((1, 32, 8, 8), "float32"), ((32, 32, 3, 3), "float32")]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("scope", ["tile", "row", "plane"])
@pytest.mark.parametrize("rows", [1, 2, 4])
def test_each_register_tile_and_accumulator_scope_equals_numpy_in_model_layouts(
        target: str, scope: str, rows: int) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 32, 8, 8)), rand(rng, (32, 32, 3, 3))
    space = config_space("conv2d_NCHWc.x86", LOGICAL, {"padding": 1}, target)
    assert {e.size[-1] for e in space.knobs["tile_oh"].entities} == {1, 2, 4}
    assert space.knobs["acc_scope"].entities[0].val == "tile"
    cfg = _with(space, target, LOGICAL, {"padding": 1}, tile_oh=[-1, rows], acc_scope=scope,
                tile_ow=[-1, 2])
    block = 16 if target == AVX512 else 8
    args = [((1, 32 // block, 8, 8, block), "float32"), ((32, 32, 3, 3), "float32")]
    attrs = {"padding": 1, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
             "out_layout": "NCHWc"}
    _check(target, args, attrs, cfg, blocked(x, block), w, conv2d_nchw(x, w, 1, 1))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("scope", ["tile", "row", "plane"])
def test_nchw_in_and_out_equals_numpy_at_each_scope_with_a_two_row_tile(
        target: str, scope: str) -> None:
    # the output stage unpacks along the columns (contiguous NCHW stores)
    rng = seeded_rng()
    x, w = rand(rng, (1, 32, 8, 8)), rand(rng, (32, 32, 3, 3))
    space = config_space("conv2d_NCHWc.x86", LOGICAL, {"padding": 1}, target)
    cfg = _with(space, target, LOGICAL, {"padding": 1}, tile_oh=[-1, 2], acc_scope=scope)
    _check(target, LOGICAL, {"padding": 1}, cfg, x, w, conv2d_nchw(x, w, 1, 1))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("scope", ["tile", "row", "plane"])
@pytest.mark.parametrize("layout", ["NCHW", "NCHWc"])
def test_rows_outside_the_oc_chunks_equal_numpy(target: str, scope: str, layout: str) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 32, 8, 8)), rand(rng, (32, 32, 3, 3))
    space = config_space("conv2d_NCHWc.x86", LOGICAL, {"padding": 1}, target)
    cfg = _with(space, target, LOGICAL, {"padding": 1}, loop_order="rows_oc",
                acc_scope=scope, tile_oc=[-1, 16 if target == AVX512 else 8])
    attrs = {"padding": 1, "out_layout": layout}
    _check(target, LOGICAL, attrs, cfg, x, w, conv2d_nchw(x, w, 1, 1))


@pytest.mark.parametrize("k, hw, co, out, order", [(1, 56, 64, "NCHWc", "rows_oc"),
                                                  (1, 56, 64, "NCHW", "oc_rows"),
                                                  (1, 14, 256, "NCHWc", "oc_rows"),
                                                  (3, 56, 64, "NCHWc", "rows_oc"),
                                                  (3, 28, 128, "NCHWc", "rows_oc"),
                                                  (3, 14, 256, "NCHWc", "oc_rows")])
def test_a_conv_with_more_pixels_than_channels_defaults_to_rows_outside(
        k: int, hw: int, co: int, out: str, order: str) -> None:
    # (writing the blocked layout; an NCHW output keeps the chunks outside; 3x3 convs too:
    # each thread then reads the rows the 1x1 conv before it wrote on the same thread)
    from schedule.space import FallbackConfig

    args = [((1, 64, hw, hw), "float32"), ((co, 64, k, k), "float32")]
    cfg = FallbackConfig(AVX512)
    instantiate("conv2d_NCHWc.x86", args, {"padding": k // 2, "out_layout": out}, cfg=cfg,
                target=AVX512)
    assert cfg["loop_order"].val == order


@pytest.mark.parametrize("target", TARGETS)
def test_random_points_of_the_space_equal_numpy(target: str) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 32, 8, 8)), rand(rng, (32, 32, 3, 3))
    space = config_space("conv2d_NCHWc.x86", LOGICAL, {"padding": 1}, target)
    for index in space.sample(rng, 3):
        _check(target, LOGICAL, {"padding": 1}, space.get(index), x, w,
               conv2d_nchw(x, w, 1, 1))


@pytest.mark.parametrize("layout", ["NCHW", "NCHWxc"])
def test_a_strided_1x1_conv_copies_only_the_pixels_it_reads(layout: str) -> None:
    from schedule.templates.common import walk_ops

    rng = seeded_rng()
    x, w = rand(rng, (1, 32, 12, 12)), rand(rng, (48, 32, 1, 1))
    logical = [((1, 32, 12, 12), "float32"), ((48, 32, 1, 1), "float32")]
    if layout == "NCHW":
        args, xin = logical, x
    else:  # blocked by 8, re-blocked to the config's 16 by the layout stage
        args, xin = [((1, 4, 12, 12, 8), "float32"), ((48, 32, 1, 1), "float32")], blocked(x, 8)
    attrs = {"strides": 2, "data_layout": layout}
    space = config_space("conv2d_NCHWc.x86", logical, {"strides": 2}, AVX512)
    cfg = _with(space, AVX512, logical, {"strides": 2}, tile_ic=[-1, 16])
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, cfg=cfg, target=AVX512)
    stage = [op for op in walk_ops([ts[-1]]) if op.name == "data_vec"]
    assert [int(d.value) for d in stage[0].output(0).shape] == [1, 2, 6, 6, 16]  # of 12x12
    _check(AVX512, args, attrs, cfg, xin, w, conv2d_nchw(x, w, stride=2))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("hw, k, c, co, scope, ic_bn", [
    (7, 3, 64, 64, "plane", 4), (14, 3, 64, 64, "tile", None), (56, 3, 64, 64, "tile", None),
    # a 1x1 conv: by plane where the oc chunk's weights outgrow L1 (512 x 32 floats), or
    # where AVX2's register tile (7 columns x 1 vector) has fewer than 8 accumulators,
    # if it has 8 oc chunks or more to spread over the threads
    (7, 1, 64, 256, {AVX2: "plane", AVX512: "tile"}, None), (7, 1, 512, 256, "plane", None),
    (7, 1, 512, 64, {AVX2: "plane", AVX512: "tile"}, None), (14, 1, 512, 256, "tile", None)])
def test_the_default_is_a_point_of_the_space_and_a_small_output_accumulates_by_plane(
        target: str, hw: int, k: int, c: int, co: int, scope: Any, ic_bn: int | None) -> None:
    args = [((1, c, hw, hw), "float32"), ((co, c, k, k), "float32")]
    task = Task("conv2d_NCHWc.x86", args, {"padding": k // 2}, target)
    default = task.default_config()
    assert default is not None
    assert default["acc_scope"].val == (scope[target] if isinstance(scope, dict) else scope)
    assert ic_bn is None or default["tile_ic"].size[-1] == ic_bn
    assert "plane" in [e.val for e in task.space.knobs["acc_scope"].entities] or hw > 14


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c, hw, co, stride", [(512, 7, 256, 1), (256, 14, 64, 2)])
def test_a_small_1x1_conv_by_plane_equals_numpy_in_model_layouts(target: str, c: int, hw: int,
                                                                  co: int, stride: int) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, c, hw, hw)), rand(rng, (co, c, 1, 1))
    block = 16 if target == AVX512 else 8
    logical = [((1, c, hw, hw), "float32"), ((co, c, 1, 1), "float32")]
    args = [((1, c // block, hw, hw, block), "float32"), logical[1]]
    attrs = {"strides": stride, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
             "out_layout": "NCHWc"}
    cfg = Task("conv2d_NCHWc.x86", args, attrs, target).default_config()
    assert cfg is not None
    assert cfg["acc_scope"].val == ("plane" if c == 512 or target == AVX2 else "tile")
    _check(target, args, attrs, cfg, blocked(x, block), w, conv2d_nchw(x, w, stride=stride))


@pytest.mark.parametrize("target, zmm", [(AVX2, False), (AVX512, True)])
def test_the_default_micro_kernel_keeps_its_accumulators_in_registers(target: str,
                                                                      zmm: bool) -> None:
    # the conv alone (data blocked as the model stores it, no padding: no layout stage);
    # tile scope has no buffer in memory, so a vector load or store on the stack is a spill
    block = 16 if zmm else 8
    args = [((1, 64 // block, 58, 58, block), "float32"), ((64, 64, 3, 3), "float32")]
    attrs = {"data_layout": "NCHWxc", "kernel_layout": "OIHWio", "out_layout": "NCHWc"}
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, target=target)
    text = lowering.build(s, ts, target=target).source("asm")
    reg = "zmm" if zmm else "ymm"
    # the function that holds the FMAs (the parallel body), not the launcher's records
    bodies = re.split(r"\n(?=[A-Za-z_][\w.$]*:\n)", text)
    asm = max(bodies, key=lambda b: b.count("vfmadd"))
    fmas = re.findall(rf"vfmadd\w+\s+%{reg}\d+, %{reg}\d+, %{reg}\d+", asm)
    assert len(fmas) >= 8, "the micro-kernel lost its register tile"
    spills = re.findall(rf"vmov\w+\s+[^\n]*%{reg}\d+[^\n]*\(%rsp\)|vmov\w+\s+-?\d*\(%rsp\)"
                        rf"[^\n]*%{reg}", asm)
    assert not spills, spills[:4]


FP16_CHAIN = """
def @main(%x: Tensor[(1, 16, 8, 8), float16], %w: Tensor[(32, 16, 3, 3), float16],
          %v: Tensor[(32, 32, 3, 3), float16]) {
  nn.conv2d(nn.relu(nn.conv2d(%x, %w, padding=[1, 1])), %v, padding=[1, 1])
}"""


@pytest.mark.parametrize("out_layout", ["NCHW", "NCHWc"])
def test_a_float16_conv_sums_in_float32_and_rounds_once(out_layout: str) -> None:
    rng = seeded_rng()
    x = rng.standard_normal((1, 16, 8, 8)).astype("float16")
    w = rng.standard_normal((32, 16, 3, 3)).astype("float16")
    args = [((1, 16, 8, 8), "float16"), ((32, 16, 3, 3), "float16")]
    attrs = {"padding": 1, "out_layout": out_layout}
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs)
    assert ts[-1].dtype == "float16"
    out = np.zeros([int(d.value) for d in ts[-1].shape], "float16")
    lowering.build(s, ts)(x, w, out)
    got = (unblocked(out) if out.ndim == 5 else out).astype(np.float64)
    exact = conv2d_nchw(x.astype(np.float64), w.astype(np.float64), 1, 1)
    # one rounding of the exact sum: half a float16 ulp (float32 sums add a hair); a
    # float16 accumulator was off by 0.16, ten ulps
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got - exact) <= ulp), np.max(np.abs(got - exact) / ulp)


def test_a_float16_conv_chain_equals_the_interpreter() -> None:
    import relay_ir

    mod = relay_ir.parse(FP16_CHAIN)
    rng = seeded_rng()
    ins = [rng.standard_normal(s).astype("float16")
           for s in ((1, 16, 8, 8), (32, 16, 3, 3), (32, 32, 3, 3))]
    lib = relay_ir.build(mod, target="llvm")
    got = lib.run(*ins).astype(np.float64)
    want = relay_ir.interpret(mod, *ins).astype(np.float64)
    # both round each conv once; a first-conv value a float32 sum rounds the other way
    # moves the second by an ulp or two of its largest value (a float16 accumulator: 6-14)
    ulp = float(np.spacing(np.float16(np.max(np.abs(want)))))
    assert np.max(np.abs(got - want)) <= 2 * ulp, np.max(np.abs(got - want)) / ulp


def _parallel_stages(func: Any) -> set[str]:
    """Names of the buffers stored inside a parallel loop of `func`."""
    from lowering import ir as lir

    loops: list[Any] = []
    lir.post_order_visit_stmt(func.body, lambda st: loops.append(st) if isinstance(
        st, lir.For) and st.kind == lir.ForKind.PARALLEL else None)
    found: set[str] = set()
    for loop in loops:
        lir.post_order_visit_stmt(loop.body, lambda st: found.add(st.buffer.name)
                                  if isinstance(st, lir.BufferStore) else None)
    return found


@pytest.mark.parametrize("hw, parallel", [(56, True), (4, False)])
def test_a_padding_stage_is_parallel_from_16k_elements(hw: int, parallel: bool,
                                                       monkeypatch: Any) -> None:
    # ResNet-18's 64@56 3x3 pads 64 x 58 x 58 values per call: serial, that copy cost about
    # 5% of the model on 2 threads; a 64 x 6 x 6 pad is cheaper than a parallel launch (the
    # copy, where blocked data is not read through a guard)
    import schedule.templates.x86_conv2d_nchwc as template

    monkeypatch.setattr(template, "PAD_GUARD", False)
    rng = seeded_rng()
    args = [((1, 4, hw, hw, 16), "float32"), ((64, 64, 3, 3), "float32")]
    attrs = {"padding": 1, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
             "out_layout": "NCHWc"}
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, target=AVX512)
    func = lowering.lower(s, ts)
    pads = {n for n in _parallel_stages(func) if "pad" in n}
    assert bool(pads) == parallel, _parallel_stages(func)
    if _foreign_cpu(AVX512):
        return
    x, w = rand(rng, (1, 64, hw, hw)), rand(rng, (64, 64, 3, 3))
    k = lowering.build(s, ts, target=AVX512)
    wk = input_packers("conv2d_NCHWc.x86", args, ts[:2], attrs)[1](w)
    out = np.full([int(d.value) for d in ts[-1].shape], np.nan, "float32")
    k(blocked(x, 16), wk, out)
    close(unblocked(out), conv2d_nchw(x, w, 1, 1))


# 64 output channels in model layouts: two or more oc chunks on both targets
MULTI_ATTRS = {"padding": 1, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
               "out_layout": "NCHWc"}


def _multi_args(target: str) -> list:
    block = 16 if AVX512 in target else 8
    return [((1, 32 // block, 8, 8, block), "float32"), ((64, 32, 3, 3), "float32")]


@pytest.fixture
def weight_prefetch(monkeypatch: Any) -> None:
    """The weight prefetch on (off by default: see PREFETCH_WEIGHTS in the template)."""
    import schedule.templates.x86_conv2d_nchwc as template

    monkeypatch.setattr(template, "PREFETCH_WEIGHTS", True)


@pytest.fixture
def no_guard(monkeypatch: Any) -> None:
    """The padded copy for blocked data too (PAD_GUARD off: the A/B switch)."""
    import schedule.templates.x86_conv2d_nchwc as template

    monkeypatch.setattr(template, "PAD_GUARD", False)


def test_the_default_reads_blocked_data_through_the_guard_and_does_not_prefetch() -> None:
    # 256 output pixels: more than a 3x3 conv prefetches its weights for
    # (PREFETCH_TILE_PIXELS); PREFETCH_WEIGHTS, for every conv, stays off
    args = [((1, 2, 16, 16, 16), "float32"), ((64, 32, 3, 3), "float32")]
    s, ts = instantiate("conv2d_NCHWc.x86", args, MULTI_ATTRS, target=AVX512)
    text = str(lowering.lower(s, ts))
    assert "prefetch(" not in text and "data_pad" not in text, text


@pytest.mark.usefixtures("weight_prefetch")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("scope", ["tile", "row", "plane"])
def test_the_prefetch_fetches_the_next_oc_chunk_spread_over_rows_and_equals_numpy(
        target: str, scope: str) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 32, 8, 8)), rand(rng, (64, 32, 3, 3))
    args = _multi_args(target)
    space = config_space("conv2d_NCHWc.x86", args, MULTI_ATTRS, target)
    cfg = _with(space, target, args, MULTI_ATTRS, acc_scope=scope)
    s, ts = instantiate("conv2d_NCHWc.x86", args, MULTI_ATTRS, cfg=cfg, target=target)
    text = str(lowering.lower(s, ts))
    chunks = 64 // int(cfg["tile_oc"].size[-1])
    # the next chunk, clamped to the last (with 2 chunks the simplifier folds it to 1)
    nxt = "1" if chunks == 2 else rf"min\(\(.* \+ 1\), {chunks - 1}\)"
    assert re.search(rf"prefetch\(kernel\[{nxt}, ", text), text
    # each of the 8 rows issues its share: a guard on the step index modulo 8
    assert re.search(r"if \(\(floormod\(.*, 8\) == ", text), text
    block = args[0][0][-1]
    _check(target, args, MULTI_ATTRS, cfg, blocked(x, block), w, conv2d_nchw(x, w, 1, 1))


@pytest.mark.usefixtures("weight_prefetch")
@pytest.mark.parametrize("target, co, loop_order, prefetch", [
    (AVX512, 64, "oc_rows", True),
    (AVX512 + " -l2-kib=64", 64, "oc_rows", False),  # 2 chunks of 36 KiB > 3/4 of L2
    (AVX2 + " -l2-kib=32", 64, "oc_rows", False),  # 2 chunks of 18 KiB > 24 KiB
    (AVX512, 32, "oc_rows", False),  # one oc chunk: no next one
    (AVX512, 64, "rows_oc", True),  # the next chunk is the next parallel iteration
])
def test_the_prefetch_is_left_out_where_it_cannot_help(target: str, co: int, loop_order: str,
                                                       prefetch: bool) -> None:
    args = _multi_args(target)
    args[1] = ((co, 32, 3, 3), "float32")
    space = config_space("conv2d_NCHWc.x86", args, MULTI_ATTRS, target)
    cfg = _with(space, target, args, MULTI_ATTRS, acc_scope="tile", loop_order=loop_order)
    s, ts = instantiate("conv2d_NCHWc.x86", args, MULTI_ATTRS, cfg=cfg, target=target)
    assert ("prefetch(" in str(lowering.lower(s, ts))) == prefetch


@pytest.mark.usefixtures("weight_prefetch")
@pytest.mark.parametrize("target", TARGETS)
def test_a_step_of_few_fmas_is_not_given_a_prefetch(target: str) -> None:
    # one input channel by one column a step (tuned AVX2 ResNet-18 confirmed such configs):
    # the step's guard and prefetch would outweigh its 2-4 FMAs
    args = _multi_args(target)
    space = config_space("conv2d_NCHWc.x86", args, MULTI_ATTRS, target)
    few = _with(space, target, args, MULTI_ATTRS, acc_scope="tile", tile_ic=[-1, 1],
                tile_ow=[-1, 1])
    s, ts = instantiate("conv2d_NCHWc.x86", args, MULTI_ATTRS, cfg=few, target=target)
    assert "prefetch(" not in str(lowering.lower(s, ts))
    default = _with(space, target, args, MULTI_ATTRS, acc_scope="tile")
    s, ts = instantiate("conv2d_NCHWc.x86", args, MULTI_ATTRS, cfg=default, target=target)
    assert "prefetch(" in str(lowering.lower(s, ts))


# a 1x1 conv in model layouts with more output channels than pixels (the oc chunks outside
# the rows), data blocked as ResNet-50's convs hand it on: 32 channels (AVX-512: a 32 x 32
# block slice is 64 lines counted exactly, a block a step) or 8 (AVX2: a block a step)
ONE_BY_ONE_ATTRS = {"padding": 0, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
                    "out_layout": "NCHWc"}


def _one_by_one_args(target: str) -> list:
    block = 32 if AVX512 in target else 8
    return [((1, 64 // block, 7, 7, block), "float32"), ((128, 64, 1, 1), "float32")]


@pytest.mark.parametrize("target", TARGETS)
def test_a_1x1_conv_prefetches_the_next_chunks_weights_by_default_and_equals_numpy(
        target: str) -> None:
    # (PREFETCH_WEIGHTS, for every conv, stays off: only the 1x1 convs' weights come in
    # bursts worth spreading)
    import schedule.templates.x86_conv2d_nchwc as template

    assert not template.PREFETCH_WEIGHTS and template.PREFETCH_1X1_WEIGHTS
    rng = seeded_rng()
    x, w = rand(rng, (1, 64, 7, 7)), rand(rng, (128, 64, 1, 1))
    args = _one_by_one_args(target)
    s, ts = instantiate("conv2d_NCHWc.x86", args, ONE_BY_ONE_ATTRS, target=target)
    text = str(lowering.lower(s, ts))
    assert re.search(r"prefetch\(kernel\[min\(\(.* \+ 1\), \d+\), ", text), text
    # spread over 7 rows: the step index modulo 7 (or the block, when fewer) is the row's
    assert re.search(r"if \(\(floormod\(.*, 7\) == |if \(\(.* == floormod\(.*, 7\)\)\)",
                     text), text
    _check(target, args, ONE_BY_ONE_ATTRS, None, blocked(x, args[0][0][-1]), w,
           conv2d_nchw(x, w, 1, 0))


def test_an_avx512_1x1_conv_prefetches_four_channels_a_step_their_8_lines_exactly(
        monkeypatch: Any) -> None:
    import schedule.templates.x86_conv2d_nchwc as template

    def lowered() -> str:
        s, ts = instantiate("conv2d_NCHWc.x86", args, ONE_BY_ONE_ATTRS, target=AVX512)
        return str(lowering.lower(s, ts))

    args = _one_by_one_args(AVX512)
    # a 32 x 32 block slice is 64 lines: too big a burst for one step (PREFETCH_PER_BLOCK),
    # so 4 input channels a step, 8 lines under one guard on the 4-channel group
    text = lowered()
    assert re.search(r"if \(\(floormod\(\(ic_outer \+ ic_inner\.outer\), 7\) == ", text), text
    assert text.count("prefetch(") == 8, text
    assert "kernel[min((floordiv(n.oc.fused.h.outer.fused, 7) + 1), 3), ic_outer, 0, 0, " \
        "((ic_inner.outer * 4) + 3), 16]" in text, text
    # one input channel a step: its 2 lines, no third for a straddle (the weights are
    # packed on a line)
    monkeypatch.setattr(template, "PREFETCH_GROUPED", False)
    text = lowered()
    assert re.search(r"if \(\(floormod\(\(\(ic_outer \* \d+\) \+ ic_inner\), 7\)", text), text
    assert text.count("prefetch(") == 2, text
    # a block a step: its 64 lines counted exactly, at most what one step may prefetch
    monkeypatch.setattr(template, "PREFETCH_PER_BLOCK", True)
    text = lowered()
    assert re.search(r"if \(\(ic_outer == floormod\(", text), text
    assert text.count("prefetch(") == 64, text


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("scope", ["tile", "row"])
def test_a_1x1_conv_in_the_rows_oc_order_prefetches_the_next_chunk_over_its_tiles(
        target: str, scope: str, monkeypatch: Any) -> None:
    # rows outside, chunks inside (tuned ResNet-50 1x1 convs): the next chunk is the next
    # parallel iteration; each (row, chunk) iteration's 2 tiles of 7 columns share it
    import schedule.templates.x86_conv2d_nchwc as template

    rng = seeded_rng()
    x, w = rand(rng, (1, 64, 4, 14)), rand(rng, (128, 64, 1, 1))
    block = 32 if AVX512 in target else 8
    args = [((1, 64 // block, 4, 14, block), "float32"), ((128, 64, 1, 1), "float32")]
    space = config_space("conv2d_NCHWc.x86", args, ONE_BY_ONE_ATTRS, target)
    cfg = _with(space, target, args, ONE_BY_ONE_ATTRS, acc_scope=scope, loop_order="rows_oc",
                tile_ow=[-1, 7])
    s, ts = instantiate("conv2d_NCHWc.x86", args, ONE_BY_ONE_ATTRS, cfg=cfg, target=target)
    text = str(lowering.lower(s, ts))
    chunks = 128 // int(cfg["tile_oc"].size[-1])
    fused = r"n\.h\.outer\.fused\.oc\.fused"
    assert re.search(rf"prefetch\(kernel\[min\(\(floormod\({fused}, {chunks}\) \+ 1\), "
                     rf"{chunks - 1}\), ", text), text
    assert re.search(r"== w\.outer\)\) \{", text), text  # the tiles take turns
    _check(target, args, ONE_BY_ONE_ATTRS, cfg, blocked(x, block), w, conv2d_nchw(x, w, 1, 0))
    monkeypatch.setattr(template, "PREFETCH_ROWS_OC", False)
    s, ts = instantiate("conv2d_NCHWc.x86", args, ONE_BY_ONE_ATTRS, cfg=cfg, target=target)
    assert "prefetch(" not in str(lowering.lower(s, ts))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("switch", ["PREFETCH_GROUPED", "PREFETCH_PER_BLOCK"])
def test_a_1x1_conv_with_each_prefetch_step_equals_numpy(target: str, switch: str,
                                                         monkeypatch: Any) -> None:
    import schedule.templates.x86_conv2d_nchwc as template

    monkeypatch.setattr(template, switch, not getattr(template, switch))
    rng = seeded_rng()
    x, w = rand(rng, (1, 64, 7, 7)), rand(rng, (128, 64, 1, 1))
    args = _one_by_one_args(target)
    s, ts = instantiate("conv2d_NCHWc.x86", args, ONE_BY_ONE_ATTRS, target=target)
    assert "prefetch(" in str(lowering.lower(s, ts))
    _check(target, args, ONE_BY_ONE_ATTRS, None, blocked(x, args[0][0][-1]), w,
           conv2d_nchw(x, w, 1, 0))


@pytest.mark.parametrize("target", TARGETS)
def test_a_1x1_conv_without_the_switch_or_with_few_fmas_a_step_does_not_prefetch(
        target: str, monkeypatch: Any) -> None:
    import schedule.templates.x86_conv2d_nchwc as template

    args = _one_by_one_args(target)
    space = config_space("conv2d_NCHWc.x86", args, ONE_BY_ONE_ATTRS, target)
    # one input channel by one column: 1-2 FMAs a step
    few = _with(space, target, args, ONE_BY_ONE_ATTRS, tile_ic=[-1, 1], tile_ow=[-1, 1])
    s, ts = instantiate("conv2d_NCHWc.x86", args, ONE_BY_ONE_ATTRS, cfg=few, target=target)
    assert "prefetch(" not in str(lowering.lower(s, ts))
    monkeypatch.setattr(template, "PREFETCH_1X1_WEIGHTS", False)
    s, ts = instantiate("conv2d_NCHWc.x86", args, ONE_BY_ONE_ATTRS, target=target)
    assert "prefetch(" not in str(lowering.lower(s, ts))


# a 3x3 conv with a 7x7 output in model layouts, as ResNet-18's 256@14 -> 512 stride 2
# and 512@7 3x3 (scaled down): the default accumulates a plane, in 4 oc chunks or more
PLANE_ATTRS = {"padding": 1, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
               "out_layout": "NCHWc"}


def _plane_args(target: str, hw: int = 7) -> list:
    block = 16 if AVX512 in target else 8
    return [((1, 64 // block, hw, hw, block), "float32"), ((128, 64, 3, 3), "float32")]


def _plane_lowered(target: str, args: list, attrs: dict, **knobs: Any) -> tuple[Any, str]:
    """The default config but for `knobs` (a plane at 7x7, a tile at 14x14) and its
    lowered text."""
    space = config_space("conv2d_NCHWc.x86", args, attrs, target)
    cfg = _with(space, target, args, attrs, **knobs)
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, cfg=cfg, target=target)
    return cfg, str(lowering.lower(s, ts))


@pytest.mark.parametrize("hw, stride", [(7, 1), (14, 2)])
def test_a_7x7_plane_3x3_conv_prefetches_the_next_chunks_weights_and_equals_numpy(
        hw: int, stride: int) -> None:
    # its weights serve 49 pixels each and stream from memory in a model
    # (PREFETCH_PLANE_WEIGHTS); the next chunk's slice of each ic block is spread over
    # the plane's 7 tile rows, a (kh, kw) step of 4 channels x 7 columns x 2 vectors each
    rng = seeded_rng()
    x, w = rand(rng, (1, 64, hw, hw)), rand(rng, (128, 64, 3, 3))
    args = _plane_args(AVX512, hw)
    attrs = {**PLANE_ATTRS, "strides": stride}
    cfg, text = _plane_lowered(AVX512, args, attrs)
    assert cfg["acc_scope"].val == "plane"
    chunks = 128 // int(cfg["tile_oc"].size[-1])
    assert re.search(rf"prefetch\(kernel\[min\(\(n\.oc\.fused \+ 1\), {chunks - 1}\), ",
                     text), text
    assert re.search(r"if \(\(floormod\(.*, 7\) == h\.outer\)\)", text), text
    _check(AVX512, args, attrs, cfg, blocked(x, 16), w, conv2d_nchw(x, w, stride, 1))


def test_a_7x7_plane_in_avx2_code_keeps_its_28_fma_steps_without_prefetch(
        monkeypatch: Any) -> None:
    # AVX2's default plane tile is 7 columns x 1 vector of 4 channels a step: under
    # MIN_PREFETCH_STEP_FMAS_PLANE, so AVX2 code is as before; with the bound lowered it
    # prefetches and still equals numpy
    import schedule.templates.x86_conv2d_nchwc as template

    rng = seeded_rng()
    x, w = rand(rng, (1, 64, 7, 7)), rand(rng, (128, 64, 3, 3))
    args = _plane_args(AVX2)
    cfg, text = _plane_lowered(AVX2, args, PLANE_ATTRS)
    assert cfg["acc_scope"].val == "plane" and "prefetch(" not in text
    monkeypatch.setattr(template, "MIN_PREFETCH_STEP_FMAS_PLANE", 28)
    cfg, text = _plane_lowered(AVX2, args, PLANE_ATTRS)
    assert "prefetch(" in text
    _check(AVX2, args, PLANE_ATTRS, cfg, blocked(x, 8), w, conv2d_nchw(x, w, 1, 1))


def test_a_3x3_plane_does_not_prefetch_with_the_switch_off_few_fmas_a_step_or_14x14(
        monkeypatch: Any) -> None:
    import schedule.templates.x86_conv2d_nchwc as template

    def prefetches(args: list, **knobs: Any) -> bool:
        return "prefetch(" in _plane_lowered(AVX512, args, PLANE_ATTRS, acc_scope="plane",
                                             **knobs)[1]

    args = _plane_args(AVX512)
    assert prefetches(args)
    # one input channel by one column: 2 FMAs a step (tuned 512@7 planes in final.db)
    assert not prefetches(args, tile_ic=[-1, 1], tile_ow=[-1, 1])
    # 196 pixels: each weight serves 4x as many (measured slower beside the tile scope)
    assert not prefetches(_plane_args(AVX512, 14))
    monkeypatch.setattr(template, "PREFETCH_PLANE_WEIGHTS", False)
    assert not prefetches(args)


def test_a_7x7_plane_whose_two_chunks_outgrow_the_targets_l2_does_not_prefetch() -> None:
    # ResNet-18's 256@14 -> 512 stride 2: two chunks of 288 KiB fit 3/4 of a 1 MiB L2,
    # not of 512 KiB
    args = [((1, 16, 14, 14, 16), "float32"), ((512, 256, 3, 3), "float32")]
    attrs = {**PLANE_ATTRS, "strides": 2}
    for target, prefetch in ((AVX512, True), (AVX512 + " -l2-kib=512", False)):
        s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, target=target)
        assert ("prefetch(" in str(lowering.lower(s, ts))) == prefetch, target


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("hw, stride", [(14, 1), (28, 2)])
def test_a_14x14_3x3_conv_keeps_a_tile_of_16_accumulators_prefetches_and_equals_numpy(
        target: str, hw: int, stride: int, monkeypatch: Any) -> None:
    # ResNet-50's 256@14 3x3 (scaled down): the fallback's tile is 7 columns (x 2 vectors
    # on AVX-512, not 14 x 2: the prefetch's branches made LLVM spill 28 accumulators;
    # x 1 vector by 2 rows on AVX2, ROWS_FOR_ACCUMULATORS), and the next chunk's weights
    # are spread over the 14 rows' tiles (PREFETCH_TILE_WEIGHTS).
    # Scaled down it has more pixels than output channels, which would take it to the
    # rows_oc order (ROWS_OUTER_WITH_TAPS); ResNet's 256@14 has fewer and keeps oc_rows
    import schedule.templates.x86_conv2d_nchwc as template

    monkeypatch.setattr(template, "ROWS_OUTER_WITH_TAPS", False)
    rng = seeded_rng()
    x, w = rand(rng, (1, 64, hw, hw)), rand(rng, (128, 64, 3, 3))
    args = _plane_args(target, hw)
    attrs = {**PLANE_ATTRS, "strides": stride}
    cfg, text = _plane_lowered(target, args, attrs)
    rows = int(cfg["tile_oh"].size[-1])
    assert cfg["acc_scope"].val == "tile" and int(cfg["tile_ow"].size[-1]) == 7
    assert rows == (2 if target == AVX2 else 1)
    chunks, tile_rows = 128 // int(cfg["tile_oc"].size[-1]), 14 // rows
    assert re.search(rf"prefetch\(kernel\[min\(\(floordiv\(.*, {tile_rows}\) \+ 1\), "
                     rf"{chunks - 1}\), ", text), text
    assert re.search(rf"if \(\(floormod\(.*, {tile_rows}\) == floormod\(", text), text
    _check(target, args, attrs, cfg, blocked(x, args[0][0][-1]), w,
           conv2d_nchw(x, w, stride, 1))


@pytest.mark.parametrize("target, hw, k, rows", [
    (AVX2, 14, 1, 2), (AVX2, 14, 3, 2), (AVX2, 28, 1, 1), (AVX2, 7, 1, 1),
    (AVX512, 14, 1, 1), (AVX512, 14, 3, 1)])
def test_the_default_tile_takes_two_rows_where_one_rows_tile_has_fewer_than_8_accumulators(
        target: str, hw: int, k: int, rows: int, monkeypatch: Any) -> None:
    # AVX2 at 14x14: 7 columns x 1 vector in one row, 2 x 7 in two (ROWS_FOR_ACCUMULATORS);
    # at 28x28 its 4 columns x 2 vectors are 8 already, 7x7 has no even row count, and
    # AVX-512's 14x14 tile is 7 x 2 vectors
    import schedule.templates.x86_conv2d_nchwc as template

    args = [((1, 256, hw, hw), "float32"), ((256, 256, k, k), "float32")]
    task = Task("conv2d_NCHWc.x86", args, {"padding": k // 2}, target)
    cfg = task.default_config()
    assert cfg is not None
    vecs = max(1, int(cfg["tile_oc"].size[-1]) // (8 if target == AVX2 else 16))
    assert int(cfg["tile_oh"].size[-1]) == rows
    assert rows * int(cfg["tile_ow"].size[-1]) * vecs >= 8 or hw == 7
    monkeypatch.setattr(template, "ROWS_FOR_ACCUMULATORS", False)
    off = Task("conv2d_NCHWc.x86", args, {"padding": k // 2}, target).default_config()
    assert int(off["tile_oh"].size[-1]) == 1


def test_a_14x14_avx2_conv_with_a_two_row_tile_equals_numpy_in_model_layouts() -> None:
    # two rows drop the padding guard for a padded copy; a 1x1 conv at 14x14 has none
    rng = seeded_rng()
    for k in (3, 1):
        x, w = rand(rng, (1, 32, 14, 14)), rand(rng, (24, 32, k, k))
        args = [((1, 4, 14, 14, 8), "float32"), ((24, 32, k, k), "float32")]
        attrs = {**PLANE_ATTRS, "padding": k // 2}
        cfg = Task("conv2d_NCHWc.x86", args, attrs, AVX2).default_config()
        assert cfg is not None and int(cfg["tile_oh"].size[-1]) == 2
        _check(AVX2, args, attrs, cfg, blocked(x, 8), w, conv2d_nchw(x, w, 1, k // 2))


def test_a_tile_3x3_conv_does_not_prefetch_with_28_accumulators_the_switch_off_or_28x28(
        monkeypatch: Any) -> None:
    import schedule.templates.x86_conv2d_nchwc as template

    def prefetches(args: list, **knobs: Any) -> bool:
        return "prefetch(" in _plane_lowered(AVX512, args, PLANE_ATTRS, **knobs)[1]

    args = _plane_args(AVX512, 14)
    assert prefetches(args)
    assert not prefetches(args, tile_ow=[-1, 14])  # 28 accumulators
    assert not prefetches(_plane_args(AVX512, 28))  # 784 pixels: each weight used 784 times
    monkeypatch.setattr(template, "PREFETCH_TILE_WEIGHTS", False)
    cfg, text = _plane_lowered(AVX512, args, PLANE_ATTRS)
    assert "prefetch(" not in text and int(cfg["tile_ow"].size[-1]) == 14  # main's default


# padded data blocked by a multiple of the config's channel block: read through a guard
GUARDED = [  # (size, kernel, stride, padding (top, left, bottom, right), data block x ic_bn,
    #          knobs)
    (9, 3, 1, (1, 1, 1, 1), 1, {"acc_scope": "tile"}),
    (9, 3, 2, (1, 1, 1, 1), 2, {"acc_scope": "tile"}),
    (11, 3, 1, (2, 2, 2, 2), 1, {"acc_scope": "row"}),
    (7, 3, 2, (1, 0, 2, 1), 2, {"acc_scope": "plane"}),
    (10, 3, 1, (0, 1, 1, 0), 1, {"acc_scope": "tile", "tile_ow": [-1, 3]}),
    (9, 5, 1, (2, 2, 2, 2), 2, {"acc_scope": "tile", "loop_order": "rows_oc"}),
    (8, 3, 1, (1, 1, 1, 1), 1, {"acc_scope": "row", "loop_order": "rows_oc"}),
    (10, 3, 1, (0, 0, 0, 0), 1, {"acc_scope": "tile"}),
]


def _conv_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: tuple) -> np.ndarray:
    pt, pl, pb, pr = pad
    return conv2d_nchw(np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))), w, stride, 0)


class _GuardedCase:
    """One GUARDED conv on blocked data with the config's blocks `ic` (16 AVX-512, 8
    AVX2): its lowered stages' names, and `check()` against numpy on fresh inputs."""

    def __init__(self, target: str, hw: int, k: int, stride: int, pad: tuple, per: int,
                 knobs: dict) -> None:
        rng = seeded_rng()
        ic = 16 if target == AVX512 else 8
        self.x, self.w = rand(rng, (1, 2 * ic, hw, hw)), rand(rng, (2 * ic, 2 * ic, k, k))
        self.args = [((1, 2 // per, hw, hw, ic * per), "float32"),
                     ((2 * ic, 2 * ic, k, k), "float32")]
        self.attrs = {"padding": pad, "strides": stride, "data_layout": "NCHWxc",
                      "kernel_layout": "OIHWio", "out_layout": "NCHWc"}
        space = config_space("conv2d_NCHWc.x86", self.args, self.attrs, target)
        self.cfg = _with(space, target, self.args, self.attrs, tile_ic=[-1, ic],
                         tile_oc=[-1, ic], **knobs)
        s, ts = instantiate("conv2d_NCHWc.x86", self.args, self.attrs, cfg=self.cfg,
                            target=target)
        self.stages = _stage_names(lowering.lower(s, ts))
        self.target, self.block, self.stride, self.pad = target, ic * per, stride, pad

    def check(self) -> None:
        _check(self.target, self.args, self.attrs, self.cfg, blocked(self.x, self.block),
               self.w, _conv_ref(self.x, self.w, self.stride, self.pad))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("hw, k, stride, pad, per, knobs", GUARDED)
def test_padded_blocked_data_is_read_through_a_guard_and_equals_numpy(
        target: str, hw: int, k: int, stride: int, pad: tuple, per: int,
        knobs: dict) -> None:
    # no padded copy: the reduction's guard, peeled off the interior by loop_partition
    case = _GuardedCase(target, hw, k, stride, pad, per, knobs)
    stages = case.stages
    assert not any("pad" in n or n == "data_vec" for n in stages), stages
    case.check()


@pytest.mark.usefixtures("no_guard")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("hw, k, stride, pad, per, knobs", GUARDED[:4])
def test_the_padded_copy_of_blocked_data_still_equals_numpy(
        target: str, hw: int, k: int, stride: int, pad: tuple, per: int,
        knobs: dict) -> None:
    # PAD_GUARD off: the A/B switch pads blocked data in a copy stage as NCHW data is
    case = _GuardedCase(target, hw, k, stride, pad, per, knobs)
    stages = case.stages
    assert "data_pad" in stages or "data_vec" in stages, stages  # (re-blocked when per 2)
    case.check()


def _stage_names(func: Any) -> set[str]:
    from lowering import ir as lir

    found: set[str] = set()
    lir.post_order_visit_stmt(func.body, lambda st: found.add(st.buffer.name)
                              if isinstance(st, lir.BufferStore) else None)
    return found


@pytest.mark.parametrize("layout, block, copy", [("NCHW", 0, True), ("NCHWxc", 4, True),
                                                 ("NCHWxc", 16, False), ("NCHWxc", 32, False),
                                                 ("NCHWc", 16, False)])
def test_the_guard_leaves_a_padding_copy_only_where_the_data_needs_a_layout_stage(
        layout: str, block: int, copy: bool) -> None:
    # ResNet-18's 64@56 in AVX-512 code (ic_bn 16): NCHW data and a block that is no
    # multiple of 16 are copied anyway; blocked data is read as it is
    shape = (1, 64, 56, 56) if layout == "NCHW" else (1, 64 // block, 56, 56, block)
    args = [(shape, "float32"), ((64, 64, 3, 3), "float32")]
    attrs = {"padding": 1, "data_layout": layout, "kernel_layout": "OIHWio",
             "out_layout": "NCHWc"}
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, target=AVX512)
    stages = _stage_names(lowering.lower(s, ts))
    assert ("data_vec" in stages or "data_pad" in stages) == copy, stages


@pytest.mark.parametrize("target, fmas, broadcasts, loads",
                         [(AVX2, 14, 14, 1), (AVX512, 28, 14, 2)])
def test_the_guarded_interior_keeps_the_micro_kernel_of_the_padded_copy(
        target: str, fmas: int, broadcasts: int, loads: int) -> None:
    # 64@56 3x3, data blocked as the model writes it: the interior's innermost loop is one
    # basic block of tile_ow broadcasts, oc_bn / lanes loads per channel and their FMAs
    # (AVX-512: 14 x 2 per input channel; AVX2: 14 x 1, ONE_VECTOR_ROWS), no spill
    block = 16 if target == AVX512 else 8
    args = [((1, 64 // block, 56, 56, block), "float32"), ((64, 64, 3, 3), "float32")]
    attrs = {"padding": 1, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
             "out_layout": "NCHWc"}
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, target=target)
    lines = lowering.build(s, ts, target=target).source("asm").split("\n")
    label = re.compile(r"^\.?[\w.$]+:")
    at = {ln.rstrip(":"): i for i, ln in enumerate(lines) if label.match(ln)}
    loops = []
    for i, ln in enumerate(lines):
        m = re.match(r"\s+j\w+\s+(\.?[\w.$]+)", ln)
        if m and at.get(m.group(1), i) < i:
            body = lines[at[m.group(1)]:i + 1]
            loops.append((sum("vfmadd" in b for b in body),
                          sum("vbroadcastss" in b for b in body),
                          sum(bool(re.search(r"vmov[au]ps\s+-?\w*\(", b)) for b in body),
                          sum("(%rsp)" in b for b in body)))
    assert (fmas, broadcasts, loads, 0) in loops, sorted(set(loops))[:8]


@pytest.mark.parametrize("knobs", [{"acc_scope": "tile"}, {"acc_scope": "row"},
                                   {"acc_scope": "tile", "loop_order": "rows_oc"},
                                   {"acc_scope": "plane"}])
def test_a_guarded_batch_of_two_equals_numpy(knobs: dict) -> None:
    # the batch axis outside the rows that loop_partition peels (parallel or serial)
    rng = seeded_rng()
    x, w = rand(rng, (2, 16, 7, 7)), rand(rng, (32, 16, 3, 3))
    args = [((2, 1, 7, 7, 16), "float32"), ((32, 16, 3, 3), "float32")]
    attrs = {"padding": 1, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
             "out_layout": "NCHWc"}
    space = config_space("conv2d_NCHWc.x86", args, attrs, AVX512)
    cfg = _with(space, AVX512, args, attrs, tile_ic=[-1, 8], tile_oc=[-1, 16], **knobs)
    _check(AVX512, args, attrs, cfg, blocked(x, 16), w, conv2d_nchw(x, w, 1, 1))


def _dilated(w: np.ndarray, d: int) -> np.ndarray:
    """The kernel with d - 1 zeros between taps: a conv with it is the dilated conv."""
    o, c, kh, kw = w.shape
    out = np.zeros((o, c, (kh - 1) * d + 1, (kw - 1) * d + 1), w.dtype)
    out[:, :, ::d, ::d] = w
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("hw, k, stride, dil, pad, knobs", [
    (9, 3, 1, 2, (2, 2, 2, 2), {"acc_scope": "tile"}),
    (11, 3, 2, 2, (1, 2, 2, 1), {"acc_scope": "row"}),
    (7, 3, 1, 3, (3, 3, 3, 3), {"acc_scope": "plane"}),
    (9, 3, 1, 1, (1, 1, 1, 1), {"acc_scope": "tile", "reduce_order": [1, 2, 0, 3]}),
    (9, 3, 1, 1, (1, 1, 1, 1), {"acc_scope": "row", "reduce_order": [1, 0, 2, 3],
                                "unroll_kw": True}),
    (7, 5, 1, 1, (2, 2, 2, 2), {"acc_scope": "plane", "reduce_order": [1, 2, 0, 3],
                                "unroll_kw": True}),
    (13, 3, 1, 1, (1, 1, 1, 1), {"acc_scope": "tile", "loop_order": "rows_oc",
                                 "reduce_order": [1, 0, 2, 3]}),
    (5, 5, 1, 1, (3, 3, 3, 3), {"acc_scope": "tile", "tile_ow": [-1, 1]}),
])
def test_a_guarded_conv_with_dilation_and_each_reduce_order_equals_numpy(
        target: str, hw: int, k: int, stride: int, dil: int, pad: tuple,
        knobs: dict) -> None:
    # odd row counts, padding up to a whole kernel (rows whose taps all lie in the padding)
    rng = seeded_rng()
    ic = 16 if target == AVX512 else 8
    x, w = rand(rng, (1, 2 * ic, hw, hw)), rand(rng, (2 * ic, 2 * ic, k, k))
    args = [((1, 2, hw, hw, ic), "float32"), ((2 * ic, 2 * ic, k, k), "float32")]
    attrs = {"padding": pad, "strides": stride, "dilation": dil, "data_layout": "NCHWxc",
             "kernel_layout": "OIHWio", "out_layout": "NCHWc"}
    space = config_space("conv2d_NCHWc.x86", args, attrs, target)
    cfg = _with(space, target, args, attrs, tile_ic=[-1, ic], tile_oc=[-1, ic], **knobs)
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, cfg=cfg, target=target)
    assert "data_pad" not in _stage_names(lowering.lower(s, ts))
    _check(target, args, attrs, cfg, blocked(x, ic), w,
           _conv_ref(x, _dilated(w, dil), stride, pad))


def _parallel_extent(text: str) -> int:
    m = re.search(r"for \([\w.]+, 0, (\d+)\) parallel", text)
    assert m, text
    return int(m.group(1))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("c, hw, knobs", [
    (64, 56, {}), (64, 56, {"acc_scope": "row", "unroll_kw": True}),
    (64, 56, {"loop_order": "rows_oc", "reduce_order": [1, 2, 0, 3]}),
    (64, 56, {"tile_ow": [-1, 8]}), (128, 28, {}), (256, 14, {}),
    (256, 14, {"acc_scope": "plane", "reduce_order": [1, 0, 2, 3]}), (512, 7, {}),
])
def test_a_guarded_conv_keeps_the_rows_parallel_and_at_most_three_micro_kernels(
        target: str, c: int, hw: int, knobs: dict, monkeypatch: Any) -> None:
    # ResNet-18's 3x3 convs in model layouts: the parallel loop is (n, oc chunk, row) as
    # without the guard (the plane: (n, oc chunk)), the kh row of taps is the kh loop's
    # bounds, and only border column tiles are copies of the micro-kernel (one ic_inner
    # loop each). Without the weight prefetch of the 14x14 and 7x7 convs: its steps lie
    # in the kh loop, which then keeps the row guard inside (PREFETCH_TILE_WEIGHTS)
    import schedule.templates.x86_conv2d_nchwc as template

    monkeypatch.setattr(template, "PREFETCH_TILE_WEIGHTS", False)
    monkeypatch.setattr(template, "PREFETCH_PLANE_WEIGHTS", False)
    block = 16 if target == AVX512 else 8
    args = [((1, c // block, hw, hw, block), "float32"), ((c, c, 3, 3), "float32")]
    attrs = {"padding": 1, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
             "out_layout": "NCHWc"}
    space = config_space("conv2d_NCHWc.x86", args, attrs, target)
    # one register row (AVX2's 14x14 default has two, which keep the padded copy)
    cfg = _with(space, target, args, attrs, **{"tile_oh": [-1, 1], **knobs})
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, cfg=cfg, target=target)
    text = str(lowering.lower(s, ts))
    assert "data_pad" not in text
    chunks = c // int(cfg["tile_oc"].size[-1])
    rows = 1 if cfg["acc_scope"].val == "plane" else hw
    assert _parallel_extent(text) == chunks * rows, text
    assert re.search(r"for \(kh, max\(0, ", text), text
    assert 1 <= text.count("for (ic_inner") <= 3, text


def _one_thread_equals_two_and_numpy(monkeypatch: Any, s: Any, ts: Any, wk: np.ndarray,
                                     x: np.ndarray, w: np.ndarray) -> None:
    outs = []
    for threads in ("1", "2"):  # a kernel reads the thread count when it is loaded
        monkeypatch.setenv("TESSEL_NUM_THREADS", threads)
        k = lowering.build(s, ts, target=AVX512)
        out = np.full([int(d.value) for d in ts[-1].shape], np.nan, "float32")
        k(blocked(x, 16), wk, out)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    close(unblocked(outs[0]), conv2d_nchw(x, w, 1, 1))


@pytest.mark.parametrize("scope", ["tile", "row", "plane"])
def test_a_guarded_conv_gives_the_same_output_on_one_and_two_threads(
        monkeypatch: Any, scope: str) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 32, 7, 7)), rand(rng, (32, 32, 3, 3))
    args = [((1, 2, 7, 7, 16), "float32"), ((32, 32, 3, 3), "float32")]
    attrs = {"padding": 1, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
             "out_layout": "NCHWc"}
    space = config_space("conv2d_NCHWc.x86", args, attrs, AVX512)
    cfg = _with(space, AVX512, args, attrs, acc_scope=scope, tile_oc=[-1, 16])
    if _foreign_cpu(AVX512):
        pytest.skip("the host cannot run AVX-512 code")
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, cfg=cfg, target=AVX512)
    wk = input_packers("conv2d_NCHWc.x86", args, ts[:2], attrs)[1](w)
    _one_thread_equals_two_and_numpy(monkeypatch, s, ts, wk, x, w)


def test_a_3x3_conv_split_by_rows_by_default_gives_one_threads_output_on_two(
        monkeypatch: Any) -> None:
    # 256 output pixels, 32 channels: the default splits the rows between the threads
    # (ROWS_OUTER_WITH_TAPS), the guarded padding on the rows at each thread's edge
    from schedule.space import FallbackConfig

    rng = seeded_rng()
    x, w = rand(rng, (1, 64, 16, 16)), rand(rng, (32, 64, 3, 3))
    args = [((1, 4, 16, 16, 16), "float32"), ((32, 64, 3, 3), "float32")]
    attrs = {"padding": 1, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
             "out_layout": "NCHWc"}
    if _foreign_cpu(AVX512):
        pytest.skip("the host cannot run AVX-512 code")
    cfg = FallbackConfig(AVX512)
    s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, cfg=cfg, target=AVX512)
    assert cfg["loop_order"].val == "rows_oc"
    wk = input_packers("conv2d_NCHWc.x86", args, ts[:2], attrs)[1](w)
    _one_thread_equals_two_and_numpy(monkeypatch, s, ts, wk, x, w)


def test_a_register_tile_of_several_rows_keeps_the_padded_copy() -> None:
    # the rows' guard would lie inside the unrolled micro-kernel (built 2-8x slower)
    args = [((1, 2, 8, 8, 16), "float32"), ((32, 32, 3, 3), "float32")]
    attrs = {"padding": 1, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
             "out_layout": "NCHWc"}
    space = config_space("conv2d_NCHWc.x86", args, attrs, AVX512)
    for rows, copy in ((1, False), (2, True)):
        cfg = _with(space, AVX512, args, attrs, tile_oh=[-1, rows], tile_ic=[-1, 16])
        s, ts = instantiate("conv2d_NCHWc.x86", args, attrs, cfg=cfg, target=AVX512)
        assert ("data_pad" in _stage_names(lowering.lower(s, ts))) == copy


# a stride-1 1x1 conv as a model runs it: data blocked by 32, output NCHWc
POINTWISE_ATTRS = {"padding": 0, "data_layout": "NCHWxc", "kernel_layout": "OIHWio",
                   "out_layout": "NCHWc"}


def _pointwise_default(target: str, c: int, hw: int, co: int, **attrs: Any) -> Any:
    args = [((1, c // 32, hw, hw, 32), "float32"), ((co, c, 1, 1), "float32")]
    cfg = Task("conv2d_NCHWc.x86", args, {**POINTWISE_ATTRS, **attrs}, target).default_config()
    assert cfg is not None
    return cfg


@pytest.mark.parametrize("c, hw, co", [(64, 56, 256), (256, 56, 64), (512, 28, 128),
                                       (128, 28, 512)])
def test_avx512_pointwise_convs_with_more_pixels_than_channels_take_a_four_row_tile(
        c: int, hw: int, co: int, monkeypatch: Any) -> None:
    # POINTWISE_ROW_BAND: 4 rows x 2 columns x 2 vectors in the rows_oc order
    import schedule.templates.x86_conv2d_nchwc as template

    cfg = _pointwise_default(AVX512, c, hw, co)
    assert cfg["loop_order"].val == "rows_oc"
    assert (int(cfg["tile_oh"].size[-1]), int(cfg["tile_ow"].size[-1])) == (4, 2)
    assert int(cfg["tile_oc"].size[-1]) == 32
    monkeypatch.setattr(template, "POINTWISE_ROW_BAND", False)
    off = _pointwise_default(AVX512, c, hw, co)
    assert (int(off["tile_oh"].size[-1]), int(off["tile_ow"].size[-1])) == (1, 14)


@pytest.mark.parametrize("target, c, hw, co, attrs", [
    (AVX2, 64, 56, 256, {}),                    # 16 registers: AVX2's tiles stay
    (AVX512, 1024, 14, 256, {}),                # fewer pixels than channels: oc_rows
    (AVX512, 256, 56, 512, {"strides": 2}),     # strided: not measured
    (AVX512, 64, 56, 256, {"out_layout": "NCHW"})])  # unpacked output: oc_rows
def test_the_four_row_pointwise_tile_leaves_other_convs_and_avx2_as_they_were(
        target: str, c: int, hw: int, co: int, attrs: dict, monkeypatch: Any) -> None:
    import schedule.templates.x86_conv2d_nchwc as template

    on = _pointwise_default(target, c, hw, co, **attrs)
    monkeypatch.setattr(template, "POINTWISE_ROW_BAND", False)
    off = _pointwise_default(target, c, hw, co, **attrs)
    assert on.to_json() == off.to_json()


@pytest.mark.parametrize("hw, co", [(8, 32), (12, 64), (16, 96)])
def test_a_pointwise_conv_with_the_four_row_tile_equals_numpy_in_model_layouts(
        hw: int, co: int) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 64, hw, hw)), rand(rng, (co, 64, 1, 1))
    args = [((1, 2, hw, hw, 32), "float32"), ((co, 64, 1, 1), "float32")]
    cfg = Task("conv2d_NCHWc.x86", args, POINTWISE_ATTRS, AVX512).default_config()
    assert cfg is not None and int(cfg["tile_oh"].size[-1]) == 4
    _check(AVX512, args, POINTWISE_ATTRS, cfg, blocked(x, 32), w, conv2d_nchw(x, w, 1, 0))


@pytest.mark.parametrize("target, hw, k, oc_bn, cols", [
    (AVX2, 56, 3, 8, 14), (AVX2, 28, 1, 8, 14), (AVX2, 14, 1, 8, 7),
    (AVX512, 56, 3, 32, 14), (AVX512, 28, 1, 32, 14)])
def test_the_default_tile_is_one_vector_by_registers_minus_2_columns_on_wide_avx2_rows(
        target: str, hw: int, k: int, oc_bn: int, cols: int, monkeypatch: Any) -> None:
    # AVX2 at 56x56 and 28x28: 8 channels x 14 columns (14 accumulators, a weight vector,
    # a broadcast: 16 registers) instead of 16 x 4 (ONE_VECTOR_ROWS); 14x14 is one tile
    # wide (its 2 x 7 rows stay), and AVX-512's 30 columns divide none of these rows
    import schedule.templates.x86_conv2d_nchwc as template

    def tile(**attrs: Any) -> tuple[int, int]:
        args = [((1, 64, hw, hw), "float32"), ((128, 64, k, k), "float32")]
        cfg = Task("conv2d_NCHWc.x86", args, {"padding": k // 2}, target).default_config()
        return int(cfg["tile_oc"].size[-1]), int(cfg["tile_ow"].size[-1])

    assert tile() == (oc_bn, cols)
    monkeypatch.setattr(template, "ONE_VECTOR_ROWS", False)
    assert tile() == ((16, 4) if target == AVX2 and hw > 14 else (oc_bn, cols))


def test_a_wide_avx2_conv_with_a_one_vector_row_tile_equals_numpy_in_model_layouts() -> None:
    rng = seeded_rng()
    for k in (3, 1):
        x, w = rand(rng, (1, 16, 28, 28)), rand(rng, (24, 16, k, k))
        args = [((1, 2, 28, 28, 8), "float32"), ((24, 16, k, k), "float32")]
        attrs = {**PLANE_ATTRS, "padding": k // 2}
        cfg = Task("conv2d_NCHWc.x86", args, attrs, AVX2).default_config()
        assert (int(cfg["tile_oc"].size[-1]), int(cfg["tile_ow"].size[-1])) == (8, 14)
        _check(AVX2, args, attrs, cfg, blocked(x, 8), w, conv2d_nchw(x, w, 1, k // 2))


@pytest.mark.parametrize("hw, ic_bn", [(56, 16), (28, 16), (14, 8)])
def test_a_strided_1x1_avx2_conv_on_blocks_of_8_copies_its_pixels_into_blocks_of_16(
        hw: int, ic_bn: int) -> None:
    # STRIDED_1X1_LINE: where ONE_VECTOR_ROWS made the input's blocks 8 (a 32-byte half
    # line a pixel), not at 14x14, whose blocks were 8 before too
    rng = seeded_rng()
    x, w = rand(rng, (1, 32, hw, hw)), rand(rng, (16, 32, 1, 1))
    args = [((1, 4, hw, hw, 8), "float32"), ((16, 32, 1, 1), "float32")]
    attrs = {**PLANE_ATTRS, "padding": 0, "strides": 2}
    cfg = Task("conv2d_NCHWc.x86", args, attrs, AVX2).default_config()
    assert int(cfg["tile_ic"].size[-1]) == ic_bn
    _check(AVX2, args, attrs, cfg, blocked(x, 8), w, conv2d_nchw(x, w, 2, 0))


@pytest.mark.parametrize("c, hw, co", [(256, 14, 1024), (1024, 14, 256), (512, 14, 1024)])
def test_avx512_pointwise_convs_with_more_channels_than_pixels_take_a_seven_column_tile(
        c: int, hw: int, co: int, monkeypatch: Any) -> None:
    # POINTWISE_CHUNK_TILE: one row of 7 columns x 2 vectors in the oc_rows order
    import schedule.templates.x86_conv2d_nchwc as template

    cfg = _pointwise_default(AVX512, c, hw, co)
    assert cfg["loop_order"].val == "oc_rows" and cfg["acc_scope"].val == "tile"
    assert (int(cfg["tile_oh"].size[-1]), int(cfg["tile_ow"].size[-1])) == (1, 7)
    assert int(cfg["tile_oc"].size[-1]) == 32
    monkeypatch.setattr(template, "POINTWISE_CHUNK_TILE", False)
    off = _pointwise_default(AVX512, c, hw, co)
    assert (int(off["tile_oh"].size[-1]), int(off["tile_ow"].size[-1])) == (1, 14)


@pytest.mark.parametrize("target, c, hw, co, attrs", [
    (AVX2, 256, 14, 1024, {}),                  # 16 registers: AVX2's tiles stay
    (AVX512, 512, 7, 2048, {}),                 # 7x7: a plane
    (AVX512, 1024, 14, 256, {"strides": 2}),    # strided: not measured
    (AVX512, 256, 14, 1024, {"out_layout": "NCHW"}),  # unpacked output
    (AVX512, 1024, 14, 128, {})])               # more pixels than channels: the row band
def test_the_seven_column_pointwise_tile_leaves_other_convs_and_avx2_as_they_were(
        target: str, c: int, hw: int, co: int, attrs: dict, monkeypatch: Any) -> None:
    import schedule.templates.x86_conv2d_nchwc as template

    on = _pointwise_default(target, c, hw, co, **attrs)
    monkeypatch.setattr(template, "POINTWISE_CHUNK_TILE", False)
    off = _pointwise_default(target, c, hw, co, **attrs)
    assert on.to_json() == off.to_json()


@pytest.mark.parametrize("hw, co", [(8, 64), (10, 128), (14, 224)])
def test_a_pointwise_conv_with_the_seven_column_tile_equals_numpy_in_model_layouts(
        hw: int, co: int) -> None:
    rng = seeded_rng()
    x, w = rand(rng, (1, 64, hw, hw)), rand(rng, (co, 64, 1, 1))
    args = [((1, 2, hw, hw, 32), "float32"), ((co, 64, 1, 1), "float32")]
    cfg = Task("conv2d_NCHWc.x86", args, POINTWISE_ATTRS, AVX512).default_config()
    assert cfg is not None and int(cfg["tile_ow"].size[-1]) < hw   # the narrower tile
    _check(AVX512, args, POINTWISE_ATTRS, cfg, blocked(x, 32), w, conv2d_nchw(x, w, 1, 0))
