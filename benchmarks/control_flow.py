"""The Relay VM against PyTorch eager and TorchScript on the Relay paper's control-flow
models (benchmarks/control_flow_models.py): CharRNN (hidden 128/256, 32/64 steps),
Child-Sum TreeLSTM (hidden 150, random trees of 20-60 nodes), an LSTM over a List; a
`?`-batch CNN compiled once by the VM against relay_ir.build's kernels built per batch;
and the VM's own time per instruction. Medians of repeats after warm-up; torch runs on as
many threads as Tessel's kernels (lowering.kernel.num_threads()).

    python -m benchmarks.control_flow            # everything
    python -m benchmarks.control_flow --quick    # fewer sizes and repeats

Before timing, each model's VM output is checked against torch's (max abs difference
printed, 1e-4 required). Needs torch==2.13.0.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

import relay_ir
import relay_ir.vm as vm
from benchmarks.control_flow_models import (
    Model,
    Tree,
    char_rnn,
    list_items,
    list_lstm,
    list_value,
    random_tree,
    small_cnn,
    tree_lstm,
    tree_value,
)
from benchmarks.models import median_seconds
from lowering.kernel import num_threads

TOLERANCE = 1e-4


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(a, dtype=np.float32))


# the PyTorch models, weights loaded from a Model's params


class CharRNN(nn.Module):
    """GRUCell + Linear + softmax, fed its own output for n steps (a Python loop)."""

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        super().__init__()
        hidden, vocab = p["w_hh"].shape[1], p["w_ih"].shape[1]
        self.cell = nn.GRUCell(vocab, hidden)
        self.out = nn.Linear(hidden, vocab)
        self.cell.weight_ih.data, self.cell.weight_hh.data = _t(p["w_ih"]), _t(p["w_hh"])
        self.cell.bias_ih.data, self.cell.bias_hh.data = _t(p["b_ih"]), _t(p["b_hh"])
        self.out.weight.data, self.out.bias.data = _t(p["w_out"]), _t(p["b_out"])

    def forward(self, n: int, h: torch.Tensor, x: torch.Tensor) -> list[torch.Tensor]:
        ys: list[torch.Tensor] = []
        for _ in range(n):
            h = self.cell(x, h)
            x = torch.softmax(self.out(h), dim=1)
            ys.append(x)
        return ys


class ListLSTM(nn.Module):
    """LSTMCell over a list of inputs; the final (h, c)."""

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(p["w_ih"].shape[1], p["w_hh"].shape[1])
        self.cell.weight_ih.data, self.cell.weight_hh.data = _t(p["w_ih"]), _t(p["w_hh"])
        self.cell.bias_ih.data, self.cell.bias_hh.data = _t(p["b_ih"]), _t(p["b_hh"])

    def forward(self, xs: list[torch.Tensor], h: torch.Tensor, c: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        for x in xs:
            h, c = self.cell(x, (h, c))
        return h, c


class ChildSumCell(nn.Module):
    """One Child-Sum TreeLSTM node from its input and its children's stacked (h, c)."""

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.w_iou = nn.Linear(p["w_iou"].shape[1], p["w_iou"].shape[0])
        self.u_iou = nn.Linear(p["u_iou"].shape[1], p["u_iou"].shape[0], bias=False)
        self.w_f = nn.Linear(p["w_f"].shape[1], p["w_f"].shape[0])
        self.u_f = nn.Linear(p["u_f"].shape[1], p["u_f"].shape[0], bias=False)
        self.w_iou.weight.data, self.w_iou.bias.data = _t(p["w_iou"]), _t(p["b_iou"])
        self.u_iou.weight.data = _t(p["u_iou"])
        self.w_f.weight.data, self.w_f.bias.data = _t(p["w_f"]), _t(p["b_f"])
        self.u_f.weight.data = _t(p["u_f"])

    def forward(self, x: torch.Tensor, hs: torch.Tensor, cs: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        # hs, cs: (children, H); a leaf has zero rows, so the sums are zero
        iou = self.w_iou(x) + self.u_iou(hs.sum(dim=0, keepdim=True))
        i, o, u = torch.chunk(iou, 3, dim=1)
        f = torch.sigmoid(self.w_f(x) + self.u_f(hs))
        c = torch.sigmoid(i) * torch.tanh(u) + (f * cs).sum(dim=0, keepdim=True)
        return torch.sigmoid(o) * torch.tanh(c), c


class TreeLSTM(nn.Module):
    """Eager: a Python recursion over the Tree, as a PyTorch user writes it."""

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.cell = ChildSumCell(p)
        self.hidden = p["u_f"].shape[0]

    def forward(self, tree: Any) -> tuple[torch.Tensor, torch.Tensor]:
        states = [self.forward(c) for c in tree.children]
        if states:
            hs = torch.cat([s[0] for s in states])
            cs = torch.cat([s[1] for s in states])
        else:
            hs = cs = torch.zeros(0, self.hidden)
        return self.cell(tree.value, hs, cs)


class ScriptTreeLSTM(nn.Module):
    """For TorchScript, which has no recursion: nodes in post-order, children by index."""

    def __init__(self, p: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.cell = ChildSumCell(p)
        self.hidden = p["u_f"].shape[0]

    def forward(self, xs: list[torch.Tensor], kids: list[list[int]]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        hs: list[torch.Tensor] = []
        cs: list[torch.Tensor] = []
        for k in range(len(xs)):
            if len(kids[k]) > 0:
                h_kids = torch.cat([hs[j] for j in kids[k]])
                c_kids = torch.cat([cs[j] for j in kids[k]])
            else:
                h_kids = torch.zeros(0, self.hidden)
                c_kids = torch.zeros(0, self.hidden)
            h, c = self.cell(xs[k], h_kids, c_kids)
            hs.append(h)
            cs.append(c)
        return hs[-1], cs[-1]


def torch_tree(tree: Tree) -> Any:
    """The same tree with torch tensors (so eager pays no conversion per node)."""
    return Tree(_t(tree.value), tuple(torch_tree(c) for c in tree.children))  # type: ignore


def post_order(tree: Tree) -> tuple[list[torch.Tensor], list[list[int]]]:
    xs: list[torch.Tensor] = []
    kids: list[list[int]] = []

    def visit(t: Tree) -> int:
        mine = [visit(c) for c in t.children]
        xs.append(_t(t.value))
        kids.append(mine)
        return len(xs) - 1

    visit(tree)
    return xs, kids


# one benchmark row


def _max_diff(got: Any, want: Any) -> float:
    if isinstance(want, (list, tuple)):
        return max(_max_diff(g, w) for g, w in zip(got, want, strict=True))
    return float(np.abs(np.asarray(got) - want.detach().numpy()).max())


def _check(name: str, got: Any, want: Any) -> float:
    diff = _max_diff(got, want)
    status = "ok" if diff <= TOLERANCE else "MISMATCH"
    print(f"  {name}: VM vs torch max |diff| {diff:.2e} ({status})")
    if diff > TOLERANCE:
        raise SystemExit(f"{name}: the VM's output differs from torch's by {diff:.2e}")
    return diff


def _row(name: str, vm_run: Callable[[], Any], eager: Callable[[], Any],
         script: Callable[[], Any], repeat: int) -> dict[str, float]:
    with torch.inference_mode():
        return {"name": name,  # type: ignore[dict-item]
                "vm": median_seconds(vm_run, repeat),
                "eager": median_seconds(eager, repeat),
                "script": median_seconds(script, repeat, warmup=3)}


def _machine(model: Model) -> vm.VirtualMachine:
    return vm.VirtualMachine(vm.compile(model.module, params=model.params))


def bench_char_rnn(hidden: int, steps: int, repeat: int, vocab: int = 64) -> dict:
    model = char_rnn(hidden=hidden, vocab=vocab)
    machine = _machine(model)
    rng = np.random.default_rng(1)
    h0 = rng.standard_normal((1, hidden)).astype("float32")
    x0 = np.eye(vocab, dtype="float32")[:1]
    eager = CharRNN(model.params).eval()
    script = torch.jit.script(eager)
    n = np.int32(steps)
    th, tx = _t(h0), _t(x0)
    name = f"CharRNN h{hidden} x{steps}"
    with torch.inference_mode():
        _check(name, list_items(machine.run(n, h0, x0)), eager(steps, th, tx))
    row = _row(name, lambda: machine.run(n, h0, x0), lambda: eager(steps, th, tx),
               lambda: script(steps, th, tx), repeat)
    return {**row, "profile": (machine, (n, h0, x0))}


def bench_tree_lstm(trees: int, repeat: int, hidden: int = 150) -> dict:
    model = tree_lstm(hidden=hidden, input_size=hidden)
    machine = _machine(model)
    rng = np.random.default_rng(2)
    pytrees = [random_tree(rng, int(rng.integers(20, 61)), hidden) for _ in range(trees)]
    values = [tree_value(model.module, t) for t in pytrees]
    eager = TreeLSTM(model.params).eval()
    script = torch.jit.script(ScriptTreeLSTM(model.params).eval())
    ttrees = [torch_tree(t) for t in pytrees]
    orders = [post_order(t) for t in pytrees]
    name = f"TreeLSTM h{hidden} {trees} trees"
    with torch.inference_mode():
        for v, tt, (xs, kids) in zip(values, ttrees, orders):
            _check(name, machine.run(v), eager(tt))
            _check(name + " (script)", machine.run(v), script(xs, kids))
    nodes = sum(t.size() for t in pytrees)
    row = _row(f"{name} ({nodes} nodes)", lambda: [machine.run(v) for v in values],
               lambda: [eager(t) for t in ttrees],
               lambda: [script(xs, kids) for xs, kids in orders], repeat)
    return {**row, "profile": (machine, (values[0],))}


def bench_list_lstm(steps: int, repeat: int, hidden: int = 256) -> dict:
    model = list_lstm(hidden=hidden, input_size=hidden)
    machine = _machine(model)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1, hidden)).astype("float32") for _ in range(steps)]
    h0 = np.zeros((1, hidden), "float32")
    value = list_value(model.module, xs)
    eager = ListLSTM(model.params).eval()
    script = torch.jit.script(eager)
    txs, th = [_t(x) for x in xs], _t(h0)
    name = f"LSTM list h{hidden} x{steps}"
    with torch.inference_mode():
        _check(name, machine.run(value, h0, h0), eager(txs, th, th))
    row = _row(name, lambda: machine.run(value, h0, h0), lambda: eager(txs, th, th),
               lambda: script(txs, th, th), repeat)
    return {**row, "profile": (machine, (value, h0, h0))}


