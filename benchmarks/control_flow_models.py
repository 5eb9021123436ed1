"""The Relay paper's control-flow models in Relay text, with seeded random weights: a
CharRNN (a GRU cell generating a sequence by recursion over steps), a Child-Sum TreeLSTM
over the prelude's Tree ADT, and an LSTM over a List of inputs.

    >>> m = char_rnn(hidden=128, vocab=32)
    >>> exe = relay_ir.vm.compile(m.module, params=m.params)            # doctest: +SKIP
    >>> relay_ir.vm.VirtualMachine(exe).run(np.int32(32), *m.inputs)    # doctest: +SKIP

Each model is a `Model`: an IRModule with the prelude whose @main takes the run-time
inputs first and the weights after them, the weights by name (`params`, bound as
constants by relay_ir.vm.compile), and the weights in PyTorch's layout so that
benchmarks/control_flow.py can load the same numbers into torch.nn.GRUCell / LSTMCell.
Gate order and formulas are PyTorch's (GRU: r, z, n; LSTM: i, f, g, o), so the outputs
agree to rounding. The recursion is a local recursive function of @main, so the weights
it uses are constants of the kernels (pre-packed once), not arguments passed down.

Tree values (`tree_value`) and list values (`list_value`) are the interpreter's
ConstructorValue, which both the VM and the interpreter take.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import relay_ir
from relay_ir.interpreter import ConstructorValue
from relay_ir.module import IRModule


@dataclass(frozen=True)
class Model:
    """A Relay program and its weights (by @main parameter name)."""

    name: str
    module: IRModule
    params: dict[str, np.ndarray]


@dataclass(frozen=True)
class Tree:
    """A rose tree of input vectors, the Python mirror of the prelude's `Rose(x, kids)`."""

    value: np.ndarray
    children: tuple[Tree, ...] = ()

    def size(self) -> int:
        return 1 + sum(c.size() for c in self.children)


def _weights(rng: np.random.Generator, shapes: dict[str, tuple[int, ...]], fan: int
             ) -> dict[str, np.ndarray]:
    # PyTorch's RNN init: U(-1/sqrt(hidden), 1/sqrt(hidden)), so activations stay in range
    bound = 1.0 / np.sqrt(fan)
    return {n: rng.uniform(-bound, bound, s).astype("float32") for n, s in shapes.items()}


def _parse(text: str) -> IRModule:
    return relay_ir.parse(text, init_module=IRModule().import_prelude())


def _t(*shape: int) -> str:
    return f"Tensor[({', '.join(map(str, shape))}), float32]"


def char_rnn(hidden: int = 128, vocab: int = 64, seed: int = 0) -> Model:
    """A GRU cell fed its own output: `@main(%n, %h0, %x0, weights)` runs n steps, each
    x_{t+1} = softmax(dense(h_{t+1}, w_out) + b_out) (the distribution over the vocabulary,
    as a generator samples from; kept continuous so VM and torch cannot pick different
    characters), and returns the List of the n output distributions, each (1, vocab).

    Weights: w_ih (3H, vocab), w_hh (3H, H), b_ih, b_hh (3H,) as torch.nn.GRUCell;
    w_out (vocab, H), b_out (vocab,)."""
    H, V = hidden, vocab
    text = f"""
def @main(%n: int32, %h0: {_t(1, H)}, %x0: {_t(1, V)}, %w_ih: {_t(3 * H, V)},
          %w_hh: {_t(3 * H, H)}, %b_ih: {_t(3 * H)}, %b_hh: {_t(3 * H)},
          %w_out: {_t(V, H)}, %b_out: {_t(V)}) -> List[{_t(1, V)}] {{
  let %gen = fn (%i: int32, %h: {_t(1, H)}, %x: {_t(1, V)}) -> List[{_t(1, V)}] {{
    if (equal(%i, 0)) {{
      Nil
    }} else {{
      let %gi = split(nn.bias_add(nn.dense(%x, %w_ih), %b_ih, axis=1),
                      indices_or_sections=3, axis=1);
      let %gh = split(nn.bias_add(nn.dense(%h, %w_hh), %b_hh, axis=1),
                      indices_or_sections=3, axis=1);
      let %r = sigmoid(add(%gi.0, %gh.0));
      let %z = sigmoid(add(%gi.1, %gh.1));
      let %c = tanh(add(%gi.2, multiply(%r, %gh.2)));
      let %h2 = add(multiply(subtract(1f, %z), %c), multiply(%z, %h));
      let %y = nn.softmax(nn.bias_add(nn.dense(%h2, %w_out), %b_out, axis=1), axis=1);
      Cons(%y, %gen(subtract(%i, 1), %h2, %y))
    }}
  }};
  %gen(%n, %h0, %x0)
}}
"""
    rng = np.random.default_rng(seed)
    params = _weights(rng, {"w_ih": (3 * H, V), "w_hh": (3 * H, H), "b_ih": (3 * H,),
                            "b_hh": (3 * H,), "w_out": (V, H), "b_out": (V,)}, H)
    return Model(f"charrnn_h{H}", _parse(text), params)


