"""The template registry: name -> Template (compute builder + schedule), and the helpers
that build a schedule from a template name, argument shapes, attrs and a config.

A template is registered next to its definition:

    >>> from schedule.templates import TEMPLATES, config_space
    >>> space = config_space("dense.x86", [((64, 32), "float32"), ((48, 32), "float32")], {})
    >>> "tile_y" in space.knobs and TEMPLATES["dense.x86"].target_kind
    'llvm'

The compute builder and the schedule function both receive the config: a knob that
changes the computation itself (the width of the packed weight layout) is declared by the
compute builder, the loop knobs by the schedule. Both run in that order with the same
config object, so the space is the same whichever path declared it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from schedule.schedule import Schedule
from schedule.space import ConfigEntity, ConfigSpace, FallbackConfig
from tensor_expr.tensor import Tensor, placeholder
from tessel_errors import ScheduleError

# One argument: (shape, dtype); shapes are tuples of ints.
ArgSpec = tuple[Sequence[int], str]
# compute(cfg, args, attrs) -> (input placeholders, output tensors)
ComputeFn = Callable[[Any, Sequence[ArgSpec], dict[str, Any]],
                     tuple[list[Tensor], list[Tensor]]]
# schedule(cfg, outs) -> Schedule
ScheduleFn = Callable[[Any, Sequence[Tensor]], Schedule]
# packers(input placeholders, arg specs, attrs) -> {input position: numpy transform from
# the spec's layout to the layout the instantiated input takes (a weight packed in the
# config's blocks)}
PackersFn = Callable[[Sequence[Tensor], Sequence[ArgSpec], dict[str, Any]],
                     dict[int, Callable[[Any], Any]]]
# epilogue(anchor_output) -> (extra input placeholders, final output tensor)
Epilogue = Callable[[Tensor], tuple[list[Tensor], Tensor]]


@dataclass(frozen=True)
class Template:
    """A schedule template: its name, target kind, compute builder and schedule function."""

    name: str
    target_kind: str
    compute: ComputeFn
    schedule: ScheduleFn
    tunable: bool = True
    doc: str = ""
    packers: PackersFn | None = None
    # attrs that make the template take its weight (input 1) in a packed layout when the
    # caller holds it as a constant and packs it once with `packers`
    constant_weight_attrs: tuple[tuple[str, Any], ...] = ()
    # whether the target's device can run the template's code (tensor cores: sm_70+);
    # templates_for leaves out the templates it cannot
    available: Callable[[Any], bool] | None = None
    # the knob whose value's innermost factor is the channel block the template writes its
    # blocked (NCHWc) output in: a model plans the layouts between its convs from it
    # (relay_ir.backend.layout_plan); None where no knob decides it
    output_block: str | None = None
    # raised when a change makes the template's kernels (its default among them) time
    # otherwise: records are filed under the version (workload_key), so a build never
    # applies a record confirmed against an older default
    version: int = 1
    # how a config splits the output among the threads of its parallel loop ("rows",
    # "channels"): see `partition_of`; None where the template does not say
    partition: Callable[[Any], str] | None = None
    # whether the template computes a call of these arg specs and attrs (a Winograd conv:
    # 3x3, stride 1); None: every call of its family. anchor_tasks leaves out the others
    applies: Callable[[Sequence[ArgSpec], dict[str, Any]], bool] | None = None


TEMPLATES: dict[str, Template] = {}


def register_template(name: str, target_kind: str = "llvm", compute: ComputeFn | None = None,
                      tunable: bool = True, packers: PackersFn | None = None,
                      constant_weight_attrs: dict[str, Any] | None = None,
                      available: Callable[[Any], bool] | None = None,
                      output_block: str | None = None, version: int = 1,
                      partition: Callable[[Any], str] | None = None,
                      applies: Callable[[Sequence[ArgSpec], dict[str, Any]], bool] | None = None
                      ) -> Callable[[ScheduleFn], ScheduleFn]:
    """Register the decorated schedule function with its compute builder under `name`.

    `@register_template("dense.x86", target_kind="llvm", compute=dense_compute)`;
    `output_block="tile_oc"` names the knob that decides a blocked output's channel block
    (see `output_block_of`); `version` (from 1) goes up when the template's kernels change
    how they time, so that older records no longer apply (see `workload_key`);
    `partition(cfg)` says how a config splits the output among threads (`partition_of`);
    `applies(specs, attrs)` says whether it computes such a call at all (`template_applies`).

    tests/schedule/test_template_versions.py fails when what a template decides (its
    compute, config space, fallback or the schedule of fixed points of its space, for the
    canonical tasks of tests/schedule/pin_templates.py) changed while `version` did not:
    raise `version` if a config now does something else, then re-pin the fingerprints with
    `python3 -m tests.schedule.pin_templates NAME` (only re-pin when no config changed
    what it does, e.g. a renamed stage).
    """
    if compute is None:
        raise ScheduleError(f"template '{name}': register_template needs compute=<builder>")

    def deco(fn: ScheduleFn) -> ScheduleFn:
        if name in TEMPLATES:
            raise ScheduleError(f"template '{name}' is registered twice")
        doc = (fn.__doc__ or "").strip().split("\n")[0]
        TEMPLATES[name] = Template(name, target_kind, compute, fn, tunable, doc, packers,
                                   tuple(sorted((constant_weight_attrs or {}).items())),
                                   available, output_block, version, partition, applies)
        return fn

    return deco


def output_block_of(name: str, cfg: Any) -> int | None:
    """The channel block a config of template `name` writes its blocked output in, read from
    the template's `output_block` knob (no instantiation); None for a template whose knobs
    do not decide it. `cfg` is a ConfigEntity or a FallbackConfig the template has filled.

        >>> from schedule.templates import config_space
        >>> args = [((1, 64, 8, 8), "float32"), ((32, 64, 1, 1), "float32")]
        >>> space = config_space("conv2d_NCHWc.x86", args, {}, "llvm -mcpu=haswell")
        >>> output_block_of("conv2d_NCHWc.x86", space.get(0))
        1
        >>> output_block_of("dense.x86", None) is None
        True
    """
    knob = get_template(name).output_block
    if knob is None:
        return None
    return block_of(cfg[knob])


def partition_of(name: str, cfg: Any) -> str | None:
    """How a config of template `name` splits its output among the threads of its parallel
    loop ("rows", "channels"), read from its knobs; None for a template that does not say.
    `cfg` is a ConfigEntity or a FallbackConfig the template has filled.

        >>> from schedule.templates import config_space
        >>> args = [((1, 64, 8, 8), "float32"), ((32, 64, 1, 1), "float32")]
        >>> space = config_space("conv2d_NCHWc.x86", args, {}, "llvm -mcpu=haswell")
        >>> sorted({partition_of("conv2d_NCHWc.x86", space.get(i)) for i in range(space.size)})
        ['channels', 'rows']
        >>> partition_of("dense.cuda", None) is None
        True
    """
    split = get_template(name).partition
    return None if split is None else split(cfg)


def block_of(entity: Any) -> int:
    """The channel block a block knob's value names: a split's innermost factor, or the
    one value of a knob a layout fixes (`cfg.define_knob("tile_oc", [16])`).

        >>> from schedule.space import OtherOptionEntity, SplitEntity
        >>> block_of(SplitEntity([-1, 16])), block_of(OtherOptionEntity(8))
        (16, 8)
    """
    size = getattr(entity, "size", None)
    return int(size[-1]) if size is not None else int(entity.val)


def input_packers(name: str, args: Sequence[ArgSpec], ins: Sequence[Tensor],
                  attrs: dict[str, Any] | None = None) -> dict[int, Callable[[Any], Any]]:
    """{input position: numpy transform} for the inputs an instantiated template takes in
    another layout than their spec (see PackersFn); {} for most templates.

        >>> input_packers("batch_matmul.x86", [((2, 4, 8), "float32")] * 2, [])
        {}
    """
    tpl = get_template(name)
    return dict(tpl.packers(ins, args, dict(attrs or {}))) if tpl.packers is not None else {}


def constant_weight_attrs(name: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """`attrs` for a call whose weight (input 1) is a constant the caller packs once with
    `input_packers`: the template's own additions, e.g. conv2d_NCHWc's OIHWio layout.

        >>> constant_weight_attrs("conv2d_NCHWc.x86", {"padding": 1})["kernel_layout"]
        'OIHWio'
        >>> constant_weight_attrs("dense.x86", {})
        {'weight_layout': 'packed'}
        >>> constant_weight_attrs("batch_matmul.x86", {})
        {}
    """
    return {**attrs, **dict(get_template(name).constant_weight_attrs)}


# the template-name suffix per target key (tessel_target.KINDS): "dense" -> "dense.x86"
_SUFFIX_BY_KEY = {"cpu": "x86", "gpu": "cuda", "accel": "accel"}
# where a target implements a family in its own layout: the CPU's conv2d is NCHWc; a GPU
# runs int8 conv2d / dense through its general templates
_BASE_BY_KEY = {("conv2d", "cpu"): "conv2d_NCHWc", ("conv2d", "gpu"): "conv2d_nchw_gemm",
                ("conv2d_int8", "gpu"): "conv2d_nchw_gemm", ("dense_int8", "gpu"): "dense",
                # a float16 dense (tensor cores on a GPU): the CPU's dense
                ("dense_tensorcore", "cpu"): "dense",
                ("dense_tensorcore", "accel"): "dense_packed",
                # a float16 conv2d tensor cores can take: the CPU's conv2d (the accelerator
                # has none for float convs, as for "conv2d")
                ("conv2d_tensorcore", "cpu"): "conv2d_NCHWc",
                ("conv2d_tensorcore", "gpu"): "conv2d_nchw_tensorcore",
                ("group_conv2d", "cpu"): "group_conv2d_NCHWc",
                ("depthwise_conv2d_nchw", "cpu"): "depthwise_conv2d_NCHWc",
                # a conv of an image (few input channels): a GPU's conv2d templates
                ("conv2d_stem", "gpu"): "conv2d_nchw_gemm",
                # the accelerator computes int8 only: a float conv or dense has no template
                # there (and is no accel tuning task); an --op spec names conv2d_nchw
                ("conv2d_nchw", "accel"): "conv2d_packed", ("dense", "accel"): "dense_packed",
                ("conv2d_int8", "accel"): "conv2d_packed", ("dense_int8", "accel"): "dense_packed"}


# other templates a target has for a family, each tuned as its own task: a compilation
# takes the one whose tuning record is fastest (the first, template_for's, when none has)
_ALTERNATES_BY_KEY = {("conv2d", "gpu"): ("conv2d_nchw",),
                      # Winograd F(m x m, 3 x 3) for the 3x3 stride-1 convs (its `applies`):
                      # which wins depends on the shape and the CPU, so tuning decides
                      ("conv2d", "cpu"): ("conv2d_NCHWc_winograd",),
                      ("conv2d_stem", "gpu"): ("conv2d_nchw",),
                      ("dense_tensorcore", "gpu"): ("dense",),
                      ("conv2d_tensorcore", "gpu"): ("conv2d_nchw_gemm", "conv2d_nchw"),
                      ("conv2d_int8", "gpu"): ("conv2d_nchw",)}


def is_alternate(name: str) -> bool:
    """Whether template `name` is another template of a family whose default is not it (a
    CPU's Winograd conv beside the direct one): a call runs it only where its record is
    faster than the default template's, so even its own default config is a choice the
    model's confirmation judges against the family's default.

        >>> is_alternate("conv2d_NCHWc_winograd.x86"), is_alternate("conv2d_NCHWc.x86")
        (True, False)
    """
    for (family, key), bases in _ALTERNATES_BY_KEY.items():
        suffix = _SUFFIX_BY_KEY[key]
        default = f"{_BASE_BY_KEY.get((family, key), family)}.{suffix}"
        if name != default and name in {f"{b}.{suffix}" for b in bases}:
            return True
    return False


def template_for(family: str, target: Any) -> str | None:
    """The name of `family`'s template for `target`, or None when it has none.

        >>> template_for("dense", "llvm"), template_for("dense", "cuda -sim")
        ('dense.x86', 'dense.cuda')
        >>> template_for("conv2d", "llvm"), template_for("conv2d", "cuda")
        ('conv2d_NCHWc.x86', 'conv2d_nchw_gemm.cuda')
        >>> template_for("conv2d_NCHWc", "cuda") is None
        True
        >>> template_for("conv2d_int8", "accel -batch=4"), template_for("conv2d", "accel")
        ('conv2d_packed.accel', None)

    """
    found = templates_for(family, target)
    return found[0] if found else None


def templates_for(family: str, target: Any) -> tuple[str, ...]:
    """Every template `target` has for `family`, the default (template_for's) first.

        >>> templates_for("conv2d", "cuda")
        ('conv2d_nchw_gemm.cuda', 'conv2d_nchw.cuda')
        >>> templates_for("dense", "llvm"), templates_for("conv2d_NCHWc", "cuda")
        (('dense.x86',), ())
        >>> templates_for("dense_tensorcore", "cuda"), templates_for("dense_tensorcore", "llvm")
        (('dense_tensorcore.cuda', 'dense.cuda'), ('dense.x86',))
        >>> templates_for("conv2d_tensorcore", "cuda -arch=sm_80")
        ('conv2d_nchw_tensorcore.cuda', 'conv2d_nchw_gemm.cuda', 'conv2d_nchw.cuda')

    A template the target's device cannot run is left out (a GPU without tensor cores):

        >>> templates_for("dense_tensorcore", "cuda -arch=sm_61")
        ('dense.cuda',)
    """
    from tessel_target import Target

    t = Target.parse(target)
    for key in t.keys:
        suffix = _SUFFIX_BY_KEY.get(key)
        if suffix is not None:
            bases = (_BASE_BY_KEY.get((family, key), family),
                     *_ALTERNATES_BY_KEY.get((family, key), ()))
            names = [n for n in (f"{b}.{suffix}" for b in bases) if n in TEMPLATES]
            return tuple(n for n in names
                         if TEMPLATES[n].available is None or TEMPLATES[n].available(t))
    return ()


def template_applies(name: str, specs: Sequence[ArgSpec], attrs: dict[str, Any]) -> bool:
    """Whether template `name` computes a call of these arg specs and attrs: an alternate
    template may take only some calls of its family (registered with `applies`).

        >>> template_applies("dense.x86", [((4, 8), "float32"), ((16, 8), "float32")], {})
        True
    """
    test = get_template(name).applies
    return test is None or bool(test(specs, attrs))


def get_template(name: str) -> Template:
    """The template registered as `name` (ScheduleError listing the known names if none)."""
    try:
        return TEMPLATES[name]
    except KeyError:
        known = ", ".join(sorted(TEMPLATES))
        raise ScheduleError(f"no schedule template named '{name}'; known: {known}") from None


def _check_args(tpl: Template, args: Sequence[ArgSpec]) -> list[tuple[tuple[int, ...], str]]:
    out = []
    for n, a in enumerate(args):
        try:
            shape, dtype = a
            shape = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise ScheduleError(f"template '{tpl.name}': argument {n} must be (shape, dtype), "
                                f"got {a!r}") from None
        out.append((shape, str(dtype)))
    return out


# a task attr that keys records apart and never reaches a template: the channel block a
# model hands a blocked conv its data in (0: NCHW), where that is not the block the task
# is otherwise timed in (relay_ir.backend.layout_plan.as_in_model reads it; the task's
# config space is the logical conv's, as for every task timed in a model's layouts)
DATA_BLOCK = "data_block"


def build_compute(name: str, args: Sequence[ArgSpec], attrs: dict[str, Any] | None,
                  cfg: Any, epilogue: Epilogue | None = None
                  ) -> tuple[list[Tensor], list[Tensor]]:
    """Run a template's compute builder (and the epilogue) -> (inputs, outputs)."""
    tpl = get_template(name)
    attrs = {k: v for k, v in (attrs or {}).items() if k != DATA_BLOCK}
    ins, outs = tpl.compute(cfg, _check_args(tpl, args), attrs)
    if epilogue is not None:
        if len(outs) != 1:
            raise ScheduleError(f"template '{name}': an epilogue needs a single-output "
                                f"anchor, this one has {len(outs)} outputs")
        extra, final = epilogue(outs[0])
        if tuple(final.shape) != tuple(outs[0].shape):
            raise ScheduleError(
                f"template '{name}': the epilogue must keep the anchor's shape "
                f"{_shape(outs[0])}, got {_shape(final)}; fuse shape-changing ops separately")
        ins, outs = list(ins) + list(extra), [final]
    return list(ins), list(outs)


def _shape(t: Tensor) -> str:
    return "(" + ", ".join(str(d) for d in t.shape) + ")"


def instantiate(template_name: str, args: Sequence[ArgSpec], attrs: dict[str, Any] | None = None,
                cfg: Any = None, epilogue: Epilogue | None = None, target: Any = None
                ) -> tuple[Schedule, list[Tensor]]:
    """Build the schedule of a template for the given args; returns (schedule, arg tensors).

    `s, targs = instantiate("dense.x86", [((64, 32), "float32"), ((48, 32), "float32")])`
    then `lowering.build(s, targs)`. `cfg` is a ConfigEntity (a tuned point), a
    FallbackConfig, or None (the template's default: a FallbackConfig for `target`, by
    default the host's "llvm"). The template sizes itself for `cfg.target`.
    """
    if cfg is None:
        cfg = FallbackConfig(target)
    if not isinstance(cfg, (ConfigSpace, ConfigEntity)):
        raise ScheduleError(f"instantiate: cfg must be a ConfigSpace, ConfigEntity or "
                            f"FallbackConfig, got {type(cfg).__name__}")
    if isinstance(cfg, ConfigSpace):
        cfg.template_name = template_name
    ins, outs = build_compute(template_name, args, attrs, cfg, epilogue)
    s = get_template(template_name).schedule(cfg, outs)
    return s, ins + outs


def config_space(template_name: str, args: Sequence[ArgSpec],
                 attrs: dict[str, Any] | None = None, target: Any = None) -> ConfigSpace:
    """The knobs a template declares for these args on `target` (default: the host's
    "llvm"): `config_space("dense.x86", args, {}, "llvm -mcpu=haswell")`."""
    cfg = ConfigSpace(target)
    instantiate(template_name, args, attrs, cfg)
    return cfg


def placeholders(args: Sequence[tuple[tuple[int, ...], str]], names: Sequence[str]
                 ) -> list[Tensor]:
    """One placeholder per (shape, dtype) argument, named in order."""
    return [placeholder(shape, dtype, name=n) for (shape, dtype), n in zip(args, names)]


def expect_args(name: str, args: Sequence[Any], count: int, ranks: Sequence[int]) -> None:
    """A ScheduleError unless there are `count` args with the given ranks."""
    if len(args) != count:
        raise ScheduleError(f"template '{name}' takes {count} arguments, got {len(args)}")
    for n, ((shape, _), r) in enumerate(zip(args, ranks)):
        if r >= 0 and len(shape) != r:
            raise ScheduleError(f"template '{name}': argument {n} must have rank {r}, got "
                                f"shape {tuple(shape)}")


def workload_key(template_name: str, args: Sequence[ArgSpec],
                 attrs: dict[str, Any] | None = None) -> str:
    """The deterministic key tuning records are filed under: template, args, attrs.

    Defined here, below both autotune (which writes records) and relay_ir.build (which
    reads them), so that the two agree without an upward import.

        >>> workload_key("matmul.x86", [((8, 4), "float32"), ((4, 8), "float32")])
        'matmul.x86|[[[8,4],"float32"],[[4,8],"float32"]]|{}'
    """
    spec = json.dumps([[[int(d) for d in shape], str(dtype)] for shape, dtype in args],
                      separators=(",", ":"))
    attr = json.dumps(attrs or {}, sort_keys=True, separators=(",", ":"), allow_nan=False)
    tpl = TEMPLATES.get(template_name)
    version = tpl.version if tpl is not None else 1
    # a template past version 1 files its records apart from the older versions': those
    # were confirmed against another default (after the padding guard became
    # conv2d_NCHWc.x86's default, tuned AVX2 ResNet-18 databases ran up to 9% slower
    # than untuned)
    name = template_name if version == 1 else f"{template_name}{VERSION_MARK}{version}"
    return f"{name}|{spec}|{attr}"


VERSION_MARK = "#v"  # between a template's name and its version in a workload key


def older_workload_keys(template_name: str, args: Sequence[ArgSpec],
                        attrs: dict[str, Any] | None = None) -> list[str]:
    """The keys the records of the template's older versions are filed under (none at
    version 1): what relay_ir.build looks for to say that a database needs tuning again.

        >>> older_workload_keys("matmul.x86", [((8, 4), "float32"), ((4, 8), "float32")])
        []
    """
    tpl = TEMPLATES.get(template_name)
    current = workload_key(template_name, args, attrs)
    if tpl is None or tpl.version == 1:
        return []
    tail = current.split("|", 1)[1]
    return [f"{template_name}|{tail}"] + [f"{template_name}{VERSION_MARK}{v}|{tail}"
                                          for v in range(2, tpl.version)]
