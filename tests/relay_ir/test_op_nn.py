"""nn ops: references against naive loop formulations, relations incl. gradual refinement."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from relay_ir.op._common import Refined, RelationError
from relay_ir.ty import ANY, TensorType, TupleType
from tests.relay_ir.op_helpers import T, rand, ref, rel, rel_full
from tests.rng import seeded_rng


def conv2d_loops(x, w, stride, pad, dil, groups):
    """Naive NCHW/OIHW convolution: one output element at a time."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    pt, pl, pb, pr = pad
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh = (h + pt + pb - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pl + pr - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for b, oc, i, j in itertools.product(range(n), range(o), range(oh), range(ow)):
        g = oc // og
        acc = 0.0
        for ic, a, e in itertools.product(range(cg), range(kh), range(kw)):
            acc += xp[b, g * cg + ic, i * stride[0] + a * dil[0], j * stride[1] + e * dil[1]] \
                * w[oc, ic, a, e]
        out[b, oc, i, j] = acc
    return out


@pytest.mark.parametrize("stride,padding,dil,groups", [
    ((1, 1), (0, 0), (1, 1), 1),
    ((2, 1), (1, 2), (1, 1), 1),
    ((1, 1), (1, 0, 2, 1), (2, 1), 2),
    ((1, 2), (1, 1), (1, 1), 4),  # depthwise: groups == channels
])
def test_conv2d_nchw_matches_loops(stride, padding, dil, groups) -> None:
    rng = seeded_rng()
    x = rand(rng, 2, 4, 7, 6)
    w = rand(rng, 4, 4 // groups, 3, 2)
    got = ref("nn.conv2d", x, w, strides=stride, padding=padding, dilation=dil, groups=groups)
    pad4 = padding if len(padding) == 4 else (padding[0], padding[1]) * 2
    want = conv2d_loops(x.astype(np.float64), w.astype(np.float64), stride, pad4, dil, groups)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    out_t = rel("nn.conv2d", T(x.shape), T(w.shape), strides=stride, padding=padding,
                dilation=dil, groups=groups)
    assert out_t.shape == got.shape


def test_conv2d_nhwc_hwio_matches_nchw() -> None:
    rng = seeded_rng()
    x, w = rand(rng, 1, 3, 5, 5), rand(rng, 6, 3, 3, 3)
    want = conv2d_loops(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1, 1, 1),
                        (1, 1), 1)
    got = ref("nn.conv2d", x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), padding=(1, 1),
              data_layout="NHWC", kernel_layout="HWIO")
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
    t = rel("nn.conv2d", T((1, 5, 5, 3)), T((3, 3, 3, 6)), padding=(1, 1), data_layout="NHWC",
            kernel_layout="HWIO")
    assert t.shape == (1, 5, 5, 6)


def test_conv2d_relation_errors_and_refinement() -> None:
    with pytest.raises(RelationError, match=r"dim 1 is 4, but weight .* needs 3"):
        rel("nn.conv2d", T((1, 4, 8, 8)), T((8, 3, 3, 3)))
    with pytest.raises(RelationError, match="kernel_layout 'OHWI' is not supported"):
        rel("nn.conv2d", T((1, 3, 8, 8)), T((8, 3, 3, 3)), kernel_layout="OHWI")
    with pytest.raises(RelationError, match="the output height would be -1"):
        rel("nn.conv2d", T((1, 3, 2, 8)), T((8, 3, 4, 3)))
    out = rel_full("nn.conv2d", T((None, None, None, 8)), T((8, 3, 3, 3)), padding=(1, 1))
    assert isinstance(out, Refined)
    assert out.ret.shape == (ANY, 8, ANY, 8)
    assert out.args[0].shape == (ANY, 3, ANY, 8)  # the input channels are now known


def test_dense_reference_and_gradual_relation() -> None:
    rng = seeded_rng()
    x, w = rand(rng, 2, 5, 3), rand(rng, 4, 3)
    want = np.array([[[sum(float(x[b, i, k]) * float(w[n, k]) for k in range(3))
                       for n in range(4)] for i in range(5)] for b in range(2)])
    np.testing.assert_allclose(ref("nn.dense", x, w), want, rtol=1e-5, atol=1e-6)
    assert rel("nn.dense", T((None, 3)), T((16, 3))).shape == (ANY, 16)
    out = rel_full("nn.dense", T((8, None)), T((16, 3)))
    assert out.args[0] == T((8, 3)) and out.ret.shape == (8, 16)
    with pytest.raises(RelationError, match="reduction dim does not match"):
        rel("nn.dense", T((8, 4)), T((16, 3)))


