"""ResNet-18's stride-2 max pool (3x3, pad 1, after the stem conv) as the model runs it: in
the blocked layout NCHW[x]c that the stem conv writes (schedule.templates.x86_injective.
schedule_blocked_pool), beside a Tessel copy of the same input (the floor: a pool must read
all of it), the same pool in NCHW, numpy's copy and ONNX Runtime's MaxPool on the NCHW
tensor. Outputs are checked against ORT first; medians of --repeat after warm-up,
--rounds interleaved rounds, the load average with each round.

    python -m benchmarks.pool                        # 1x64x112x112, the host's block
    python -m benchmarks.pool --target "llvm -mcpu=haswell"   # the AVX2 block and code
    python -m benchmarks.pool --channels 8 --size 16 --repeat 2 --rounds 1   # tiny
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import numpy as np
from onnx import TensorProto, helper

import lowering
import tensor_expr as te
from benchmarks.models import median_seconds, ort_session, relative_error
from lowering.kernel import num_threads
from relay_ir.backend.executor import aligned, aligned_empty
from schedule.space import FallbackConfig
from schedule.templates.x86_conv2d_nchwc import pick_blocks
from schedule.templates.x86_injective import schedule_injective, schedule_reduce
from tensor_expr import ops
from tessel_target import Target


def maxpool_model(shape: tuple[int, int, int, int]) -> Any:
    """A one-node ONNX MaxPool(3x3, stride 2, pad 1) of an NCHW input of `shape`."""
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1])
    graph = helper.make_graph([node], "pool",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def _kernels(shape5: tuple[int, ...], shape4: tuple[int, ...], target: str
             ) -> dict[str, Any]:
    """{name: (kernel, input shape, output shape)}: blocked pool, its input's copy, NCHW pool."""
    out = {}
    for name, shape in (("blocked", shape5), ("nchw", shape4)):
        x = te.placeholder(shape, "float32", name="x")
        y = ops.max_pool2d(x, (3, 3), (2, 2), (1, 1, 1, 1),
                           layout="NCHWc" if len(shape) == 5 else "NCHW")
        s = schedule_reduce(FallbackConfig(target), [y])
        out[name] = (lowering.build(s, [x, y], target=target), shape,
                     tuple(int(d.value) for d in y.shape))
    x = te.placeholder(shape5, "float32", name="x")
    y = te.compute(shape5, lambda *i: x[i], name="copy")
    s = schedule_injective(FallbackConfig(target), [y])
    out["copy"] = (lowering.build(s, [x, y], target=target), shape5, shape5)
    return out


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Run the benchmark (see the module docstring); returns the median seconds per system.

        >>> main(["--channels", "8", "--size", "16", "--repeat", "2", "--rounds", "1"])
        ... # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--size", type=int, default=112, help="input height and width")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pause", type=float, default=0.3)
    a = ap.parse_args(argv)
    if Target.parse(a.target).features > Target.parse("llvm").features:
        raise SystemExit(f"this host cannot run code for '{a.target}'")
    c, n = a.channels, a.size
    # the stem conv's output block, as the layout plan stores the pool's input
    _, block, _ = pick_blocks(3, c, n, None, Target.parse(a.target))
    shape4, shape5 = (1, c, n, n), (1, c // block, n, n, block)
    kernels = _kernels(shape5, shape4, a.target)
    rng = np.random.default_rng(0)
    x4 = aligned(rng.standard_normal(shape4).astype("float32"))
    x5 = aligned(np.ascontiguousarray(
        x4.reshape(1, c // block, block, n, n).transpose(0, 1, 3, 4, 2)))
    arrays = {k: (x5 if len(ins) == 5 else x4, aligned_empty(outs, "float32"))
              for k, (_, ins, outs) in kernels.items()}
    sess = ort_session(maxpool_model(shape4), num_threads())
    want = sess.run(None, {"x": x4})[0]
    for k in ("blocked", "nchw"):
        kernels[k][0](*arrays[k])
        got = arrays[k][1]
        if got.ndim == 5:
            got = got.transpose(0, 1, 4, 2, 3).reshape(want.shape)
        err = relative_error(got, want)
        if not err <= 1e-6:
            raise SystemExit(f"tessel {k} max pool differs from onnxruntime by {err:.1e}")
    copy_dst = np.empty_like(x4)
    runs = {f"tessel {k}": (lambda k=k: kernels[k][0](*arrays[k])) for k in kernels}
    runs["numpy copy"] = lambda: np.copyto(copy_dst, x4)
    runs["onnxruntime"] = lambda: sess.run(None, {"x": x4})
    print(f"max pool 3x3 s2 p1 of 1x{c}x{n}x{n} (blocked by {block}), target '{a.target}', "
          f"{num_threads()} threads; microseconds, median of {a.repeat}")
    per: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(a.rounds):
        print(f"round {r + 1}: load average {os.getloadavg()[0]:.2f}", flush=True)
        for k, fn in runs.items():
            time.sleep(a.pause)  # let the previous runtime's workers go idle
            per[k].append(median_seconds(fn, a.repeat, warmup=3))
    secs = {k: statistics.median(v) for k, v in per.items()}
    for k, v in secs.items():
        print(f"  {k:<16} {v * 1e6:9.1f} us   {v / secs['tessel copy']:5.2f}x tessel copy   "
              f"{v / secs['onnxruntime']:5.2f}x onnxruntime")
    return secs


if __name__ == "__main__":
    main()
