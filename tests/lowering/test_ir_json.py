"""lowering.ir_json: loop IR to JSON and back keeps the printed IR, sharing and meaning;
a malformed document is a LoweringError naming the node."""

from __future__ import annotations

import json

import numpy as np
import pytest

import lowering
import tensor_expr as te
from lowering.interpreter import run as interpret
from lowering.ir_json import from_json, to_json
from schedule import create_schedule
from tessel_errors import LoweringError
from tests.rng import seeded_rng


def _matmul_func():
    A = te.placeholder((12, 10), name="A")
    B = te.placeholder((10, 8), name="B")
    k = te.reduce_axis((0, 10), name="k")
    C = te.compute((12, 8), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((12, 8), lambda i, j: te.if_then_else(C[i, j] > 0, C[i, j], -C[i, j]),
                   name="D")
    s = create_schedule(D)
    io, ii = s[D].split(s[D].op.axis[0], factor=5)  # a guard: 12 is not a multiple of 5
    s[D].unroll(ii)
    s[C].compute_at(s[D], io)
    return lowering.lower(s, [A, B, D], name="mm")


def test_a_round_trip_keeps_the_printed_ir_and_the_results() -> None:
    f = _matmul_func()
    g = from_json(json.loads(json.dumps(to_json(f))))
    assert str(g.body) == str(f.body) and g.name == f.name
    rng = seeded_rng()
    a, b = rng.standard_normal((12, 10)), rng.standard_normal((10, 8))
    a, b = a.astype("float32"), b.astype("float32")
    out_f, out_g = np.full((12, 8), np.nan, "float32"), np.full((12, 8), np.nan, "float32")
    interpret(f, a, b, out_f)
    interpret(g, a, b, out_g)
    np.testing.assert_array_equal(out_f, out_g)
    np.testing.assert_allclose(out_g, np.abs(a @ b), rtol=1e-4, atol=1e-6)


def test_shared_nodes_are_written_once_and_stay_shared() -> None:
    f = _matmul_func()
    doc = to_json(f)
    g = from_json(doc)
    assert sum(row[0] == "Buffer" and row[1] == "A" for row in doc["nodes"]) == 1
    stores = []
    lowering.ir.post_order_visit_stmt(g.body, lambda s: stores.append(s)
                                      if isinstance(s, lowering.ir.BufferStore) else None)
    assert all(st.buffer is g.params[2] for st in stores if st.buffer.name == "D")


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(version=9), r"version 9; expected 'tessel-loop-ir' version 1"),
    (lambda d: d.pop("root"), r"expected the keys format, version, nodes, root"),
    (lambda d: d["nodes"][0].__setitem__(0, "Reduce"), r"node 0: unknown node class"),
    (lambda d: d["nodes"].__setitem__(0, "Var"), r"node 0: a node is a list"),
    (lambda d: d.update(root=0), r"root must be the index of a PrimFunc node"),
    (lambda d: d["nodes"][0].append(1), r"node 0: a \w+ has \d fields"),
])
def test_malformed_documents_are_refused(edit, match: str) -> None:
    doc = json.loads(json.dumps(to_json(_matmul_func())))
    edit(doc)
    with pytest.raises(LoweringError, match=match):
        from_json(doc)


def test_a_field_of_the_wrong_type_is_refused_naming_the_node_and_field() -> None:
    doc = json.loads(json.dumps(to_json(_matmul_func())))
    k = next(k for k, row in enumerate(doc["nodes"]) if row[0] == "For")
    bad = json.loads(json.dumps(doc))
    bad["nodes"][k][4] = "sideways"
    with pytest.raises(LoweringError, match=rf"node {k} \(For.kind\): 'sideways' is not a "
                                            "ForKind"):
        from_json(bad)
    bad = json.loads(json.dumps(doc))
    bad["nodes"][k][2] = k + 1  # a forward reference
    with pytest.raises(LoweringError, match=rf"node {k} \(For.min\): expected the index of "
                                            "an earlier node"):
        from_json(bad)
    v = next(k for k, row in enumerate(doc["nodes"]) if row[0] == "Var")
    bad = json.loads(json.dumps(doc))
    bad["nodes"][v][2] = "complex128"
    with pytest.raises(LoweringError, match=rf"node {v} \(Var.dtype\): unknown dtype "):
        from_json(bad)


def test_dtypes_and_integer_indices_are_checked_where_constructors_do_not() -> None:
    doc = json.loads(json.dumps(to_json(_matmul_func())))
    k = next(k for k, row in enumerate(doc["nodes"]) if row[0] == "IntImm")
    bad = json.loads(json.dumps(doc))
    bad["nodes"][k][2] = "threadIdx.x"
    with pytest.raises(LoweringError, match=rf"node {k} \(IntImm.dtype\): unknown dtype "
                                            "'threadIdx.x'"):
        from_json(bad)
    f = next(k for k, row in enumerate(doc["nodes"]) if row[0] == "FloatImm")
    s = next(k for k, row in enumerate(doc["nodes"]) if row[0] == "BufferStore" and k > f)
    bad = json.loads(json.dumps(doc))
    bad["nodes"][s][3][0] = f  # a float constant as an index
    with pytest.raises(LoweringError, match=rf"node {s}: an index of float32 .* they are "
                                            "integers"):
        from_json(bad)