def test_batch_matmul_and_matmul() -> None:
    rng = seeded_rng()
    x, y = rand(rng, 3, 2, 4), rand(rng, 3, 5, 4)
    want = np.stack([x[b].astype(np.float64) @ y[b].astype(np.float64).T for b in range(3)])
    np.testing.assert_allclose(ref("nn.batch_matmul", x, y), want, rtol=1e-5, atol=1e-6)
    assert rel("nn.batch_matmul", T((3, 2, 4)), T((1, 5, 4))).shape == (3, 2, 5)
    a, b = rand(rng, 2, 3), rand(rng, 3, 6)
    np.testing.assert_allclose(ref("matmul", a, b), a.astype(np.float64) @ b, rtol=1e-5)
    np.testing.assert_allclose(ref("matmul", a.T.copy(), b, transpose_a=True),
                               a.astype(np.float64) @ b, rtol=1e-5)
    assert rel("matmul", T((7, 2, 3)), T((3, 6))).shape == (7, 2, 6)
    with pytest.raises(RelationError, match="reduction dims do not match: 3 .lhs. vs 4"):
        rel("matmul", T((2, 3)), T((4, 6)))
    with pytest.raises(RelationError, match="expected a 3-d"):
        rel("nn.batch_matmul", T((2, 3)), T((4, 3)))