def bench_dynamic_cnn(batches: tuple[int, ...], repeat: int) -> list[dict]:
    rng = np.random.default_rng(4)
    model = small_cnn()
    machine = _machine(model)
    rows = []
    for batch in batches:
        lib = relay_ir.build(small_cnn(batch).module, params=model.params)
        x = rng.standard_normal((batch, 3, 32, 32)).astype("float32")
        diff = float(np.abs(machine.run(x) - lib.run(x=x)).max())
        print(f"  ?-batch CNN b{batch}: VM vs build max |diff| {diff:.2e}")
        if diff > TOLERANCE:
            raise SystemExit(f"?-batch CNN: the VM's output differs from build's by {diff:.2e}")
        rows.append({"batch": batch, "vm": median_seconds(lambda x=x: machine.run(x), repeat),
                     "build": median_seconds(lambda x=x, lib=lib: lib.run(x=x), repeat)})
    return rows


def overhead(machine: vm.VirtualMachine, args: tuple, total: float) -> tuple[int, float,
                                                                               float]:
    """Instructions of one run, the kernels' share of its time, and the VM's own time per
    instruction ((untimed median - kernel time) / instructions)."""
    prof = machine.profile(*args)
    kernels = prof.kernels.total
    return prof.instructions, kernels / total, (total - kernels) / prof.instructions


