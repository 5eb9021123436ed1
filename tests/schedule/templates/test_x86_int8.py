"""The x86 int8 templates (conv2d_int8.x86, dense_int8.x86): bit for bit the Relay
interpreter's int8 x int8 -> int32 semantics on every x86 variant the target names, VNNI's
vpdpbusd where the target has it and exact vpmaddwd where it does not, built on any host
and run where the host can."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lowering
import relay_ir as R
from relay_ir import nn
from schedule.templates import config_space, input_packers, instantiate
from tessel_errors import ScheduleError
from tests.relay_ir import programs as P
from tests.rng import int8_values, seeded_rng
from tests.unwritten import unwritten

# the x86 variants and the instruction the 4-wide int8 dot must become on each
VARIANTS = {
    "avx2": ("llvm -mcpu=haswell", "vpmaddwd"),
    "avx512": ("llvm -mcpu=skylake-avx512", "vpmaddwd"),
    "avx512vnni": ("llvm -mcpu=cascadelake", "vpdpbusd"),
    "avxvnni": ("llvm -mcpu=alderlake", "vpdpbusd"),
}
CONV, DENSE = "conv2d_int8.x86", "dense_int8.x86"
# the packed weight (what build uses) on every variant; the weight packed by stages at
# every call on one variant of each instruction
LAYOUT_RUNS = [(v, "packed") for v in sorted(VARIANTS)] + [("avx2", "plain"),
                                                          ("avx512vnni", "plain")]


def _build(name: str, args: list[Any], attrs: dict[str, Any], target: str,
           cfg: Any = None) -> tuple[Any, list[Any]]:
    s, tensors = instantiate(name, args, attrs, cfg=cfg, target=target)
    return lowering.build(s, tensors, target=target), tensors


def _run(kernel: Any, tensors: list[Any], name: str, args: list[Any],
         attrs: dict[str, Any], inputs: list[np.ndarray]) -> np.ndarray:
    """Pack the weight as build would, run, return the output; skip where the host cannot
    run the target's code (the build and the assembly are still checked elsewhere)."""
    if kernel.foreign:
        pytest.skip(f"this host cannot run code for {kernel.target}: {kernel.foreign}")
    packers = input_packers(name, args, tensors[:2], attrs)
    ins = [packers[k](a) if k in packers else a for k, a in enumerate(inputs)]
    out = unwritten(tuple(int(d.value) for d in tensors[-1].shape), "int32")
    kernel(*ins, out)
    return out


def _interpret_conv(x: np.ndarray, w: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    xv, wv = P.tvar("x", x.shape, "int8"), P.tvar("w", w.shape, "int8")
    relay_attrs = {k: v for k, v in attrs.items() if k in ("strides", "padding", "dilation")}
    mod = P.main_module([xv, wv], nn.conv2d(xv, wv, out_dtype="int32", **relay_attrs))
    return R.interpret(mod, x, w)


CONV_CASES = {
    "3x3_pad1": ((1, 16, 8, 8), (32, 16, 3, 3), {"padding": (1, 1)}),
    # input channels not a multiple of 4, outputs fewer than a vector, stride 2
    "odd_channels_strided": ((2, 5, 9, 9), (7, 5, 3, 3), {"strides": (2, 2),
                                                          "padding": (1, 1)}),
    "1x1_stride2": ((1, 24, 10, 10), (40, 24, 1, 1), {"strides": (2, 2)}),
    "asymmetric_pad_dilated": ((1, 12, 9, 11), (16, 12, 3, 3), {"padding": (1, 0, 2, 1),
                                                                "dilation": (2, 1)}),
}


@pytest.mark.parametrize("variant, layout", LAYOUT_RUNS)
@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_int8_conv2d_is_bit_identical_to_the_interpreter(case: str, variant: str,
                                                         layout: str) -> None:
    dshape, kshape, conv_attrs = CONV_CASES[case]
    kernel_layout = "OIHW" if layout == "plain" else layout
    target, _ = VARIANTS[variant]
    args = [(dshape, "int8"), (kshape, "int8")]
    attrs = {**conv_attrs, "out_dtype": "int32", "kernel_layout": kernel_layout}
    kernel, tensors = _build(CONV, args, attrs, target)
    rng = seeded_rng()
    x, w = int8_values(rng, dshape), int8_values(rng, kshape)
    got = _run(kernel, tensors, CONV, args, attrs, [x, w])
    np.testing.assert_array_equal(got, _interpret_conv(x, w, attrs))


DENSE_CASES = {"batch1": (1, 1000, 512), "batch3_odd": (3, 17, 40), "k_not_4": (8, 32, 5),
               "batch16": (16, 64, 128)}


@pytest.mark.parametrize("variant, weight_layout", LAYOUT_RUNS)
@pytest.mark.parametrize("case", sorted(DENSE_CASES))
def test_int8_dense_is_bit_identical_to_int32_matmul(case: str, variant: str,
                                                     weight_layout: str) -> None:
    M, N, K = DENSE_CASES[case]
    target, _ = VARIANTS[variant]
    args = [((M, K), "int8"), ((N, K), "int8")]
    attrs = {"out_dtype": "int32", "weight_layout": weight_layout}
    kernel, tensors = _build(DENSE, args, attrs, target)
    rng = seeded_rng()
    x, w = int8_values(rng, (M, K)), int8_values(rng, (N, K))
    got = _run(kernel, tensors, DENSE, args, attrs, [x, w])
    np.testing.assert_array_equal(got, x.astype(np.int32) @ w.astype(np.int32).T)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name, args, attrs", [
    (CONV, [((1, 16, 8, 8), "int8"), ((32, 16, 3, 3), "int8")], {"padding": 1}),
    (DENSE, [((4, 64), "int8"), ((32, 64), "int8")], {}),
], ids=["conv2d", "dense"])
def test_the_dot_is_vpdpbusd_with_vnni_and_exact_vpmaddwd_without(
        name: str, args: list[Any], attrs: dict[str, Any], variant: str) -> None:
    target, instruction = VARIANTS[variant]
    kernel, _ = _build(name, args, {**attrs, "out_dtype": "int32"}, target)
    asm = kernel.source("asm")
    other = {"vpdpbusd": "vpmaddwd", "vpmaddwd": "vpdpbusd"}[instruction]
    assert instruction in asm and other not in asm
    # vpmaddubsw saturates its int16 pair sums: never used, it would break bit-exactness
    assert "vpmaddubsw" not in asm


