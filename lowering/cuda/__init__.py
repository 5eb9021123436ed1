"""The CUDA backend: loop IR to CUDA C (codegen), NVRTC or nvcc to PTX and cubin
(compile), launches through the driver API (driver, kernel), and the GPU simulator
(simulator) that target "cuda -sim" runs on the CPU; tensor-core fragments and their
warp matrix calls in both (wmma).

    >>> import tensor_expr as te, lowering
    >>> from schedule import create_schedule
    >>> A = te.placeholder((256,), name="A")
    >>> B = te.compute((256,), lambda i: A[i] * 2.0, name="B")
    >>> s = create_schedule(B)
    >>> bx, tx = s[B].split(B.op.axis[0], factor=64)
    >>> s[B].bind(bx, te.thread_axis("blockIdx.x"))
    >>> s[B].bind(tx, te.thread_axis("threadIdx.x"))
    >>> f = lowering.build(s, [A, B], target="cuda -sim")
    >>> 'extern "C" __global__' in f.source
    True
    >>> import numpy as np
    >>> a, b = np.arange(256, dtype="float32"), np.full(256, np.nan, "float32")
    >>> f(a, b); b[:3].tolist()
    [0.0, 2.0, 4.0]
"""

from __future__ import annotations

from typing import Any

from lowering import ir as lir
from lowering.cuda.kernel import CudaKernel, DeviceArray, to_device
from tessel_target import Target
from tessel_target.gpu import DEFAULT_ARCH, cuda_arch


def arch_of(target: Target) -> str:
    """The architecture to compile for: `-arch`, else the GPU found, else sm_90."""
    return cuda_arch(target)


def build(func: lir.PrimFunc, target: Any) -> CudaKernel:
    """CUDA C for `func`, compiled; with `-sim` the kernel runs in the simulator.

    `f = lowering.cuda.build(func, "cuda -arch=sm_90"); print(f.source)`
    """
    from lowering.cuda.codegen import generate
    from lowering.cuda.compile import compile_cuda

    t = Target.parse(target)
    program = generate(func, arch_of(t))
    ptx, cubin = compile_cuda(program.source, program.arch)
    return CudaKernel(func, t, program, ptx, cubin)


__all__ = ["DEFAULT_ARCH", "CudaKernel", "DeviceArray", "arch_of", "build", "to_device"]
