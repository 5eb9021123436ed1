"""Pooling: max_pool2d, avg_pool2d (count_include_pad, ceil_mode), global pooling.

Windows follow PyTorch's rules: with ceil_mode the last window may hang over the bottom /
right padding, but must start inside the input or the top/left padding; padded cells
never win a max and count for an average only with count_include_pad (and never beyond
the padded input).

    >>> import tensor_expr as te
    >>> from tensor_expr import ops
    >>> x = te.placeholder((1, 2, 7, 7), name="x")
    >>> y = ops.max_pool2d(x, 3, strides=2, ceil_mode=True)
    >>> [int(d.value) for d in y.shape]
    [1, 2, 3, 3]
"""

from __future__ import annotations

from typing import Any

from tensor_expr.expr import IntImm, PrimExpr, all, cast, const, if_then_else, min_value
from tensor_expr.expr import max as emax
from tensor_expr.expr import min as emin
from tensor_expr.ops.nn import _pair, pad4
from tensor_expr.tensor import Tensor, compute, reduce_axis
from tensor_expr.tensor import max as te_max
from tensor_expr.tensor import sum as te_sum
from tessel_errors import TensorExprError


def pool_out_size(n: PrimExpr, k: int, s: int, before: int, after: int, ceil_mode: bool,
                  op: str) -> PrimExpr:
    """Output extent of a pooling window; ceil_mode needs a constant input extent."""
    if not ceil_mode:
        return (n + before + after - k) // s + 1
    if not isinstance(n, IntImm):
        raise TensorExprError(f"{op}: ceil_mode needs constant spatial dimensions, got {n}")
    span = n.value + before + after - k
    out = -(-span // s) + 1
    if (out - 1) * s >= n.value + before:  # the last window would start in the padding
        out -= 1
    return IntImm(out, "int32")


def _layout_axes(layout: str, op: str) -> tuple[int, int]:
    if layout == "NCHW":
        return 2, 3
    if layout == "NHWC":
        return 1, 2
    if layout == "NCHWc":  # [N, C/x, H, W, x]: channels blocked, the block innermost
        return 2, 3
    raise TensorExprError(f"{op}: layout must be 'NCHW', 'NHWC' or 'NCHWc', got {layout!r}")


def _windows(data: Tensor, pool_size: Any, strides: Any, padding: Any, ceil_mode: bool,
             layout: str, op: str) -> dict[str, Any]:
    rank = 5 if layout == "NCHWc" else 4
    if data.ndim != rank:
        raise TensorExprError(f"{op}: expects {rank}-D data in layout {layout}, got "
                              f"'{data.name}' with {data.ndim}")
    hax, wax = _layout_axes(layout, op)
    kh, kw = _pair(pool_size, "pool_size", op)
    sh, sw = _pair(strides if strides is not None else (kh, kw), "strides", op)
    pt, pl, pb, pr = pad4(padding, op)
    if pt >= kh or pb >= kh or pl >= kw or pr >= kw:
        raise TensorExprError(
            f"{op}: padding {(pt, pl, pb, pr)} must be smaller than the window {(kh, kw)}")
    h, w = data.shape[hax], data.shape[wax]
    oh = pool_out_size(h, kh, sh, pt, pb, ceil_mode, op)
    ow = pool_out_size(w, kw, sw, pl, pr, ceil_mode, op)
    shape = list(data.shape)
    shape[hax], shape[wax] = oh, ow
    return dict(hax=hax, wax=wax, kh=kh, kw=kw, sh=sh, sw=sw, pt=pt, pl=pl, pb=pb, pr=pr,
                h=h, w=w, shape=shape)


def _window_read(data: Tensor, g: dict[str, Any], idx: tuple[PrimExpr, ...], ry: Any, rx: Any,
                 fill: PrimExpr) -> PrimExpr:
    y = idx[g["hax"]] * g["sh"] + ry - g["pt"]
    x = idx[g["wax"]] * g["sw"] + rx - g["pl"]
    src = list(idx)
    src[g["hax"]], src[g["wax"]] = y, x
    inside = all(y >= 0, y < g["h"], x >= 0, x < g["w"])
    return if_then_else(inside, data[tuple(src)], fill)


def max_pool2d(data: Tensor, pool_size: Any, strides: Any = None, padding: Any = 0,
               ceil_mode: bool = False, layout: str = "NCHW") -> Tensor:
    """Max over (kh, kw) windows; padded cells are -inf. Tag "pool_max"."""
    g = _windows(data, pool_size, strides, padding, ceil_mode, layout, "max_pool2d")
    ry = reduce_axis((0, g["kh"]), name="ry")
    rx = reduce_axis((0, g["kw"]), name="rx")
    low = min_value(data.dtype)

    def body(*idx: PrimExpr) -> PrimExpr:
        return te_max(_window_read(data, g, idx, ry, rx, low), axis=[ry, rx])

    return compute(g["shape"], body, name="max_pool2d", tag="pool_max")


def avg_pool2d(data: Tensor, pool_size: Any, strides: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True,
               layout: str = "NCHW") -> Tensor:
    """Mean over (kh, kw) windows: a sum stage ("pool_sum") then a divide by the count."""
    if not data.dtype.startswith("float"):
        raise TensorExprError(f"avg_pool2d: needs a float tensor, got {data.dtype}")
    g = _windows(data, pool_size, strides, padding, ceil_mode, layout, "avg_pool2d")
    ry = reduce_axis((0, g["kh"]), name="ry")
    rx = reduce_axis((0, g["kw"]), name="rx")
    zero = const(0, data.dtype)

    def body(*idx: PrimExpr) -> PrimExpr:
        return te_sum(_window_read(data, g, idx, ry, rx, zero), axis=[ry, rx])

    total = compute(g["shape"], body, name="avg_pool2d_sum", tag="pool_sum")

    def extent(o: PrimExpr, s: int, p_before: int, p_after: int, k: int, n: PrimExpr
               ) -> PrimExpr:
        start = o * s - p_before
        end = emin(start + k, n + p_after)
        if count_include_pad:
            return end - start
        return emin(end, n) - emax(start, const(0))

    def divide(*idx: PrimExpr) -> PrimExpr:
        ch = extent(idx[g["hax"]], g["sh"], g["pt"], g["pb"], g["kh"], g["h"])
        cw = extent(idx[g["wax"]], g["sw"], g["pl"], g["pr"], g["kw"], g["w"])
        return total[idx] / cast(ch * cw, data.dtype)

    return compute(g["shape"], divide, name="avg_pool2d", tag="elemwise")


def _global(data: Tensor, layout: str, op: str) -> tuple[int, int, list[PrimExpr]]:
    rank = 5 if layout == "NCHWc" else 4
    if data.ndim != rank:
        raise TensorExprError(f"{op}: expects {rank}-D data in layout {layout}, got "
                              f"'{data.name}' with {data.ndim}")
    hax, wax = _layout_axes(layout, op)
    shape = list(data.shape)
    shape[hax] = shape[wax] = IntImm(1, "int32")
    return hax, wax, shape


def global_max_pool2d(data: Tensor, layout: str = "NCHW") -> Tensor:
    """Max over the whole H x W plane, keeping it as 1 x 1: tag "pool_max"."""
    hax, wax, shape = _global(data, layout, "global_max_pool2d")
    ry = reduce_axis((0, data.shape[hax]), name="ry")
    rx = reduce_axis((0, data.shape[wax]), name="rx")

    def body(*idx: PrimExpr) -> PrimExpr:
        src = list(idx)
        src[hax], src[wax] = ry, rx
        return te_max(data[tuple(src)], axis=[ry, rx])

    return compute(shape, body, name="global_max_pool2d", tag="pool_max")


def global_avg_pool2d(data: Tensor, layout: str = "NCHW") -> Tensor:
    """Mean over the whole H x W plane: a sum stage then a divide stage."""
    if not data.dtype.startswith("float"):
        raise TensorExprError(f"global_avg_pool2d: needs a float tensor, got {data.dtype}")
    hax, wax, shape = _global(data, layout, "global_avg_pool2d")
    ry = reduce_axis((0, data.shape[hax]), name="ry")
    rx = reduce_axis((0, data.shape[wax]), name="rx")

    def body(*idx: PrimExpr) -> PrimExpr:
        src = list(idx)
        src[hax], src[wax] = ry, rx
        return te_sum(data[tuple(src)], axis=[ry, rx])

    total = compute(shape, body, name="global_avg_pool2d_sum", tag="pool_sum")
    count = cast(data.shape[hax] * data.shape[wax], data.dtype)
    return compute(shape, lambda *i: total[i] / count, name="global_avg_pool2d",
                   tag="elemwise")
