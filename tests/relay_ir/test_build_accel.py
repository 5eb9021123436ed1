"""relay_ir.build(qmod, target="accel"): a quantized model's int8 conv2d/dense groups run on
the simulated accelerator, the rest on the host CPU, values packed where the accelerator
reads them; the result equals the CPU build and the Relay interpreter bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import relay_ir as R
from relay_ir import nn
from relay_ir.backend.accel_pack import AccelKernelFn
from relay_ir.quantize import quantize
from tests.relay_ir.quantize.models import images, small_cnn
from tests.rng import seeded_rng

F32 = "float32"


def _he(rng, shape):
    return (rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))).astype(F32)


def chain_cnn(rng, image=8):
    """conv 3->20 -> relu -> conv 20->20 /2 -> relu -> conv 1x1 20->24 -> relu -> dense
    -> relu -> dense: channel counts off the 16-wide block, a stride, a 1x1 conv and a
    dense layer whose requantized output feeds another dense."""
    x = R.Var("x", R.TensorType((1, 3, image, image), F32))
    shapes = {"w0": (20, 3, 3, 3), "w1": (20, 20, 3, 3), "w2": (24, 20, 1, 1),
              "d0": (32, 24 * (image // 2) ** 2), "d1": (10, 32)}
    ws = {k: R.Var(k, R.TensorType(s, F32)) for k, s in shapes.items()}
    bs = {f"b{k}": R.Var(f"b{k}", R.TensorType((s[0],), F32)) for k, s in shapes.items()}
    h = nn.relu(nn.bias_add(nn.conv2d(x, ws["w0"], padding=(1, 1)), bs["bw0"]))
    h = nn.relu(nn.bias_add(nn.conv2d(h, ws["w1"], strides=(2, 2), padding=(1, 1)),
                            bs["bw1"]))
    h = nn.relu(nn.bias_add(nn.conv2d(h, ws["w2"]), bs["bw2"]))
    h = nn.relu(R.add(nn.dense(R.reshape(h, (1, -1)), ws["d0"]), bs["bd0"]))
    out = R.add(nn.dense(h, ws["d1"]), bs["bd1"])
    params = {k: _he(rng, s) for k, s in shapes.items()}
    params.update({k: (rng.standard_normal(v.type_annotation.shape) * 0.1).astype(F32)
                   for k, v in bs.items()})
    fn = R.Function((x, *ws.values(), *bs.values()), out)
    return R.IRModule.from_expr(fn), params


def residual_cnn(rng, image=8):
    """conv -> relu -> [conv -> relu -> conv] + shortcut -> relu -> conv /2 -> relu ->
    dense, no biases: the first conv's int32 result is the shortcut, requantized by a
    group of its own for the next conv."""
    x = R.Var("x", R.TensorType((1, 3, image, image), F32))
    shapes = {"w0": (16, 3, 3, 3), "w1": (16, 16, 3, 3), "w2": (16, 16, 3, 3),
              "w3": (24, 16, 3, 3), "d": (10, 24 * (image // 2) ** 2)}
    ws = {k: R.Var(k, R.TensorType(s, F32)) for k, s in shapes.items()}
    h = nn.relu(nn.conv2d(x, ws["w0"], padding=(1, 1)))
    r = nn.relu(nn.conv2d(h, ws["w1"], padding=(1, 1)))
    h = nn.relu(R.add(nn.conv2d(r, ws["w2"], padding=(1, 1)), h))
    h = nn.relu(nn.conv2d(h, ws["w3"], strides=(2, 2), padding=(1, 1)))
    out = nn.dense(R.reshape(h, (1, -1)), ws["d"])
    params = {k: _he(rng, s) for k, s in shapes.items()}
    return R.IRModule.from_expr(R.Function((x, *ws.values()), out)), params


def _quantized(model, **options):
    rng = seeded_rng()
    mod, params = model(rng)
    return quantize(mod, params, dataset=images(rng, 8), **options)


def _accel_groups(lib):
    return [p.group for p in lib.placement if p.device == "accel"]


@pytest.mark.parametrize("model, skip, target", [
    (small_cnn, [0], "accel"), (small_cnn, [], "accel"), (chain_cnn, [], "accel"),
    (residual_cnn, [], "accel"), (residual_cnn, [], "accel -batch=4 -block=32")],
    ids=["small_cnn-skip0", "small_cnn", "chain_cnn", "residual_cnn", "residual_cnn-b4x32"])
def test_the_accelerator_build_equals_the_cpu_build_and_the_interpreter(model, skip, target):
    qmod = _quantized(model, skip_conv_layers=skip)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a float first conv stays on the host
        lib = R.build(qmod, target=target)
    cpu = R.build(qmod, target="llvm")
    assert _accel_groups(lib)
    for sample in images(seeded_rng(), 3):
        got = lib.run(**sample)
        np.testing.assert_array_equal(got, cpu.run(**sample))
        np.testing.assert_array_equal(got, R.interpret(qmod, **sample))


def test_every_int8_anchor_runs_on_the_accelerator_and_a_float_tail_on_the_host():
    lib = R.build(_quantized(chain_cnn, skip_conv_layers=[]), target="accel")
    accel = _accel_groups(lib)
    assert sum("conv2d" in g for g in accel) == 3
    assert sum("dense" in g for g in accel) == 2
    # the second dense is dequantized in its group: dense and bias on the accelerator,
    # the int32 result stored as byte planes, the cast to float and the scale on the host
    rest = [p for p in lib.placement if p.why.startswith("the rest of")]
    assert [(p.group, p.device) for p in rest] == [("fused_cast_multiply", "cpu")]
    assert rest[0].why == "the rest of fused_dense_add_cast_multiply: a cast to float32"
    kinds = {type(lib.plan.kernels[s.kernel]).__name__ for s in lib.plan.steps}
    assert "AccelKernelFn" in kinds and "KernelFn" in kinds


def test_a_conv_whose_anchor_cannot_run_there_is_a_warning_naming_it():
    with pytest.warns(UserWarning, match="1 conv2d/dense groups run on the host CPU, not the "
                                         "accelerator: fused_conv2d_bias_add_relu: the "
                                         "nn.conv2d reads float32/float32"):
        lib = R.build(_quantized(small_cnn, skip_conv_layers=[0]), target="accel")
    assert lib.placement[0].device == "cpu"


def test_values_stay_packed_from_one_accelerator_group_to_the_next():
    lib = R.build(_quantized(chain_cnn, skip_conv_layers=[]), target="accel")
    # packed where the quantized input enters the first conv, unpacked where the
    # host's reshape reads the last conv's result; again around the two denses
    assert [c[2] for c in lib.layout_changes] == ["NCHW -> packed", "packed -> NCHW"] * 2
    steps = [lib.plan.kernels[s.kernel] for s in lib.plan.steps]
    assert sum(isinstance(k, AccelKernelFn) for k in steps) == 5


def test_a_requantization_of_a_value_the_accelerator_holds_runs_there_too():
    lib = R.build(_quantized(residual_cnn, skip_conv_layers=[]), target="accel")
    placed = [(p.group, p.device) for p in lib.placement]
    assert ("fused_add_right_shift_clip_cast", "accel") in placed  # no conv: ALU only
    assert sum(d == "accel" for _, d in placed) == 6
    # one packed region from the quantized input of the first conv to the reshape
    # (and one around the last dense)
    assert [c[0] for c in lib.layout_changes[:2]] == ["fused_conv2d_relu",
                                                      "fused_reshape_add_right_shift_clip_cast"]


def test_a_tuned_record_configures_the_accelerator_group(tmp_path):
    from autotune.measure import MeasureResult
    from autotune.task import Task
    from autotune.tuning import _record
    from tuning_logs import TuningDatabase

    qmod = _quantized(chain_cnn, skip_conv_layers=[])
    lib = R.build(qmod, target="accel")
    groups = [lib.plan.kernels[s.kernel].group for s in lib.plan.steps
              if isinstance(lib.plan.kernels[s.kernel], AccelKernelFn)]
    first = groups[0].task
    task = Task(first.template, list(first.specs), first.attrs, "accel")
    cfg = next(task.config(k) for k in range(task.space.size)
               if task.config(k)["tile_h"].size[-1] == 1
               and task.config(k)["oc_nthread"].val == 1)
    with TuningDatabase(tmp_path / "t.db") as db:
        db.add_many([_record(task, _input(task, cfg), MeasureResult((1e-3,)), "test")])
    tuned = R.build(qmod, target="accel", tuning_db=tmp_path / "t.db")
    tuned_groups = [tuned.plan.kernels[s.kernel].group for s in tuned.plan.steps
                    if isinstance(tuned.plan.kernels[s.kernel], AccelKernelFn)]
    assert tuned_groups[0].tuned and not groups[0].tuned
    assert len(tuned_groups[0].kernel.instructions) != len(groups[0].kernel.instructions)
    sample = images(seeded_rng(), 1)[0]
    np.testing.assert_array_equal(tuned.run(**sample), lib.run(**sample))


def _input(task, cfg):
    from autotune.measure import MeasureInput

    return MeasureInput(task, cfg)


def test_a_model_built_for_the_accelerator_cannot_be_saved(tmp_path):
    lib = R.build(_quantized(chain_cnn, skip_conv_layers=[]), target="accel")
    with pytest.raises(R.RelayError if hasattr(R, "RelayError") else Exception,
                       match="simulated accelerator"):
        lib.save(str(tmp_path / "m"))


def test_an_immediate_the_alu_cannot_hold_leaves_the_rest_of_the_tail_to_the_host():
    rng = seeded_rng()
    x = R.Var("x", R.TensorType((1, 16, 6, 6), "int8"))
    w = R.Constant(rng.integers(-128, 128, (24, 16, 3, 3)).astype(np.int8))
    y = nn.conv2d(x, w, padding=(1, 1), out_dtype="int32")
    y = R.add(y, R.Constant(np.asarray(100000, np.int32)))  # past 16 signed bits
    y = R.cast(R.clip(R.right_shift(y, R.Constant(np.asarray(9, np.int32))), -127, 127),
               "int8")
    mod = R.IRModule.from_expr(R.Function((x,), y))
    lib = R.build(mod, target="accel")
    assert [(p.device, p.why) for p in lib.placement] == [
        ("accel", ""), ("cpu", "the rest of fused_conv2d_add_right_shift_clip_cast: add by an "
                               "immediate outside [-32768, 32767]")]
    data = rng.integers(-128, 128, (1, 16, 6, 6)).astype(np.int8)
    np.testing.assert_array_equal(lib.run(x=data), R.interpret(mod, x=data))


def test_one_op_per_group_runs_the_alu_ops_on_values_the_accelerator_holds():
    qmod = _quantized(residual_cnn, skip_conv_layers=[])
    with R.transform.PassContext(opt_level=0), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lib = R.build(qmod, target="accel")  # no fusion: every op a group of its own
    alone = [p for p in lib.placement if p.device == "accel" and "conv2d" not in p.group
             and "dense" not in p.group]
    assert {p.group for p in alone} >= {"fused_add", "fused_right_shift", "fused_clip"}
    sample = images(seeded_rng(), 1)[0]
    np.testing.assert_array_equal(lib.run(**sample), R.interpret(qmod, **sample))


def random_cnn(rng):
    """Two or three conv-bias(-relu) layers with channels off the block, kernels 1/3/5,
    strides 1/2 and paddings drawn from `rng`, and their params and one sample."""
    c, img = int(rng.choice([1, 3, 5])), int(rng.choice([7, 9, 12]))
    x = R.Var("x", R.TensorType((1, c, img, img), F32))
    h, args, params = x, [], {}
    for n in range(int(rng.integers(2, 4))):
        o, k, s = int(rng.choice([4, 17, 40])), int(rng.choice([1, 3, 5])), int(rng.choice([1, 2]))
        p = int(rng.integers(0, k // 2 + 1))
        if (img + 2 * p - k) // s + 1 < 1:
            continue
        w = R.Var(f"w{n}", R.TensorType((o, c, k, k), F32))
        b = R.Var(f"b{n}", R.TensorType((o,), F32))
        args += [w, b]
        params[f"w{n}"], params[f"b{n}"] = _he(rng, (o, c, k, k)), _he(rng, (o, 1))[:, 0]
        h = nn.bias_add(nn.conv2d(h, w, strides=(s, s), padding=(p, p)), b)
        h = nn.relu(h) if rng.random() < 0.7 else h
        c, img = o, (img + 2 * p - k) // s + 1
    return R.IRModule.from_expr(R.Function((x, *args), h)), params


@pytest.mark.parametrize("draw", range(3))
def test_random_small_cnns_on_the_accelerator_equal_the_interpreter(draw):
    rng = seeded_rng()
    mod, params = random_cnn(rng)
    shape = mod["main"].params[0].type_annotation.shape
    data = [{"x": rng.standard_normal(shape).astype(F32)} for _ in range(3)]
    qmod = quantize(mod, params, dataset=data, skip_conv_layers=[])
    lib = R.build(qmod, target="accel")
    assert all(p.device == "accel" for p in lib.placement if "conv2d" in p.group)
    np.testing.assert_array_equal(lib.run(**data[0]), R.interpret(qmod, **data[0]))
