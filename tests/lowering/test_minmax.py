"""min/max in generated code: numpy semantics (NaN propagates) and reductions that build."""

import numpy as np
import pytest

import lowering
import tensor_expr as te
from schedule import create_schedule
from tests.unwritten import unwritten


def test_max_reduction_into_a_scalar_builds_and_matches_numpy() -> None:
    # LLVM's O3 once never returned on the compare+select form of this reduction.
    x = te.placeholder((8, 32), name="x")
    k0, k1 = te.reduce_axis((0, 8), name="k0"), te.reduce_axis((0, 32), name="k1")
    m = te.compute((), lambda: te.max(x[k0, k1], axis=[k0, k1]), name="m")
    f = lowering.build(create_schedule(m), [x, m])
    a = np.random.default_rng(0).standard_normal((8, 32)).astype("float32")
    out = unwritten((), "float32")
    f(a, out)
    assert out == a.max()


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64"])
def test_integer_min_reduction_matches_numpy(dtype: str) -> None:
    x = te.placeholder((8, 32), dtype, name="x")
    k = te.reduce_axis((0, 32), name="k")
    m = te.compute((8,), lambda i: te.min(x[i, k], axis=k), name="m")
    f = lowering.build(create_schedule(m), [x, m])
    a = np.random.default_rng(1).integers(0, 200, size=(8, 32)).astype(dtype)
    out = unwritten((8,), dtype)
    f(a, out)
    np.testing.assert_array_equal(out, a.min(axis=1))


@pytest.mark.parametrize("vectorize", [False, True])
def test_elementwise_max_propagates_nan_like_numpy(vectorize: bool) -> None:
    a = te.placeholder((16,), name="a")
    b = te.placeholder((16,), name="b")
    c = te.compute((16,), lambda i: te.max(a[i], b[i]), name="c")
    s = create_schedule(c)
    if vectorize:
        s[c].vectorize(s[c].op.axis[0])
    f = lowering.build(s, [a, b, c])
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(16).astype("float32"), rng.standard_normal(16).astype("float32")
    x[3], y[5] = np.nan, np.nan
    out = unwritten(16, "float32")
    f(x, y, out)
    np.testing.assert_array_equal(out, np.maximum(x, y))
    ref = unwritten(16, "float32")
    lowering.interpret(lowering.lower(s, [a, b, c]), x, y, ref)
    np.testing.assert_array_equal(ref, np.maximum(x, y))
