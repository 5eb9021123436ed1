"""x86 conv2d in the blocked layout NCHW[x]c (data) and OIHW[x]i[y]o (kernel).

The vector runs over a block of oc_bn output channels (contiguous in both the output and
the packed kernel), the register tile over reg_n output columns: per input channel and
kernel tap the micro-kernel broadcasts reg_n inputs, loads one kernel vector row and does
reg_n x oc_bn/lanes FMAs into accumulators held in registers.

Layouts: attrs `data_layout` "NCHW" (default: packed by a separate injective stage),
"NCHWc" (args already [N, C/ic_bn, H, W, ic_bn]: the block fixes tile_ic) or "NCHWxc"
(args blocked by any x, [N, C/x, H, W, x], as another conv wrote them: tile_ic stays the
knob it is for "NCHW", so an NCHW task's tuned config applies, and the pad stage re-blocks
only when x differs from it); `kernel_layout` "OIHW" (default,
packed by a stage) or "OIHWio" ([O/oc_bn, I/ic_bn, KH, KW, ic_bn, oc_bn]); `out_layout`
"NCHW" (default: unpacked by the output stage) or "NCHWc". With both inputs already
packed the kernel is the convolution alone.

Padding: NCHW data and data in a block that is no multiple of tile_ic pass through a layout
stage anyway, which pads as it copies. Data blocked by a multiple of tile_ic (as a model's
convs hand it on) is read as it is (PAD_GUARD, on): the reduction carries the guard "this
tap lies inside the data"; lowering's hoist_guards turns its row part into the bounds of
the kh loop (kh in [max(0, pt - h), min(KH, H + pt - h)) for stride and dilation 1), and
loop_partition peels the first and last column tiles (a row of one tile: the kw taps)
off a guard-free interior whose inner loop is the padded copy's: three micro-kernels a
conv, the rows in the parallel loop (n, oc chunk, row) as without the guard. A register
tile of several rows (tile_oh > 1) keeps the copy: its rows' guard would lie inside the
unrolled micro-kernel. ResNet-18's 3x3 convs on one Sapphire Rapids core, model layouts
(block 16), default configs, CPU time, two runs each, copy -> guard, load 2.2-2.5: 64@56
1405, 1446 -> 1306, 1245 us, 64@56 -> 128 stride 2 727, 732 -> 733, 704, 128@28 1437,
1412 -> 1333, 1334, 256@14 1484, 1444 -> 1281, 1296, 512@7 1624, 1582 -> 1489, 1475.
Build time: a tuning candidate (16 random points the guard applies to, CPU time) 64@56
median 0.19 -> 0.25 s (mean 0.23 -> 0.33) in AVX-512 code, 0.21 -> 0.28 AVX2, 256@14
0.15 -> 0.21 and 0.16 -> 0.17: the two border tiles are the extra code; ResNet-18's whole
build is no slower (its padding stages go). Whole models: see PAD_GUARD.

"OIHWio" with a 4-D (OIHW) kernel spec is what a model with constant weights uses: the
kernel argument arrives packed in the blocks the config chooses (tile_ic, tile_oc stay
tunable), and `input_packers` gives the numpy packing that build applies once to the
constant and measurement applies to each candidate's random weight.

    >>> from schedule.templates import instantiate
    >>> args = [((1, 16, 8, 8), "float32"), ((16, 16, 3, 3), "float32")]
    >>> s, ts = instantiate("conv2d_NCHWc.x86", args, {"padding": 1})
    >>> [t.name for t in ts]
    ['data', 'kernel', 'conv2d_unpack']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from schedule.schedule import Schedule, create_schedule
from schedule.space import FallbackConfig
from schedule.templates.common import (
    accumulator,
    best_divisor,
    divisor_at_most,
    fallback_split,
    fallback_value,
    find_anchor,
    injective_inputs,
    inline_injective,
    output_and_accumulator,
    parallel_fuse,
    schedule_copy_stage,
    shape_of,
)
from schedule.templates.conv_common import PAD, conv_attrs, conv_layouts, pad_hw
from schedule.templates.registry import expect_args, placeholders, register_template
from tensor_expr import tensor as T
from tensor_expr.expr import all as te_all
from tensor_expr.expr import cast
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError
from tessel_target import Target

CONV, PACK_DATA, PACK_KERNEL, UNPACK = "conv2d_NCHWc", "pack_data", "pack_kernel", "unpack"
# Padded data blocked by a multiple of the config's channel block (NCHWc, NCHWxc) is read
# as it is, the padding a guard of the reduction ("this tap lies inside the data"), instead
# of a padded copy; False keeps the copy (an A/B switch for benchmarks and tests). Main (the
# copy) against this, alternating processes, ratios to ONNX Runtime in the same run:
# TESSEL_NUM_THREADS=1 python -m benchmarks.models --models resnet18 resnet50 mobilenet_v2
# --cpu-time --rounds 3 --repeat 5 (load 3.2-4.3): ResNet-18 1.04x, 1.05x -> 0.97x, 1.02x,
# ResNet-50 1.13x, 1.13x -> 1.08x, 1.08x, MobileNetV2 (no padded 3x3 conv2d) 0.95x, 0.87x
# -> 0.90x, 0.98x; AVX2 code (--target "llvm -mcpu=haswell", one thread, load 3.3-4.0):
# ResNet-18 46.8, 46.2 -> 43.1, 41.7 ms; two threads (--rounds 5 --repeat 10, load 3.6-4.8,
# bimodal): ResNet-18 37.8, 37.0, 27.5 -> 30.1, 26.9, 23.9 ms (0.64x, 0.54x, 0.79x ->
# 0.59x, 0.49x, 0.92x: ORT's own time moved 26-68 ms), ResNet-50 116.6, 111.0, 68.1 ->
# 95.7, 93.4, 57.7 ms. With the final loop_partition (load 0.8-2.0): one thread ResNet-18
# 1.04x, 1.05x -> 0.99x, 0.98x, ResNet-50 1.09x, 1.14x -> 1.07x, 1.06x, MobileNetV2 0.94x,
# 0.88x -> 0.88x, 0.98x (noise), AVX2 ResNet-18 45.6 -> 42.6 ms; two threads ResNet-18 in
# the fast mode (ORT 14.0-14.4 ms, load 0.5-0.8) 1.13x -> 1.04x. ResNet-18's build (CPU
# time) 8.7 -> 5.7 s, AVX2 5.9 -> 4.9 s: the padding stages go. (pad3's version, which kept
# the rows out of the parallel loop and peeled about 15 micro-kernels a conv, doubled it.)
PAD_GUARD = True
# Prefetch the next oc chunk's weights into L2 (_prefetch_next_chunk). Off by default: with
# tuned configs of one input channel and one column per step (AVX2 ResNet-18, confirmed
# records of benchmarks.task_scheduler) the per-step guard and prefetch outweigh the step's
# one or two FMAs, and the convs ran 1.4-6x slower (256@14 3x3 2181 -> 6177 us, 256@14 ->
# 512 stride 2 1209 -> 7297, one core); untuned the gain was 0-5% (ResNet-18 none in the
# lead's A/B, ResNet-50 about 3%). Steps of fewer than MIN_PREFETCH_STEP_FMAS now go
# without: the same tuned database then ran 1.011x (40.81 against 40.36 ms). Still off:
# untuned, with the bound, one thread, CPU time, interleaved in one process (load 2.1-2.6),
# prefetch / none: ResNet-18 1.001, AVX2 1.008; ResNet-50 0.988 and 1.018, AVX2 1.000.
# Again with the lines counted exactly and a 32 x 32 block's slice 4 channels a step
# (PREFETCH_GROUPED; benchmarks.template_switch --switch PREFETCH_WEIGHTS, one core, CPU
# time, 9 rounds, load 3.4-3.5), none -> prefetch: 256@14 3x3 (five) 6553 -> 6984 us,
# 512@14 3x3 s2 1375 -> 1497, the convs 48.93 -> 49.38 ms, the model (median) 52.94 -> 52.70;
# with every slice of more than 8 lines in 4-channel steps (the 3x3 convs' 16 x 32 blocks
# too; load 1.9-2.1) worse: 256@14 3x3 6205 -> 7749 us, the convs 46.32 -> 47.81 ms
PREFETCH_WEIGHTS = False
# 1x1 convs prefetch the next oc chunk's weights whatever PREFETCH_WEIGHTS says. In
# ResNet-50 a 1x1 conv at 14x14 or 7x7 reads 1-2 MiB of weights that no earlier step left
# in cache, and the oc_rows order asks for them in bursts: the first row of each chunk
# walks the chunk's block (1024@14 -> 256: 128 KiB) at 9 B a cycle, about twice what one
# core draws from memory (9.8 GB/s, numpy's sum of 64 MiB), while the chunk's other rows
# read it from L2 and draw nothing. Measured in the model's order (layer_profile.
# primed_convs, one Sapphire Rapids core, load 1-1.3), 1024@14 -> 256 ran 763 us a call,
# 660 with its weights read just before: the 1 MiB cost 103 us, its whole streaming time
# (107 us at 9.8 GB/s), as if no compute overlapped it; 256@14 -> 1024 702 -> 615 us. The
# next chunk's block spread over the rows draws 1/14 of it a row instead. Builds
# interleaved in one process, each conv timed in the model's order (medians of 7, load
# 2.1-2.5), none -> 1x1 prefetch: 1024@14 -> 256 (five) 3578 -> 3271 us, 256@14 -> 1024
# (six) 4018 -> 3764, 512@7 -> 2048 (three) 2566 -> 2341, 1024@14 -> 2048 stride 2 2009
# -> 1620, 2048@7 -> 512 (two) 1696 -> 1569; ResNet-50 53.57 -> 51.87 ms; AVX2 code
# (-mcpu=haswell: 8 channels a step, no per-channel guard) 1024@14 -> 256 7090 -> 6752,
# ResNet-50 95.9 -> 95.0 ms. With the 3x3 convs' steps of one channel too (the bound below
# lowered to 16 for them) the 3x3 convs ran 5-15% slower and the model lost the gain.
# The A/B in one process: TESSEL_NUM_THREADS=1 python -m benchmarks.template_switch
# --cpu-time (its docstring has a run's figures); AVX2 code (--target "llvm -mcpu=haswell",
# load 3.3-3.6) convs in order 88.23 -> 87.54 ms, the model 97.03 -> 93.72 (median), 86.62
# -> 87.96 (minimum): no worse. Tried beside it, no gain beyond the noise: plane scope or
# tile_oc 64 for the 14x14 1x1 convs, oc_rows for the expanding 1x1 convs at 28x28, the
# next row's input prefetched in the rows_oc order (1.8% off the convs, the model 2% slower).
PREFETCH_1X1_WEIGHTS = True
# the fewest vector FMAs a prefetching step may have (see _prefetch_next_chunk): the
# defaults' steps have 64 (AVX2, 8 channels x 4 columns x 2 vectors) to 448; steps of one
# input channel (16-28 FMAs) made ResNet-18 9.8% slower, tuned steps of 2-4 FMAs 1.4-6x
MIN_PREFETCH_STEP_FMAS = 64
# the same for a 1x1 conv, whose AVX-512 default steps are one input channel (a 32 x 32
# block slice is 65 lines, more than one step may prefetch) of 14 (7 columns) or 28 FMAs:
# the per-step guard costs less than the burst of weights it spreads (figures at
# PREFETCH_1X1_WEIGHTS; a bound of 16, which leaves out the 7x7 convs' 14-FMA steps, kept
# 1024@14 -> 2048 stride 2 at 2110 -> 2057 us against 2009 -> 1620 with this one)
MIN_PREFETCH_STEP_FMAS_1X1 = 8
# a step of a whole ic block (ic_bn x oc_bn floats) where its slice is at most 64 lines
# counted exactly (Stage.prefetch aligned), rather than one input channel a step. Off: a
# burst of 64 prefetches at one step stalls the demand loads behind it. In ResNet-50's
# order (benchmarks.template_switch --switch PREFETCH_PER_BLOCK, one Sapphire Rapids core,
# CPU time, 7 rounds, load 3.5), per channel -> per block: 2048@7 -> 512 (three) 2140 ->
# 2632 us, 1024@14 -> 2048 s2 1470 -> 1820, 512@7 -> 2048 (two) 1477 -> 1803, the convs
# 47.87 -> 48.99 ms
PREFETCH_PER_BLOCK = False
# where a block's slice is too many lines for one step, a step of as many input channels
# as make PREFETCH_STEP_LINES lines (AVX-512 32 x 32: 4 channels, 8 lines, a guard per
# 56-112 FMAs) rather than one (2 lines, a guard per 14-28 FMAs). Two runs as above
# (--switch PREFETCH_GROUPED, load 3.5-4.0), one channel -> four: ResNet-50's convs 48.79
# -> 47.56 and 47.68 -> 46.99 ms, the model (median) 53.13 -> 51.85 and 52.44 -> 51.56;
# 256@14 -> 1024 (six) 3703 -> 3438 and 3541 -> 3341 us, 1024@14 -> 256 (five) 3055 ->
# 2916 and 3006 -> 2868; the 3x3 convs, which do not prefetch, 0.96-1.05 (the noise)
PREFETCH_GROUPED = True
PREFETCH_STEP_LINES = 8
# in the rows_oc order (rows outside, oc chunks inside) each (row, chunk) iteration
# prefetches the next chunk's weights too, shared among its register tiles: the next
# chunk is the next parallel iteration, whose weights the first row reads from memory.
# The tuned ResNet-50 (a database tuned alone and warm, whose 256@14 -> 1024 is rows_oc
# with 1 MiB of weights) in order, one Sapphire Rapids core, CPU time, 9 rounds, load
# 3.1-3.2 (benchmarks.template_switch --switch PREFETCH_ROWS_OC --db), off -> on: 256@14
# -> 1024 (six) 4159 -> 3800 us, the convs 48.25 -> 47.21 ms, the model (median) flat,
# 51.46 -> 51.42. Untuned (the 56x56 and 28x28 1x1 convs whose pixels outnumber their
# output channels, weights of 16-128K floats), three runs: the convs 0.985, 0.988, 0.998
# of off, 128@28 -> 512 (four) 0.96-0.985, the model (median) 1.008, 1.003, 0.979
PREFETCH_ROWS_OC = True
# a conv with taps (3x3) whose accumulators are a plane of at most PREFETCH_PLANE_PIXELS
# output pixels (the default at 7x7) prefetches the next oc chunk's weights whatever
# PREFETCH_WEIGHTS says, spread over the plane's tile rows in each input-channel block.
# Each of its weights serves only the plane's 49 pixels, so its chunk (256@14 -> 512
# stride 2: 288 KiB of ResNet-18's 4.5 MiB) is read from memory at the micro-kernel's
# pace: in the model that conv ran 944 us against 651 warm and alone. One Emerald Rapids
# core (2 MiB L2), CPU time, 7 rounds interleaved in one process (benchmarks.
# template_switch --switch PREFETCH_PLANE_WEIGHTS), off -> on: ResNet-18 (load 1.1-1.5)
# 256@14 -> 512 stride 2 944 -> 625 us (ONNX Runtime 725), 512@7 3x3 (three) 4255 ->
# 3599, the convs in order 17.86 -> 16.80 ms, the model (median) 18.60 -> 17.73;
# ResNet-50 (load 1.7-2.6) 512@14 -> 512 stride 2 1914 -> 1323 (ONNX Runtime 1679),
# 512@7 3x3 (two) 2835 -> 2410, the convs 39.88 -> 38.63, the model 43.62 -> 40.73.
# Alone (the kernel repeated, load 4-5) warm 256@14 -> 512 s2 651 -> 641 us, 512@14 ->
# 512 s2 1283 -> 1291, 512@7 1178 -> 1229 (its kh row bounds stayed a guard: the kh loop
# held the prefetch; since, lowering.passes.hoist_guards splits the prefetches off into a
# loop of their own before the row's work, whose guard becomes the kh bounds: ResNet-18's
# 512@7 3x3, untuned, 11-15% faster in the model's order); with a fresh copy of the
# weights each call 1037 -> 692, 1987 -> 1398, 1569 -> 1347. AVX2 code (haswell's 256 KiB
# L2: two chunks do not fit) is unchanged. Tried beside it, slower: the 14x14 3x3 convs
# prefetching in their tile of 28 accumulators (ResNet-18's 256@14 3x3, three, 3221 ->
# 3556 us, load 3.6: they spilled, see PREFETCH_TILE_WEIGHTS), a 14x14 plane with its
# prefetch (4321 against the tile's 3544), a row accumulator at 14x14 with it (1.05x),
# the prefetch at the kh loop instead of kw (24 lines a step: 692 -> 845 us cold, 256@14
# -> 512 s2, load 4.6); tile-scope 7x7 outputs prefetching (final.db's tuned 256@14 ->
# 512 s2) 736 -> 716
# us, within the noise. The template's version stays 3: final.db's best configs of these
# shapes (tile scope, or planes of 2-FMA steps) build as before; a record of a plane with
# steps of 32+ FMAs undersells it now (it was timed without the prefetch).
PREFETCH_PLANE_WEIGHTS = True
PREFETCH_PLANE_PIXELS = 49
# the fewest vector FMAs a prefetching step of such a plane may have: the default's steps
# are an ic block of 4 channels by a row of 7 columns x 2 vectors (56 FMAs); tuned planes
# of one channel by one column (2 FMAs a step, final.db's 512@7 3x3) go without
MIN_PREFETCH_STEP_FMAS_PLANE = 32
# a conv with taps whose accumulators are the register tile (the default from 8x8 to 14x14
# outputs) prefetches the next oc chunk's weights too where its output has at most
# PREFETCH_TILE_PIXELS pixels and its tile at most PREFETCH_TILE_ACCUMULATORS vectors, steps
# of MIN_PREFETCH_STEP_FMAS_PLANE; the fallback's tile for such a conv keeps to that many
# (256@14 3x3 on AVX-512: 7 columns x 2 vectors, not 14 x 2). With 28 accumulators the
# prefetches' branches inside the tile's reduction made LLVM spill them (378 zmm stack moves
# in 256@14 3x3's kernel, 4.1x slower warm); with 14 none, and warm alone 927 -> 939 us,
# cold (a fresh copy of the weights each call) 1103 -> 1008 (load 2.4). Against main's
# 14 x 2 tile without it (benchmarks.conv_configs 256 14 256 3 1 '{"tile_ow": [-1, 14]}'
# --block 32, load 2.3): warm 251 -> 247 GFLOP/s, cold 205 -> 228 (ONNX Runtime 221
# warm, 197 cold). ResNet-50's 256@14
# 3x3 convs read 2.25 MiB of weights each, every weight used 196 times: cold they ran 202
# GFLOP/s against 252 warm (python -m benchmarks.conv_configs 256 14 256 3 1 --block 32
# --cold-weights 64; ONNX Runtime 181 and 212), the whole 2.25 MiB's streaming time. One
# Emerald Rapids core, CPU time, 7 rounds in one process (template_switch --switch
# PREFETCH_TILE_WEIGHTS, load 2.4-2.8), off -> on: ResNet-18 256@14 3x3 (three) 3329 ->
# 2948 us, 128@28 -> 256 stride 2 575 -> 510, the convs 16.59 -> 16.19 ms, the model
# (median) 16.99 -> 16.35; ResNet-50 256@14 3x3 (five) 5530 -> 5013, 256@28 -> 256 stride 2
# 1165 -> 1090, the convs 38.24 -> 37.67, the model 39.25 -> 38.29. Of that the 7-column
# tile alone (no prefetch) was 2-3%: 256@14 3x3 3329 -> 3258, 5530 -> 5394. AVX2 code
# (haswell: 7 x 1 accumulators, as before; its 256 KiB L2 holds two 72 KiB chunks)
# ResNet-18 256@14 3x3 7463 -> 6950, the model 35.16 -> 34.55 (prefetch alone, load 2.5).
# Tuned (final.db, load 3.0): ResNet-18 256@14 3x3 3078 -> 2978, 256@14 -> 512 stride 2
# (tile scope) 747 -> 723, ResNet-50 256@14 3x3 5245 -> 4996: its tuned tiles of 14
# accumulators prefetch too. The version stays 3: such a record runs faster than it was
# timed, the knobs choose the same loops.
PREFETCH_TILE_WEIGHTS = True
PREFETCH_TILE_PIXELS = 196
PREFETCH_TILE_ACCUMULATORS = 16
# a conv with taps (3x3) and more output pixels than output channels takes the rows_oc
# order by default as the 1x1 convs do: its parallel loop then splits the rows between
# the threads, as the 1x1 conv before it (rows_oc too) wrote them, so each core reads the
# rows it wrote (and a halo row) instead of every row, half of them from the other core's
# cache; the weights each core reads in full are 144-576 KiB. ResNet-50 untuned on two
# threads (Emerald Rapids, builds interleaved in one process, step medians of 40 runs over
# the samples in which no pool thread waited for a CPU, as benchmarks.step_sequence keeps
# them, and the worker ran 90% of the step or more; load 3.9), oc_rows
# -> rows_oc: 128@56 -> 28 stride 2 717 -> 535 us, 64@56 531-553 -> 490-494, 128@28
# 507-511 -> 499-501, the steps 21.49 -> 21.12 ms (a second oc_rows build 21.45); one
# thread (load 4.2) the steps 44.49 -> 44.24 ms, 128@56 -> 28 stride 2 1290 -> 1190 us.
# Again, two builds of each (load 3.6): two threads 21.46, 21.43 -> 21.06, 21.04 ms; AVX2
# code (-mcpu=haswell), one thread (load 2.1): 83.05, 83.64 -> 83.19, 83.50 ms. Whole
# runs, two threads, interleaved in one process, 100 each, quiet (load 1.1): ResNet-50
# 22.62 -> 22.16 ms (median), ResNet-18 9.76 -> 9.21; one thread (load 2) 43.00 -> 43.54
# and 19.74 -> 19.65 (medians; 25th percentiles 40.79 -> 40.67, 19.43 -> 19.31).
# benchmarks.models --alternate, processes in turn, two pairs (load 1.0-1.35): ResNet-50
# 1.00x, 1.03x -> 0.98x, 1.03x of ORT, ResNet-18 1.08x, 0.96x -> 1.02x, 1.14x (ORT itself
# 10.2-12.0 ms): whole-model ratios move more than this between runs. Only the fallback's
# loop_order changes: a record names its loop_order, so records keep their meaning and
# the version stays 3 (the fallback re-pinned)
ROWS_OUTER_WITH_TAPS = True
# a register tile of two output rows where one row's tile has fewer accumulators than the
# FMA pipes need to stay busy (8: latency x ports, as pick_blocks counts) because the
# registers cap it (not a narrow output: its row is wider than pick_blocks' budget) and
# two rows' still leave a register for the broadcast and one per weight vector. Only
# AVX2's 16 registers meet it at ResNet's and MobileNetV2's shapes: a 14x14 output gets 7
# columns x 1 vector (14 x 1 or 7 x 2 would not fit beside the loads), 2 x 7 x 1 = 14
# accumulators; AVX-512's tiles there have 14 already. AVX2 code (-mcpu=haswell), one
# Emerald Rapids core, CPU time, medians of 9 interleaved rounds beside ONNX Runtime capped
# to AVX2 in the same process (model layouts, data block 8 or 16 as the model has it, load
# 3.6-3.9), 1 row -> 2 rows (ONNX Runtime): 256@14 3x3 3442 -> 2806 us (2861), 1024@14 ->
# 256 1691 -> 1444 (1397), 256@14 -> 1024 1794 -> 1330 (1619), 128@28 -> 256 3x3 stride 2
# 1868 -> 1504 (1667), 512@28 -> 1024 stride 2 3453 -> 2749 (3182). One row of 14 columns
# instead: 256@14 3x3 5108 us (its one tile holds both padded borders: the guard stays
# inside it), the 1x1 convs as two rows. Two rows drop the padding guard (PAD_GUARD) for
# a padded copy: included in the figures above. 28x28 and wider keep their 8 (4 x 2).
ROWS_FOR_ACCUMULATORS = True
# a 1x1 conv in the rows_oc order (more output pixels than output channels, blocked
# output) on a target of 32 vector registers takes a register tile of POINTWISE_BAND_ROWS
# rows x as many columns as keep POINTWISE_BAND_ACCUMULATORS accumulators (AVX-512, oc
# block 32: 4 rows x 2 columns x 2 vectors) instead of one row of 14 columns: each (rows,
# oc chunk) iteration of the parallel loop then covers four output rows, so the weights of
# all the chunks (64-256 KiB at ResNet-50's 56x56 and 28x28 1x1 convs, more than L1) are
# read from L2 once per four rows instead of once per row, at the cost of 10 loads per 16
# FMAs instead of 16 per 28. MLAS (ONNX Runtime's NCHWc pointwise kernel) keeps a filter
# set's weights in L1 across the whole plane instead. ResNet-50 on one Emerald Rapids core,
# builds interleaved in one process, each conv's median over 9 rounds of 7 profiled model
# runs (load 1.0-1.5), one row of 14 -> 4 x 2: 64@56 -> 256 (four) 2580 -> 2515 us,
# 128@28 -> 512 (four) 2563 -> 2522, 512@28 -> 128 (three) 1900 -> 1835, 256@56 -> 64
# (two) 1302 -> 1209, 256@56 -> 128 1247 -> 1191, 512@28 -> 256 1228 -> 1193, 64@56 -> 64
# 174 -> 166; an earlier run 2777 -> 2660, 2759 -> 2652, 2040 -> 1919, 1413 -> 1273. Two
# rows x 4 columns gained about half as much, two rows x 7 (28 accumulators) less, four
# rows x 1 column lost 5-15%; one row of 8 columns (16 accumulators) did not gain; nor did
# a band of 4 or 8 rows around one row's 14-column tile (a loop split off the rows, the
# next chunk's prefetch left out: 2349 against 4 x 2's 2298 us, 256@56 -> 64 1190 against
# 1088). benchmarks.template_switch --switch POINTWISE_ROW_BAND --cpu-time (9 rounds, load
# 0.65-1.0), off -> on: ResNet-50's convs in order 50.65 -> 49.63 ms (256@56 -> 64 1397
# -> 1224 us, 256@56 -> 128 1324 -> 1203, 512@28 -> 256 1273 -> 1171), the model (median)
# 53.39 -> 52.43; MobileNetV2's convs 4.97 -> 4.83, the model 5.12 -> 5.00; ResNet-18 has
# no stride-1 1x1 conv. AVX2 (16 registers) keeps its tiles: only targets with 32
# registers qualify. A fallback change only: records keep their meaning (version 3).
POINTWISE_ROW_BAND = True
POINTWISE_BAND_ROWS = 4
POINTWISE_BAND_ACCUMULATORS = 16
# a channel block of one vector and a row of (registers - 2) columns: that many
# accumulators, one weight vector and one broadcast fill the registers, where that holds
# more accumulators than pick_blocks' usual tile and the row is a multiple of the columns
# wider than one tile (a one-tile row holds both padded borders). Only AVX2's 16
# registers meet it at ResNet's shapes: 56x56 and 28x28 outputs get 8 channels x 14
# columns (14 accumulators) instead of 16 x 4 (8: exactly the FMA pipes' latency x ports,
# no slack for the loads). That block is the one the model keeps between convs there
# (16 -> 8: layout_plan.output_block, as_in_model and autotune.block_rule follow, as
# does the grouped conv). AVX-512 (32 registers: 30 columns) keeps its tiles. AVX2 code
# (-mcpu=haswell), one Emerald Rapids core, CPU time, model layouts (data block as the
# block the producer writes), medians of 15 interleaved rounds (load 0.9-1.2), 16 x 4 ->
# 8 x 14: 64@56 3x3 2922 -> 2527 us, 128@28 3x3 2795 -> 2503, 64@56 -> 256 1625 -> 1405,
# 256@56 -> 64 1467 -> 1291, 512@28 -> 128 1412 -> 1292, 256@56 -> 128 2935 -> 2569,
# 128@56 -> 128 3x3 stride 2 2992 -> 2668; 8 x 7 x 2 rows was level or slower (3027,
# 2657, 1646 ...). See STRIDED_1X1_LINE for the strided 1x1 convs reading blocks of 8.
# Whole models untuned against ONNX Runtime's AVX2 kernels (benchmarks.tuned_ab --ort
# under benchmarks.avx2_host, one thread, CPU time, 21 rounds, this checkout and main in
# turn, load 1.3-3.3): ResNet-50 1.003, 0.997, 1.008, 1.011, 0.998 (main 1.042, 1.054,
# 1.040, 1.040, 1.054; one run at load 3.5 read 1.023 against 1.025), ResNet-18 1.023,
# 1.030 (1.061, 1.063), MobileNetV2 0.869, 0.854 (0.870, 0.889), ResNeXt-26 1.048 (1.092).
ONE_VECTOR_ROWS = True
# a strided 1x1 conv whose data block fills less than a 64-byte cache line per pixel
# (blocks of 8 floats: ONE_VECTOR_ROWS' AVX2 blocks) reads half of every line it touches
# at stride 2, and again for each output channel block; copying its strided pixels once
# into blocks of 16 (the layout stage a strided 1x1 conv has for another block: one line
# a pixel) costs less. AVX2 code, one core, CPU time, medians of 15 interleaved rounds
# (load 0.9-1.3), data in blocks of 8, ic block 8 -> 16: 256@56 -> 512 stride 2 2680 ->
# 2539 us (2816 with data in blocks of 16), 512@28 -> 1024 stride 2 3259 -> 2514 (2639).
# Only on the input rows whose blocks ONE_VECTOR_ROWS made 8 (a multiple of its columns,
# wider than one tile): at 14x14 input, blocks of 8 before it too, 16 was slower (1024@14
# -> 2048 stride 2 2877 -> 3083 us, 256@14 -> 512 167 -> 194), and so was it on the small
# ones (64@56 -> 128 and 128@28 -> 256: 0-20% of 160-300 us), where 16 is what the data
# had before ONE_VECTOR_ROWS.
STRIDED_1X1_LINE = True


def two_row_tile(OH: int, OW: int, oc_bn: int, reg_n: int, target: Target) -> bool:
    """Whether a register tile of `reg_n` columns x `oc_bn` channels takes a second output
    row (ROWS_FOR_ACCUMULATORS' test, the switch aside): fewer than 8 accumulators because
    the registers, not the row's width, cap one row's tile (pick_blocks' budget), OH even,
    and two rows' accumulators still leave a register for the broadcast and one per weight
    vector.

        >>> two_row_tile(14, 14, 8, 7, Target.parse("llvm -mcpu=haswell"))
        True
        >>> two_row_tile(14, 14, 16, 14, Target.parse("llvm -mcpu=skylake-avx512"))
        False
    """
    vecs, regs = max(1, oc_bn // target.fp32_lanes), target.vector_registers
    return reg_n * vecs < 8 and OW * vecs > regs - 4 and OH % 2 == 0 and \
        2 * reg_n * vecs + vecs + 1 <= regs


def pointwise_band_tile(CO: int, OH: int, OW: int, oc_bn: int, target: Target
                        ) -> tuple[int, int] | None:
    """(tile_oh, tile_ow) of a stride-1 1x1 conv's default register tile where the
    POINTWISE_ROW_BAND rule takes it (see there), else None: `CO` output channels, an
    OH x OW output, channel block `oc_bn`.

        >>> pointwise_band_tile(256, 56, 56, 32, Target.parse("llvm -mcpu=skylake-avx512"))
        (4, 2)
        >>> pointwise_band_tile(256, 56, 56, 32, Target.parse("llvm -mcpu=haswell")) is None
        True
        >>> pointwise_band_tile(1024, 14, 14, 32, Target.parse("llvm -mcpu=skylake-avx512"))
    """
    rows, lanes = POINTWISE_BAND_ROWS, target.fp32_lanes
    if not POINTWISE_ROW_BAND or target.vector_registers < 32 or OH * OW <= CO or \
            OH % rows or oc_bn % lanes:
        return None
    # exactly that many accumulators: fewer (4 rows x 1 column x 2 vectors) lost 5-15%
    cols = POINTWISE_BAND_ACCUMULATORS // (rows * (oc_bn // lanes))
    return (rows, cols) if cols and OW % cols == 0 else None

# a stride-1 1x1 conv with at least as many output channels as pixels, above 7x7 (the
# oc_rows order: ResNet-50's 256@14 -> 1024 and 1024@14 -> 256), on a target of 32 vector
# registers takes a register tile of at most PREFETCH_TILE_ACCUMULATORS accumulators
# (AVX-512, oc block 32: one row of 7 columns x 2 vectors) instead of one row of 14
# columns (28 accumulators, beside which the next chunk's weight prefetch runs): the
# tuner's pick for both in final2.db (560 and 477 us there). One Emerald Rapids core, one
# thread, each conv in the model's order (layer_profile.primed_convs "none", wall time;
# the model by CPU time), the minimum of 9 rounds, two builds of each side in one process
# (one build ran every conv, the unchanged ones too, up to 25% slower than another in the
# same process: one build a side misleads), on -> off: load 1.0, 256@14 -> 1024 (six) 3575
# and 3589 -> 3689 and 3662 us, 1024@14 -> 256 (five) 3012, 2986 -> 3049, 3048, the model
# (median) 50.64, 49.90 -> 51.58, 50.86 ms; load 0.9-1.8, 3136, 3237 -> 3295, 3334 and
# 2671, 2767 -> 2791, 2791, the model 50.09, 51.09 -> 50.64, 51.34. MobileNetV2's 96@14 ->
# 576 (three) 394, 399 -> 402, 405; its convs 4.64, 4.50 -> 4.63, 4.48 ms. Tried beside it
# (one build a side, so within that 25%), no gain over 1 x 14: 2 rows x 7 columns
# (0.97-1.04 in three runs), the rows_oc order (1.13), row scope (1.00-1.14), plane scope
# (1.17-1.25), the next chunk's residual tile prefetched in the output stage (256@14 ->
# 1024 1.03). AVX2 (16 registers) keeps its tiles.
POINTWISE_CHUNK_TILE = True


def pointwise_chunk_columns(CO: int, OH: int, OW: int, oc_bn: int, target: Target
                            ) -> int | None:
    """tile_ow of a stride-1 1x1 conv's default register tile where the
    POINTWISE_CHUNK_TILE rule takes it (see there), else None: `CO` output channels, an
    OH x OW output, channel block `oc_bn`.

        >>> avx512 = Target.parse("llvm -mcpu=skylake-avx512")
        >>> pointwise_chunk_columns(1024, 14, 14, 32, avx512)
        7
        >>> pointwise_chunk_columns(1024, 14, 14, 32, Target.parse("llvm -mcpu=haswell")) is None
        True
        >>> pointwise_chunk_columns(2048, 7, 7, 32, avx512) is None   # 7x7: a plane
        True
    """
    lanes = target.fp32_lanes
    if not POINTWISE_CHUNK_TILE or target.vector_registers < 32 or \
            not 49 < OH * OW <= CO or oc_bn % lanes:
        return None
    vecs = oc_bn // lanes
    return max([d for d in range(1, OW) if OW % d == 0 and d * vecs <= PREFETCH_TILE_ACCUMULATORS]
               or [0]) or None

# ---------------------------------------------------------------------------------------
# Choosing the blocks


def one_vector_row_columns(OW: int, target: Target) -> int:
    """The columns of ONE_VECTOR_ROWS' tile where a row of OW outputs takes it by width (a
    multiple of (registers - 2) columns, wider than one tile), else 0; whether it then
    beats pick_blocks' usual tile is pick_blocks' to say.

        >>> one_vector_row_columns(56, Target.parse("llvm -mcpu=haswell"))
        14
        >>> one_vector_row_columns(14, Target.parse("llvm -mcpu=haswell"))
        0
    """
    cols = target.vector_registers - 2  # beside one weight vector and one broadcast
    return cols if OW % cols == 0 and OW > cols else 0


def pick_blocks(C: int, CO: int, OW: int, oc_fixed: int | None = None,
                target: Target | None = None) -> tuple[int, int, int]:
    """(ic_bn, oc_bn, reg_n): at least 8 accumulators (FMA latency x ports), no spills,
    then the fewest loads per FMA; e.g. (8, 16, 4) for 64@56 on AVX2.

    Measured on 64@56, 1 thread (GFLOP/s): (8, 16, 4) 57.5, (8, 8, 7) 40.1, (8, 8, 14)
    31.6 (14 accumulators leave no room for the loads), (16, 16, 4) 28.8.
    """
    target = target or Target.parse("llvm")
    lanes = target.fp32_lanes
    budget = target.vector_registers - 4
    cands = []
    for oc_bn in ((oc_fixed,) if oc_fixed else (2 * lanes, lanes)):
        if CO % oc_bn:
            continue
        vecs = max(1, oc_bn // lanes)
        for reg_n in range(1, min(OW, 32) + 1):
            acc = reg_n * vecs
            if OW % reg_n == 0 and acc <= budget:
                cands.append((acc >= 8, -(reg_n + vecs) / acc if acc >= 8 else acc,
                              oc_bn, reg_n))
    if cands:
        _, _, oc_bn, reg_n = max(cands)
    else:  # channels not a multiple of the vector width
        oc_bn = oc_fixed or divisor_at_most(CO, lanes)
        reg_n = divisor_at_most(OW, 8)
    cols = one_vector_row_columns(OW, target)
    if ONE_VECTOR_ROWS and oc_fixed in (None, lanes) and CO % lanes == 0 and cols and \
            cols > reg_n * max(1, oc_bn // lanes):
        oc_bn, reg_n = lanes, cols  # see ONE_VECTOR_ROWS
    ic_bn = best_divisor(C, [lanes, 2 * lanes, 4])
    return ic_bn, oc_bn, reg_n


def _block_knob(cfg: Any, name: str, extent: int, fixed: int | None, default: int,
                max_block: int | None = None) -> int:
    """A channel-block knob: a split of the channels, or one value when the layout fixes it."""
    if fixed is not None:
        cfg.define_knob(name, [fixed])
        return fixed
    keep = None if max_block is None else (lambda f: f[-1] <= max_block or f[-1] == default)
    cfg.define_split(name, extent, num_outputs=2, filter=keep)
    fallback_split(cfg, name, [default])
    return int(cfg[name].size[-1])


# ---------------------------------------------------------------------------------------
# The computation


def _compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
             ) -> tuple[list[Tensor], list[Tensor]]:
    dl, kl, ol = conv_layouts("conv2d_NCHWc.x86", attrs, ("NCHW", "NCHWc", "NCHWxc"),
                              ("OIHW", "OIHWio"))
    # a logical OIHW spec in the packed layout: the config picks the blocks
    logical_kernel = kl == "OIHWio" and len(args) == 2 and len(args[1][0]) == 4
    expect_args("conv2d_NCHWc.x86", args, 2, [4 if dl == "NCHW" else 5,
                                               4 if kl == "OIHW" or logical_kernel else 6])
    data, kernel = placeholders(args, ["data", "kernel"])
    ds, ks = shape_of(data), shape_of(kernel)
    a = conv_attrs(attrs)
    if a.groups != 1:
        raise ScheduleError("conv2d_NCHWc.x86 handles groups=1; use depthwise_conv2d_nchw.x86")
    if dl == "NCHW":
        N, C, H, W = ds
        fixed_ic = None
    else:
        N, C, H, W = ds[0], ds[1] * ds[4], ds[2], ds[3]
        fixed_ic = ds[4] if dl == "NCHWc" else None
    if kl == "OIHW" or logical_kernel:
        CO, KH, KW = ks[0], ks[2], ks[3]
        fixed_oc = None
    else:
        CO, KH, KW = ks[0] * ks[5], ks[2], ks[3]
        fixed_oc = ks[5]
        if fixed_ic is not None and ks[4] != fixed_ic:
            raise ScheduleError(f"conv2d_NCHWc.x86: kernel ic block {ks[4]} differs from the "
                                f"data's channel block {fixed_ic}")
        fixed_ic = ks[4] if fixed_ic is None else fixed_ic
    OH, OW = a.out_hw(H, W, KH, KW)

    ic0, oc0, reg0 = pick_blocks(C, CO, OW, fixed_oc, cfg.target)
    if PREFETCH_TILE_WEIGHTS and KH * KW > 1 and \
            default_acc_scope(OH, OW, KH * KW) == "tile" and OH * OW <= PREFETCH_TILE_PIXELS:
        # a tile the weight prefetch leaves registers for (PREFETCH_TILE_ACCUMULATORS)
        vecs = max(1, oc0 // cfg.target.fp32_lanes)
        reg0 = max([d for d in range(1, reg0 + 1)
                    if OW % d == 0 and d * vecs <= PREFETCH_TILE_ACCUMULATORS] or [reg0])
    if dl == "NCHWxc" and (KH, KW) == (1, 1) and a.padding == (0, 0, 0, 0):
        # a 1x1 conv reads data blocked as it arrives with no stage at all; in other blocks
        # its pad stage re-blocks the whole input each call (ResNet-18's 1x1 stride-2 convs
        # took 4x ONNX Runtime's time, ResNet-50's 1x1 convs up to 3x)
        ic0 = ds[4]
        if STRIDED_1X1_LINE and a.strides != (1, 1) and ds[4] * 4 < 64 and C % 16 == 0 \
                and one_vector_row_columns(W, cfg.target):
            ic0 = 16  # see STRIDED_1X1_LINE
    elif default_acc_scope(OH, OW, KH * KW) == "plane" and C % 4 == 0 and \
            (dl == "NCHW" or a.padding != (0, 0, 0, 0)):
        # a plane accumulated one small channel block at a time (its layout stage exists
        # anyway): 512@7 3x3 on one Sapphire Rapids core (load 3.2) ic_bn 16: 139 GFLOP/s,
        # 8: 139, 4: 153, 2: 163; AVX2 code (8 -> 4) 88 -> 96; 256@14 stride 2: 147 -> 156
        ic0 = 4
    ic_bn = _block_knob(cfg, "tile_ic", C, fixed_ic, ic0)
    # oc_bn / lanes vectors per column are unrolled in the micro-kernel: keep it in registers
    oc_bn = _block_knob(cfg, "tile_oc", CO, fixed_oc, oc0, max_block=4 * cfg.target.fp32_lanes)
    cfg.define_split("tile_ow", OW, num_outputs=2, max_factor=32)
    fallback_split(cfg, "tile_ow", [reg0])
    register_rows(cfg, OH)
    if ROWS_FOR_ACCUMULATORS and two_row_tile(OH, OW, oc0, reg0, cfg.target):
        fallback_split(cfg, "tile_oh", [2])  # see ROWS_FOR_ACCUMULATORS
    # a stride-1 unpadded 1x1 conv writing blocked output: the pointwise tiles' convs
    pointwise = (KH, KW) == (1, 1) and a.strides == (1, 1) and \
        a.padding == (0, 0, 0, 0) and ol == "NCHWc"
    band = pointwise_band_tile(CO, OH, OW, oc0, cfg.target) if pointwise else None
    if band is not None:  # see POINTWISE_ROW_BAND
        fallback_split(cfg, "tile_oh", [band[0]])
        fallback_split(cfg, "tile_ow", [band[1]])
    chunk_cols = pointwise_chunk_columns(CO, OH, OW, oc0, cfg.target) if pointwise else None
    if chunk_cols is not None:  # see POINTWISE_CHUNK_TILE
        fallback_split(cfg, "tile_ow", [chunk_cols])

    # data -> NCHW[ic_bn]c, zero-padded (one injective stage)
    (sh, sw), (dh, dw) = a.strides, a.dilation
    step = (1, 1)
    if (KH, KW) == (1, 1) and a.padding == (0, 0, 0, 0) and (dl == "NCHW" or ds[4] != ic_bn):
        # a strided 1x1 conv reads one pixel in sh x sw: its layout stage copies only those
        # (ResNet-18's 1x1 stride-2 convs re-blocked their whole input, 4x the pixels, and
        # ran at 0.44-0.60 of ONNX Runtime on NCHW data)
        H, W, step, sh, sw = OH, OW, (sh, sw), 1, 1
    shape5 = (N, C // ic_bn, H, W, ic_bn)
    # data blocked by a multiple of ic_bn is read as it is, the padding the reduction's
    # guard; other blocks and NCHW data have a layout stage anyway, which pads as it copies
    # (one output row per register tile: with more, the rows' guard lies inside the
    # unrolled micro-kernel, which then built 2-8x slower, 1-2.5 s a 64@56 candidate)
    guard = PAD_GUARD and dl != "NCHW" and a.padding != (0, 0, 0, 0) and \
        ds[4] % ic_bn == 0 and int(cfg["tile_oh"].size[-1]) == 1
    if dl == "NCHW":
        dpad = pad_hw(data, 2, a.padding, shape=shape5, name="data_vec",
                      read=lambda n, c, h, w, b: data[n, c * ic_bn + b, h * step[0],
                                                      w * step[1]])
    elif guard:
        dpad = None
    elif ds[4] != ic_bn:  # NCHWxc in another block: re-blocked by the pad stage
        x = ds[4]
        dpad = pad_hw(data, 2, a.padding, shape=shape5, name="data_vec",
                      read=lambda n, c, h, w, b: data[n, (c * ic_bn + b) // x, h * step[0],
                                                      w * step[1], (c * ic_bn + b) % x])
    else:
        dpad = pad_hw(data, 2, a.padding)
    if kl == "OIHW":
        kvec = T.compute((CO // oc_bn, C // ic_bn, KH, KW, ic_bn, oc_bn),
                         lambda o, i, y, x, bi, bo: kernel[o * oc_bn + bo, i * ic_bn + bi, y, x],
                         name="kernel_vec", tag=PACK_KERNEL)
    elif logical_kernel:
        kernel = T.placeholder((CO // oc_bn, C // ic_bn, KH, KW, ic_bn, oc_bn), kernel.dtype,
                               name="kernel")
        kvec = kernel
    else:
        kvec = kernel
    ico = T.reduce_axis((0, C // ic_bn), name="ic_outer")
    ici = T.reduce_axis((0, ic_bn), name="ic_inner")
    ry = T.reduce_axis((0, KH), name="kh")
    rx = T.reduce_axis((0, KW), name="kw")
    # float16 sums in float32, rounded once by the output stage (a float16 accumulator
    # lost 0.16 on a 16-channel 3x3 conv, 10x the interpreter's rounding)
    out_dt = attrs.get("out_dtype") or data.dtype
    acc = {**attrs, "out_dtype": "float32"} if out_dt == "float16" else attrs
    pt, pl, pb, pr = a.padding if guard else (0, 0, 0, 0)
    per = ds[4] // ic_bn if guard else 1  # ic_bn blocks per block of the data

    def read(n: Any, y: Any, x: Any) -> Any:
        if not guard:
            return dpad[n, ico, y, x, ici]
        if per == 1:
            return data[n, ico, y, x, ici]
        return data[n, ico // per, y, x, ico % per * ic_bn + ici]

    def body(n: Any, oc: Any, h: Any, w: Any, ob: Any) -> Any:
        y, x = h * sh + ry * dh - pt, w * sw + rx * dw - pl
        inside = [c for c, pad in ((y >= 0, pt), (y < H, pb), (x >= 0, pl), (x < W, pr))
                  if pad]
        return T.sum(accumulator(acc, read(n, y, x))
                     * accumulator(acc, kvec[oc, ico, ry, rx, ici, ob]),
                     axis=[ico, ry, rx, ici], where=te_all(*inside) if inside else None)

    conv = T.compute((N, CO // oc_bn, OH, OW, oc_bn), body, name="conv2d_NCHWc", tag=CONV)
    cfg.add_flop(2.0 * N * CO * OH * OW * C * KH * KW)
    if ol == "NCHWc":
        if conv.dtype == out_dt:
            return [data, kernel], [conv]
        return [data, kernel], [T.compute(conv.shape, lambda *i: cast(conv[i], out_dt),
                                          name="conv2d_round", tag="round")]
    out = T.compute((N, CO, OH, OW),
                    lambda n, c, h, w: cast(conv[n, c // oc_bn, h, w, c % oc_bn], out_dt),
                    name="conv2d_unpack", tag=UNPACK)
    return [data, kernel], [out]


# ---------------------------------------------------------------------------------------
# The schedule


# Where the accumulators of a register tile live across the input-channel blocks:
# "tile": the tile's whole reduction (all channels, all taps) runs with the tile in
# registers, then it is stored: the kernel block of one oc chunk (C x KH x KW x oc_bn) is
# streamed once per tile, from L2 once it outgrows L1. "row" / "plane": the reduction runs
# one input-channel block at a time over a whole output row (plane) kept in an L1 buffer,
# each tile loaded into registers, reduced over the block's kh x kw x ic_bn steps and
# stored back (MLAS's NCHWc kernel accumulates in its output this way): the block's kernel
# slice (ic_bn x KH x KW x oc_bn) stays in L1 for the whole row (plane). 512@7 3x3 on one
# Sapphire Rapids core (load 1.9): tile 128 GFLOP/s, plane 136, plane with oc_bn 64 142.
ACC_SCOPES = ("tile", "row", "plane")
# a plane accumulator is offered up to this many output pixels (7x7, 14x14): its buffer
# (pixels x oc_bn floats) stays on the worker's stack and in L1/L2
PLANE_PIXELS = 196


def register_rows(cfg: Any, OH: int) -> None:
    """The tile_oh knob: output rows in the register tile (a 2-D tile rows x tile_ow
    columns), a divisor of OH up to 4; the fallback is 1 row. Declared by the computes
    of the templates that schedule with schedule_conv2d_nchwc (the padding guard reads
    it): `register_rows(cfg, 56)`."""
    cfg.define_split("tile_oh", OH, num_outputs=2, max_factor=4)
    fallback_split(cfg, "tile_oh", [1])


def default_acc_scope(OH: int, OW: int, taps: int, block_bytes: int = 0,
                      accumulators: int = 8, chunks: int = 8) -> str:
    """The fallback's accumulator scope: a plane for a 7x7-or-smaller output, else the tile.

    A conv with taps: a row of 7 columns reads the oc chunk's whole kernel block from L2
    per 14 FMAs. A 1x1 conv reduces only ic_bn steps per block between a tile's load and
    store, so it takes the plane only where the tile scope loses more: when the oc chunk's
    weight block (`block_bytes`: C x oc_bn floats) outgrows a 32 KiB L1, re-read per row
    from L2 (and from memory in a model, where ResNet-50's 4-8 MiB of weights per conv
    stream in at each run), or when the register tile has fewer than 8 `accumulators`
    (FMA latency x ports: the plane's short reductions of consecutive tiles overlap).
    One Sapphire Rapids core, model layouts, weights cold (python -m
    benchmarks.conv_configs --cold-weights, load 3-4), tile -> plane GFLOP/s: 2048@7 ->
    512 100 -> 115, 512@7 -> 2048 102 -> 119, 960@7 -> 320 100 -> 111, 320@7 -> 1280
    114 -> 130, 1024@14 -> 2048 stride 2 107 -> 110; AVX2 code (8 floats per block, 7
    accumulators) 66 -> 96, 69 -> 95, and 160@7 -> 960 71 -> 92; kept by tile: 160@7 ->
    960 on AVX-512 (20 KiB block, 166 either way) and 256@14 -> 512 stride 2 (32 KiB:
    174 tile, 148 plane warm). A 1x1 conv with fewer than 8 oc `chunks` keeps the tile:
    a plane is one parallel iteration per chunk (MobileNetV2's 960@7 -> 160 has 5, split
    3:2 on two threads), the tile one per chunk and row.

        >>> default_acc_scope(7, 7, 9), default_acc_scope(7, 7, 1), default_acc_scope(14, 14, 9)
        ('plane', 'tile', 'tile')
        >>> default_acc_scope(7, 7, 1, block_bytes=2048 * 32 * 4), default_acc_scope(7, 7, 1,
        ...     block_bytes=256 * 8 * 4, accumulators=7)
        ('plane', 'plane')
    """
    if OH * OW > 49:
        return "tile"
    if taps > 1:
        return "plane"
    return "plane" if chunks >= 8 and (block_bytes > 32 * 1024 or accumulators < 8) else "tile"


# Fallback, measured (python -m tests.schedule.templates.bench_templates) on the 2-core EPYC
# (Zen 3, AVX2, 8 fp32 lanes) build machine, shared with other jobs (load average 3-5):
# figures swing 2x between runs, so compare with numpy's GEMM from the same run.
# ResNet-18 3x3 layers, batch 1, NCHW in/out (layout stages included), 1 thread (load 3.3):
# 64@56 55.9 GFLOP/s, 128@28 71.1, 256@14 14.9 (numpy GEMM 74.2 in the same run); in a
# busier run 27.8, 27.0, 21.7 (numpy 32.2). 2 threads (load 3.2): 26.7, 72.6, 46.4;
# pre-packed NCHW8c in/out 57.0, 35.9, 48.9 (numpy GEMM 29.7). ONNX Runtime's ~300 GFLOP/s
# in FACTS.md was measured on an AVX-512 machine, not this one.
# On one Sapphire Rapids core (AVX-512, FMA peak 211 GFLOP/s), model layouts (NCHW16c in,
# packed weight, NCHWc out), 64-byte aligned arrays, load 2: 3x3 64@56 174, 128@28 182,
# 256@14 176 (204 at load 0.5), 512@7 164 (the tile-scope default before: 146); the hot
# loop is MLAS's: per input channel, tile_ow broadcasts, oc_bn / 16 kernel vector loads,
# tile_ow x oc_bn / 16 FMAs into zmm accumulators, no spills. Every distinct ResNet-18
# conv alone, NCHW in/out (python -m benchmarks.conv_layers, TESSEL_NUM_THREADS=1, load
# 1.1): 0.87-1.07 of ONNX Runtime (before: 0.50-0.96, the 1x1 stride-2 convs 0.50-0.73).
def schedule_conv2d_nchwc(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """NCHWc conv: parallel (n, oc-chunk, oh), a tile_oh x tile_ow x oc_bn register tile,
    vector oc_bn; the accumulators per tile, per row or per plane (knob acc_scope)."""
    outs = list(outs)
    s = create_schedule(outs)
    conv = find_anchor(outs, CONV)
    keep = injective_inputs(conv)
    out = outs[0]
    unpacked = len(out.shape) == 4
    if unpacked and out.op is not conv.op:
        inline_injective(s, outs, keep=keep)
        s[conv].set_scope("local")
        O, CC = out, conv
    else:
        inline_injective(s, outs, keep=keep)
        O, CC = output_and_accumulator(s, outs, conv)
    _, _, OH, OW, oc_bn = shape_of(conv)
    lanes = cfg.target.fp32_lanes
    taps = math.prod(int(r.dom.extent.value) for r in CC.op.reduce_axis[1:3])

    cfg.define_knob("unroll_kw", [True, False])
    cfg.define_reorder("reduce_order", [0, 1, 2, 3], policy="candidate",
                       candidates=[[0, 1, 2, 3], [1, 2, 0, 3], [1, 0, 2, 3]])
    cfg.define_knob("acc_scope", [a for a in ACC_SCOPES
                                  if a != "plane" or OH * OW <= PLANE_PIXELS])
    # oc chunks outside the rows (a chunk's weights stay in cache across the rows) or the
    # rows outside (an input row stays in cache across the chunks; a plane has no rows)
    cfg.define_knob("loop_order", ["oc_rows", "rows_oc"])
    if isinstance(cfg, FallbackConfig):
        # unrolled taps let LLVM share one broadcast between neighbouring taps (column w at
        # kw + 1 is column w + 1 at kw), which keeps more values live than the registers
        # hold: on AVX2 the broadcasts spilled to the stack. Rolled: 64@56 3x3 on one
        # Sapphire Rapids core (load 2.7) 99.6 -> 103.7 GFLOP/s AVX2, 182.6 -> 187.3 AVX-512
        fallback_value(cfg, "unroll_kw", False)
        C = math.prod(int(r.dom.extent.value) for r in (CC.op.reduce_axis[0],
                                                         CC.op.reduce_axis[3]))
        acc = int(cfg["tile_ow"].size[-1]) * int(cfg["tile_oh"].size[-1]) * \
            max(1, oc_bn // lanes)
        fallback_value(cfg, "acc_scope", default_acc_scope(
            OH, OW, taps, block_bytes=C * taps * oc_bn * 4, accumulators=acc,
            chunks=int(shape_of(conv)[1])))
        # rows outer for a 1x1 conv whose input outweighs its weights (more pixels than
        # output channels) writing the blocked layout: ResNet-50's 256@56 -> 64 on one
        # Sapphire Rapids core (load 1.4) 168 -> 182 GFLOP/s, 512@28 -> 128 189 -> 194; so
        # do 3x3 convs with more pixels than output channels (ROWS_OUTER_WITH_TAPS: the
        # rows each thread wrote stay on it). 1x1 convs with more channels than pixels
        # (1024@14 -> 256: 197 -> 190) keep the chunks outer (on two threads rows_oc for
        # ResNet-50's 14x14 1x1 convs took 1024@14 -> 256 from 300 to 271 us, the steps
        # 21.54 -> 21.49 ms, one thread 39.18 -> 39.68), and so does an NCHW output:
        # unpacked row by row across all chunks into a fresh array per run, 64@56 -> 128
        # stride 2 fell from 99 to 47 GFLOP/s in benchmarks.conv_layers (the same kernel
        # timed on one reused, aligned output did not change: a cause in the output's
        # memory, not found)
        CO = shape_of(conv)[1] * oc_bn
        # (a grouped conv, this schedule's other user, keeps its 3x3 convs' chunks outer:
        # not measured; each core reads only its groups' channels there)
        taps_ok = ROWS_OUTER_WITH_TAPS and conv.op.name == CONV
        rows = (taps == 1 or taps_ok) and OH * OW > CO and len(O.shape) == 5
        fallback_value(cfg, "loop_order", "rows_oc" if rows else "oc_rows")
        # Alternatives to these defaults measured inside ResNet-50 (one Sapphire Rapids
        # core, CPU time, every conv of a shape changed at once, builds interleaved in one
        # process, load 2-4) that did not win beyond the noise (3-5% a conv): plane scope
        # for the 14x14 1x1 and 3x3 convs, row scope for 256@14 3x3, tile_oc 64 (28
        # accumulators) for the 7x7 or the 56x56 1x1 convs, oc_rows for the expanding 1x1
        # convs; 128@56 3x3 stride 2 ran 145 GFLOP/s alone in every config (tile_ic 32, 7 x
        # 64, 2 x 7, rows_oc, unroll_kw, row scope), 0.88x stride 1 at the same OW. One
        # gain: a 2-row tile (tile_oh 2, tile_ow 7) made 256@56 -> 64 8.5% faster (five
        # runs), its 3 MiB input read once for 64 FMAs an element waiting on memory, two
        # rows streaming twice the pages at once; 0-2.5% on the other reducing 1x1 convs,
        # too little to change the default. What the model loses to ORT is mostly memory:
        # its convs took 58 ms in the model against 50 ms each alone and warm
        # (benchmarks.layer_profile.warm_convs)
    reg_n = int(cfg["tile_ow"].size[-1])
    reg_h = int(cfg["tile_oh"].size[-1])
    scope = cfg["acc_scope"].val
    rows_outer = cfg["loop_order"].val == "rows_oc" and scope != "plane"
    par = schedule_output_tiles(s, O, CC, oc_bn, reg_n, reg_h=reg_h, acc_scope=scope,
                                unpack_along_w=True, rows_outer=rows_outer)
    # the loop whose iterations share the next chunk's prefetches and their number: the
    # rows of one chunk (the oc_rows order), or the register tiles of one (row, chunk)
    # iteration in the rows_oc order, whose next chunk is the next parallel iteration
    spread: tuple[Any, int] | None = (par, OH // reg_h) if scope != "plane" else None
    if rows_outer:
        tiles = s[O].leaf_iter_vars[s[O].leaf_iter_vars.index(par) + 1]
        spread = (tiles, -(-OW // reg_n)) if PREFETCH_ROWS_OC else None

    # the micro-kernel
    cn, cco, ch, cw, ccb = s[CC].op.axis
    red = list(s[CC].op.reduce_axis)  # ic_outer, kh, kw, ic_inner
    cho, chi = s[CC].split(ch, factor=reg_h)
    cwo, cwi = s[CC].split(cw, factor=reg_n)
    vec = best_divisor(oc_bn, [lanes, lanes // 2 or 1])
    cbo, cbi = s[CC].split(ccb, factor=vec)
    order = cfg["reduce_order"].perm
    if scope == "tile":
        s[CC].reorder(cn, cco, cho, cwo, *[red[i] for i in order], chi, cwi, cbo, cbi)
    else:
        # one input-channel block at a time over the row (plane): the tiles inside it
        blk, red[0] = s[CC].split(red[0], factor=1)
        s[CC].reorder(cn, cco, blk, cho, cwo, *[red[i] for i in order], chi, cwi, cbo, cbi)
    if scope == "plane":
        spread = (cho, OH // reg_h)
    elif rows_outer and scope == "row" and spread is not None:
        spread = (cwo, -(-OW // reg_n))  # the row's tiles are the accumulator's loop
    plane_taps = PREFETCH_PLANE_WEIGHTS and scope == "plane" and taps > 1 and \
        OH * OW <= PREFETCH_PLANE_PIXELS
    plane_taps = plane_taps or (PREFETCH_TILE_WEIGHTS and scope == "tile" and taps > 1 and
                                OH * OW <= PREFETCH_TILE_PIXELS and
                                reg_h * reg_n * (oc_bn // vec) <= PREFETCH_TILE_ACCUMULATORS)
    if spread is not None and (PREFETCH_WEIGHTS or (PREFETCH_1X1_WEIGHTS and taps == 1)
                               or plane_taps):
        _prefetch_next_chunk(s, CC, spread[0], spread[1], red[order[2]], red[3], cfg.target,
                             tile_fmas=reg_h * reg_n * (oc_bn // vec),
                             least=MIN_PREFETCH_STEP_FMAS_PLANE if plane_taps else None)
    if cfg["unroll_kw"].val:
        s[CC].unroll(red[2])
    s[CC].unroll(chi)
    s[CC].unroll(cwi)
    s[CC].unroll(cbo)
    if vec > 1:
        s[CC].vectorize(cbi)

    # the layout / padding stages: parallel from 16K elements (schedule_copy_stage); vector
    # loads where the source is contiguous along the last axis, gathers from NCHW (one line
    # per channel: 64@56 1x1 stride 2 went from 111 to 120 GFLOP/s)
    for t in keep:
        schedule_copy_stage(s, t, vector_ok=t.op.tag == PAD)
    return s


def _prefetch_next_chunk(s: Schedule, CC: Tensor, rows: Any, n_rows: int, at_block: Any,
                         at_channel: Any, target: Target, tile_fmas: int,
                         least: int | None = None) -> None:
    """Prefetch the next oc chunk's kernel block into L2 while this chunk is computed.
    (`rows` may also be the register tiles of one (row, chunk) iteration in the rows_oc
    order: they share the next chunk's prefetches, PREFETCH_ROWS_OC.)

    In a model no conv's weights are in cache when it starts (the others' evicted them),
    and the first row of each oc chunk walks its block (C x KH x KW x oc_bn floats) at
    the micro-kernel's pace, 2 vector loads per tile_ow x 2 FMAs: 9 B per cycle, more than
    one core draws from memory, so that row waits on memory. Each row (`rows`, a loop of
    `n_rows` iterations that all read the chunk: the parallel rows, or the plane's tile
    rows) prefetches 1/n_rows of the next chunk's block, spread through its reduction:
    at each (ic block, kh, kw) step (`at_block`; at each input channel, `at_channel`,
    where one step's slice would be 64 lines or more) whose index modulo n_rows is the
    row's. Only where there is a next chunk, and where the two chunks fit in 3/4 of
    the target's L2 (room for the rows of data they meet).

    One Sapphire Rapids core, CPU time. Each kernel of ResNet-18 timed in model order
    (weights cold; load 3.5): 512@7 3x3 1781-2042 -> 1513-1593 us, 256@14 3x3 1518-1600
    -> 1395-1470. Alone and repeated (weights in cache; load 5): 64@56 +0.5%, 128@28
    +1.2%, 256@14 +2.1%, 256@14 -> 512 stride 2 +3.5%, 512@7 +3.7% (the guard and the
    prefetches of the plane's short steps). Whole models, interleaved in one process
    (load 1-5): ResNet-18 2.4-5.7% faster (five runs), ResNet-50 2.7-4.3% (three),
    ResNet-18 in AVX2 code (-mcpu=haswell, 256 KiB L2) 1.5% (one). Coarser steps (a
    burst of 25 lines per kh step in the plane, 65 per ic block in a 1x1 conv) made
    ResNet-18 2.6% slower than none; one input channel per step everywhere (a guard per
    16-28 FMAs) 9.8% slower. By default only 1x1 convs (PREFETCH_1X1_WEIGHTS) and convs
    with taps accumulated in a plane of 7x7 or less (PREFETCH_PLANE_WEIGHTS) or in a tile
    of at most 16 accumulators at 14x14 or less (PREFETCH_TILE_WEIGHTS; steps of `least`
    FMAs or more, MIN_PREFETCH_STEP_FMAS_PLANE) prefetch. The 1x1 convs' steps
    were one input channel of 14-28 FMAs (MIN_PREFETCH_STEP_FMAS_1X1): in
    ResNet-50 that took 0.3 ms off 1024@14 -> 256's five calls, 0.4 off 1024@14 -> 2048
    stride 2, and 1.7 ms off the model. A 32 x 32 block's slice now goes 4 channels (8
    lines, counted exactly: the packed weights start on a line) a step (PREFETCH_GROUPED:
    ResNet-50's convs 1.5-2.5% faster again), not a block (64 lines at once: 2.3% slower).
    """
    kv = next(t for t in CC.op.input_tensors if len(t.shape) == 6)
    shape = shape_of(kv)
    chunk_bytes = math.prod(shape[1:]) * 4
    if shape[0] < 2 or 2 * chunk_bytes > target.l2_bytes * 3 // 4:
        return
    # a step's slice is ic_bn x oc_bn floats, a whole number of lines into the packed
    # weights (the executor aligns them to a line): 32 x 32 is 64, as many as one step may
    # prefetch (PREFETCH_PER_BLOCK; without it one line more was counted, for a slice that
    # might straddle one, and a 32 x 32 block went one input channel a step)
    slice_bytes = shape[4] * shape[5] * 4
    exact = PREFETCH_PER_BLOCK and slice_bytes % 64 == 0
    lines = -(-slice_bytes // 64) + (0 if exact else 1)
    per_channel = lines > 64
    at = at_channel if per_channel else at_block
    channels = 1 if per_channel else shape[4]
    if per_channel and PREFETCH_GROUPED:
        per_line = -(-shape[5] * 4 // 64)
        channels = max(d for d in range(1, shape[4] + 1)
                       if shape[4] % d == 0 and d * per_line <= max(PREFETCH_STEP_LINES, per_line))
    # the step's vector FMAs (the register tile's, per input channel of the step) must
    # outweigh its guard and prefetches: tuned configs of one channel by one or two
    # columns (2-4 FMAs a step) ran 1.4-6x slower with them (see PREFETCH_WEIGHTS)
    if least is None:
        least = MIN_PREFETCH_STEP_FMAS_1X1 if shape[2] * shape[3] == 1 else MIN_PREFETCH_STEP_FMAS
    if tile_fmas * channels < least:
        return
    if per_channel and channels > 1:
        at, _ = s[CC].split(at_channel, factor=channels)
    s[CC].prefetch(kv, at, dim=0, shift=1, level=2, spread=(rows, n_rows), aligned=True)


def schedule_output_tiles(s: Schedule, O: Tensor, CC: Tensor, oc_bn: int, reg_n: int,
                          reg_h: int = 1, acc_scope: str = "tile",
                          unpack_along_w: bool = False, rows_outer: bool = False) -> Any:
    """The output stage of a blocked conv: parallel over (n, oc chunk, oh), a tile of reg_h
    rows x reg_n columns per step with the accumulator `CC` computed at it (acc_scope
    "tile"), at the row ("row") or at the oc chunk ("plane"), vector stores along the
    channel block (along the columns when the block is 1, or for an NCHW output when
    `unpack_along_w`: contiguous stores instead of a scatter, 64@56 1x1 stride 2 with NCHW
    out 118 -> 134 GFLOP/s). With `rows_outer` (tile and row scopes) the rows are the
    outer loop and the oc chunks inside it, so that an input row stays in cache across the
    chunks. An NCHW output (4-D) is split into blocks of oc_bn channels first; shared by the fp32,
    int8 and depthwise templates."""
    if len(O.shape) == 4:
        n, c, h, w = s[O].op.axis
        co, cb = s[O].split(c, factor=oc_bn)
    else:
        n, co, h, w, cb = s[O].op.axis
    ho, hi = s[O].split(h, factor=reg_h)
    wo, wi = s[O].split(w, factor=reg_n)
    outer = [n, ho, co] if rows_outer and acc_scope != "plane" else [n, co, ho]
    if len(O.shape) == 4 and unpack_along_w and reg_n > 1:
        s[O].reorder(*outer, wo, hi, cb, wi)
        s[O].vectorize(wi)
    else:
        s[O].reorder(*outer, wo, hi, wi, cb)
        s[O].vectorize(cb if oc_bn > 1 else wi)
    if acc_scope == "tile":
        s[CC].compute_at(s[O], wo)
        return parallel_fuse(s, O, outer)
    if acc_scope == "row":
        par = parallel_fuse(s, O, outer)
        s[CC].compute_at(s[O], par)
        return par
    if acc_scope == "plane":
        par = parallel_fuse(s, O, [n, co])
        s[CC].compute_at(s[O], par)
        return par
    raise ScheduleError(f"acc_scope must be one of {ACC_SCOPES}, got {acc_scope!r}")


def pack_oihw(ic_bn: int, oc_bn: int) -> Callable[[np.ndarray], np.ndarray]:
    """The numpy packing OIHW -> OIHWio with these blocks: `pack_oihw(16, 32)(w)`."""
    def pack(w: np.ndarray) -> np.ndarray:
        co, c, kh, kw = w.shape
        blocked = w.reshape(co // oc_bn, oc_bn, c // ic_bn, ic_bn, kh, kw)
        return np.ascontiguousarray(blocked.transpose(0, 2, 4, 5, 3, 1))
    return pack


def _packers(ins: Sequence[Tensor], args: Sequence[Any], attrs: dict[str, Any]
             ) -> dict[int, Callable[[np.ndarray], np.ndarray]]:
    """A logical OIHW kernel spec instantiated packed: the packing of its blocks."""
    kshape = shape_of(ins[1])
    if len(args[1][0]) == 4 and len(kshape) == 6:
        return {1: pack_oihw(kshape[4], kshape[5])}
    return {}


def conv_partition(cfg: Any) -> str:
    """How the output stage's parallel loop (schedule_output_tiles) splits the output among
    threads: by rows (the rows_oc order, rows outermost) or by channel chunks (the oc_rows
    order, and the plane scope whatever the order).

        >>> from schedule.space import FallbackConfig
        >>> cfg = FallbackConfig("llvm")
        >>> cfg.define_knob("loop_order", ["oc_rows", "rows_oc"])
        >>> cfg.define_knob("acc_scope", ["tile", "row", "plane"])
        >>> conv_partition(cfg)
        'channels'
    """
    rows = cfg["loop_order"].val == "rows_oc" and cfg["acc_scope"].val != "plane"
    return "rows" if rows else "channels"


register_template("conv2d_NCHWc.x86", "llvm", compute=_compute, packers=_packers,
                  constant_weight_attrs={"kernel_layout": "OIHWio"},
                  output_block="tile_oc", version=3,
                  partition=conv_partition)(schedule_conv2d_nchwc)