@pytest.mark.parametrize("variant, register", [("avx2", "ymm"), ("avxvnni", "ymm"),
                                               ("avx512", "zmm"), ("avx512vnni", "zmm")])
def test_the_dot_fills_the_vector_width_of_the_target(variant: str, register: str) -> None:
    target, instruction = VARIANTS[variant]
    kernel, _ = _build(DENSE, [((4, 64), "int8"), ((64, 64), "int8")],
                       {"out_dtype": "int32"}, target)
    lines = [ln for ln in kernel.source("asm").splitlines() if instruction in ln]
    assert lines and all(register in ln for ln in lines)


@pytest.mark.parametrize("name, args, attrs", [
    (CONV, [((1, 8, 8, 8), "int8"), ((16, 8, 3, 3), "int8")], {"padding": 1}),
    (DENSE, [((6, 24), "int8"), ((40, 24), "int8")], {}),
], ids=["conv2d", "dense"])
def test_tuning_candidates_of_the_int8_templates_stay_bit_exact(
        name: str, args: list[Any], attrs: dict[str, Any]) -> None:
    target = "llvm"
    attrs = {**attrs, "out_dtype": "int32"}
    space = config_space(name, args, attrs, target)
    assert space.size > 8
    rng = seeded_rng()
    x, w = int8_values(rng, args[0][0]), int8_values(rng, args[1][0])
    picks = rng.choice(space.size, size=4, replace=False)
    want = None
    for index in picks:
        kernel, tensors = _build(name, args, attrs, target, cfg=space.get(int(index)))
        got = _run(kernel, tensors, name, args, attrs, [x, w])
        want = got if want is None else want
        np.testing.assert_array_equal(got, want)
    if name == DENSE:
        np.testing.assert_array_equal(want, x.astype(np.int32) @ w.astype(np.int32).T)
    else:
        np.testing.assert_array_equal(want, _interpret_conv(x, w, attrs))


def test_int8_conv2d_reads_blocked_data_and_writes_blocked_output() -> None:
    # what the layout plan asks between convs: int8 NCHW8c in, int32 NCHW[oc_bn]c out
    rng = seeded_rng()
    x, w = int8_values(rng, (1, 16, 6, 6)), int8_values(rng, (32, 16, 3, 3))
    blocked = np.ascontiguousarray(x.reshape(1, 2, 8, 6, 6).transpose(0, 1, 3, 4, 2))
    args = [(blocked.shape, "int8"), (w.shape, "int8")]
    attrs = {"padding": 1, "out_dtype": "int32", "kernel_layout": "packed",
             "data_layout": "NCHWxc", "out_layout": "NCHWc"}
    kernel, tensors = _build(CONV, args, attrs, "llvm")
    got = _run(kernel, tensors, CONV, args, attrs, [blocked, w])
    n, cb, h, wd, b = got.shape
    logical = got.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, wd)
    np.testing.assert_array_equal(logical, _interpret_conv(x, w, {"padding": 1}))


