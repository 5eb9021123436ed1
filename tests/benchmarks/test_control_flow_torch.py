"""benchmarks.control_flow: the PyTorch ports (eager and TorchScript) of the control-flow
models compute what the VM computes with the same weights, at small sizes."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.control_flow_models import (
    char_rnn,
    list_items,
    list_lstm,
    list_value,
    random_tree,
    tree_lstm,
    tree_value,
)
from tests.rng import seeded_rng

torch = pytest.importorskip("torch", reason="torch is not installed (CI does not install it)")

import relay_ir.vm as vm  # noqa: E402
from benchmarks import control_flow as cf  # noqa: E402


def _machine(model):
    return vm.VirtualMachine(vm.compile(model.module, params=model.params))


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got), want.detach().numpy(), rtol=1e-4, atol=1e-5)


def _vector(rng, n):
    return rng.standard_normal((1, n)).astype("float32")


def test_char_rnn_eager_and_script_match_the_vm():
    rng = seeded_rng()
    model = char_rnn(hidden=8, vocab=5, seed=int(rng.integers(1 << 30)))
    h0, x0 = _vector(rng, 8), np.eye(5, dtype="float32")[:1]
    got = list_items(_machine(model).run(np.int32(4), h0, x0))
    eager = cf.CharRNN(model.params)
    for net in (eager, torch.jit.script(eager)):
        with torch.inference_mode():
            want = net(4, torch.from_numpy(h0), torch.from_numpy(x0))
        assert len(want) == len(got) == 4
        for g, w in zip(got, want):
            _close(g, w)


def test_tree_lstm_eager_and_script_match_the_vm():
    rng = seeded_rng()
    model = tree_lstm(hidden=6, input_size=6, seed=int(rng.integers(1 << 30)))
    tree = random_tree(rng, 11, 6)
    h, c = _machine(model).run(tree_value(model.module, tree))
    script = torch.jit.script(cf.ScriptTreeLSTM(model.params))
    with torch.inference_mode():
        for want in (cf.TreeLSTM(model.params)(cf.torch_tree(tree)),
                     script(*cf.post_order(tree))):
            _close(h, want[0])
            _close(c, want[1])


def test_list_lstm_eager_and_script_match_the_vm():
    rng = seeded_rng()
    model = list_lstm(hidden=6, input_size=4, seed=int(rng.integers(1 << 30)))
    xs, h0, c0 = [_vector(rng, 4) for _ in range(5)], _vector(rng, 6), _vector(rng, 6)
    h, c = _machine(model).run(list_value(model.module, xs), h0, c0)
    eager = cf.ListLSTM(model.params)
    args = ([torch.from_numpy(x) for x in xs], torch.from_numpy(h0), torch.from_numpy(c0))
    for net in (eager, torch.jit.script(eager)):
        with torch.inference_mode():
            want = net(*args)
        _close(h, want[0])
        _close(c, want[1])


def test_the_benchmark_runs_at_tiny_sizes_and_reports_every_system():
    result = cf.main(["--tiny"])
    names = [r["name"] for r in result["rows"]]
    assert [n.split()[0] for n in names] == ["CharRNN", "TreeLSTM", "LSTM"]
    for row in result["rows"]:
        for system in ("vm", "eager", "script"):
            assert row[system] > 0 and row[f"{system}_cpu"] >= 0
    assert [c["batch"] for c in result["cnn"]] == [1, 2]
    assert all(c[s] > 0 for c in result["cnn"] for s in ("vm", "symbolic", "build"))
    assert isinstance(result["goal_met"], bool)
