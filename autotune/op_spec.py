"""Operator specs on the command line -> tuning tasks.

    >>> from autotune.op_spec import parse_op_spec
    >>> parse_op_spec("matmul:1024x1024x1024").workload_key.split("|")[0]
    'matmul.x86'
    >>> parse_op_spec("conv2d:1,64,56,56,64,3,3,1,1").attrs
    {'padding': 1, 'strides': 1}

Forms (M x N x K means C[M, N] = A[M, K] @ B[K, N]; dense's weight is [N, K]):
    matmul:MxNxK    dense:MxNxK    batch_matmul:BxMxNxK
    conv2d:N,C,H,W,O,KH,KW[,stride[,pad]]          (NCHW data, OIHW kernel)
    conv2d_nchwc:N,C,H,W,O,KH,KW[,stride[,pad]]    (the blocked NCHWc template)
    conv2d_gemm:N,C,H,W,O,KH,KW[,stride[,pad]]     (the GPU's implicit GEMM)
    depthwise_conv2d:N,C,H,W,KH,KW[,stride[,pad]]
An optional `@dtype` suffix sets the dtype (default float32): `matmul:64x64x64@float64`.
"""

from __future__ import annotations

import re

from autotune.task import Task
from tessel_errors import TesselError

_FORMS = {
    "matmul": "matmul:MxNxK",
    "dense": "dense:MxNxK",
    "batch_matmul": "batch_matmul:BxMxNxK",
    "conv2d": "conv2d:N,C,H,W,O,KH,KW[,stride[,pad]]",
    "conv2d_nchwc": "conv2d_nchwc:N,C,H,W,O,KH,KW[,stride[,pad]]",
    "conv2d_gemm": "conv2d_gemm:N,C,H,W,O,KH,KW[,stride[,pad]]",
    "depthwise_conv2d": "depthwise_conv2d:N,C,H,W,KH,KW[,stride[,pad]]",
}


class OpSpecError(TesselError):
    """An --op spec that does not parse."""


def _ints(spec: str, body: str, sep: str, what: str) -> list[int]:
    parts = [p.strip() for p in body.split(sep)] if body else []
    out = []
    for p in parts:
        if not re.fullmatch(r"[0-9]+", p) or int(p) < 1:
            raise OpSpecError(f"op spec {spec!r}: {p!r} is not a positive integer; "
                              f"expected {what}")
        out.append(int(p))
    return out


def _template(spec: str, family: str, target: str) -> str:
    from schedule.templates import template_for

    name = template_for(family, target)
    if name is None:
        raise OpSpecError(f"op spec {spec!r}: target '{target}' has no {family} template yet")
    return name


def parse_op_spec(spec: str, target: str = "llvm") -> Task:
    """The task an op spec names: `parse_op_spec("dense:1x1000x512")`."""
    if not isinstance(spec, str) or ":" not in spec:
        raise OpSpecError(f"op spec {spec!r} must look like OP:DIMS, e.g. matmul:1024x1024x1024; "
                          f"known forms: {', '.join(_FORMS.values())}")
    op, body = spec.split(":", 1)
    op = op.strip().lower()
    dtype = "float32"
    if "@" in body:
        body, dtype = body.split("@", 1)
        if not re.fullmatch(r"(float|int|uint)(16|32|64|8)", dtype):
            raise OpSpecError(f"op spec {spec!r}: unknown dtype {dtype!r}; use e.g. @float32")
    if op not in _FORMS:
        raise OpSpecError(f"op spec {spec!r}: unknown op {op!r}; known forms: "
                          f"{', '.join(_FORMS.values())}")
    form = _FORMS[op]
    if op in ("matmul", "dense", "batch_matmul"):
        dims = _ints(spec, body, "x", form)
        want = 4 if op == "batch_matmul" else 3
        if len(dims) != want:
            raise OpSpecError(f"op spec {spec!r}: {op} takes {want} sizes separated by 'x' "
                              f"({form}), got {len(dims)}")
        if op == "batch_matmul":
            b, m, n, k = dims
            args = [((b, m, k), dtype), ((b, k, n), dtype)]
        elif op == "matmul":
            m, n, k = dims
            args = [((m, k), dtype), ((k, n), dtype)]
        else:
            m, n, k = dims
            args = [((m, k), dtype), ((n, k), dtype)]
        return Task(_template(spec, op, target), args, {}, target, name=spec)
    dims = _ints(spec, body, ",", form)
    base = 6 if op == "depthwise_conv2d" else 7
    if not base <= len(dims) <= base + 2:
        raise OpSpecError(f"op spec {spec!r}: {op} takes {base} to {base + 2} comma-separated "
                          f"integers ({form}), got {len(dims)}")
    stride = dims[base] if len(dims) > base else 1
    pad = dims[base + 1] if len(dims) > base + 1 else 0
    attrs = {"strides": stride, "padding": pad}
    if op == "depthwise_conv2d":
        n, c, h, w, kh, kw = dims[:6]
        args = [((n, c, h, w), dtype), ((c, 1, kh, kw), dtype)]
        template = _template(spec, "depthwise_conv2d_nchw", target)
    else:
        n, c, h, w, o, kh, kw = dims[:7]
        args = [((n, c, h, w), dtype), ((o, c, kh, kw), dtype)]
        family = {"conv2d": "conv2d_nchw", "conv2d_nchwc": "conv2d_NCHWc",
                  "conv2d_gemm": "conv2d_nchw_gemm"}[op]
        template = _template(spec, family, target)
    if (h + 2 * pad - kh) < 0 or (w + 2 * pad - kw) < 0:
        raise OpSpecError(f"op spec {spec!r}: the {kh}x{kw} kernel is larger than the "
                          f"padded {h}x{w} input")
    return Task(template, args, attrs, target, name=spec)
