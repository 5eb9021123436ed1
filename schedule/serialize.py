"""JSON form of a schedule: the list of primitives applied, replayable on a fresh schedule.

Stages are named by op name and iter vars by name ('i.outer', 'i.j.fused'); both names
are deterministic, so a replay on a new schedule of the same computation finds them.

    >>> import tensor_expr as te
    >>> from schedule import create_schedule, apply_json
    >>> A = te.placeholder((64,), name="A")
    >>> B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    >>> s = create_schedule(B); _ = s[B].split(B.op.axis[0], factor=8)
    >>> s2 = create_schedule(B); apply_json(s2, s.to_json())
    >>> [v.var.name for v in s2[B].leaf_iter_vars]
    ['i.outer', 'i.inner']
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tensor_expr.expr import IntImm, IterVar, PrimExpr
from tensor_expr.tensor import Tensor, thread_axis
from tessel_errors import ScheduleError

if TYPE_CHECKING:
    from schedule.schedule import Schedule
    from schedule.stage import Stage

FORMAT_VERSION = 1


def iv_ref(st: Stage, iv: IterVar) -> str:
    """The name of `iv` within its stage ('#k' = k-th iter var when names repeat)."""
    same = [v for v in st.all_iter_vars if v.var.name == iv.var.name]
    if len(same) == 1:
        return iv.var.name
    return "#" + str(next(n for n, v in enumerate(st.all_iter_vars) if v is iv))


def iv_by_ref(st: Stage, ref: str) -> IterVar:
    """The iter var of stage `st` named `ref` (see iv_ref)."""
    if ref.startswith("#"):
        return st.all_iter_vars[int(ref[1:])]
    for v in st.all_iter_vars:
        if v.var.name == ref:
            return v
    raise ScheduleError(f"replay: {st.describe()} has no axis '{ref}'; its axes are "
                        + ", ".join(f"'{v.var.name}'" for v in st.all_iter_vars))


def encode_args(sch: Schedule, args: Mapping[str, Any]) -> dict[str, Any]:
    """Primitive arguments as JSON values (stages, tensors, iter vars by name)."""
    return {k: _encode(sch, v) for k, v in args.items()}


def _encode(sch: Schedule, v: Any) -> Any:
    from schedule.stage import Stage

    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_encode(sch, x) for x in v]
    if isinstance(v, Stage):
        return {"stage": sch.stage_ref(v)}
    if isinstance(v, Tensor):
        return {"tensor": [sch.stage_ref(sch[v]), v.value_index]}
    if isinstance(v, IterVar):
        owner = sch._owner_of(v)
        if owner is None:
            raise ScheduleError(f"cannot record axis '{v.var.name}': it belongs to no stage")
        return {"iv": [sch.stage_ref(owner), iv_ref(owner, v)]}
    if isinstance(v, IntImm):
        return v.value
    if isinstance(v, PrimExpr):
        raise ScheduleError(f"cannot serialise the symbolic argument '{v}'; schedules "
                            "stored as JSON take constant factors")
    raise ScheduleError(f"cannot serialise schedule argument {v!r}")


def _decode(sch: Schedule, v: Any) -> Any:
    if isinstance(v, list):
        return [_decode(sch, x) for x in v]
    if isinstance(v, dict):
        if "stage" in v:
            return sch.stage_by_ref(v["stage"])
        if "tensor" in v:
            ref, k = v["tensor"]
            return sch.stage_by_ref(ref).op.output(k)
        if "iv" in v:
            ref, name = v["iv"]
            return iv_by_ref(sch.stage_by_ref(ref), name)
    return v


def to_json(sch: Schedule) -> str:
    """The schedule's primitives as JSON text."""
    return json.dumps({"version": FORMAT_VERSION, "primitives": sch.primitives},
                      sort_keys=True)


def apply_json(sch: Schedule, text: str, intrinsics: Mapping[str, Any] | None = None) -> None:
    """Replay the primitives of `text` (from to_json) on `sch`, a fresh schedule."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
        raise ScheduleError(f"not a Tessel schedule record (version {FORMAT_VERSION}): "
                            f"{text[:60]!r}")
    for n, rec in enumerate(data["primitives"]):
        try:
            apply_record(sch, rec, intrinsics or {})
        except ScheduleError as e:
            raise ScheduleError(f"replay of primitive {n} ({rec.get('prim')}) failed: {e}") from e


def apply_record(sch: Schedule, rec: Mapping[str, Any], intrinsics: Mapping[str, Any]) -> Any:
    """Apply one recorded primitive."""
    prim = rec["prim"]
    st = sch.stage_by_ref(rec["stage"])
    a = {k: _decode(sch, v) for k, v in rec["args"].items()}
    if prim == "cache_read":
        return sch.cache_read(a["tensor"], a["scope"], a["readers"])
    if prim == "cache_write":
        return sch.cache_write(a["tensor"], a["scope"])
    if prim == "rfactor":
        return sch.rfactor(a["tensor"], a["axis"], a["factor_axis"])
    if prim == "split":
        return st.split(a["axis"], factor=a["factor"], nparts=a["nparts"])
    if prim == "tile":
        return st.tile(a["x"], a["y"], a["x_factor"], a["y_factor"])
    if prim in ("fuse", "reorder"):
        return getattr(st, prim)(*a["axes"])
    if prim == "compute_at":
        return st.compute_at(a["parent"], a["axis"])
    if prim in ("compute_inline", "compute_root"):
        return getattr(st, prim)()
    if prim in ("vectorize", "unroll", "parallel"):
        return getattr(st, prim)(a["axis"])
    if prim == "pragma":
        return st.pragma(a["axis"], a["key"], a["value"])
    if prim == "prefetch":
        spread = a.get("spread")
        return st.prefetch(a["tensor"], a["axis"], a["dim"], a["shift"], a["level"],
                           None if spread is None else tuple(spread),
                           bool(a.get("aligned", False)))
    if prim == "storage_align":
        return st.storage_align(a["axis"], a["factor"], a["offset"])
    if prim == "bind":
        return st.bind(a["axis"], thread_axis(a["thread"], a["thread_name"]))
    if prim == "set_scope":
        return st.set_scope(a["scope"])
    if prim == "tensorize":
        intrin = intrinsics.get(a["intrin"])
        if intrin is None:
            raise ScheduleError(f"replay of tensorize needs intrinsic '{a['intrin']}': pass "
                                "intrinsics={name: TensorIntrin} to apply_json")
        return st.tensorize(a["axis"], intrin)
    raise ScheduleError(f"unknown primitive {prim!r} in schedule record")