def tree_lstm(hidden: int = 150, input_size: int = 150, seed: int = 0) -> Model:
    """Child-Sum TreeLSTM (Tai et al. 2015) over `Tree[Tensor[(1, input_size)]]`:
    `@main(%tree, weights)` returns the root's (h, c), each (1, hidden).

    h~ = sum of the children's h; i, o, u from W x + U h~ + b; one forget gate per child
    f_k = sigmoid(W_f x + U_f h_k + b_f); c = i*u + sum f_k*c_k; h = o*tanh(c). Weights:
    w_iou (3H, D), u_iou (3H, H), b_iou (3H,), w_f (H, D), u_f (H, H), b_f (H,)."""
    H, D = hidden, input_size
    state = f"({_t(1, H)}, {_t(1, H)})"
    text = f"""
def @main(%tree: Tree[{_t(1, D)}], %w_iou: {_t(3 * H, D)}, %u_iou: {_t(3 * H, H)},
          %b_iou: {_t(3 * H)}, %w_f: {_t(H, D)}, %u_f: {_t(H, H)}, %b_f: {_t(H)})
          -> {state} {{
  let %node = fn (%t: Tree[{_t(1, D)}]) -> {state} {{
    match (%t) {{
      Rose(%x, %children) => {{
        let %kids = @map(%node, %children);
        let %zero = zeros(shape=[1, {H}], dtype="float32");
        let %hsum = @foldl(fn (%acc: {_t(1, H)}, %s: {state}) {{ add(%acc, %s.0) }},
                           %zero, %kids);
        let %fx = nn.bias_add(nn.dense(%x, %w_f), %b_f, axis=1);
        let %fc = @foldl(fn (%acc: {_t(1, H)}, %s: {state}) {{
          add(%acc, multiply(sigmoid(add(%fx, nn.dense(%s.0, %u_f))), %s.1))
        }}, %zero, %kids);
        let %iou = split(add(nn.bias_add(nn.dense(%x, %w_iou), %b_iou, axis=1),
                             nn.dense(%hsum, %u_iou)), indices_or_sections=3, axis=1);
        let %c = add(multiply(sigmoid(%iou.0), tanh(%iou.2)), %fc);
        (multiply(sigmoid(%iou.1), tanh(%c)), %c)
      }}
    }}
  }};
  %node(%tree)
}}
"""
    rng = np.random.default_rng(seed)
    params = _weights(rng, {"w_iou": (3 * H, D), "u_iou": (3 * H, H), "b_iou": (3 * H,),
                            "w_f": (H, D), "u_f": (H, H), "b_f": (H,)}, H)
    return Model(f"treelstm_h{H}", _parse(text), params)


