"""A saved model records each kernel's in-place pairs (relay_ir.backend.inplace), so the
model loaded from it plans exactly the memory the built one did; a folder saved without
them still loads and plans without sharing; pairs that do not fit their kernel are refused
with an error naming the kernel and the pair."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import relay_ir
from relay_ir.backend.pipeline import bind_params
from relay_ir.frontend.onnx import from_onnx
from tessel_errors import RelayError
from tests.e2e import onnx_models
from tests.relay_ir.test_artifact_bad_input import _rehash
from tests.relay_ir.test_memory_plan_inplace import _residual_steps_share
from tests.rng import seeded_rng


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory):
    """A small ResNet-18 (8 residual convs) built and saved: (mod, params, input, lib,
    folder)."""
    m = onnx_models.resnet18(image=32, width=8, classes=10)
    mod, params = from_onnx(m)
    lib = relay_ir.build(mod, target="llvm", params=params)
    folder = tmp_path_factory.mktemp("inplace") / "r18.tessel"
    lib.save(str(folder))
    return mod, params, m.graph.input[0].name, lib, folder


@pytest.fixture
def folder(saved, tmp_path: Path) -> Path:
    """A fresh copy of the saved model, to edit."""
    d = tmp_path / "m.tessel"
    shutil.copytree(saved[4], d)
    return d


def _same_plan(a, b) -> None:
    assert a.storage_of == b.storage_of
    assert a.block_bytes == b.block_bytes
    assert a.block_offsets == b.block_offsets


def _edit(folder: Path, edit) -> None:
    doc = json.loads((folder / "model.json").read_text())
    edit(doc)
    (folder / "model.json").write_text(json.dumps(doc))
    _rehash(folder)


def _check_numbers(saved, lib) -> None:
    mod, params, name, built, _ = saved
    x = seeded_rng().standard_normal((1, 3, 32, 32)).astype("float32")
    want = relay_ir.interpret(bind_params(mod, params), **{name: x})
    got = lib.run(**{name: x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got, built.run(**{name: x}))


def test_a_loaded_model_plans_the_memory_the_built_one_did(saved) -> None:
    *_, built, folder = saved
    lib = relay_ir.load_compiled(str(folder))
    _same_plan(lib.memory_plan, built.memory_plan)
    _residual_steps_share(lib)  # the residual convs write over their residual input
    _check_numbers(saved, lib)


def test_a_model_saved_without_pairs_loads_and_plans_without_sharing(
        saved, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mod, params, *_ = saved
    _edit(folder, lambda d: [k.pop("inplace") for k in d["kernels"]])
    lib = relay_ir.load_compiled(str(folder))
    monkeypatch.setenv("TESSEL_PLAN_INPLACE", "0")
    apart = relay_ir.build(mod, target="llvm", params=params)
    _same_plan(lib.memory_plan, apart.memory_plan)
    assert lib.memory_plan.peak_bytes > saved[3].memory_plan.peak_bytes
    _check_numbers(saved, lib)


def _residual_kernel(folder: Path) -> tuple[int, dict]:
    doc = json.loads((folder / "model.json").read_text())
    k = next(k for k, kd in enumerate(doc["kernels"]) if kd.get("inplace"))
    return k, doc["kernels"][k]


@pytest.mark.parametrize("case", ["past_the_end", "shape", "output_over_input", "itself"])
def test_a_pair_that_does_not_fit_its_kernel_is_refused(folder: Path, case: str) -> None:
    k, kd = _residual_kernel(folder)
    specs = kd["specs"]
    ip, op = kd["inplace"][0]
    if case == "past_the_end":
        pair, match = [ip, len(specs)], "names a parameter past the kernel's"
    elif case == "shape":  # the conv's weight over its output
        w = next(p for p, s in enumerate(specs) if s != specs[op])
        pair, match = [w, op], "an output takes an input's storage only at the same shape"
    elif case == "output_over_input":
        pair, match = [op, ip], "so the pair is not \\(input, output\\)"
    else:
        pair, match = [op, op], "so the pair is not \\(input, output\\)"
    _edit(folder, lambda d: d["kernels"][k].update(inplace=[pair]))
    with pytest.raises(RelayError, match=rf"model\.json'?: kernels\[{k}\]\.inplace pair "
                                         rf"\[{pair[0]}, {pair[1]}\].*{match}"):
        relay_ir.load_compiled(str(folder))


def test_a_pair_of_the_wrong_form_is_refused_by_the_schema(folder: Path) -> None:
    k, _ = _residual_kernel(folder)
    _edit(folder, lambda d: d["kernels"][k].update(inplace=[[1, -2]]))
    with pytest.raises(RelayError, match=rf"kernels\[{k}\]\.inplace"):
        relay_ir.load_compiled(str(folder))