@pytest.mark.parametrize("name, args, attrs, message", [
    (CONV, [((1, 8, 8, 8), "float32"), ((16, 8, 3, 3), "float32")], {},
     "int8 data x int8 kernel -> int32, got float32 x float32 -> int32"),
    (CONV, [((1, 8, 8, 8), "int8"), ((16, 8, 3, 3), "int8")],
     {"data_layout": "NHWC"}, "data_layout must be one of"),
    (CONV, [((1, 8, 8, 8), "int8"), ((16, 4, 3, 3), "int8")], {},
     "the kernel has 4 input channels, the data 8"),
    (DENSE, [((2, 8), "int8"), ((4, 8), "int8")], {"out_dtype": "int16"},
     "int8 data x int8 weight -> int32, got int8 x int8 -> int16"),
    (DENSE, [((2, 8), "int8"), ((4, 8), "int8")], {"weight_layout": "tiled"},
     "weight_layout must be 'plain' or 'packed'"),
])
def test_bad_int8_template_arguments_are_schedule_errors(
        name: str, args: list[Any], attrs: dict[str, Any], message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        instantiate(name, args, {"out_dtype": "int32", **attrs}, target="llvm")


@pytest.mark.parametrize("variant", ["avx2", "avx512vnni"])
def test_the_loop_ir_interpreter_runs_the_tensorized_dot_as_the_kernel_does(
        variant: str) -> None:
    from lowering import interpreter

    target, _ = VARIANTS[variant]
    args = [((1, 5, 5, 5), "int8"), ((20, 5, 3, 3), "int8")]
    attrs = {"padding": 1, "strides": 2, "out_dtype": "int32", "kernel_layout": "packed"}
    s, tensors = instantiate(CONV, args, attrs, target=target)
    rng = seeded_rng()
    x, w = int8_values(rng, (1, 5, 5, 5)), int8_values(rng, (20, 5, 3, 3))
    got = _run(lowering.build(s, tensors, target=target), tensors, CONV, args, attrs, [x, w])
    packed = input_packers(CONV, args, tensors[:2], attrs)[1](w)
    interpreted = unwritten((1, 20, 3, 3), "int32")
    interpreter.run(lowering.lower(s, tensors), x, packed, interpreted)
    np.testing.assert_array_equal(interpreted, got)
    np.testing.assert_array_equal(got, _interpret_conv(x, w, attrs))


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(c=st.integers(1, 20), co=st.integers(1, 40), hw=st.integers(3, 9),
       k=st.sampled_from([1, 3]), stride=st.integers(1, 2), pad=st.integers(0, 1),
       seed=st.integers(0, 2**31 - 1))
def test_random_int8_conv2d_shapes_are_bit_identical_to_the_interpreter(
        c: int, co: int, hw: int, k: int, stride: int, pad: int, seed: int) -> None:
    args = [((1, c, hw, hw), "int8"), ((co, c, k, k), "int8")]
    attrs = {"strides": (stride, stride), "padding": (pad, pad), "out_dtype": "int32",
             "kernel_layout": "packed"}
    kernel, tensors = _build(CONV, args, attrs, "llvm")
    rng = np.random.default_rng(seed)
    x, w = int8_values(rng, (1, c, hw, hw)), int8_values(rng, (co, c, k, k))
    got = _run(kernel, tensors, CONV, args, attrs, [x, w])
    np.testing.assert_array_equal(got, _interpret_conv(x, w, attrs))


def test_a_dot_whose_consumer_reads_part_of_a_tile_computes_the_whole_tile() -> None:
    # 7 outputs read of one 16-lane block: bound inference alone would size the local
    # buffer for 7, the dot writes 16; a tensorized stage's region is whole tiles
    import tensor_expr as te
    from lowering.interpreter import run
    from schedule import create_schedule
    from schedule.templates.x86_int8_dot import dot4_intrin, dot4_term

    a = te.placeholder((4,), "uint8", name="a")
    b = te.placeholder((1, 16), "int32", name="b")
    k = te.reduce_axis((0, 4), name="k")
    acc = te.compute((1, 16), lambda o, i: te.sum(dot4_term(a[k], b[o, i], k), axis=k),
                     name="acc")
    out = te.compute((7,), lambda n: acc[n // 16, n % 16], name="out")
    s = create_schedule(out)
    s[acc].set_scope("local")
    no, _ = s[out].split(out.op.axis[0], factor=16)
    s[acc].compute_at(s[out], no)
    s[acc].tensorize(acc.op.axis[1], dot4_intrin(16))
    func = lowering.lower(s, [a, b, out])
    assert "allocate acc[int32 * (1, 16)]" in str(func)
    rng = np.random.default_rng(7)
    av = rng.integers(0, 256, 4).astype("uint8")
    bv = rng.integers(-2**31, 2**31, (1, 16)).astype("int32")
    got = np.full(7, -1, "int32")
    run(func, av, bv, got)
    want = bv.view("int8").reshape(16, 4).astype(np.int64) @ av.astype(np.int64)
    np.testing.assert_array_equal(got, want[:7])
