"""ResNet-18's conv layers on the simulated accelerator: cycles, GEMM utilisation and DRAM
bytes, with virtual threads (double buffering) off and on, and batch 1 against batch 4
(the `accel -batch=4` core, four images a GEMM step; cycles per image).

    python -m benchmarks.accel            # the table (cycle model), one functional check
    python -m benchmarks.accel --quick    # the same, without the 7x7 first layer

The cycles come from the cycle model (`lowering.accel.simulator.profile`: they do not
depend on the data); the smallest layer also runs functionally on random int8 data and
is checked bit for bit against numpy, and its run's stats against the model's.
"""

from __future__ import annotations

import argparse

import numpy as np

from lowering.accel import Env
from lowering.accel.conv2d import Bases, Conv2d, plan, reference_conv2d, run_conv2d
from lowering.accel.conv2d import conv2d as conv2d_stream
from lowering.accel.simulator import Stats, profile

# (name, in channels, size, out channels, kernel, stride, padding): every distinct conv
LAYERS = [
    ("conv1 7x7/2 64", 3, 224, 64, 7, 2, 3),
    ("3x3 64@56", 64, 56, 64, 3, 1, 1),
    ("3x3/2 128@28", 64, 56, 128, 3, 2, 1),
    ("1x1/2 128@28", 64, 56, 128, 1, 2, 0),
    ("3x3 128@28", 128, 28, 128, 3, 1, 1),
    ("3x3/2 256@14", 128, 28, 256, 3, 2, 1),
    ("1x1/2 256@14", 128, 28, 256, 1, 2, 0),
    ("3x3 256@14", 256, 14, 256, 3, 1, 1),
    ("3x3/2 512@7", 256, 14, 512, 3, 2, 1),
    ("1x1/2 512@7", 256, 14, 512, 1, 2, 0),
    ("3x3 512@7", 512, 7, 512, 3, 1, 1),
]


def layer_stats(target: str, batch: int, layer: tuple, double_buffer: bool) -> Stats:
    """The cycle model's stats of one layer with a bias/shift/ReLU/clip tail."""
    env = Env(target)
    _, c, size, o, k, s, pad = layer
    p = plan(env, Conv2d(batch, c, size, size, o, (k, k), s, pad), None, double_buffer)
    insns = conv2d_stream(p, Bases(0, 0, 0, 0, bias=0), shift=8, relu=True, clip=True)
    return profile(insns, env)


def check_functional(layer: tuple) -> str:
    """Run `layer` on the simulator on random data; bit-exact against numpy?"""
    _, c, size, o, k, s, pad = layer
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, c, size, size), dtype=np.int8)
    w = rng.integers(-128, 128, (o, c, k, k), dtype=np.int8)
    b = rng.integers(-(1 << 16), 1 << 16, o).astype(np.int32)
    y, stats, insns = run_conv2d(Env(), x, w, stride=s, padding=pad, bias=b, shift=8,
                                 relu=True, clip=True)
    same = np.array_equal(y, reference_conv2d(x, w, s, pad, b, 8, True, True))
    model = profile(insns, Env()).as_dict() == stats.as_dict()
    return (f"functional check of {layer[0]}: output {'equals' if same else 'DIFFERS FROM'} "
            f"numpy; run stats {'equal' if model else 'DIFFER FROM'} the cycle model's")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="leave out the 7x7 first layer")
    args = ap.parse_args(argv)
    layers = LAYERS[1:] if args.quick else LAYERS
    head = (f"{'layer':<16}{'vt':>4}{'cycles b1':>12}{'util':>7}{'read KiB':>10}"
            f"{'write KiB':>10}{'cyc/img b4':>12}{'util':>7}{'read KiB/img':>13}")
    print(head)
    print("-" * len(head))
    totals = {}
    for layer in layers:
        for vt in (False, True):
            one = layer_stats("accel", 1, layer, vt)
            four = layer_stats("accel -batch=4", 4, layer, vt)
            for key, st, imgs in (("b1", one, 1), ("b4", four, 4)):
                totals[(key, vt)] = totals.get((key, vt), 0) + st.total_cycles / imgs
            print(f"{layer[0]:<16}{'on' if vt else 'off':>4}{one.total_cycles:>12}"
                  f"{one.gemm_utilisation:>7.2f}{one.dram_bytes_read / 1024:>10.0f}"
                  f"{one.dram_bytes_written / 1024:>10.0f}{four.total_cycles // 4:>12}"
                  f"{four.gemm_utilisation:>7.2f}{four.dram_bytes_read / 4096:>13.0f}")
    for vt in (False, True):
        print(f"{'total':<16}{'on' if vt else 'off':>4}{totals[('b1', vt)]:>12.0f}"
              f"{'':>27}{totals[('b4', vt)]:>12.0f}")
    print(check_functional(LAYERS[-2]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
