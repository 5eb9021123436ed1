"""FoldScaleAxis on random chains around a conv2d or dense (hypothesis): constants of random
broadcast shapes (per channel, along other axes, enlarging the batch), multiplies, bias
adds, subtracts and ReLUs, a scale on the input, and values with a second consumer; the
folded program computes the interpreter's values of the original on fresh inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import relay_ir.transform as T
from relay_ir import nn
from relay_ir.expr import Constant, Expr, Tuple
from relay_ir.interpreter import interpret
from relay_ir.op import tensor as Tn
from relay_ir.transform.pass_manager import verify_module
from tests.relay_ir.programs import main_module, tvar
from tests.rng import seeded_rng

OPS = ["multiply", "multiply", "add", "subtract", "bias_add", "relu", "keep"]


def _const_shape(draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts against `shape`: each dim 1 or its own, leading dims
    dropped, now and then a batch of 2 (which enlarges the value)."""
    dims = [draw(st.sampled_from([1, d])) for d in shape]
    dims = dims[draw(st.integers(0, len(dims))):]
    if dims and len(dims) == len(shape) and shape[0] == 1 and draw(st.integers(0, 9)) == 0:
        dims[0] = 2
    return tuple(dims)


@st.composite
def programs(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    kind = draw(st.sampled_from(["nchw", "nhwc", "dense"]))
    groups = draw(st.sampled_from([1, 2])) if kind != "dense" else 1
    cin, cout = 4, 6
    if kind == "dense":
        in_shape, axis = (3, cin), 1
        w = rng.standard_normal((cout, cin)).astype("float32")
    else:
        in_shape = (1, cin, 5, 5) if kind == "nchw" else (1, 5, 5, cin)
        w = rng.standard_normal((cout, cin // groups, 3, 3) if kind == "nchw"
                                else (3, 3, cin // groups, cout)).astype("float32")
        axis = 1 if kind == "nchw" else 3
    x = tvar("x", in_shape)
    data: Expr = x
    if draw(st.booleans()):  # a scale on the input, per channel or not
        data = Tn.multiply(x, Constant(rng.uniform(0.5, 1.5, _const_shape(draw, in_shape))
                                       .astype("float32")))
    weight = Constant(w) if draw(st.integers(0, 5)) else tvar("w", w.shape)
    if kind == "dense":
        e: Expr = nn.dense(data, weight)
    else:
        e = nn.conv2d(data, weight, padding=(1, 1), groups=groups, data_layout=kind.upper(),
                      kernel_layout="OIHW" if kind == "nchw" else "HWIO")
    extra: list[Expr] = []
    for _ in range(draw(st.integers(1, 4))):
        shape = tuple(int(d) for d in T.InferType()(main_module(
            [x] + ([weight] if not isinstance(weight, Constant) else []), e))["main"]
            .checked_type.ret_type.shape)
        if draw(st.integers(0, 7)) == 0:
            extra.append(e)  # a second consumer of this value
        op = draw(st.sampled_from(OPS))
        c = Constant(rng.uniform(0.5, 1.5, _const_shape(draw, shape)).astype("float32"))
        if op == "bias_add":
            e = nn.bias_add(e, Constant(rng.uniform(-1, 1, shape[axis]).astype("float32")),
                            axis=axis)
        elif op == "relu":
            e = nn.relu(e)
        elif op in ("multiply", "add"):
            e = getattr(Tn, op)(c, e) if draw(st.booleans()) else getattr(Tn, op)(e, c)
        elif op == "subtract":
            e = Tn.subtract(e, c)
    body = Tuple(tuple([e, *extra])) if extra else e
    params = [x] + ([weight] if not isinstance(weight, Constant) else [])
    return main_module(params, body), [in_shape] + ([w.shape] if len(params) > 1 else [])


@settings(max_examples=60, deadline=None)
@given(programs())
def test_folded_random_programs_compute_the_same_values(program):
    mod, shapes = program
    out = T.FoldScaleAxis()(mod)
    verify_module(out)
    rng = seeded_rng()
    args = [rng.standard_normal(s).astype("float32") for s in shapes]
    want, got = interpret(mod, *args), interpret(out, *args)
    for g, v in zip(got if isinstance(got, tuple) else [got],
                    want if isinstance(want, tuple) else [want]):
        np.testing.assert_allclose(np.asarray(g), np.asarray(v), rtol=1e-4, atol=1e-4)
