"""The template registry: names, knobs each space declares, config JSON replay, errors."""

from __future__ import annotations

import pytest

import lowering
from schedule.space import FallbackConfig
from schedule.templates import TEMPLATES, config_space, instantiate
from tessel_errors import ScheduleError

DENSE = [((16, 24), "float32"), ((32, 24), "float32")]
CONV = [((1, 8, 8, 8), "float32"), ((16, 8, 3, 3), "float32")]


def test_registry_holds_the_x86_templates() -> None:
    want = {"dense.x86", "matmul.x86", "batch_matmul.x86", "conv2d_nchw.x86",
            "conv2d_NCHWc.x86", "depthwise_conv2d_nchw.x86", "injective.x86", "reduce.x86",
            "softmax.x86", "pool2d.x86", "global_pool2d.x86"}
    assert want <= set(TEMPLATES)
    assert all(TEMPLATES[n].target_kind == "llvm" for n in want)
    assert not TEMPLATES["softmax.x86"].tunable and TEMPLATES["dense.x86"].tunable


def test_dense_space_declares_tiles_packing_and_unroll() -> None:
    space = config_space("dense.x86", DENSE)
    assert {"tile_x", "tile_y", "tile_k", "pack_b", "unroll_kw", "parallel"} <= set(space.knobs)
    assert [e.val for e in space.knobs["pack_b"].entities] == [True, False]
    assert space.flop == 2.0 * 16 * 32 * 24


def test_conv_spaces_declare_blocks_and_reduction_order() -> None:
    nchw = config_space("conv2d_nchw.x86", CONV, {"padding": 1})
    assert {"tile_co", "tile_oh", "tile_ow", "tile_rc", "reduce_order",
            "unroll_k"} <= set(nchw.knobs)
    # an annotate knob: unroll the kernel rows, the columns, both or neither
    assert [e.to_json() for e in nchw.knobs["unroll_k"].entities] == [
        ["none", "none"], ["none", "unroll"], ["unroll", "none"], ["unroll", "unroll"]]
    nchwc = config_space("conv2d_NCHWc.x86", CONV, {"padding": 1})
    assert {"tile_ic", "tile_oc", "tile_ow", "reduce_order", "unroll_kw"} <= set(nchwc.knobs)
    dw = config_space("depthwise_conv2d_nchw.x86", [((1, 8, 8, 8), "float32"),
                                                   ((8, 1, 3, 3), "float32")])
    assert {"tile_oh", "tile_ow"} <= set(dw.knobs)


def test_config_json_replays_the_same_schedule() -> None:
    space = config_space("conv2d_nchw.x86", CONV, {"padding": 1})
    point = space.get(space.size // 3)
    text1 = str(lowering.lower(*instantiate("conv2d_nchw.x86", CONV, {"padding": 1}, point)))
    again = config_space("conv2d_nchw.x86", CONV, {"padding": 1}).from_json(point.to_json())
    text2 = str(lowering.lower(*instantiate("conv2d_nchw.x86", CONV, {"padding": 1}, again)))
    assert text1 == text2


def test_fallback_picks_a_vector_width_register_tile_for_dense() -> None:
    cfg = FallbackConfig()
    instantiate("dense.x86", [((64, 64), "float32"), ((64, 64), "float32")], cfg=cfg)
    nr = cfg["tile_x"].size[-1]
    assert nr % 8 == 0 and cfg["tile_y"].size[-1] > 1 and cfg["pack_b"].val is True


def test_unknown_template_lists_the_known_ones() -> None:
    with pytest.raises(ScheduleError, match=r"no schedule template named 'dense\.tpu'; known: "
                                            r".*dense\.cuda.*dense\.x86"):
        instantiate("dense.tpu", DENSE)


def test_wrong_argument_count_is_an_error() -> None:
    with pytest.raises(ScheduleError, match=r"template 'dense\.x86' takes 2 arguments, got 1"):
        instantiate("dense.x86", DENSE[:1])


def test_epilogue_that_changes_the_shape_is_rejected() -> None:
    import tensor_expr as te

    def transpose(c: te.Tensor) -> tuple[list[te.Tensor], te.Tensor]:
        return [], te.compute((32, 16), lambda i, j: c[j, i], name="t")

    with pytest.raises(ScheduleError, match=r"the epilogue must keep the anchor's shape"):
        instantiate("dense.x86", DENSE, epilogue=transpose)


def test_config_of_another_template_is_rejected() -> None:
    point = config_space("dense.x86", DENSE).get(0)
    with pytest.raises(ScheduleError, match="config has no knob|does not have"):
        instantiate("conv2d_nchw.x86", CONV, {"padding": 1}, point)


def test_a_versioned_template_files_its_records_under_its_version() -> None:
    from autotune import Task
    from schedule.templates import TEMPLATES, older_workload_keys, workload_key

    args = [((1, 32, 8, 8), "float32"), ((32, 32, 3, 3), "float32")]
    assert TEMPLATES["conv2d_NCHWc.x86"].version == 4
    key = workload_key("conv2d_NCHWc.x86", args, {})
    assert key.startswith("conv2d_NCHWc.x86#v4|")
    assert older_workload_keys("conv2d_NCHWc.x86", args, {}) == [
        key.replace("#v4|", "|", 1), key.replace("#v4|", "#v2|", 1),
        key.replace("#v4|", "#v3|", 1)]
    assert Task.from_workload_key(key).template == "conv2d_NCHWc.x86"
    # a template at version 1 keeps the keys it always had
    assert workload_key("dense.x86", [((4, 16), "float32")] * 2).startswith("dense.x86|")
    assert older_workload_keys("dense.x86", [((4, 16), "float32")] * 2) == []
