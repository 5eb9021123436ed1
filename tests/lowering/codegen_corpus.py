"""A corpus of PrimFuncs for checking that the LLVM code generator's output does not change.

`corpus(small)` lowers: random configs of a 64@56 3x3 conv (NCHWc, model layouts) on AVX-512
and AVX2 targets, a guarded conv (sizes that the splits do not divide), a dense, and the
hand-built loop-IR examples (injective ops, reductions, parallel and vectorized loops,
masks, allocations). `digest(...)` hashes the generated IR text of each entry.

    >>> from tests.lowering.codegen_corpus import corpus, digest
    >>> len(digest(corpus(small=True))[1]) == 64
    True
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from typing import Any

AVX512 = "llvm -mcpu=skylake-avx512"
AVX2 = "llvm -mcpu=haswell"
CONV = ("conv2d_NCHWc.x86", [((1, 64, 56, 56), "float32"), ((64, 64, 3, 3), "float32")],
        {"padding": [1, 1, 1, 1], "kernel_layout": "OIHWio"})
GUARDED = ("conv2d_NCHWc.x86", [((1, 24, 13, 13), "float32"), ((40, 24, 3, 3), "float32")],
           {"padding": [1, 1, 1, 1]})


def _task_funcs(spec: tuple, target: str, n: int, seed: int) -> Iterator[tuple[str, Any, str]]:
    import lowering
    from autotune.measure import timed_as
    from autotune.task import Task

    name, args, attrs = spec
    t = timed_as(Task(name, args, attrs, target=target), True)
    rng = random.Random(seed)
    for _ in range(n):
        i = rng.randrange(len(t.space))
        yield f"{name}/{target}/{i}", lowering.lower(*t.instantiate(t.config(i)), name="main"), \
            target


def corpus(small: bool = False) -> list[tuple[str, Any, str]]:
    """(label, PrimFunc, target) triples; `small` keeps a few of each kind (for tests)."""
    from autotune.op_spec import parse_op_spec
    from tests.lowering.ir_examples import V, all_examples, intrinsic

    n = 2 if small else 6
    out: list[tuple[str, Any, str]] = []
    for target in (AVX512, AVX2):
        out += _task_funcs(CONV, target, n, 1)
        out += _task_funcs(GUARDED, target, 1 if small else 3, 2)
        d = parse_op_spec("dense:1x1000x512", target)
        out += _task_funcs((d.template, d.args, d.attrs), target, 1 if small else 3, 3)
    examples = all_examples()
    for fn in ("exp", "tanh", "sigmoid", "sqrt"):
        examples[f"intrinsic_{fn}"] = intrinsic(fn, "float32", V)
    names = sorted(examples)
    if small:
        names = names[::4]
    for name in names:
        for target in (AVX512, AVX2 + " -fast-math"):
            out.append((f"example/{name}/{target}", examples[name][0], target))
    return out


def digest(entries: list[tuple[str, Any, str]]) -> tuple[dict[str, str], str]:
    """The sha256 of each entry's generated IR text, and one over all of them."""
    from lowering.llvm.codegen import generate

    each = {}
    total = hashlib.sha256()
    for label, func, target in entries:
        h = hashlib.sha256(generate(func, target).text.encode()).hexdigest()
        each[label] = h
        total.update(label.encode() + b"=" + h.encode() + b"\n")
    return each, total.hexdigest()