def pool_loops(x, k, s, pad, kind, include_pad=False, ceil_mode=False):
    """Naive NCHW pooling over explicit windows (PyTorch semantics)."""
    n, c, h, w = x.shape
    pt, pl, pb, pr = pad

    def extent(size, kk, ss, lo, hi):
        num = size + lo + hi - kk
        out = (-(-num // ss) if ceil_mode else num // ss) + 1
        if ceil_mode and (out - 1) * ss >= size + lo:
            out -= 1
        return out

    oh, ow = extent(h, k[0], s[0], pt, pb), extent(w, k[1], s[1], pl, pr)
    out = np.zeros((n, c, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        vals, count_pad = [], 0
        for a, b in itertools.product(range(k[0]), range(k[1])):
            r, q = i * s[0] - pt + a, j * s[1] - pl + b
            if -pt <= r < h + pb and -pl <= q < w + pr:
                count_pad += 1
            if 0 <= r < h and 0 <= q < w:
                vals.append(x[:, :, r, q])
        stack = np.stack(vals)
        if kind == "max":
            out[:, :, i, j] = stack.max(axis=0)
        else:
            out[:, :, i, j] = stack.sum(axis=0) / (count_pad if include_pad else len(vals))
    return out


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("ceil_mode,include_pad", [(False, False), (True, False), (True, True)])
def test_pools_match_loops(kind, ceil_mode, include_pad) -> None:
    rng = seeded_rng()
    x = rand(rng, 1, 2, 7, 6)
    attrs = {"pool_size": (3, 2), "strides": (2, 2), "padding": (1, 0), "ceil_mode": ceil_mode}
    if kind == "avg":
        attrs["count_include_pad"] = include_pad
    got = ref(f"nn.{kind}_pool2d", x, **attrs)
    want = pool_loops(x.astype(np.float64), (3, 2), (2, 2), (1, 0, 1, 0), kind, include_pad,
                      ceil_mode)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert rel(f"nn.{kind}_pool2d", T(x.shape), **attrs).shape == got.shape


def test_pool_nhwc_and_global_avg_pool() -> None:
    rng = seeded_rng()
    x = rand(rng, 2, 3, 4, 5)
    nhwc = ref("nn.max_pool2d", x.transpose(0, 2, 3, 1), pool_size=(2, 2), layout="NHWC")
    np.testing.assert_array_equal(nhwc.transpose(0, 3, 1, 2),
                                  ref("nn.max_pool2d", x, pool_size=(2, 2)))
    g = ref("nn.global_avg_pool2d", x)
    want = [[[[x[b, ch].astype(np.float64).sum() / 20]] for ch in range(3)] for b in range(2)]
    np.testing.assert_allclose(g, want, rtol=1e-6)
    assert rel("nn.global_avg_pool2d", T((None, 3, 4, 5))).shape == (ANY, 3, 1, 1)
    assert rel("nn.global_avg_pool2d", T((2, 4, 5, 3)), layout="NHWC").shape == (2, 1, 1, 3)


def test_batch_norm_returns_three_fields() -> None:
    rng = seeded_rng()
    x = rand(rng, 2, 3, 4)
    g, b, m = rand(rng, 3), rand(rng, 3), rand(rng, 3)
    v = np.abs(rand(rng, 3)) + 0.5
    out, mean, var = ref("nn.batch_norm", x, g, b, m, v, epsilon=1e-3)
    want = np.empty((2, 3, 4))
    for ch in range(3):
        want[:, ch] = (x[:, ch] - m[ch]) / np.sqrt(float(v[ch]) + 1e-3) * g[ch] + b[ch]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(mean, m)
    t = rel("nn.batch_norm", T((2, 3, 4)), *[T((3,))] * 4)
    assert t == TupleType((T((2, 3, 4)), T((3,)), T((3,))))
    with pytest.raises(RelationError, match="dim 0 is 4, but the channels"):
        rel("nn.batch_norm", T((2, 3, 4)), T((4,)), *[T((3,))] * 3)
    refined = rel_full("nn.batch_norm", T((2, None, 4)), *[T((3,))] * 4)
    assert refined.args[0] == T((2, 3, 4))


def test_layer_norm_softmax_log_softmax() -> None:
    rng = seeded_rng()
    x = rand(rng, 3, 5).astype(np.float64)
    g, b = rand(rng, 5), rand(rng, 5)
    want = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5)
    got = ref("nn.layer_norm", x.astype(np.float32), g, b)
    np.testing.assert_allclose(got, want * g + b, rtol=1e-4, atol=1e-5)
    e = np.exp(x)
    sm = ref("nn.softmax", x.astype(np.float32), axis=0)
    np.testing.assert_allclose(sm, e / e.sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(ref("nn.log_softmax", x.astype(np.float32)),
                               np.log(e / e.sum(axis=1, keepdims=True)), rtol=1e-5, atol=1e-6)
    assert rel("nn.softmax", T((None, 4)), axis=1).shape == (ANY, 4)
    with pytest.raises(RelationError, match="axis 2 is out of range for a tensor of rank 2"):
        rel("nn.softmax", T((3, 4)), axis=2)
    with pytest.raises(RelationError, match="expected a vector of length 5"):
        rel("nn.layer_norm", T((3, 5)), T((5, 1)), T((5,)))


def test_relu_leaky_relu_bias_add() -> None:
    rng = seeded_rng()
    x = rand(rng, 2, 3, 4)
    np.testing.assert_array_equal(ref("nn.relu", x), [[[max(v, 0.0) for v in r] for r in p]
                                                      for p in x.tolist()])
    lr = ref("nn.leaky_relu", x, alpha=0.2)
    np.testing.assert_allclose(lr, np.where(x > 0, x, 0.2 * x.astype(np.float64)), rtol=1e-6)
    bias = rand(rng, 3)
    got = ref("nn.bias_add", x, bias)
    np.testing.assert_allclose(got, x + bias[None, :, None], rtol=1e-6)
    np.testing.assert_allclose(ref("nn.bias_add", x, rand(rng, 4), axis=-1).shape, (2, 3, 4))
    assert rel_full("nn.bias_add", T((2, None)), T((5,))).args[0] == T((2, 5))
    with pytest.raises(RelationError, match="dim 0 is 4, but dim 1 of data needs 3"):
        rel("nn.bias_add", T((2, 3)), T((4,)))


def test_pad_and_dropout() -> None:
    rng = seeded_rng()
    x = rand(rng, 2, 3)
    got = ref("nn.pad", x, pad_width=((1, 0), (2, 1)), pad_value=-1.0)
    assert got.shape == (3, 6) and (got[0] == -1).all() and (got[1:, 2:5] == x).all()
    edge = ref("nn.pad", x, pad_width=((0, 0), (1, 1)), pad_mode="edge")
    np.testing.assert_array_equal(edge[:, 0], x[:, 0])
    assert rel("nn.pad", T((None, 3)), pad_width=((1, 1), (0, 2))).shape == (ANY, 5)
    with pytest.raises(RelationError, match="pad_width has 1 entries, the data has rank 2"):
        rel("nn.pad", T((2, 3)), pad_width=((1, 1),))
    out, mask = ref("nn.dropout", x, rate=0.3)
    np.testing.assert_array_equal(out, x)
    assert rel("nn.dropout", T((2, 3))) == TupleType((T((2, 3)), T((2, 3))))
    assert isinstance(rel("nn.relu", T((None,))), TensorType)
    assert mask.shape == x.shape
