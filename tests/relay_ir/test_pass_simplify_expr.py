"""SimplifyExpr: identities, reshape/transpose chains, squeeze/expand_dims pairs, casts."""

from __future__ import annotations

import numpy as np

import relay_ir.transform as T
from relay_ir.expr import Call
from relay_ir.interpreter import interpret
from relay_ir.op import tensor as Tn
from relay_ir.op import transform as X
from relay_ir.op.registry import Op
from relay_ir.transform.analysis import post_order
from tests.relay_ir.programs import PROGRAMS_BY_NAME, const, main_module, tvar
from tests.rng import seeded_rng


def _ops(expr) -> list[str]:
    return [e.op.name for e in post_order(expr) if isinstance(e, Call) and isinstance(e.op, Op)]


def _simplified(shape, build):
    x = tvar("x", shape)
    mod = main_module([x], build(x))
    out = T.SimplifyExpr()(mod)
    return out, out["main"].body, out["main"].params[0]


def test_arithmetic_identities_vanish():
    for build in (lambda x: Tn.multiply(x, const(1.0)), lambda x: Tn.multiply(const(1.0), x),
                  lambda x: Tn.add(x, const(0.0)), lambda x: Tn.add(const(np.zeros(3)), x),
                  lambda x: Tn.subtract(x, const(0.0)), lambda x: Tn.divide(x, const(1.0))):
        _, body, x = _simplified((2, 3), build)
        assert body is x


def test_identity_that_broadcasts_is_kept():
    # x * ones((2, 3)) with x of shape (3,) has a bigger result: not an identity
    _, body, _ = _simplified((3,), lambda x: Tn.multiply(x, const(np.ones((2, 3)))))
    assert _ops(body) == ["multiply"]


def test_subtract_from_zero_is_not_an_identity():
    _, body, _ = _simplified((3,), lambda x: Tn.subtract(const(0.0), x))
    assert _ops(body) == ["subtract"]


def _run(mod, x_data):
    return np.asarray(interpret(mod, x_data))


def test_adjacent_constant_adds_become_one_add_with_the_same_result():
    rng = seeded_rng()
    b1, b2 = rng.standard_normal((4, 1, 1)), rng.standard_normal((4, 1, 1))

    def build(x):
        return Tn.add(const(b2), Tn.add(x, const(b1)))

    out, body, x = _simplified((1, 4, 3, 3), build)
    assert _ops(body) == ["add"] and body.args[0] is x
    np.testing.assert_allclose(body.args[1].data, (b1 + b2).astype("float32"), rtol=1e-6)
    data = rng.standard_normal((1, 4, 3, 3)).astype("float32")
    v = tvar("x", (1, 4, 3, 3))
    before = main_module([v], build(v))
    np.testing.assert_allclose(_run(out, data), _run(before, data), rtol=1e-6, atol=1e-6)


def test_adjacent_constant_multiplies_become_one_multiply():
    _, body, x = _simplified((2, 3), lambda x: Tn.multiply(Tn.multiply(const(2.0), x),
                                                           const([1.0, 2.0, 3.0])))
    assert _ops(body) == ["multiply"] and body.args[0] is x
    assert body.args[1].data.tolist() == [2.0, 4.0, 6.0]


def test_adjacent_constants_that_would_enlarge_the_value_are_kept():
    # (x + c1) + c2 where c2 broadcasts x (3,) to (2, 3): the inner add has another type
    _, body, _ = _simplified((3,), lambda x: Tn.add(Tn.add(x, const(1.0)),
                                                    const(np.ones((2, 3)))))
    assert _ops(body) == ["add", "add"]


def test_an_add_after_a_multiply_is_not_merged():
    _, body, _ = _simplified((3,), lambda x: Tn.add(Tn.multiply(x, const(2.0)), const(1.0)))
    assert _ops(body) == ["multiply", "add"]


