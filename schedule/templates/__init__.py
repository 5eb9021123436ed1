"""schedule.templates: schedule templates per op and target, and the registry that names them.

    >>> from schedule.templates import instantiate, config_space
    >>> args = [((64, 32), "float32"), ((48, 32), "float32")]
    >>> s, tensors = instantiate("dense.x86", args)          # the default (fallback) schedule
    >>> space = config_space("dense.x86", args)              # the knobs, for the tuner
    >>> s2, _ = instantiate("dense.x86", args, cfg=space.get(7))

A template (`Template`) is a compute builder `compute(cfg, args, attrs) -> (inputs,
outputs)` plus one schedule function `schedule(cfg, outs) -> Schedule` that both declares
its knobs (cfg is a ConfigSpace) and applies them (a ConfigEntity, or a FallbackConfig
with per-shape defaults). `args` is a list of (shape, dtype); attrs a dict.

## The templates (x86, target kind "llvm")

- dense.x86, matmul.x86, batch_matmul.x86: knobs tile_x (3-way; its inner factor is the
  register tile width and B's packing width), pack_b, tile_y, tile_k, unroll_kw, parallel.
  Args: data [M,K] + weight [N,K]; A [M,K] + B [K,N] (attr transpose_b); [b,M,K] + [b,K,N].
- conv2d_nchw.x86: tile_co, tile_oh, tile_ow, tile_rc, reduce_order, unroll_kw. Args data
  NCHW, kernel OIHW; attrs strides, padding, dilation.
- group_conv2d_NCHWc.x86 (1 < groups < channels): tile_ic, tile_oc (per group), tile_oh,
  tile_ow, acc_scope, reduce_order, unroll_kw (conv2d_NCHWc's schedule); attrs groups,
  kernel_layout (OIHW / OIHWio).
- conv2d_NCHWc.x86: tile_ic, tile_oc, tile_oh x tile_ow (the register tile: rows x
  columns), acc_scope (the accumulators reduced per register tile, or one input-channel
  block at a time over a row / plane kept in L1), reduce_order, unroll_kw; attrs
  data_layout (NCHW / NCHWc / NCHWxc: blocked by any x), kernel_layout (OIHW / OIHWio),
  out_layout (NCHW / NCHWc).
- conv2d_NCHWc_winograd.x86 (an alternate of conv2d_NCHWc.x86 for 3x3 stride-1 float32
  convs, `applies`): Winograd F(m x m, 3 x 3), knobs tile_m (2 / 4), tile_oc (its output
  block, default conv2d_NCHWc's), tile_p (the GEMM's register tile over the m x m tiles),
  fuse (rows / gemm / root: where the stages run) and tile_rows (rows of tiles a chunk);
  layouts as conv2d_NCHWc's but kernel_layout OIHW / winograd (a constant kernel
  transformed by its packer, winograd_matrices).
- conv2d_int8.x86, dense_int8.x86 (int8 x int8 -> int32, what build uses for a quantized
  model): the inner reduction is the 4-wide int8 dot of x86_int8_dot, tensorized
  (vpdpbusd with VNNI, exact vpmaddwd without); conv2d knobs tile_ic, tile_oc, tile_ow,
  reduce_order, unroll_kw, layouts as conv2d_NCHWc's (kernel_layout "packed": int32 words
  and compensation); dense knobs tile_x, tile_y, tile_k, unroll_kw (weight_layout
  "packed").
- conv2d_stem.x86 (the family "conv2d_stem": groups=1 with at most 4 input channels, a
  model's image): NCHW data read as it is, the vector
  over a block of output channels; tile_oc, tile_ow, tile_oh, parallel, unroll_kw; attrs
  data_layout (NCHW / NCHWxc), kernel_layout (OIHW / OIHWo), out_layout (NCHW / NCHWc).
- depthwise_conv2d_NCHWc.x86 (multiplier 1; what build uses on the CPU): tile_ow,
  tile_oh, parallel (rows / channels), unroll_kw; padding is a guard loop_partition
  peels, not a copy; the block is the data's (data_layout NCHWxc) or the vector width (NCHW);
  kernel_layout OIHW / packed, out_layout NCHW / NCHWc.
- depthwise_conv2d_nchw.x86: tile_oh, tile_ow, unroll_kw; kernel [C*m, 1, KH, KW].
- injective.x86, reduce.x86, softmax.x86, pool2d.x86, global_pool2d.x86: fixed schedules;
  attrs op (relu / add / ..., sum / mean / max / ..., max / avg), axis, pool_size, ...

## The templates (CUDA, target kind "cuda")

- dense.cuda, matmul.cuda, batch_matmul.cuda: shared-memory tiles of A and B, one output
  per thread; knobs tile_y, tile_x (threads per block axis), tile_k.
- conv2d_nchw_gemm.cuda (a GPU conv2d's default): an implicit GEMM, the kernel and the
  image's columns read into dense.cuda's shared tiles by index arithmetic; knobs tile_y
  (output channels), tile_x (positions), tile_k. conv2d_nchw.cuda: direct, shared-memory
  input window and kernel slice per channel step; knobs tile_co, tile_oh, tile_ow
  (threads), tile_rc. depthwise_conv2d_nchw.cuda: tile_c,
  tile_oh, tile_ow.
- pool2d.cuda (knobs threads, unroll_window), softmax.cuda (one block per row, its
  reductions across the threads: threads), reduce.cuda (mode serial / cross, threads);
  attrs as their x86 namesakes'.
- dense_tensorcore.cuda: float16 dense on tensor cores (16x16x16 warp matrix operations
  of schedule.templates.cuda_wmma, float32 accumulators; any M, N, K, padded to tiles of
  16 in the shared-tile loads; sm_70+): knobs tile_m, tile_n (blocks, warps, fragments
  per warp), tile_k (chunk), offset. conv2d_nchw_tensorcore.cuda: a float16 conv2d as an
  implicit GEMM on the same schedule (any channels and positions, padded alike).
- injective.cuda (an injective group: elementwise, broadcast, layout ops): each output
  flat, split into blocks, elements per thread and vector lanes; knobs threads, ept,
  vector. Its task is the group's input and output specs (attrs outputs), measured on a
  stand-in of that memory traffic. Other GPU groups use the generic GPU schedule
  (schedule.templates.cuda_generic).

## The templates (the accelerator, target kind "accel")

- conv2d_packed.accel, dense_packed.accel: int8 in VTA's packed layouts (NCHW1n16c data,
  OIHW16o16i kernel; packers pack the logical operands), VTA's conv2d schedule with the
  ALU epilogue; knobs tile_b, tile_co, tile_h, tile_w, tile_ci, oc_nthread, h_nthread
  (cthread virtual threads), order ("spatial" / "channel"). Candidates cost their
  simulated cycles. The accelerator's `Env` is schedule.templates.accel_env
  (lowering.accel.Env).

`template_for(family, target)` names the template a target uses for an op family:
"dense" is "dense.x86" on the CPU and "dense.cuda" on a GPU (None: no such template).
`templates_for` lists every template a target has for a family, the default first: a GPU
conv2d is an implicit GEMM (conv2d_nchw_gemm.cuda) or direct (conv2d_nchw.cuda); each is
tuned as its own task, and a compilation takes the one with the fastest record.

Tile sizes and spaces follow the vector width of the target the config carries
(`cfg.target.fp32_lanes`, `cfg.target.vector_registers`: AVX2 8 lanes and 16 registers,
AVX-512 16 and 32), never the machine the template happens to run on: instantiate or
`config_space(..., target="llvm -mcpu=haswell")` sizes for AVX2 on any host. The host
target's width can be overridden with $TESSEL_VECTOR_BITS.

## The epilogue: fusing elementwise consumers into dense / conv2d

The output stage of dense, matmul, batch_matmul and the conv2d templates can compute a
chain of elementwise / broadcast ops (bias add, relu, residual add, batch-norm scale and
shift, clip): the accumulator tile is written through the epilogue, with no buffer of the
anchor's full output. Pass the chain as a function:

    epilogue(anchor: Tensor) -> (extra_inputs: list[Tensor], final: Tensor)

It receives the anchor op's output tensor (e.g. the conv2d result, NCHW) and returns the
placeholders it introduced (bias, residual, scale, ...) and the final tensor, which must
have the anchor's shape and be computed from it by injective ops only (each output element
from the same element of the anchor, other inputs broadcast freely):

    >>> import tensor_expr as te
    >>> def bias_relu(C):
    ...     bias = te.placeholder((C.shape[1],), name="bias")
    ...     D = te.compute(C.shape, lambda i, j: te.max(C[i, j] + bias[j], 0.0), name="D")
    ...     return [bias], D
    >>> s, tensors = instantiate("dense.x86", args, epilogue=bias_relu)
    >>> [t.name for t in tensors]
    ['data', 'weight', 'bias', 'D']

The arguments are then the template's inputs, the epilogue's extra inputs, and the final
output. A fused-group compiler that builds its own TE graph may also call
`TEMPLATES[name].schedule(cfg, [final])` directly, as long as the graph holds the anchor
op by its tag (templates find it with `common.find_anchor`) and the template's compute
declared the compute-side knobs on the same cfg first (`build_compute` does both).
Intermediate injective stages of the chain are inlined into the output stage.
"""

