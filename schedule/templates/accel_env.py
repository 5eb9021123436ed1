"""The accelerator's hardware configuration under VTA's names, for schedules and codegen
(lowering.accel.Env; it lives here so that the accelerator's templates can read it).

`Env(target)` reads an `accel` target (tessel_target.accel holds the options and their
defaults) and exposes what VTA's `vta.get_env()` does, so that VTA's tutorials read the
same: the GEMM core's shape (`BATCH`, `BLOCK_IN`, `BLOCK_OUT`), the dtypes, the on-chip
buffer scopes, the pragma names and `gemm`, the tensor intrinsic of one GEMM core step.

Every on-chip buffer holds whole tiles ("elements" in VTA's words): an input element is
BATCH x BLOCK_IN int8, a weight element BLOCK_OUT x BLOCK_IN int8, an accumulator element
BATCH x BLOCK_OUT int32, a micro-op 32 bits. A buffer's depth is its size over its element
size, and SRAM addresses in instructions count elements, not bytes.

    >>> env = Env("accel")
    >>> env.BATCH, env.BLOCK_IN, env.BLOCK_OUT, env.inp_scope
    (1, 16, 16, 'local.inp_buffer')
    >>> env.INP_BUFF_DEPTH, env.WGT_BUFF_DEPTH, env.ACC_BUFF_DEPTH, env.UOP_BUFF_DEPTH
    (2048, 1024, 2048, 8192)
    >>> env.gemm.name
    'accel_gemm'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import tensor_expr as te
from schedule import decl_tensor_intrin
from schedule.tensorize import TensorIntrin
from tessel_errors import CodegenError
from tessel_target import Target

# The name of the call `env.gemm` lowers to; the accel codegen recognises it by this name.
GEMM_INTRIN = "accel_gemm"
UOP_BYTES = 4  # a micro-op is one 32-bit word


@dataclass(frozen=True)
class Env:
    """VTA's environment for one accelerator configuration: `Env("accel -batch=4")`."""

    target: Target

    def __init__(self, target: Target | str = "accel") -> None:
        t = Target.parse(target)
        if t.kind != "accel":
            raise CodegenError(f"Env needs an accel target such as 'accel -batch=4', got '{t}'")
        object.__setattr__(self, "target", t)
        for name in ("INP", "WGT", "ACC", "UOP"):
            if self.depth(name) < 1:
                kib = t.attrs[f"{name.lower()}_buf_kib"]
                raise CodegenError(
                    f"accel target '{t}': the {kib} KiB {name.lower()} buffer holds no whole "
                    f"element of {self.elem_bytes(name)} bytes; make -{name.lower()}_buf_kib "
                    "larger or the core smaller")

    # -- the GEMM core ---------------------------------------------------------------
    @property
    def BATCH(self) -> int:  # noqa: N802 - VTA's names
        return int(self.target.attrs["batch"])

    @property
    def BLOCK_IN(self) -> int:  # noqa: N802
        return int(self.target.attrs["block"])

    @property
    def BLOCK_OUT(self) -> int:  # noqa: N802
        return int(self.target.attrs["block"])

    inp_dtype = "int8"
    wgt_dtype = "int8"
    acc_dtype = "int32"
    out_dtype = "int8"
    INP_WIDTH = 8
    WGT_WIDTH = 8
    ACC_WIDTH = 32
    OUT_WIDTH = 8

    # -- scopes and pragmas schedules name ---------------------------------------------
    inp_scope = "local.inp_buffer"
    wgt_scope = "local.wgt_buffer"
    acc_scope = "local.acc_buffer"
    dma_copy = "dma_copy"
    alu = "alu"

    # -- the DRAM model --------------------------------------------------------------
    @property
    def dram_bytes_per_cycle(self) -> int:
        return int(self.target.attrs["dram_bytes_per_cycle"])

    @property
    def dram_latency(self) -> int:
        return int(self.target.attrs["dram_latency"])

    # -- buffers: element sizes, sizes, depths ------------------------------------------
    def elem_bytes(self, buf: str) -> int:
        """Bytes of one element of buffer "INP", "WGT", "ACC", "OUT" or "UOP"."""
        b, i, o = self.BATCH, self.BLOCK_IN, self.BLOCK_OUT
        sizes = {"INP": b * i, "WGT": o * i, "ACC": b * o * 4, "OUT": b * o, "UOP": UOP_BYTES}
        return sizes[buf]

    def buff_bytes(self, buf: str) -> int:
        """Bytes of on-chip buffer "INP", "WGT", "ACC" or "UOP" (OUT shares ACC's depth)."""
        key = "acc" if buf == "OUT" else buf.lower()
        return int(self.target.attrs[f"{key}_buf_kib"]) * 1024

    def depth(self, buf: str) -> int:
        """Elements buffer `buf` holds (SRAM addresses run from 0 to depth - 1)."""
        if buf == "OUT":
            return self.depth("ACC")
        return self.buff_bytes(buf) // self.elem_bytes(buf)

    @property
    def INP_ELEM_BYTES(self) -> int:  # noqa: N802
        return self.elem_bytes("INP")

    @property
    def WGT_ELEM_BYTES(self) -> int:  # noqa: N802
        return self.elem_bytes("WGT")

    @property
    def ACC_ELEM_BYTES(self) -> int:  # noqa: N802
        return self.elem_bytes("ACC")

    @property
    def OUT_ELEM_BYTES(self) -> int:  # noqa: N802
        return self.elem_bytes("OUT")

    @property
    def INP_BUFF_SIZE(self) -> int:  # noqa: N802
        return self.buff_bytes("INP")

    @property
    def WGT_BUFF_SIZE(self) -> int:  # noqa: N802
        return self.buff_bytes("WGT")

    @property
    def ACC_BUFF_SIZE(self) -> int:  # noqa: N802
        return self.buff_bytes("ACC")

    @property
    def UOP_BUFF_SIZE(self) -> int:  # noqa: N802
        return self.buff_bytes("UOP")

    @property
    def INP_BUFF_DEPTH(self) -> int:  # noqa: N802
        return self.depth("INP")

    @property
    def WGT_BUFF_DEPTH(self) -> int:  # noqa: N802
        return self.depth("WGT")

    @property
    def ACC_BUFF_DEPTH(self) -> int:  # noqa: N802
        return self.depth("ACC")

    @property
    def UOP_BUFF_DEPTH(self) -> int:  # noqa: N802
        return self.depth("UOP")

    # -- the tensor intrinsic -----------------------------------------------------------
    @functools.cached_property
    def gemm(self) -> TensorIntrin:
        """One GEMM core step: out[BATCH, BLOCK_OUT] += inp[BATCH, BLOCK_IN] . wgt^T in
        int32, wgt being [BLOCK_OUT, BLOCK_IN] int8 (VTA's packed layouts)."""
        inp = te.placeholder((self.BATCH, self.BLOCK_IN), self.inp_dtype, name="inp")
        wgt = te.placeholder((self.BLOCK_OUT, self.BLOCK_IN), self.wgt_dtype, name="wgt")
        k = te.reduce_axis((0, self.BLOCK_IN), name="k")
        out = te.compute(
            (self.BATCH, self.BLOCK_OUT),
            lambda i, j: te.sum(inp[i, k].astype(self.acc_dtype)
                                * wgt[j, k].astype(self.acc_dtype), axis=k),
            name="gemm_out")
        return decl_tensor_intrin(out, GEMM_INTRIN)

    def __repr__(self) -> str:
        return f"Env('{self.target}')"


__all__ = ["Env", "GEMM_INTRIN", "UOP_BYTES"]