def _ms(s: float) -> str:
    return f"{s * 1e3:9.3f}"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    ap.add_argument("--repeat", type=int, default=None)
    a = ap.parse_args(argv)
    repeat = a.repeat or (5 if a.quick else 20)
    threads = num_threads()
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, {threads} thread(s) for Tessel and torch, "
          f"median of {repeat}")
    rnn_sizes = [(128, 32), (256, 64)] if a.quick else [(128, 32), (128, 64), (256, 32),
                                                          (256, 64)]
    rows = [bench_char_rnn(h, n, repeat) for h, n in rnn_sizes]
    rows.append(bench_tree_lstm(3 if a.quick else 8, repeat))
    rows.append(bench_list_lstm(32, repeat))
    print(f"\n{'model':<36} {'VM ms':>9} {'eager ms':>9} {'script ms':>9} "
          f"{'eager/VM':>8} {'script/VM':>9}")
    for r in rows:
        print(f"{r['name']:<36} {_ms(r['vm'])} {_ms(r['eager'])} {_ms(r['script'])} "
              f"{r['eager'] / r['vm']:8.2f} {r['script'] / r['vm']:9.2f}")
    print(f"\n{'VM overhead (one run)':<36} {'instrs':>7} {'in kernels':>10} "
          f"{'us/instr':>9}")
    for r in rows:
        machine, args = r["profile"]
        one = median_seconds(lambda: machine.run(*args), repeat)  # noqa: B023
        n, share, per = overhead(machine, args, one)
        print(f"{r['name']:<36} {n:7d} {share * 100:9.1f}% {per * 1e6:9.2f}")
    cnn = bench_dynamic_cnn((1, 3, 8), repeat)
    print(f"\n{'?-batch CNN':<36} {'VM ms':>9} {'build ms':>9} {'VM/build':>8}")
    for r in cnn:
        print(f"{'batch ' + str(r['batch']):<36} {_ms(r['vm'])} {_ms(r['build'])} "
              f"{r['vm'] / r['build']:8.2f}")
    return {"rows": [{k: v for k, v in r.items() if k != "profile"} for r in rows],
            "cnn": cnn}


if __name__ == "__main__":
    main()
