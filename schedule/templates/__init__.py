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

from schedule.templates import x86_conv2d, x86_conv2d_nchwc, x86_dense, x86_injective  # noqa: F401  (fill TEMPLATES)
from schedule.templates.registry import (
    TEMPLATES,
    Epilogue,
    Template,
    build_compute,
    config_space,
    get_template,
    instantiate,
    register_template,
)

__all__ = ["TEMPLATES", "Template", "Epilogue", "register_template", "instantiate",
           "config_space", "get_template", "build_compute"]
