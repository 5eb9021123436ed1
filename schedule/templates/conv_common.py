"""Conv2d attributes (strides, padding, dilation), the padded-input stage and the operands
of a groups=1 NCHW conv, shared by the conv2d templates.

    >>> from schedule.templates.conv_common import conv_attrs
    >>> conv_attrs({"strides": 2, "padding": 1}).padding
    (1, 1, 1, 1)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schedule.templates.common import shape_of
from tensor_expr import tensor as T
from tensor_expr.expr import all as te_all
from tensor_expr.expr import const, if_then_else
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError

PAD = "pad"


@dataclass(frozen=True)
class ConvAttrs:
    """Strides (h, w), padding (top, left, bottom, right), dilation (h, w), groups."""

    strides: tuple[int, int]
    padding: tuple[int, int, int, int]
    dilation: tuple[int, int]
    groups: int

    def out_hw(self, h: int, w: int, kh: int, kw: int) -> tuple[int, int]:
        """Output height and width for an input h x w and a kh x kw kernel."""
        pt, pl, pb, pr = self.padding
        dh, dw = self.dilation
        oh = (h + pt + pb - (kh - 1) * dh - 1) // self.strides[0] + 1
        ow = (w + pl + pr - (kw - 1) * dw - 1) // self.strides[1] + 1
        if oh <= 0 or ow <= 0:
            raise ScheduleError(f"conv2d: the kernel {kh}x{kw} does not fit the padded input "
                                f"{h}x{w} (padding {self.padding}, dilation {self.dilation})")
        return oh, ow


def _pair(v: Any, what: str) -> tuple[int, int]:
    if isinstance(v, int):
        return (v, v)
    t = tuple(int(x) for x in v)
    if len(t) != 2:
        raise ScheduleError(f"conv2d {what} must be an int or a pair, got {v!r}")
    return t  # type: ignore[return-value]


def conv_attrs(attrs: dict[str, Any]) -> ConvAttrs:
    """Normalise conv2d attrs: strides/dilation int or pair, padding int, pair or 4-tuple."""
    pad = attrs.get("padding", 0)
    if isinstance(pad, int):
        p4 = (pad, pad, pad, pad)
    else:
        p = tuple(int(x) for x in pad)
        if len(p) == 2:
            p4 = (p[0], p[1], p[0], p[1])
        elif len(p) == 4:
            p4 = p  # type: ignore[assignment]
        else:
            raise ScheduleError(f"conv2d padding must be an int, a pair or 4 values "
                                f"(top, left, bottom, right), got {pad!r}")
    return ConvAttrs(_pair(attrs.get("strides", 1), "strides"), p4,  # type: ignore[arg-type]
                     _pair(attrs.get("dilation", 1), "dilation"), int(attrs.get("groups", 1)))


def conv_layouts(template: str, attrs: dict[str, Any], data: tuple[str, ...],
                 kernel: tuple[str, ...], out: tuple[str, ...] = ("NCHW", "NCHWc")
                 ) -> tuple[str, str, str]:
    """The (data, kernel, out) layouts of a blocked conv template's attrs (defaults NCHW,
    OIHW, NCHW), each checked against the template's legal ones (a ScheduleError naming the
    template, the attr and the legal values).

        >>> conv_layouts("t", {"out_layout": "NCHWc"}, ("NCHW",), ("OIHW",))
        ('NCHW', 'OIHW', 'NCHWc')
    """
    got = (attrs.get("data_layout", "NCHW"), attrs.get("kernel_layout", "OIHW"),
           attrs.get("out_layout", "NCHW"))
    for what, v, legal in zip(("data_layout", "kernel_layout", "out_layout"), got,
                              (data, kernel, out)):
        if v not in legal:
            raise ScheduleError(f"{template}: {what} must be one of {legal}, got {v!r}")
    return got


def pad_hw(data: Tensor, h_axis: int, pads: tuple[int, int, int, int],
           read: Callable[..., Any] | None = None, shape: Any = None, name: str = "data_pad"
           ) -> Tensor:
    """Zero-pad dims h_axis, h_axis+1 by (top, left, bottom, right); `read(*idx)` (default
    data[idx]) lets the pad stage read through a layout change; `shape` its input shape."""
    pt, pl, pb, pr = pads
    if pads == (0, 0, 0, 0) and read is None:
        return data
    src = [int(d) for d in shape] if shape is not None else shape_of(data)
    rd = read if read is not None else (lambda *ix: data[ix])
    out_shape = list(src)
    out_shape[h_axis] += pt + pb
    out_shape[h_axis + 1] += pl + pr
    H, W = src[h_axis], src[h_axis + 1]

    def f(*ix: Any) -> Any:
        h, w = ix[h_axis], ix[h_axis + 1]
        inner = list(ix)
        inner[h_axis], inner[h_axis + 1] = h - pt, w - pl
        if pads == (0, 0, 0, 0):
            return rd(*inner)
        cond = te_all(h >= pt, h < H + pt, w >= pl, w < W + pl)
        return if_then_else(cond, rd(*inner), const(0.0, data.dtype))

    return T.compute(tuple(out_shape), f, name=name, tag=PAD)


@dataclass(frozen=True)
class NchwConv:
    """The operands of a groups=1 NCHW / OIHW conv template: its placeholders, their sizes,
    the attrs, the output size and the zero-padded data stage."""

    data: Tensor
    kernel: Tensor
    data_shape: tuple[int, int, int, int]
    kernel_shape: tuple[int, int, int, int]
    attrs: ConvAttrs
    out_hw: tuple[int, int]
    padded: Tensor


def nchw_conv_operands(template: str, args: Any, attrs: dict[str, Any], hint: str = ""
                       ) -> NchwConv:
    """Check `args` (NCHW data, OIHW kernel, groups=1; `hint` says where other convs go)
    and build the placeholders and the padded data.

        >>> op = nchw_conv_operands("t", [((1, 4, 8, 8), "float32"),
        ...                               ((8, 4, 3, 3), "float32")], {"padding": 1})
        >>> op.out_hw, [int(d.value) for d in op.padded.shape]
        ((8, 8), [1, 4, 10, 10])
    """
    from schedule.templates.registry import expect_args, placeholders

    expect_args(template, args, 2, [4, 4])
    data, kernel = placeholders(args, ["data", "kernel"])
    dshape, kshape = shape_of(data), shape_of(kernel)
    a = conv_attrs(attrs)
    if a.groups != 1 or kshape[1] != dshape[1]:
        raise ScheduleError(f"{template} handles groups=1 (kernel in-channels {kshape[1]} "
                            f"must equal data channels {dshape[1]}){hint}")
    out_hw = a.out_hw(dshape[2], dshape[3], kshape[2], kshape[3])
    return NchwConv(data, kernel, tuple(dshape), tuple(kshape), a, out_hw,
                    pad_hw(data, 2, a.padding))
