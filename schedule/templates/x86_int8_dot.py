"""The 4-wide int8 dot product the x86 int8 templates tensorize, and the layouts it reads.

One step of the intrinsic, for `lanes` int32 accumulators:

    acc[i] += sum_{k<4} a[k] * byte_k(b[i])        (i < lanes)

`a` is 4 activations (broadcast to every lane), `b` is `lanes` int32 words, each holding
4 signed int8 weights, byte k (little-endian) the weight of a[k]: in bytes exactly the
weight block [oc_block][4] of TVM's OIHW[ic/4]i[oc_block]o[4]i layout. It is what VNNI's
`vpdpbusd` does (unsigned bytes times signed bytes, summed by four into int32, wrapping);
the LLVM backend (lowering.llvm.intrinsics) emits that instruction where the target has
it (`dot4_instruction`), the exact `vpmaddwd` on int16-widened bytes where it does not.
For vpdpbusd the activations are 4 uint8 in order; for vpmaddwd they are stored widened,
uint16 in the order a0 a2 a1 a3 (`Activations`), so that each of the two vpmaddwd takes
its pair as one broadcast int32 word, with nothing to split per column.

VNNI multiplies unsigned by signed bytes, so int8 activations enter shifted by +128 (as
uint8) and every output subtracts 128 * sum(w) of its channel, which the packers compute
once with the weights and store as one more int32 row after them (COMP_SHIFT); padding
and padded input channels hold the shifted zero, 128, against zero weights. All of it is
int32 arithmetic modulo 2^32, so the result is the int8 x int8 -> int32 sum bit for bit.

    >>> import numpy as np
    >>> w = np.array([[1, -2, 3, -4]], "int8")            # one output channel, K = 4
    >>> words, comp = pack_words(w.reshape(1, 1, 4), 1)   # [N/nr, K/4, nr], [N/nr, nr]
    >>> int(words[0, 0, 0]) == int(w.view("<i4")[0, 0]), int(comp[0, 0])
    (True, -256)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from schedule.schedule import Schedule
from schedule.templates.common import find_anchor, injective_inputs, inline_injective, walk_ops
from schedule.tensorize import TensorIntrin, decl_tensor_intrin
from tensor_expr import tensor as T
from tensor_expr.expr import Call, PrimExpr, cast, const, if_then_else
from tensor_expr.expr import all as te_all
from tensor_expr.intrin import shift_left, shift_right
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError

# the Call the tensorized nest becomes: dot4_u8i8(acc[0], a[0], b[0], lanes)
DOT4 = "dot4_u8i8"
# int8 activations x + COMP_SHIFT are uint8; the compensation row holds COMP_SHIFT * sum(w)
COMP_SHIFT = 128


def byte_of(word: Any, k: Any) -> PrimExpr:
    """Signed byte k (0 = least significant) of an int32 word, as int32."""
    return shift_right(shift_left(word, 24 - k * 8), 24)


def dot4_term(a: Any, word: Any, k: Any) -> PrimExpr:
    """One product of the 4-wide dot: uint8 `a` times byte k of `word`, in int32. The
    templates and the intrinsic build their bodies with it, so tensorize sees one shape."""
    return cast(a, "int32") * byte_of(word, k)


def dot4_instruction(features: frozenset[str] | set[str], lanes: int) -> str:
    """Which instruction the dot over `lanes` int32 lanes becomes for a target with these
    CPU features: "vpdpbusd", "vpmaddwd" or "generic" (plain shifts and multiplies).

        >>> dot4_instruction({"avx512f", "avx512bw", "avx512vnni"}, 16)
        'vpdpbusd'
        >>> dot4_instruction({"avx2", "fma"}, 8), dot4_instruction(set(), 8)
        ('vpmaddwd', 'generic')
    """
    bits = 32 * lanes
    if bits == 512 and "avx512vnni" in features:
        return "vpdpbusd"
    if bits in (128, 256) and ("avxvnni" in features
                               or {"avx512vnni", "avx512vl"} <= set(features)):
        return "vpdpbusd"
    if (bits == 512 and "avx512bw" in features) or (bits == 256 and "avx2" in features) \
            or (bits == 128 and set(features) & {"sse2", "avx", "avx2"}):
        return "vpmaddwd"
    return "generic"


@dataclass(frozen=True)
class Activations:
    """How the 4 activations of one dot are stored: "uint8" a0 a1 a2 a3 (vpdpbusd reads
    the 4 bytes as one word) or "uint16" a0 a2 a1 a3 (vpmaddwd reads a0 a2 and a1 a3 as
    one word each); both hold x + 128.

        >>> from tessel_target import Target
        >>> acts = Activations.for_target(Target.parse("llvm -mcpu=haswell"), 8)
        >>> acts.dtype, [acts.slot(k) for k in range(4)]
        ('uint16', [0, 2, 1, 3])
    """

    dtype: str

    @staticmethod
    def for_target(target: Any, lanes: int) -> Activations:
        """The layout the target's dot instruction reads best."""
        paired = dot4_instruction(target.features, lanes) == "vpmaddwd"
        return Activations("uint16" if paired else "uint8")

    def slot(self, k: Any) -> Any:
        """Where a[k] sits in its group of 4 (and which k a slot holds: self-inverse)."""
        return k if self.dtype == "uint8" else (k % 2) * 2 + k // 2

    def channel(self, b: Any) -> Any:
        """The activation stored at position b of a block (groups of 4 from 0)."""
        return b if self.dtype == "uint8" else (b // 4) * 4 + self.slot(b % 4)

    def shifted(self, x: Any) -> PrimExpr:
        """An int8 activation as stored: x + 128 (as uint8 wrapping: an xor)."""
        return cast(cast(x, "int32") + COMP_SHIFT, self.dtype)

    @property
    def pad(self) -> PrimExpr:
        """The stored zero: 128."""
        return const(COMP_SHIFT, self.dtype)


def word_of(values: list[Any]) -> PrimExpr:
    """The int32 word of 4 int8 values, value k in byte k (what pack_words stores)."""
    word = shift_left(cast(values[3], "int32"), 24)
    for k in range(3):
        low = cast(cast(values[k], "uint8"), "int32")
        word = word + (low if k == 0 else shift_left(low, 8 * k))
    return word


def guarded(conds: list[Any], value: Any, default: Any) -> PrimExpr:
    """`value` where all `conds` hold (they guard padding), else `default`."""
    return if_then_else(te_all(*conds), value, default) if conds else value


def check_int8(template: str, args: Any, attrs: dict[str, Any], weight: str) -> None:
    """A ScheduleError unless the template's operands are int8 and its out_dtype int32."""
    dtypes = (args[0][1], args[1][1], attrs.get("out_dtype", "int32"))
    if dtypes != ("int8", "int8", "int32"):
        raise ScheduleError(f"{template} computes int8 data x int8 {weight} -> int32, got "
                            f"{dtypes[0]} x {dtypes[1]} -> {dtypes[2]}; other dtypes take "
                            "the float template of the op")


def int8_stages(s: Schedule, outs: list[Tensor], anchor: str, padded: str
                ) -> tuple[Tensor, Tensor, list[Tensor], bool]:
    """(output stage, accumulator, layout stages, cropped): the group's injective stages
    inlined but the layout stages and the blocked result of padded outputs (tagged
    `padded`, which a cropping output stage reads), the accumulator "local"."""
    acc = find_anchor(outs, anchor)
    keep = injective_inputs(acc)
    blocked = [op.output(0) for op in walk_ops(outs) if getattr(op, "tag", "") == padded]
    inline_injective(s, outs, keep=keep + blocked)
    s[acc].set_scope("local")
    return (blocked[0] if blocked else outs[0]), acc, keep, bool(blocked)


def dot4_intrin(lanes: int, acts: Activations = Activations("uint8")) -> TensorIntrin:
    """The intrinsic over `lanes` int32 accumulators (16 for 512-bit vectors, 8 for 256),
    its activations stored as `acts` says.

        >>> dot4_intrin(16).extents
        ([16], [4])
    """
    a = T.placeholder((4,), acts.dtype, name="a")
    b = T.placeholder((lanes,), "int32", name="b")
    k = T.reduce_axis((0, 4), name="k")
    c = T.compute((lanes,), lambda i: T.sum(dot4_term(a[acts.slot(k)], b[i], k), axis=k),
                  name="dot4")

    def emit(outs: Any, ins: Any) -> PrimExpr:
        return Call("int32", DOT4, (outs[0].first, ins[0].first, ins[1].first,
                                    const(lanes, "int32")))

    return decl_tensor_intrin(c, DOT4, emit=emit)


def dot4_reference(acc: np.ndarray, a: np.ndarray, words: np.ndarray) -> None:
    """The intrinsic in numpy, in place: acc[i] += sum_k a[k] * byte_k(words[i]) (int32,
    wrapping; uint16 `a` in the order a0 a2 a1 a3); the loop-IR interpreter runs
    tensorized nests with it.

        >>> acc = np.array([5], np.int32)
        >>> dot4_reference(acc, np.array([1, 2, 3, 255], np.uint8),
        ...                np.array([1, -2, 3, -4], np.int8).view("<i4"))
        >>> int(acc[0])  # 5 + 1 - 4 + 9 - 1020
        -1009
    """
    if a.dtype == np.uint16:  # a0 a2 a1 a3
        a = a[[0, 2, 1, 3]]
    b = np.ascontiguousarray(words, "<i4").view(np.int8).reshape(-1, 4).astype(np.int64)
    acc[:] = (acc.astype(np.int64) + b @ np.asarray(a, np.int64)).astype(np.int32)


def int32_lanes(target: Any) -> int:
    """int32 accumulators per vector register of the target: 16 (AVX-512), 8, or 4."""
    return int(target.vector_bits) // 32


# ---------------------------------------------------------------------------------------
# Packing constant weights (numpy, once at build)


def pack_words(w: np.ndarray, nr: int) -> tuple[np.ndarray, np.ndarray]:
    """int8 weights [N, R, 4] (N outputs, R groups of 4 reduction values in dot order) ->
    (words int32 [ceil(N/nr), R, nr], compensation int32 [ceil(N/nr), nr]): word (n, r)
    holds w[n, r, 0:4], zero for padded outputs; the compensation is COMP_SHIFT * sum(w[n])
    (wrapping in int32, as the kernel's sums do)."""
    n, r, _ = w.shape
    blocks = -(-n // nr)
    padded = np.zeros((blocks * nr, r, 4), "int8")
    padded[:n] = w
    words = np.ascontiguousarray(padded).view("<i4").reshape(blocks, nr, r)
    comp = (COMP_SHIFT * padded.astype(np.int64).sum(axis=(1, 2))).astype(np.int32)
    return (np.ascontiguousarray(words.transpose(0, 2, 1)).astype(np.int32),
            comp.reshape(blocks, nr))
