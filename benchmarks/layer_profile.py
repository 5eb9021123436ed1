"""Per-conv times of Tessel against ONNX Runtime: ORT's profiling JSON parsed into
(node, op type, microseconds), Tessel's per-kernel profile, the convolutions of both
matched, and the largest gaps.

    >>> rows = conv_gaps(lib, sess_profile_path, feeds)        # doctest: +SKIP
    >>> print(gap_table(rows, top=10))                         # doctest: +SKIP

Matching: both runtimes fuse differently (ORT folds batch norm into the conv and may run
it in its NCHWc domain; Tessel fuses the adds and activations and runs blocked layouts),
so a conv is keyed by (elements of its output, of its weight, of its data input), which
neither layouts nor fusion change, and the k-th conv with a key on one side is matched to
the k-th with that key on the other (both run in a topological order of the same graph).
The data input tells apart convs whose output and weight sizes agree by chance
(MobileNetV2's 144->24 1x1 conv at 56x56 and its 384-channel depthwise 3x3 at 14x14:
75264 and 3456 both). A conv whose key has no partner (channels padded to a block, say)
is reported unmatched.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LayerTime:
    """One conv call: its name, output and weight element counts, microseconds, and the
    element count of its data input (0: not known)."""

    name: str
    out_elems: int
    weight_elems: int
    us: float
    in_elems: int = 0

    @property
    def key(self) -> tuple[int, int, int]:
        """What matches a conv of one runtime to one of the other."""
        return self.out_elems, self.weight_elems, self.in_elems


def ort_convs(profile_path: str) -> list[LayerTime]:
    """The conv nodes of an ORT profile (SessionOptions.enable_profiling; the path that
    end_profiling returns), in run order, each with its median duration over the runs."""
    with open(profile_path) as f:
        events = json.load(f)
    durs: dict[str, list[float]] = {}
    keys: dict[str, tuple[int, int, int]] = {}
    for e in events:
        args = e.get("args", {})
        if e.get("cat") != "Node" or "Conv" not in args.get("op_name", ""):
            continue
        shapes = [next(iter(s.values())) for s in args.get("input_type_shape", [])]
        outs = [next(iter(s.values())) for s in args.get("output_type_shape", [])]
        if len(shapes) < 2 or not outs:
            continue
        keys[e["name"]] = (math.prod(outs[0]), math.prod(shapes[1]), math.prod(shapes[0]))
        durs.setdefault(e["name"], []).append(float(e["dur"]))
    return [LayerTime(n, keys[n][0], keys[n][1], statistics.median(d), keys[n][2])
            for n, d in durs.items()]


def tessel_convs(lib: Any, feeds: dict[str, Any], repeat: int = 10) -> list[LayerTime]:
    """The conv kernels of a compiled model in run order, from lib.profile (medians); the
    weight is a step's largest constant input, the data its first other input."""
    table = lib.profile(**feeds, repeat=repeat)
    plan = lib.plan
    out = []
    for k, (step, row) in enumerate(zip(plan.steps, table.rows)):
        if "conv" not in step.group:
            continue
        consts = [math.prod(plan.values[v].shape) for v in step.inputs
                  if plan.values[v].kind == "const"]
        data = [math.prod(plan.values[v].shape) for v in step.inputs
                if plan.values[v].kind != "const"]
        out.append(LayerTime(f"{k}:{step.group}", math.prod(row.shape), max(consts, default=0),
                             row.seconds * 1e6, data[0] if data else 0))
    return out


def match(tessel: list[LayerTime], ort: list[LayerTime]
          ) -> list[tuple[LayerTime | None, LayerTime | None]]:
    """Pairs (tessel, ort) matched by key and order (see the module docstring); an
    unmatched conv is paired with None."""
    pending: dict[tuple[int, int, int], list[LayerTime]] = {}
    for o in ort:
        pending.setdefault(o.key, []).append(o)
    pairs: list[tuple[LayerTime | None, LayerTime | None]] = []
    for t in tessel:
        q = pending.get(t.key)
        pairs.append((t, q.pop(0) if q else None))
    pairs += [(None, o) for q in pending.values() for o in q]
    return pairs


def gap_table(pairs: list[tuple[LayerTime | None, LayerTime | None]], top: int = 10) -> str:
    """The `top` matched convs with the largest Tessel - ORT time, and the unmatched count."""
    both = [(t, o) for t, o in pairs if t is not None and o is not None]
    both.sort(key=lambda p: p[1].us - p[0].us)
    lines = [f"{'tessel kernel':<44} {'ort node':<42} {'out':>8} {'weight':>8} "
             f"{'tessel us':>9} {'ort us':>8} {'gap us':>8} {'ratio':>6}"]
    for t, o in both[:top]:
        lines.append(f"{t.name:<44} {o.name:<42} {t.out_elems:>8} {t.weight_elems:>8} "
                     f"{t.us:>9.1f} {o.us:>8.1f} {t.us - o.us:>8.1f} "
                     f"{t.us / max(o.us, 1e-9):>6.2f}")
    lost = len(pairs) - len(both)
    lines.append(f"{len(both)} convs matched, {lost} unmatched")
    return "\n".join(lines)


__all__ = ["LayerTime", "gap_table", "match", "ort_convs", "tessel_convs"]
