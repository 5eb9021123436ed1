"""Tuning for a GPU target is refused where its times would mean nothing: in the simulator
("cuda -sim") and on a machine without a GPU."""

from __future__ import annotations

import pytest

from autotune import FakeRunner, RandomTuner, Task, tune
from autotune.op_spec import OpSpecError, parse_op_spec
from tessel_errors import DeviceError
from tessel_target import device_key
from tessel_target.gpu import gpu
from tuning_logs import TuningDatabase

ARGS = [((16, 16), "float32"), ((16, 16), "float32")]


def test_tuning_in_the_gpu_simulator_is_refused(tmp_path) -> None:
    task = Task("dense.cuda", ARGS, {}, "cuda -sim")
    with TuningDatabase(tmp_path / "t.db") as db, pytest.raises(
            DeviceError, match=r"simulator's times say nothing about a GPU's"):
        tune(task, RandomTuner(task), 4, db, FakeRunner(lambda t, c: 1.0))


def test_tuning_for_cuda_without_a_gpu_is_refused(tmp_path) -> None:
    if gpu() is not None:
        pytest.skip("this machine has a GPU")
    task = Task("dense.cuda", ARGS, {}, "cuda")
    with TuningDatabase(tmp_path / "t.db") as db, pytest.raises(
            DeviceError, match=r"no NVIDIA GPU to measure on"):
        tune(task, RandomTuner(task), 4, db, FakeRunner(lambda t, c: 1.0))


def test_cuda_records_are_filed_under_the_gpu() -> None:
    expected = "no GPU" if gpu() is None else gpu().key
    assert device_key("cuda") == f"cuda|{expected}"


def test_an_op_spec_for_cuda_names_the_cuda_template() -> None:
    assert parse_op_spec("dense:8x16x32", "cuda").template == "dense.cuda"


def test_an_op_spec_without_a_cuda_template_says_so() -> None:
    with pytest.raises(OpSpecError, match=r"target 'cuda' has no conv2d_NCHWc template yet"):
        parse_op_spec("conv2d_nchwc:1,3,8,8,4,3,3", "cuda")


def test_a_conv2d_op_spec_for_cuda_names_the_direct_cuda_template() -> None:
    assert parse_op_spec("conv2d:1,3,8,8,4,3,3", "cuda").template == "conv2d_nchw.cuda"


def test_a_conv2d_gemm_op_spec_names_the_implicit_gemm_template_on_a_gpu_only() -> None:
    assert parse_op_spec("conv2d_gemm:1,3,8,8,4,3,3", "cuda").template == \
        "conv2d_nchw_gemm.cuda"
    with pytest.raises(OpSpecError, match=r"target 'llvm' has no conv2d_nchw_gemm template"):
        parse_op_spec("conv2d_gemm:1,3,8,8,4,3,3", "llvm")
