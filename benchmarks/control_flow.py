"""The Relay VM against PyTorch eager and TorchScript on the Relay paper's control-flow
models (benchmarks/control_flow_models.py): CharRNN (hidden 128/256, 32/64 steps),
Child-Sum TreeLSTM (hidden 150, random trees of 20-60 nodes), an LSTM over a List; a
`?`-batch CNN compiled once by the VM (split per image, and as plain symbolic-extent
kernels) against relay_ir.build's kernels built per batch;
and the VM's own time per instruction. Systems are timed in interleaved rounds (each round
times every system once per model; the figure is the median over rounds of each round's
median), wall clock and, beside it, the process's CPU time, the steadier figure on a
shared machine; torch runs on as many threads as Tessel's kernels (--threads sets both).

    python -m benchmarks.control_flow                 # everything
    python -m benchmarks.control_flow --quick         # fewer sizes and rounds
    python -m benchmarks.control_flow --threads 1     # one thread for Tessel and torch

Before timing, each model's VM output is checked against torch's (max abs difference
printed, 1e-4 required). Needs torch==2.13.0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
from lowering.kernel import num_threads
from relay_ir.vm.dynamic import DynamicKernel

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


@dataclass
class Row:
    """One model: its runners by system, and per round each system's (wall, CPU) median."""

    name: str
    runners: dict[str, Callable[[], Any]]
    profile: tuple[Any, tuple]  # (VirtualMachine, args) for the overhead table
    rounds: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def time_round(self, repeat: int) -> None:
        with torch.inference_mode():
            for system, fn in self.runners.items():
                self.rounds.setdefault(system, []).append(_medians(fn, repeat))

    def wall(self, system: str) -> float:
        return statistics.median(w for w, _ in self.rounds[system])

    def cpu(self, system: str) -> float:
        return statistics.median(c for _, c in self.rounds[system])