from schedule.templates import (  # noqa: F401  (fill TEMPLATES)
    accel_conv2d,
    cuda_conv2d,
    cuda_conv2d_gemm,
    cuda_conv2d_tensorcore,
    cuda_dense,
    cuda_dense_tensorcore,
    cuda_injective,
    cuda_reduce,
    x86_conv2d,
    x86_conv2d_int8,
    x86_conv2d_nchwc,
    x86_conv2d_stem,
    x86_conv2d_winograd,
    x86_dense,
    x86_dense_int8,
    x86_depthwise_nchwc,
    x86_group_conv2d,
    x86_injective,
)
from schedule.templates.registry import (
    DATA_BLOCK,
    TEMPLATES,
    Epilogue,
    Template,
    build_compute,
    config_space,
    constant_weight_attrs,
    get_template,
    input_packers,
    instantiate,
    is_alternate,
    older_workload_keys,
    output_block_of,
    partition_of,
    register_template,
    template_applies,
    template_for,
    templates_for,
    workload_key,
)

__all__ = ["DATA_BLOCK", "workload_key", "older_workload_keys", "TEMPLATES", "Template", "Epilogue",
           "register_template", "instantiate",
           "input_packers", "constant_weight_attrs", "output_block_of", "partition_of",
           "template_applies", "is_alternate",
           "config_space", "get_template", "build_compute"]
