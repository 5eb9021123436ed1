"""benchmarks.control_flow_models: each control-flow model compiled for the VM gives the
Relay interpreter's result at small sizes on fresh seeded random inputs (no torch)."""

from __future__ import annotations

import numpy as np

import relay_ir
import relay_ir.vm as vm
from benchmarks.control_flow_models import (
    char_rnn,
    list_items,
    list_lstm,
    list_value,
    random_tree,
    small_cnn,
    tree_lstm,
    tree_value,
)
from relay_ir.interpreter import interpret
from tests.relay_ir.programs import assert_values_close
from tests.rng import seeded_rng


def _vm_and_interpreter(model, *inputs):
    got = vm.VirtualMachine(vm.compile(model.module, params=model.params)).run(*inputs)
    want = interpret(model.module, *inputs, *model.params.values())
    return got, want


def _vector(rng, n):
    return rng.standard_normal((1, n)).astype("float32")


def test_char_rnn_generates_the_interpreters_sequence():
    rng = seeded_rng()
    model = char_rnn(hidden=8, vocab=5, seed=int(rng.integers(1 << 30)))
    got, want = _vm_and_interpreter(model, np.int32(6), _vector(rng, 8),
                                    rng.dirichlet(np.ones(5)).astype("float32")[None])
    assert len(list_items(want)) == 6
    assert_values_close(got, want, rtol=1e-5, atol=1e-6, where="charrnn")


def test_tree_lstm_gives_the_interpreters_root_state():
    rng = seeded_rng()
    model = tree_lstm(hidden=6, input_size=4, seed=int(rng.integers(1 << 30)))
    tree = tree_value(model.module, random_tree(rng, 9, 4))
    got, want = _vm_and_interpreter(model, tree)
    assert_values_close(got, want, rtol=1e-5, atol=1e-6, where="treelstm")


def test_list_lstm_gives_the_interpreters_final_state():
    rng = seeded_rng()
    model = list_lstm(hidden=6, input_size=4, seed=int(rng.integers(1 << 30)))
    xs = list_value(model.module, [_vector(rng, 4) for _ in range(5)])
    got, want = _vm_and_interpreter(model, xs, _vector(rng, 6), _vector(rng, 6))
    assert_values_close(got, want, rtol=1e-5, atol=1e-6, where="lstm")


def test_random_tree_has_exactly_the_nodes_asked_for():
    rng = seeded_rng()
    for nodes in (1, 2, 20, 60):
        assert random_tree(rng, nodes, 3).size() == nodes


def test_the_question_mark_batch_cnn_gives_builds_result_at_two_batches():
    rng = seeded_rng()
    model = small_cnn(seed=int(rng.integers(1 << 30)))
    machine = vm.VirtualMachine(vm.compile(model.module, params=model.params))
    for batch in (1, 3):
        x = rng.standard_normal((batch, 3, 32, 32)).astype("float32")
        want = relay_ir.build(small_cnn(batch).module, params=model.params).run(x=x)
        np.testing.assert_allclose(machine.run(x), want, rtol=1e-4, atol=1e-5)
