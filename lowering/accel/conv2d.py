"""Microcode for an int8 conv2d in VTA's packed layouts, as VTA's conv2d schedule runs it.

DRAM holds the data as NCHW1n16c, [N/BATCH, C/BLOCK_IN, H, W, BATCH, BLOCK_IN] (input
elements (n, c, y, x)), the kernel as OIHW16o16i, [O/BLOCK_OUT, C/BLOCK_IN, KH, KW,
BLOCK_OUT, BLOCK_IN] (weight elements (o, c, kh, kw)) and the output as [N/BATCH,
O/BLOCK_OUT, OH, OW, BATCH, BLOCK_OUT]; channel counts that are not a multiple of the
block are padded with zeros by `pack_data`/`pack_kernel` and cropped by `unpack_output`.

The output is cut into tiles of `oc` channel blocks x `rows` x `cols`; the reduction
into steps of `ic` channel blocks. The weights of one channel tile (all input channels)
are loaded once, one 2-D DMA, and stay on chip for every spatial tile and batch block;
for every output tile: reset its accumulators, then per step one LOAD per input channel
block of the tile's input window (2-D strided, the conv's zero padding written by the
LOAD's pad fields) and one GEMM; then the bias add (a LOAD of the bias into the
accumulator and an ALU add), shift right, ReLU, clip, and a STORE per channel block.

The GEMM's two loops walk the tile's output rows and columns (index factors stride x
window width and stride); its micro-ops cover (oc, ic, kh, kw). A kernel depends only on
the tiling, the step and the buffer halves, so each is generated once and reused by
every tile. With `double_buffer` each buffer is split in two halves (VTA's two virtual
threads): steps alternate input halves, channel tiles weight halves, output tiles
accumulator halves. The dependency tokens come from lowering.accel.deps.

    >>> import numpy as np
    >>> from lowering.accel.env import Env
    >>> x = np.ones((1, 16, 4, 4), "int8"); w = np.ones((16, 16, 3, 3), "int8")
    >>> y, stats, _ = run_conv2d(Env(), x, w, padding=1)
    >>> int(y[0, 0, 0, 0]), int(y[0, 0, 1, 1])   # a corner sees 4 taps, the middle 9
    (64, -112)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lowering.accel.deps import insert_dependencies
from lowering.accel.dram import Dram
from lowering.accel.env import Env
from lowering.accel.isa import Alu, AluOp, Finish, Gemm, Insn, Load, MemType, Store, Uop
from lowering.accel.microcode import split_buffers
from lowering.accel.simulator import Stats, run
from tessel_errors import CodegenError

PAD_MAX = 15  # the LOAD's pad fields are 4 bits


@dataclass(frozen=True)
class Conv2d:
    """A conv2d's sizes: data [batch, in_channels, height, width], square stride/padding."""

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel: tuple[int, int]
    stride: int = 1
    padding: int = 0

    @property
    def out_height(self) -> int:
        return (self.height + 2 * self.padding - self.kernel[0]) // self.stride + 1

    @property
    def out_width(self) -> int:
        return (self.width + 2 * self.padding - self.kernel[1]) // self.stride + 1

    def blocks(self, env: Env) -> tuple[int, int, int]:
        """(batch blocks, input channel blocks, output channel blocks), padded up."""
        return (-(-self.batch // env.BATCH), -(-self.in_channels // env.BLOCK_IN),
                -(-self.out_channels // env.BLOCK_OUT))


@dataclass(frozen=True)
class ConvTiling:
    """An output tile of `oc` channel blocks x `rows` x `cols`; reduction steps of `ic`
    input channel blocks."""

    oc: int
    ic: int
    rows: int
    cols: int


@dataclass(frozen=True)
class ConvPlan:
    """A conv2d's tiling, buffer halves and micro-op kernels (`uops` go to micro-op
    buffer entries 0..; `kernels[(step, hi, hw, ha)]` is a GEMM kernel's [bgn, end))."""

    env: Env
    conv: Conv2d
    tiling: ConvTiling
    halves: int
    half_depth: tuple[int, int, int]  # INP, WGT, ACC elements per half
    uops: tuple[Uop, ...]
    kernels: dict[tuple[int, int, int, int], tuple[int, int]]
    acc_kernels: tuple[int, ...]   # per accumulator half: oc micro-ops on the tile's blocks
    bias_kernels: tuple[int, ...]  # per accumulator half: oc micro-ops adding the bias

    @property
    def window(self) -> tuple[int, int]:
        """Rows and columns of the input window one output tile reads."""
        c, t = self.conv, self.tiling
        return ((t.rows - 1) * c.stride + c.kernel[0], (t.cols - 1) * c.stride + c.kernel[1])


def _divisors(n: int) -> list[int]:
    return [d for d in range(n, 0, -1) if n % d == 0]


def _needs(env: Env, conv: Conv2d, t: ConvTiling) -> tuple[int, int, int]:
    """INP, WGT, ACC elements one half holds (the accumulator tile plus its bias)."""
    kh, kw = conv.kernel
    cb = conv.blocks(env)[1]
    wh, ww = (t.rows - 1) * conv.stride + kh, (t.cols - 1) * conv.stride + kw
    return t.ic * wh * ww, t.oc * cb * kh * kw, t.oc * t.rows * t.cols + t.oc


def choose_tiling(env: Env, conv: Conv2d, double_buffer: bool = True) -> ConvTiling:
    """The largest tiling that fits the buffers: full-width rows, as many output channel
    blocks as the weights allow (fewer input re-reads), then rows, then input blocks.

        >>> choose_tiling(Env(), Conv2d(1, 64, 56, 56, 64, (3, 3), 1, 1))
        ConvTiling(oc=4, ic=2, rows=4, cols=56)
    """
    halves = 2 if double_buffer else 1
    have = [env.depth(b) // halves for b in ("INP", "WGT", "ACC")]
    _, cb, ob = conv.blocks(env)
    for cols in _divisors(conv.out_width):
        for oc in _divisors(ob):
            for rows in _divisors(conv.out_height):
                for ic in _divisors(cb):
                    t = ConvTiling(oc, ic, rows, cols)
                    if all(n <= h for n, h in zip(_needs(env, conv, t), have)):
                        if _uop_count(env, conv, t, halves) <= env.UOP_BUFF_DEPTH:
                            return t
    raise CodegenError(f"conv2d on the accelerator: no tiling of {conv} fits the buffers")


def _uop_count(env: Env, conv: Conv2d, t: ConvTiling, halves: int) -> int:
    cb = conv.blocks(env)[1]
    return 2 * halves * t.oc + halves ** 3 * t.oc * cb * conv.kernel[0] * conv.kernel[1]


def plan(env: Env, conv: Conv2d, tiling: ConvTiling | None = None,
         double_buffer: bool = True) -> ConvPlan:
    """Check the tiling against the layer and the buffers; build the micro-op kernels."""
    t = tiling or choose_tiling(env, conv, double_buffer)
    _, cb, ob = conv.blocks(env)
    if conv.out_height < 1 or conv.out_width < 1:
        raise CodegenError(f"conv2d on the accelerator: {conv} has an empty output")
    if conv.padding > PAD_MAX or conv.padding >= min(conv.kernel):
        raise CodegenError(f"conv2d on the accelerator: padding {conv.padding} must be below "
                           f"the kernel size and at most {PAD_MAX} (the LOAD's pad fields)")
    for name, size, part in (("oc", ob, t.oc), ("ic", cb, t.ic),
                             ("rows", conv.out_height, t.rows), ("cols", conv.out_width,
                                                                  t.cols)):
        if part < 1 or size % part:
            raise CodegenError(f"conv2d on the accelerator: tile {name}={part} must divide "
                               f"the layer's {size}")
    halves, half_depth = split_buffers(env, "conv2d", t, _needs(env, conv, t), double_buffer)
    inp_h, wgt_h, acc_h = half_depth
    kh, kw = conv.kernel
    wh, ww = ((t.rows - 1) * conv.stride + kh, (t.cols - 1) * conv.stride + kw)
    area = t.rows * t.cols
    uops: list[Uop] = []
    acc_kernels, bias_kernels = [], []
    for ha in range(halves):
        acc_kernels.append(len(uops))
        uops += [Uop(ha * acc_h + o * area) for o in range(t.oc)]
        bias_kernels.append(len(uops))
        uops += [Uop(ha * acc_h + o * area, ha * acc_h + t.oc * area + o) for o in range(t.oc)]
    kernels = {}
    for step in range(cb // t.ic):
        for hi in range(halves):
            for hw in range(halves):
                for ha in range(halves):
                    bgn = len(uops)
                    uops += [Uop(ha * acc_h + o * area,
                                 hi * inp_h + (c * wh + y) * ww + x,
                                 hw * wgt_h + ((o * cb + step * t.ic + c) * kh + y) * kw + x)
                             for o in range(t.oc) for c in range(t.ic)
                             for y in range(kh) for x in range(kw)]
                    kernels[(step, hi, hw, ha)] = (bgn, len(uops))
    if len(uops) > env.UOP_BUFF_DEPTH:
        raise CodegenError(f"conv2d on the accelerator: {len(uops)} micro-ops exceed the "
                           f"micro-op buffer's {env.UOP_BUFF_DEPTH}; use fewer oc blocks")
    return ConvPlan(env, conv, t, halves, half_depth, tuple(uops), kernels,
                    tuple(acc_kernels), tuple(bias_kernels))


@dataclass(frozen=True)
class Bases:
    """DRAM bases, in elements of each array's memory type."""

    data: int
    kernel: int
    out: int
    uops: int
    bias: int | None = None


def conv2d(p: ConvPlan, bases: Bases, *, shift: int = 0, relu: bool = False,
           clip: bool = False) -> list[Insn]:
    """The instruction stream, tokens inserted, for the layer at `bases`."""
    conv, t, env = p.conv, p.tiling, p.env
    nb, cb, ob = conv.blocks(env)
    kh, kw = conv.kernel
    s, pad = conv.stride, conv.padding
    h, w = conv.height, conv.width
    oh, ow = conv.out_height, conv.out_width
    wh, ww = p.window
    inp_h, wgt_h, acc_h = p.half_depth
    area = t.rows * t.cols
    out: list[Insn] = [Load(mem=MemType.UOP, sram_base=0, dram_base=bases.uops, y_size=1,
                            x_size=len(p.uops), x_stride=len(p.uops))]
    loops = dict(iter_out=t.rows, iter_in=t.cols, dst_factor_out=t.cols, dst_factor_in=1)
    tile = step_count = 0
    for ot in range(ob // t.oc):
        hw = ot % p.halves
        out.append(Load(mem=MemType.WGT, sram_base=hw * wgt_h,
                        dram_base=bases.kernel + ot * t.oc * cb * kh * kw, y_size=t.oc,
                        x_size=cb * kh * kw, x_stride=cb * kh * kw))
        for n in range(nb):
            for r0 in range(0, oh, t.rows):
                for c0 in range(0, ow, t.cols):
                    ha = tile % p.halves
                    tile += 1
                    acc = p.acc_kernels[ha]
                    out.append(Gemm(reset=True, uop_bgn=acc, uop_end=acc + t.oc, **loops))
                    y0, x0 = r0 * s - pad, c0 * s - pad
                    ya, yb = max(y0, 0), min(y0 + wh, h)
                    xa, xb = max(x0, 0), min(x0 + ww, w)
                    for step in range(cb // t.ic):
                        hi = step_count % p.halves
                        step_count += 1
                        for c in range(t.ic):
                            ci = step * t.ic + c
                            out.append(Load(
                                mem=MemType.INP, sram_base=hi * inp_h + c * wh * ww,
                                dram_base=bases.data + ((n * cb + ci) * h + ya) * w + xa,
                                y_size=yb - ya, x_size=xb - xa, x_stride=w,
                                y_pad_0=ya - y0, y_pad_1=y0 + wh - yb,
                                x_pad_0=xa - x0, x_pad_1=x0 + ww - xb))
                        bgn, end = p.kernels[(step, hi, hw, ha)]
                        out.append(Gemm(uop_bgn=bgn, uop_end=end, src_factor_out=s * ww,
                                        src_factor_in=s, **loops))
                    out += _tail(p, bases, ha, ot, shift, relu, clip, loops)
                    for o in range(t.oc):
                        out.append(Store(
                            sram_base=ha * acc_h + o * area,
                            dram_base=bases.out + ((n * ob + ot * t.oc + o) * oh + r0) * ow + c0,
                            y_size=t.rows, x_size=t.cols, x_stride=ow))
    out.append(Finish())
    return insert_dependencies(out, p.uops)


def _tail(p: ConvPlan, bases: Bases, ha: int, ot: int, shift: int, relu: bool, clip: bool,
          loops: dict[str, int]) -> list[Insn]:
    """Bias add, shift right, ReLU and clip on one accumulator tile."""
    t, acc_h = p.tiling, p.half_depth[2]
    out: list[Insn] = []
    if bases.bias is not None:
        out.append(Load(mem=MemType.ACC, sram_base=ha * acc_h + t.oc * t.rows * t.cols,
                        dram_base=bases.bias + ot * t.oc, y_size=1, x_size=t.oc,
                        x_stride=t.oc))
        bk = p.bias_kernels[ha]
        out.append(Alu(op=AluOp.ADD, uop_bgn=bk, uop_end=bk + t.oc, **loops))
    ops = [(AluOp.SHR, shift)] if shift else []
    ops += [(AluOp.MAX, 0)] if relu else []
    ops += [(AluOp.MAX, -128), (AluOp.MIN, 127)] if clip else []
    acc = p.acc_kernels[ha]
    out += [Alu(op=op, use_imm=True, imm=imm, uop_bgn=acc, uop_end=acc + t.oc, **loops)
            for op, imm in ops]
    return out


def reference_conv2d(x: np.ndarray, k: np.ndarray, stride: int = 1, padding: int = 0,
                     bias: np.ndarray | None = None, shift: int = 0, relu: bool = False,
                     clip: bool = False) -> np.ndarray:
    """The int8 conv in numpy, independent of the microcode: int32 accumulation, bias,
    arithmetic shift right, ReLU, clip, then the low 8 bits (what STORE keeps).

        >>> reference_conv2d(np.ones((1, 1, 3, 3), "int8"), np.ones((1, 1, 3, 3), "int8"),
        ...                  padding=1)[0, 0, 0]
        array([4, 6, 4], dtype=int8)
    """
    n, c, h, w = x.shape
    o, _, kh, kw = k.shape
    s, pad = stride, padding
    xp = np.pad(x.astype(np.int32), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // s + 1, (w + 2 * pad - kw) // s + 1
    acc = np.zeros((n, o, oh, ow), np.int32)
    for y in range(kh):
        for z in range(kw):
            win = xp[:, :, y:y + (oh - 1) * s + 1:s, z:z + (ow - 1) * s + 1:s]
            acc += np.einsum("nchw,oc->nohw", win, k[:, :, y, z].astype(np.int32))
    if bias is not None:
        acc += np.asarray(bias, np.int32)[None, :, None, None]
    acc = acc >> shift
    if relu:
        acc = np.maximum(acc, 0)
    if clip:
        acc = np.clip(acc, -128, 127)
    return acc.astype(np.int8)


# -- packing ---------------------------------------------------------------------------

def _pad_to(x: np.ndarray, axis: int, multiple: int) -> np.ndarray:
    extra = -x.shape[axis] % multiple
    if not extra:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return np.pad(x, widths)


def pack_data(env: Env, x: np.ndarray) -> np.ndarray:
    """NCHW -> [N/BATCH, C/BLOCK_IN, H, W, BATCH, BLOCK_IN], N and C padded with zeros."""
    x = _pad_to(_pad_to(x, 0, env.BATCH), 1, env.BLOCK_IN)
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n // env.BATCH, env.BATCH, c // env.BLOCK_IN,
                                          env.BLOCK_IN, h, w).transpose(0, 2, 4, 5, 1, 3))


def pack_kernel(env: Env, k: np.ndarray) -> np.ndarray:
    """OIHW -> [O/BLOCK_OUT, I/BLOCK_IN, KH, KW, BLOCK_OUT, BLOCK_IN], zero-padded."""
    k = _pad_to(_pad_to(k, 0, env.BLOCK_OUT), 1, env.BLOCK_IN)
    o, i, kh, kw = k.shape
    return np.ascontiguousarray(k.reshape(o // env.BLOCK_OUT, env.BLOCK_OUT,
                                          i // env.BLOCK_IN, env.BLOCK_IN, kh, kw)
                                .transpose(0, 2, 4, 5, 1, 3))


def unpack_output(env: Env, y: np.ndarray, batch: int, channels: int) -> np.ndarray:
    """[N/BATCH, O/BLOCK_OUT, OH, OW, BATCH, BLOCK_OUT] -> NCHW, cropped to the sizes."""
    nb, ob, oh, ow, b, o = y.shape
    return y.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, ob * o, oh, ow)[:batch, :channels]


def layer_operands(env: Env, dram: Dram, p: ConvPlan, data: np.ndarray | None,
                   kernel: np.ndarray | None, bias: np.ndarray | None) -> Bases:
    """Place the packed operands (zeros where None), the output and the micro-ops."""
    conv = p.conv
    nb, cb, ob = conv.blocks(env)
    kh, kw = conv.kernel
    b, blk = env.BATCH, env.BLOCK_IN
    if data is None:
        packed_d = np.zeros((nb * cb * conv.height * conv.width, b, blk), np.int8)
    else:
        packed_d = pack_data(env, data).reshape(-1, b, blk)
    if kernel is None:
        packed_k = np.zeros((ob * cb * kh * kw, env.BLOCK_OUT, blk), np.int8)
    else:
        packed_k = pack_kernel(env, kernel).reshape(-1, env.BLOCK_OUT, blk)
    d = dram.place(MemType.INP, packed_d)
    k = dram.place(MemType.WGT, packed_k)
    o = dram.alloc(MemType.OUT, nb * ob * conv.out_height * conv.out_width)
    bias_base = None
    if bias is not None:
        full = _pad_to(np.asarray(bias, np.int32), 0, env.BLOCK_OUT).reshape(ob, 1, -1)
        bias_base = dram.place(MemType.ACC, np.ascontiguousarray(
            np.broadcast_to(full, (ob, b, env.BLOCK_OUT))))
    return Bases(d, k, o, dram.place_uops(p.uops), bias_base)


def run_conv2d(env: Env, data: np.ndarray, kernel: np.ndarray, *, stride: int = 1,
               padding: int = 0, bias: np.ndarray | None = None, shift: int = 0,
               relu: bool = False, clip: bool = False, tiling: ConvTiling | None = None,
               double_buffer: bool = True) -> tuple[np.ndarray, Stats, list[Insn]]:
    """Pack int8 NCHW `data` and OIHW `kernel` (int32 `bias` [O]), run the conv on the
    simulator; returns the int8 NCHW output, the run's stats and the stream."""
    n, c, h, w = data.shape
    o, c2, kh, kw = kernel.shape
    if c2 != c:
        raise CodegenError(f"conv2d on the accelerator: the kernel has {c2} input channels, "
                           f"the data {c}")
    conv = Conv2d(n, c, h, w, o, (kh, kw), stride, padding)
    p = plan(env, conv, tiling, double_buffer)
    dram = Dram(env)
    bases = layer_operands(env, dram, p, data, kernel, bias)
    insns = conv2d(p, bases, shift=shift, relu=relu, clip=clip)
    stats = run(insns, dram, env)
    nb, _, ob = conv.blocks(env)
    raw = dram.read(MemType.OUT, bases.out, nb * ob * conv.out_height * conv.out_width)
    y = raw.reshape(nb, ob, conv.out_height, conv.out_width, env.BATCH, env.BLOCK_OUT)
    return unpack_output(env, y, n, o), stats, insns


__all__ = ["Bases", "Conv2d", "ConvPlan", "ConvTiling", "choose_tiling", "conv2d",
           "layer_operands", "pack_data", "pack_kernel", "plan", "reference_conv2d", "run_conv2d",
           "unpack_output"]