def list_lstm(hidden: int = 256, input_size: int = 256, seed: int = 0) -> Model:
    """An LSTM cell run over a List of inputs by a tail recursion over the list:
    `@main(%xs, %h0, %c0, weights)` returns the final (h, c), each (1, hidden).

    Weights as torch.nn.LSTMCell: w_ih (4H, D), w_hh (4H, H), b_ih, b_hh (4H,)."""
    H, D = hidden, input_size
    state = f"({_t(1, H)}, {_t(1, H)})"
    text = f"""
def @main(%xs: List[{_t(1, D)}], %h0: {_t(1, H)}, %c0: {_t(1, H)}, %w_ih: {_t(4 * H, D)},
          %w_hh: {_t(4 * H, H)}, %b_ih: {_t(4 * H)}, %b_hh: {_t(4 * H)}) -> {state} {{
  let %run = fn (%rest: List[{_t(1, D)}], %h: {_t(1, H)}, %c: {_t(1, H)}) -> {state} {{
    match (%rest) {{
      Cons(%x, %tail) => {{
        let %g = split(add(nn.bias_add(nn.dense(%x, %w_ih), %b_ih, axis=1),
                           nn.bias_add(nn.dense(%h, %w_hh), %b_hh, axis=1)),
                       indices_or_sections=4, axis=1);
        let %c2 = add(multiply(sigmoid(%g.1), %c), multiply(sigmoid(%g.0), tanh(%g.2)));
        %run(%tail, multiply(sigmoid(%g.3), tanh(%c2)), %c2)
      }},
      Nil => (%h, %c),
    }}
  }};
  %run(%xs, %h0, %c0)
}}
"""
    rng = np.random.default_rng(seed)
    params = _weights(rng, {"w_ih": (4 * H, D), "w_hh": (4 * H, H), "b_ih": (4 * H,),
                            "b_hh": (4 * H,)}, H)
    return Model(f"lstm_h{H}", _parse(text), params)


def small_cnn(batch: int | str = "?", seed: int = 0) -> Model:
    """Two 3x3 convs (16, 32 channels, the second strided), ReLU, the spatial mean and a
    dense layer to 10 classes on (batch, 3, 32, 32): with batch "?" the VM compiles it once
    with symbolic-extent kernels; with a number, relay_ir.build specialises it."""
    text = f"""
def @main(%x: Tensor[({batch}, 3, 32, 32), float32], %w1: {_t(16, 3, 3, 3)},
          %w2: {_t(32, 16, 3, 3)}, %w3: {_t(10, 32)}) {{
  let %a = nn.relu(nn.conv2d(%x, %w1, padding=[1, 1], channels=16, kernel_size=[3, 3]));
  let %b = nn.relu(nn.conv2d(%a, %w2, strides=[2, 2], padding=[1, 1], channels=32,
                             kernel_size=[3, 3]));
  nn.dense(mean(%b, axis=[2, 3]), %w3)
}}
"""
    rng = np.random.default_rng(seed)
    params = _weights(rng, {"w1": (16, 3, 3, 3), "w2": (32, 16, 3, 3), "w3": (10, 32)}, 27)
    return Model(f"cnn_b{batch}", relay_ir.parse(text), params)


def random_tree(rng: np.random.Generator, nodes: int, input_size: int) -> Tree:
    """A random rose tree of exactly `nodes` nodes, each holding a (1, input_size) vector;
    every node after the first hangs under a random earlier one, so fan-out and depth vary
    as in a parse tree."""
    values = [rng.standard_normal((1, input_size)).astype("float32") for _ in range(nodes)]
    kids: list[list[int]] = [[] for _ in range(nodes)]
    for k in range(1, nodes):
        kids[int(rng.integers(0, k))].append(k)

    def build(k: int) -> Tree:
        return Tree(values[k], tuple(build(c) for c in kids[k]))

    return build(0)


def list_value(mod: IRModule, values: list[Any]) -> ConstructorValue:
    """The prelude List of `values` (Cons cells ending in Nil)."""
    cons, nil = mod.get_constructor("Cons"), mod.get_constructor("Nil")
    out = ConstructorValue(nil, ())
    for v in reversed(values):
        out = ConstructorValue(cons, (v, out))
    return out


def tree_value(mod: IRModule, tree: Tree) -> ConstructorValue:
    """The prelude Tree of `tree`: Rose(value, List of the children's trees)."""
    rose = mod.get_constructor("Rose")
    return ConstructorValue(rose, (tree.value, list_value(
        mod, [tree_value(mod, c) for c in tree.children])))


def list_items(value: ConstructorValue) -> list[Any]:
    """The elements of a prelude List value, in order."""
    out = []
    while value.fields:
        out.append(value.fields[0])
        value = value.fields[1]
    return out


__all__ = ["Model", "Tree", "char_rnn", "list_items", "list_lstm", "list_value",
           "random_tree", "small_cnn", "tree_lstm", "tree_value"]
