"""Calibrate: the scale of each quantized anchor's data input, from a global scale or from
the float model run on sample inputs (minmax, kl).

A scale s stands for the map x -> clip(round(x / s), -qmax, qmax). A tensor whose clip
level is t gets, with requantize="shift", the power of two at or above t over
2**(nbit-1) (TVM's choice: then every scale in the graph is a power of two and
requantization is a shift; 8.0 gives 1/16); with requantize="float", t / qmax. The clip
level is the tensor's largest magnitude for minmax, g for a global scale g, and the KL
threshold for kl (rounded up, so kl clips where minmax does unless the threshold lies
an octave or more below the maximum: a heavy tail; searching the powers of two for the
least divergence instead was tried: ReLU's spike at 0 drove it to clip half the range
of a small CNN's activations, 39% error). The float model runs in the Relay interpreter (the
reference semantics), one call per sample returning every calibrated tensor at once.

    >>> power2_scale(5.0, 8), power2_scale(0.25, 8)
    (0.0625, 0.001953125)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from relay_ir.expr import Expr, Function, Tuple
from relay_ir.interpreter import interpret
from relay_ir.quantize.annotate import Annotation
from relay_ir.quantize.config import QConfig
from relay_ir.quantize.kl import kl_threshold
from relay_ir.ty import TensorType
from tessel_errors import RelayError


def power2_scale(top: float, nbit: int) -> float:
    """The power of two at or above `top`, over 2**(nbit - 1) (1 / 2**(nbit - 1) for 0)."""
    p = 2.0 ** math.ceil(math.log2(top)) if top > 0 else 1.0
    return p / 2 ** (nbit - 1)


def clip_level_scale(top: float, cfg: QConfig) -> float:
    """The scale of a tensor clipped at magnitude `top` under cfg.requantize."""
    if cfg.requantize == "shift":
        return power2_scale(top, cfg.nbit)
    return (top if top > 0 else 1.0) / cfg.qmax


def _shape_text(shape: tuple[Any, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def check_dataset(fn: Function, dataset: Any) -> list[dict[str, np.ndarray]]:
    """The dataset as a list of input dicts, each giving every input of @main (by name)
    an array of its declared shape and dtype; a RelayError naming the sample and input
    otherwise."""
    names = [p.name_hint for p in fn.params]
    example = "[{" + ", ".join(f"'{n}': array" for n in names) + "}, ...]"
    if dataset is None or isinstance(dataset, Mapping) or len(dataset) == 0:
        got = "None" if dataset is None else ("a dict" if isinstance(dataset, Mapping)
                                               else "an empty sequence")
        raise RelayError(f"relay_ir.quantize: minmax and kl calibration run the float model "
                         f"on sample inputs, so dataset= must be a non-empty list of input "
                         f"dicts such as {example}, got {got}; or pass calibrate=<a float> "
                         "(a global scale) to quantize without data")
    out = []
    for k, sample in enumerate(dataset):
        if not isinstance(sample, Mapping):
            raise RelayError(f"relay_ir.quantize: dataset[{k}] is a {type(sample).__name__}, "
                             f"expected a dict of @main's inputs such as {example}")
        missing = [n for n in names if n not in sample]
        unknown = [n for n in sample if n not in names]
        if missing or unknown:
            what = "; ".join(s for s in (
                f"missing {', '.join(map(repr, missing))}" if missing else "",
                f"unknown {', '.join(map(repr, map(str, unknown)))}" if unknown else "") if s)
            raise RelayError(f"relay_ir.quantize: dataset[{k}] does not name @main's inputs "
                             f"({what}); @main takes {', '.join(map(repr, names)) or 'none'} "
                             "(params given to quantize are constants, not inputs)")
        checked = {}
        for p in fn.params:
            v = np.asarray(sample[p.name_hint])
            t = p.checked_type if isinstance(p.checked_type, TensorType) else p.type_annotation
            if isinstance(t, TensorType):
                want = tuple(t.shape)
                fits = len(want) == v.ndim and all(
                    not isinstance(d, int) or d == n for d, n in zip(want, v.shape))
                if not fits or v.dtype != np.dtype(t.dtype):
                    raise RelayError(
                        f"relay_ir.quantize: dataset[{k}][{p.name_hint!r}] is a {v.dtype} "
                        f"array of shape {_shape_text(v.shape)}, but input "
                        f"%{p.name_hint} is Tensor[{_shape_text(want)}, {t.dtype}]; give "
                        f"each sample arrays of the input's shape "
                        f"(np.asarray(a, '{t.dtype}'))")
            checked[p.name_hint] = v
        out.append(checked)
    return out


def observe(fn: Function, points: list[Expr], dataset: list[dict[str, np.ndarray]]
            ) -> list[list[np.ndarray]]:
    """The float values of `points` (sub-expressions of fn) on every sample:
    values[point][sample]."""
    probe = Function(fn.params, Tuple(tuple(points)))
    values: list[list[np.ndarray]] = [[] for _ in points]
    for sample in dataset:
        for k, v in enumerate(interpret(probe, **sample)):
            values[k].append(np.asarray(v))
    return values


def clip_level(values: list[np.ndarray], mode: str) -> float:
    """The magnitude a tensor is clipped at, from its values over the dataset."""
    if mode == "minmax":
        return max((float(np.max(np.abs(v))) for v in values if v.size), default=0.0)
    return kl_threshold(np.concatenate([v.ravel() for v in values]))


def input_scales(fn: Function, annotation: Annotation, cfg: QConfig,
                 dataset: Any = None) -> dict[int, float]:
    """{id(anchor): scale of its data input} for every quantized anchor of `fn` (a dataset
    given with a global scale is checked, not run)."""
    anchors = annotation.anchors
    samples = check_dataset(fn, dataset) if cfg.needs_dataset or dataset is not None else []
    if not cfg.needs_dataset:
        assert isinstance(cfg.calibrate, float)
        return {id(a): clip_level_scale(cfg.calibrate, cfg) for a in anchors}
    points: list[Expr] = []  # anchors sharing an input calibrate it once
    for a in anchors:
        if not any(a.args[0] is p for p in points):
            points.append(a.args[0])
    if not points:
        return {}
    values = observe(fn, points, samples)
    scale_of = {id(p): clip_level_scale(clip_level(vs, str(cfg.calibrate)), cfg)
                for p, vs in zip(points, values)}
    return {id(a): scale_of[id(a.args[0])] for a in anchors}