def test_adjacent_integer_adds_merge_exactly():
    x = tvar("x", (3,), "int32")
    mod = main_module([x], Tn.add(Tn.add(x, const(1, "int32")), const(2, "int32")))
    body = T.SimplifyExpr()(mod)["main"].body
    assert _ops(body) == ["add"] and body.args[1].data.tolist() == 3


def test_reshape_of_reshape_becomes_one_reshape():
    _, body, x = _simplified((2, 3, 4), lambda x: X.reshape(X.reshape(x, (6, 4)), (4, -1)))
    assert _ops(body) == ["reshape"] and body.args[0] is x
    assert tuple(body.attrs.newshape) == (4, 6)


def test_reshape_of_reshape_with_question_mark_dims_becomes_one_unless_the_outer_copies():
    _, body, x = _simplified((None, 3, 4), lambda x: X.reshape(X.reshape(x, (0, -1)), (-1, 4)))
    assert _ops(body) == ["reshape"] and body.args[0] is x and body.attrs.newshape == (-1, 4)
    v = seeded_rng().standard_normal((5, 3, 4)).astype("float32")
    np.testing.assert_array_equal(interpret(main_module([x], body), v), v.reshape(-1, 4))
    # a 0 in the outer reshape copies a dim of the inner result, not of x
    _, body, _ = _simplified((None, 3, 4), lambda x: X.reshape(X.reshape(x, (-1, 6)), (0, 6)))
    assert _ops(body) == ["reshape", "reshape"]


def test_reshape_back_to_the_input_shape_vanishes():
    _, body, x = _simplified((2, 3), lambda x: X.reshape(X.reshape(x, (6,)), (2, 3)))
    assert body is x


def test_squeeze_of_expand_dims_vanishes():
    _, body, x = _simplified((2, 3), lambda x: X.squeeze(X.expand_dims(x, 1, 2), (1, 2)))
    assert body is x


def test_transpose_of_transpose_composes():
    rng = seeded_rng()
    out, body, x = _simplified(
        (2, 3, 4), lambda x: X.transpose(X.transpose(x, (1, 2, 0)), (2, 0, 1)))
    assert body is x  # the two permutations are inverse
    out, body, x = _simplified(
        (2, 3, 4), lambda x: X.transpose(X.transpose(x, (1, 0, 2)), (0, 2, 1)))
    assert _ops(body) == ["transpose"] and body.args[0] is x
    a = rng.standard_normal((2, 3, 4)).astype("float32")
    np.testing.assert_array_equal(interpret(out, a), a.transpose(1, 0, 2).transpose(0, 2, 1))


def test_cast_to_the_same_dtype_vanishes():
    _, body, x = _simplified((3,), lambda x: Tn.cast(x, "float32"))
    assert body is x
    _, body, _ = _simplified((3,), lambda x: Tn.cast(x, "int32"))
    assert _ops(body) == ["cast"]


def test_simplifiable_program_loses_its_redundancy():
    out = T.SimplifyExpr()(PROGRAMS_BY_NAME["simplifiable"].build())
    ops = _ops(out["main"].body)
    assert "transpose" not in ops and "squeeze" not in ops and "expand_dims" not in ops
    assert ops.count("reshape") == 1


def test_a_conv_bias_then_batch_norm_is_one_add_after_folding_the_scale():
    from relay_ir import nn

    rng = seeded_rng()
    x = tvar("x", (1, 3, 5, 5))
    w = const(rng.standard_normal((4, 3, 3, 3)))
    b, s, t = (const(rng.standard_normal((4, 1, 1))) for _ in range(3))
    body = Tn.add(Tn.multiply(Tn.add(nn.conv2d(x, w, padding=(1, 1)), b), s), t)
    mod = main_module([x], body)
    out = T.SimplifyExpr()(T.FoldScaleAxis()(mod))
    assert _ops(out["main"].body) == ["nn.conv2d", "add"]
    data = rng.standard_normal((1, 3, 5, 5)).astype("float32")
    np.testing.assert_allclose(_run(out, data), _run(mod, data), rtol=1e-5, atol=1e-5)
