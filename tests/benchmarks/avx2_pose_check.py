"""Run under benchmarks.avx2_host by test_avx2_host: what Tessel's default target builds
in a posed process (the conv template's code; a small CNN's result against the Relay
interpreter on random inputs) and what a child process of it sees."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

import lowering
import relay_ir
from schedule.templates import instantiate

CNN = """
def @main(%x: Tensor[(1, 16, 14, 14), float32], %w: Tensor[(32, 16, 3, 3), float32]) {
  nn.relu(nn.conv2d(%x, %w, padding=[1, 1]))
}"""


def main() -> None:
    s, tensors = instantiate("conv2d_NCHWc.x86", [((1, 16, 14, 14), "float32"),
                                                  ((32, 16, 3, 3), "float32")],
                             {"padding": 1}, target="llvm")
    asm = lowering.build(s, tensors, target="llvm").source("asm")
    print("conv code:", "zmm" if "zmm" in asm else "no zmm", "ymm" if "ymm" in asm else "")
    rng = np.random.default_rng()
    x = rng.standard_normal((1, 16, 14, 14)).astype("float32")
    w = rng.standard_normal((32, 16, 3, 3)).astype("float32")
    mod = relay_ir.parse(CNN)
    got = relay_ir.build(mod, target="llvm").run(x, w)
    want = relay_ir.interpret(mod, x, w)
    error = np.max(np.abs(np.asarray(got) - want)) / np.max(np.abs(want))
    print("relative error vs interpreter:", float(error))
    child = subprocess.run([sys.executable, "-c", "import llvmlite.binding as llvm; "
                            "print(llvm.get_host_cpu_features().get('avx512f'))"],
                           capture_output=True, text=True, check=True)
    print("child avx512f:", child.stdout.strip())


if __name__ == "__main__":
    main()