def _medians(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Median wall and process CPU time of `fn()` over `repeat` calls after a warm-up
    call. CPU time counts the work of every thread of the process, not the time others'
    processes took the cores, so on a loaded machine it is the steadier figure."""
    fn()
    walls, cpus = [], []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def _machine(model: Model) -> vm.VirtualMachine:
    return vm.VirtualMachine(vm.compile(model.module, params=model.params))


def bench_char_rnn(hidden: int, steps: int, vocab: int = 64) -> Row:
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
    return Row(name, {"vm": lambda: machine.run(n, h0, x0), "eager": lambda: eager(steps, th, tx),
                      "script": lambda: script(steps, th, tx)}, (machine, (n, h0, x0)))


def bench_tree_lstm(trees: int, hidden: int = 150, nodes: tuple[int, int] = (20, 60)) -> Row:
    model = tree_lstm(hidden=hidden, input_size=hidden)
    machine = _machine(model)
    rng = np.random.default_rng(2)
    pytrees = [random_tree(rng, int(rng.integers(nodes[0], nodes[1] + 1)), hidden)
               for _ in range(trees)]
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
    total = sum(t.size() for t in pytrees)
    return Row(f"{name} ({total} nodes)", {
        "vm": lambda: [machine.run(v) for v in values],
        "eager": lambda: [eager(t) for t in ttrees],
        "script": lambda: [script(xs, kids) for xs, kids in orders]}, (machine, (values[0],)))


def bench_list_lstm(steps: int, hidden: int = 256) -> Row:
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
    return Row(name, {"vm": lambda: machine.run(value, h0, h0),
                      "eager": lambda: eager(txs, th, th),
                      "script": lambda: script(txs, th, th)}, (machine, (value, h0, h0)))


def bench_dynamic_cnn(batches: tuple[int, ...], repeat: int, rounds: int) -> list[dict]:
    """The ?-batch CNN on the VM (groups split per image, relay_ir.vm.batch_split), on a
    VM whose every ?-group is one symbolic-extent kernel (the split turned off), and as
    relay_ir.build compiles it for each batch."""
    rng = np.random.default_rng(4)
    model = small_cnn()
    machine = _machine(model)
    # symbolic-extent kernels read and write NCHW: this VM takes no layout plan (a
    # per-image group's blocked layout, relay_ir.vm.layouts, needs its per-image kernel)
    with relay_ir.transform.PassContext(disabled_pass=["AlterOpLayout"]):
        symbolic = _machine(model)
    for k in symbolic.exe.kernels:
        if isinstance(k, DynamicKernel):
            k.per_image = False
    rows = []
    for batch in batches:
        lib = relay_ir.build(small_cnn(batch).module, params=model.params)
        x = rng.standard_normal((batch, 3, 32, 32)).astype("float32")
        diff = max(float(np.abs(m.run(x) - lib.run(x=x)).max()) for m in (machine, symbolic))
        print(f"  ?-batch CNN b{batch}: VM vs build max |diff| {diff:.2e}")
        if diff > TOLERANCE:
            raise SystemExit(f"?-batch CNN: the VM's output differs from build's by {diff:.2e}")
        rows.append(Row(f"batch {batch}", {"vm": lambda x=x: machine.run(x),
                                           "symbolic": lambda x=x: symbolic.run(x),
                                           "build": lambda x=x, lib=lib: lib.run(x=x)},
                        (machine, (x,))))
    for _ in range(rounds):
        for r in rows:
            r.time_round(repeat)
    return [{"batch": b, "vm": r.wall("vm"), "symbolic": r.wall("symbolic"),
             "build": r.wall("build")} for b, r in zip(batches, rows)]


def overhead(machine: vm.VirtualMachine, args: tuple, runs: int = 20) -> tuple[int, float,
                                                                           float]:
    """Instructions of one run, the kernels' share of its time, and the VM's own time per
    instruction: (run time - kernel time) / instructions, each the minimum over `runs`
    runs (untimed, and profiled for the kernel time), the least disturbed figure of each
    on a shared machine (their medians come from runs that other processes slowed
    differently)."""
    machine.run(*args)
    total = min(_medians(lambda: machine.run(*args), 1)[0] for _ in range(runs))
    profiles = [machine.profile(*args) for _ in range(runs)]
    kernels = min(p.kernels.total for p in profiles)
    n = profiles[0].instructions
    return n, kernels / total, (total - kernels) / n


def _ms(s: float) -> str:
    return f"{s * 1e3:9.3f}"


SIZES = {  # (CharRNN (hidden, steps)s, trees, tree nodes, tree hidden, LSTM steps, hidden)
    "full": ([(128, 32), (128, 64), (256, 32), (256, 64)], 8, (20, 60), 150, 32, 256),
    "quick": ([(128, 32), (256, 64)], 3, (20, 60), 150, 32, 256),
    "tiny": ([(8, 3)], 2, (3, 5), 6, 3, 8),
}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    ap.add_argument("--tiny", action="store_true", help="tiny models (the test's run)")
    ap.add_argument("--repeat", type=int, default=None, help="calls per round (median)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="interleaved rounds (each times every system once per model)")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for Tessel's kernels and torch (default: the CPUs)")
    a = ap.parse_args(argv)
    if a.threads is not None:
        os.environ["TESSEL_NUM_THREADS"] = str(a.threads)  # read as kernels are made
    size = "tiny" if a.tiny else "quick" if a.quick else "full"
    repeat = a.repeat or (1 if a.tiny else 5 if a.quick else 10)
    rounds = a.rounds or (1 if a.tiny else 3 if a.quick else 7)
    threads = num_threads()
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, {threads} thread(s) for Tessel and torch; median over "
          f"{rounds} interleaved rounds of the median of {repeat} calls; load average "
          f"{os.getloadavg()[0]:.2f}")
    rnn, trees, nodes, tree_hidden, lstm_steps, lstm_hidden = SIZES[size]
    rows = [bench_char_rnn(h, n, vocab=5 if a.tiny else 64) for h, n in rnn]
    rows.append(bench_tree_lstm(trees, tree_hidden, nodes))
    rows.append(bench_list_lstm(lstm_steps, lstm_hidden))
    for _ in range(rounds):
        for r in rows:
            r.time_round(repeat)
    print(f"\n{'model':<36} {'VM ms':>9} {'eager ms':>9} {'script ms':>9} "
          f"{'eager/VM':>8} {'script/VM':>9} {'eager/VM cpu':>12}")
    for r in rows:
        print(f"{r.name:<36} {_ms(r.wall('vm'))} {_ms(r.wall('eager'))} "
              f"{_ms(r.wall('script'))} {r.wall('eager') / r.wall('vm'):8.2f} "
              f"{r.wall('script') / r.wall('vm'):9.2f} {r.cpu('eager') / r.cpu('vm'):12.2f}")
    faster = all(r.wall("eager") > r.wall("vm") for r in rows)
    print(f"goal (the VM faster than PyTorch eager on every model): "
          f"{'met' if faster else 'NOT met'}")
    print(f"\n{'VM overhead (one run)':<36} {'instrs':>7} {'in kernels':>10} "
          f"{'us/instr':>9}")
    for r in rows:
        machine, args = r.profile
        n, share, per = overhead(machine, args, 3 if a.tiny else 20)
        print(f"{r.name:<36} {n:7d} {share * 100:9.1f}% {per * 1e6:9.2f}")
    cnn = bench_dynamic_cnn((1, 2) if a.tiny else (1, 3, 8), repeat, rounds)
    print(f"\n{'?-batch CNN (VM: per image)':<36} {'VM ms':>9} {'symb. ms':>9} "
          f"{'build ms':>9} {'VM/build':>8} {'symb./build':>11}")
    for c in cnn:
        print(f"{'batch ' + str(c['batch']):<36} {_ms(c['vm'])} {_ms(c['symbolic'])} "
              f"{_ms(c['build'])} {c['vm'] / c['build']:8.2f} "
              f"{c['symbolic'] / c['build']:11.2f}")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return {"rows": [{"name": r.name, **{s: r.wall(s) for s in r.runners},
                      **{f"{s}_cpu": r.cpu(s) for s in r.runners}} for r in rows],
            "cnn": cnn, "goal_met": faster}


if __name__ == "__main__":
    main()
