"""Fingerprints of what each registered schedule template decides, pinned beside its
version in template_fingerprints.json (tests/schedule/test_template_versions.py checks
them):

    python3 -m tests.schedule.pin_templates            # re-pin every template
    python3 -m tests.schedule.pin_templates dense.x86  # re-pin some

A template's records are filed under its version (schedule.templates.registry.workload_key):
a change that makes a config do something else (another default, a knob value meaning
another loop nest) must raise `version=` in its `register_template(...)`, or a build applies
records measured against what the template did before (tuned models ran up to 9% slower
than untuned when conv2d_NCHWc.x86's default changed). For one or two canonical tasks of
each template and target (CASES), four parts are hashed:

- compute: the tensor-expression program of the default config (ops, shapes, dtypes, axes,
  bodies; tensor intrinsics a schedule tensorizes with, their declared computation);
- space: the knobs in declaration order, each with its values, and the flop count;
- fallback: the default config's knob values, its compute and its schedule primitives;
- schedule: the compute and the schedule primitives (the recorded split / reorder / ...
  calls, schedule.serialize) of a few fixed points of the space.

Nothing lowered is hashed, so a change to lowering, its passes or a backend changes no
fingerprint. Checked against history: at daa696e (conv2d_NCHWc.x86's padding guard made
its default, the change that left tuned databases up to 9% slower than untuned) the
compute, fallback and schedule of "64@56 3x3 NCHW16c" change on both CPUs, and nothing
of conv2d_nchw.x86 or dense.x86, though loop_partition changed in that commit too.

Named CPUs only: the targets name `-mcpu` (and cuda `-arch`), and the host's CPU is hidden
while fingerprinting, so a host that happens to be a named CPU reads the same features as
any other (`host_hidden`).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).with_name("template_fingerprints.json")
X86 = ("llvm -mcpu=skylake-avx512", "llvm -mcpu=haswell")
CUDA = ("cuda -arch=sm_80",)
ACCEL = ("accel",)
F32, F16, I8 = "float32", "float16", "int8"
CONV3 = {"strides": [1, 1], "padding": [1, 1, 1, 1], "dilation": [1, 1]}
BLOCKED = {"data_layout": "NCHWxc", "out_layout": "NCHWc"}  # blocked in, blocked out

# template -> (targets, [(case label, args, attrs)]): ResNet-like layers, small enough that
# fingerprinting every template takes seconds
CASES: dict[str, tuple[tuple[str, ...], list[tuple[str, list[Any], dict[str, Any]]]]] = {
    "matmul.x86": (X86, [("256x256x256", [((256, 256), F32), ((256, 256), F32)], {})]),
    "dense.x86": (X86, [("1x1000x512", [((1, 512), F32), ((1000, 512), F32)], {}),
                        ("1x1000x512 packed", [((1, 512), F32), ((1000, 512), F32)],
                         {"weight_layout": "packed"})]),
    "batch_matmul.x86": (X86, [("4x64x48x32", [((4, 64, 32), F32), ((4, 32, 48), F32)],
                                {})]),
    "conv2d_NCHWc.x86": (X86, [
        ("64@56 3x3", [((1, 64, 56, 56), F32), ((64, 64, 3, 3), F32)], CONV3),
        # as a model hands data on, blocked (relay_ir.backend.layout_plan.as_in_model):
        # the padding guard applies to such data only
        ("64@56 3x3 NCHW16c", [((1, 4, 56, 56, 16), F32), ((64, 64, 3, 3), F32)],
         {**CONV3, **BLOCKED}),
        ("64@56 1x1 s2", [((1, 64, 56, 56), F32), ((128, 64, 1, 1), F32)],
         {"strides": [2, 2], "padding": [0, 0, 0, 0], "dilation": [1, 1]}),
        # a model's stride-1 1x1 conv with more pixels than output channels (its AVX-512
        # default is the 4-row tile of POINTWISE_ROW_BAND)
        ("64@56 1x1 -> 256 NCHW32c", [((1, 2, 56, 56, 32), F32), ((256, 64, 1, 1), F32)],
         {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], **BLOCKED}),
        # one with more output channels than pixels above 7x7 (its AVX-512 default is the
        # 7-column tile of POINTWISE_CHUNK_TILE)
        ("256@14 1x1 -> 1024 NCHW32c", [((1, 8, 14, 14, 32), F32), ((1024, 256, 1, 1), F32)],
         {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1], **BLOCKED})]),
    # a model's 3x3 stride-1 conv, its constant kernel transformed by the packer
    "conv2d_NCHWc_winograd.x86": (X86, [
        ("64@56 3x3 NCHW16c", [((1, 4, 56, 56, 16), F32), ((64, 64, 3, 3), F32)],
         {**CONV3, **BLOCKED, "kernel_layout": "winograd"})]),
    "conv2d_nchw.x86": (X86, [("32@28 3x3", [((1, 32, 28, 28), F32), ((32, 32, 3, 3), F32)],
                               {"strides": 1, "padding": 1})]),
    "conv2d_stem.x86": (X86, [("3@224 7x7 s2", [((1, 3, 224, 224), F32),
                                                ((64, 3, 7, 7), F32)],
                               {"strides": [2, 2], "padding": [3, 3, 3, 3]}),
                              ("3@224 7x7 s2 to NCHWc", [((1, 3, 224, 224), F32),
                                                         ((64, 3, 7, 7), F32)],
                               {"strides": [2, 2], "padding": [3, 3, 3, 3],
                                "out_layout": "NCHWc"})]),
    "depthwise_conv2d_NCHWc.x86": (X86, [("32@56 3x3", [((1, 32, 56, 56), F32),
                                                        ((32, 1, 3, 3), F32)],
                                          {"padding": [1, 1, 1, 1], "groups": 32}),
                                         ("32@56 3x3 NCHW16c", [((1, 2, 56, 56, 16), F32),
                                                                ((32, 1, 3, 3), F32)],
                                          {"padding": [1, 1, 1, 1], "groups": 32,
                                           **BLOCKED})]),
    "depthwise_conv2d_nchw.x86": (X86, [("32@28 3x3", [((1, 32, 28, 28), F32),
                                                       ((32, 1, 3, 3), F32)],
                                         {"padding": 1})]),
    "group_conv2d_NCHWc.x86": (X86, [("64@28 3x3 g4", [((1, 64, 28, 28), F32),
                                                       ((64, 16, 3, 3), F32)],
                                      {"padding": 1, "groups": 4}),
                                     # as a model runs it (lower_group.GROUP_CONV_BLOCKED)
                                     ("64@14 3x3 g4 NCHW16c", [((1, 4, 14, 14, 16), F32),
                                                               ((64, 16, 3, 3), F32)],
                                      {"padding": 1, "groups": 4, **BLOCKED})]),
    "conv2d_int8.x86": (X86, [("64@28 3x3", [((1, 64, 28, 28), I8), ((64, 64, 3, 3), I8)],
                               {"padding": 1, "out_dtype": "int32"})]),
    "dense_int8.x86": (X86, [("16x256x512", [((16, 512), I8), ((256, 512), I8)],
                              {"out_dtype": "int32"})]),
    "injective.x86": (X86, [("bias_add", [((1, 64, 28, 28), F32), ((64,), F32)],
                             {"op": "bias_add"})]),
    "reduce.x86": (X86, [("sum axis 1", [((4, 64, 96), F32)], {"op": "sum", "axis": 1})]),
    "softmax.x86": (X86, [("1000", [((4, 1000), F32)], {"axis": -1})]),
    "pool2d.x86": (X86, [("max 3x3 s2", [((1, 64, 112, 112), F32)],
                          {"op": "max", "pool_size": 3, "strides": 2, "padding": 1})]),
    "global_pool2d.x86": (X86, [("avg", [((1, 512, 7, 7), F32)], {"op": "avg"})]),
    "matmul.cuda": (CUDA, [("256x256x256", [((256, 256), F32), ((256, 256), F32)], {})]),
    "dense.cuda": (CUDA, [("16x1000x512", [((16, 512), F32), ((1000, 512), F32)], {})]),
    "batch_matmul.cuda": (CUDA, [("4x64x48x32", [((4, 64, 32), F32), ((4, 32, 48), F32)],
                                  {})]),
    "conv2d_nchw.cuda": (CUDA, [("64@56 3x3", [((1, 64, 56, 56), F32), ((64, 64, 3, 3), F32)],
                                 {"strides": 1, "padding": 1})]),
    "conv2d_nchw_gemm.cuda": (CUDA, [("64@56 3x3", [((1, 64, 56, 56), F32),
                                                   ((64, 64, 3, 3), F32)],
                                      {"strides": 1, "padding": 1})]),
    "conv2d_nchw_tensorcore.cuda": (CUDA, [("64@56 3x3 fp16", [((1, 64, 56, 56), F16),
                                                               ((64, 64, 3, 3), F16)],
                                            {"strides": 1, "padding": 1})]),
    "dense_tensorcore.cuda": (CUDA, [("64x256x512 fp16", [((64, 512), F16),
                                                          ((256, 512), F16)], {})]),
    "depthwise_conv2d_nchw.cuda": (CUDA, [("32@56 3x3", [((1, 32, 56, 56), F32),
                                                         ((32, 1, 3, 3), F32)],
                                           {"padding": 1})]),
    "injective.cuda": (CUDA, [("add", [((3, 1000), F32), ((1000,), F32)],
                               {"outputs": [[[3, 1000], F32]]})]),
    "reduce.cuda": (CUDA, [("mean axis 1", [((8, 1000), F32)], {"op": "mean", "axis": [1]})]),
    "softmax.cuda": (CUDA, [("1000", [((4, 1000), F32)], {"axis": -1})]),
    "pool2d.cuda": (CUDA, [("max 3x3 s2", [((1, 64, 112, 112), F32)],
                            {"op": "max", "pool_size": [3, 3], "strides": [2, 2],
                             "padding": [1, 1]})]),
    "conv2d_packed.accel": (ACCEL, [("64@14 3x3", [((1, 64, 14, 14), I8),
                                                   ((64, 64, 3, 3), I8)],
                                     {"strides": 1, "padding": 1})]),
    "dense_packed.accel": (ACCEL, [("16x256x512", [((16, 512), I8), ((256, 512), I8)], {})]),
}


@contextlib.contextmanager
def host_hidden() -> Iterator[None]:
    """While fingerprinting, the host CPU is one no target names (so `-mcpu=haswell` reads
    haswell's known features on a haswell host too, not the host's own)."""
    import tessel_target

    real = tessel_target.host_cpu
    tessel_target.host_cpu = lambda: ("tessel-fingerprint-host", "")  # type: ignore[assignment]
    try:
        yield
    finally:
        tessel_target.host_cpu = real  # type: ignore[assignment]


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    if re.search(r" at 0x[0-9a-fA-F]+", text):  # an object's repr: another run, another pin
        raise ValueError("a fingerprint holds an object's address (an attr or an argument "
                         "printed by repr); give it a plain value: "
                         + text[max(0, text.find(" at 0x") - 80):][:160])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _ops(outs: Sequence[Any]) -> list[Any]:
    """Every op the outputs depend on, inputs first, in a deterministic order."""
    seen: dict[int, Any] = {}
    order: list[Any] = []

    def visit(op: Any) -> None:
        stack = [(op, False)]
        while stack:
            node, done = stack.pop()
            if done:
                if id(node) not in seen:
                    seen[id(node)] = node
                    order.append(node)
                continue
            if id(node) in seen:
                continue
            stack.append((node, True))
            for t in reversed(node.input_tensors):
                stack.append((t.op, False))

    for t in outs:
        visit(t.op)
    return order


def _dom(iv: Any) -> list[str]:
    from tensor_expr import expr_to_str

    return [iv.var.name, expr_to_str(iv.dom.min), expr_to_str(iv.dom.extent)]


def compute_text(outs: Sequence[Any]) -> list[Any]:
    """The TE program of `outs` as plain data: per op its name, kind, shape, dtype and, for
    a compute, tag, attrs, axes, reduce axes and body text.

        >>> import tensor_expr as te
        >>> A = te.placeholder((4,), name="A")
        >>> compute_text([te.compute((4,), lambda i: A[i] * 2.0, name="B")])[1][:2]
        ['compute', 'B']
    """
    from tensor_expr import expr_to_str
    from tensor_expr.tensor import PlaceholderOp

    rows: list[Any] = []
    for op in _ops(outs):
        if isinstance(op, PlaceholderOp):
            rows.append(["placeholder", op.name, [expr_to_str(d) for d in op.shape],
                         op.dtype])
            continue
        rows.append(["compute", op.name, op.tag, [[k, str(v)] for k, v in op.attrs],
                     [_dom(a) for a in op.axis], [_dom(a) for a in op.reduce_axis],
                     [expr_to_str(b) for b in op.body],
                     [t.dtype for t in op.outputs]])
    return rows


def _intrinsics(s: Any) -> list[Any]:
    """The tensor intrinsics the schedule tensorizes with: name, declared computation and
    the source of the call it emits."""
    found: dict[str, Any] = {}
    for st in s.stages:
        for attr in st.iter_attrs.values():
            intrin = attr.tensor_intrin
            if intrin is not None and intrin.name not in found:
                source = inspect.getsource(intrin.emit)
                found[intrin.name] = [compute_text([intrin.op.output(0)]),
                                      [line.strip() for line in source.splitlines()]]
    return sorted([name, *v] for name, v in found.items())


def _decision(template: str, args: Any, attrs: dict[str, Any], cfg: Any) -> dict[str, Any]:
    """What the template makes of one config: its compute and schedule primitives, or the
    error that rejects the config (a point the template refuses is a decision too)."""
    from tessel_errors import ScheduleError

    try:
        return _decided(template, args, attrs, cfg)
    except ScheduleError as e:
        return {"error": str(e)}


def _decided(template: str, args: Any, attrs: dict[str, Any], cfg: Any) -> dict[str, Any]:
    from schedule.templates import build_compute, get_template

    _, outs = build_compute(template, args, attrs, cfg)  # what instantiate does, keeping
    s = get_template(template).schedule(cfg, outs)      # the outputs apart
    return {"compute": compute_text(outs) + _intrinsics(s),
            "primitives": json.loads(s.to_json())["primitives"]}


def _points(size: int) -> list[int]:
    """A few fixed points of a space of `size`: the ends and three between."""
    return sorted({0, size // 3, size // 2, (2 * size) // 3, size - 1})


def fingerprint_case(template: str, target: str, args: Any, attrs: dict[str, Any]
                     ) -> dict[str, Any]:
    """{"compute", "space", "fallback", "schedule": digest, "knobs": names} of one task."""
    from schedule.space import FallbackConfig
    from schedule.templates import config_space

    with host_hidden():
        space = config_space(template, args, attrs, target)
        fallback = FallbackConfig(target)
        default = _decision(template, args, attrs, fallback)
        chosen = {name: fallback[name].to_json() for name in fallback.knobs}
        knobs = [[name, type(k).__name__, [e.to_json() for e in k.entities]]
                 for name, k in space.knobs.items()]
        points = [[i, space.get(i).to_json(), _decision(template, args, attrs, space.get(i))]
                  for i in _points(space.size)]
    return {"compute": _digest(default["compute"]),
            "space": _digest([knobs, space.flop]),
            "fallback": _digest([chosen, default]),
            "schedule": _digest(points),
            "knobs": " ".join(space.knobs)}


def fingerprint_template(name: str) -> dict[str, Any]:
    """{"version", "cases": {"<target> | <label>": fingerprint_case(...)}} of a template."""
    from schedule.templates import TEMPLATES

    targets, cases = CASES[name]
    out: dict[str, Any] = {}
    for target in targets:
        for label, args, attrs in cases:
            out[f"{target} | {label}"] = fingerprint_case(name, target, args, attrs)
    return {"version": TEMPLATES[name].version, "cases": out}


def own_templates() -> list[str]:
    """The templates Tessel registers (schedule/templates/), not those tests or users add.

        >>> "dense.x86" in own_templates()
        True
    """
    from schedule.templates import TEMPLATES

    return sorted(n for n, t in TEMPLATES.items()
                  if t.schedule.__module__.startswith("schedule.templates."))


def load_golden() -> dict[str, Any]:
    """The pinned fingerprints ({} when the file is missing)."""
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


def main(argv: list[str] | None = None) -> int:
    """Re-pin the templates named (default: all) and say what changed."""
    names = (argv if argv is not None else sys.argv[1:]) or own_templates()
    unknown = [n for n in names if n not in own_templates()]
    if unknown:
        print(f"unknown templates {unknown}; known: {', '.join(own_templates())}")
        return 2
    missing = [n for n in names if n not in CASES]
    if missing:
        print(f"no canonical task for {missing}: add them to CASES in {__file__}")
        return 2
    golden = load_golden()
    for name in names:
        new, old = fingerprint_template(name), golden.get(name)
        if old != new:
            what = "new" if old is None else changes(old, new)
            same = old is not None and old["version"] == new["version"]
            print(f"{name}: {what}; pinned at version {new['version']}"
                  + (" (not raised: if a config now does something else, raise version= "
                     "in its register_template and pin again)" if same else ""))
        golden[name] = new
    golden = {k: golden[k] for k in sorted(golden) if k in own_templates()}
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
    return 0


def changes(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What differs between two `fingerprint_template` results, in words.

        >>> a = {"version": 1, "cases": {"t | x": {"compute": "1", "space": "2",
        ...                                         "fallback": "3", "schedule": "4"}}}
        >>> b = {"version": 1, "cases": {"t | x": {**a["cases"]["t | x"], "fallback": "5"}}}
        >>> changes(a, b)
        'fallback changed (t | x)'
    """
    parts = []
    if old.get("version") != new["version"]:
        parts.append(f"version {old.get('version')} -> {new['version']}")
    cases_old, cases_new = old.get("cases", {}), new["cases"]
    for case in sorted(set(cases_old) ^ set(cases_new)):
        parts.append(f"case {case!r} {'added' if case in cases_new else 'removed'}")
    for part in ("compute", "space", "fallback", "schedule"):
        where = [c for c in sorted(set(cases_old) & set(cases_new))
                 if cases_old[c].get(part) != cases_new[c][part]]
        if where:
            parts.append(f"{part} changed ({', '.join(where)})")
    return "; ".join(parts) or "unchanged"


if __name__ == "__main__":
    raise SystemExit(main())
