"""A schedule's JSON (its primitives) replayed on a fresh schedule lowers to identical IR."""

from __future__ import annotations

import json

import pytest

import lowering
import tensor_expr as te
from schedule import Schedule, apply_json, create_schedule, decl_tensor_intrin


def _matmul():
    A = te.placeholder((32, 24), name="A")
    B = te.placeholder((24, 20), name="B")
    k = te.reduce_axis((0, 24), name="k")
    C = te.compute((32, 20), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def _gemm_blocked(s, A, B, C):
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 8)
    s[C].parallel(io)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].vectorize(cj)
    AA = s.cache_read(A, "global", [CC])
    s[AA].compute_at(s[CC], ko)
    s[C].pragma(io, "auto_unroll_max_step", 16)


def _rfactor_fused(s, A, B, C):
    i, j = s[C].op.axis
    f = s[C].fuse(i, j)
    fo, fi = s[C].split(f, nparts=4)
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=6)
    CF = s.rfactor(C, ki, factor_axis=2)
    s[CF].vectorize(s[CF].op.axis[2])


def _gpu(s, A, B, C):
    i, j = s[C].op.axis
    bx, tx = s[C].split(i, factor=16)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))


@pytest.mark.parametrize("recipe", [_gemm_blocked, _rfactor_fused, _gpu])
def test_replayed_schedule_lowers_to_identical_text(recipe):
    args = _matmul()
    s = create_schedule(args[-1])
    recipe(s, *args)
    text = s.to_json()
    fresh = _matmul()
    s2 = Schedule.from_json(text, fresh[-1])
    assert str(lowering.lower(s2, fresh)) == str(lowering.lower(s, args))
    assert s2.to_json() == text


def test_json_lists_primitives_with_names_not_objects():
    args = _matmul()
    s = create_schedule(args[-1])
    _gemm_blocked(s, *args)
    prims = json.loads(s.to_json())["primitives"]
    assert [p["prim"] for p in prims] == [
        "cache_write", "tile", "parallel", "compute_at", "split", "reorder", "unroll",
        "vectorize", "cache_read", "compute_at", "pragma"]
    assert prims[1]["args"]["x"] == {"iv": ["C", "i"]}
    assert prims[3]["args"] == {"axis": {"iv": ["C", "j.outer"]}, "parent": {"stage": "C"}}
    assert prims[9]["stage"] == "A.global"


def test_fused_and_split_names_are_deterministic():
    args = _matmul()
    s = create_schedule(args[-1])
    C = args[-1]
    i, j = s[C].op.axis
    f = s[C].fuse(i, j)
    o, n = s[C].split(f, factor=8)
    o2, o3 = s[C].split(o, factor=2)
    assert [v.var.name for v in s[C].leaf_iter_vars] == [
        "i.j.fused.outer.outer", "i.j.fused.outer.inner", "i.j.fused.inner", "k"]


def test_replay_of_tensorize_needs_the_intrinsic():
    a = te.placeholder((4,), name="a")
    b = te.placeholder((4,), name="b")
    vadd = decl_tensor_intrin(te.compute((4,), lambda i: a[i] + b[i], name="c"), "vadd4")

    def prog():
        A, B = te.placeholder((16,), name="A"), te.placeholder((16,), name="B")
        return [A, B, te.compute((16,), lambda i: A[i] + B[i], name="C")]

    args = prog()
    s = create_schedule(args[-1])
    io, ii = s[args[-1]].split(args[-1].op.axis[0], factor=4)
    s[args[-1]].tensorize(ii, vadd)
    fresh = prog()
    s2 = create_schedule(fresh[-1])
    apply_json(s2, s.to_json(), intrinsics={"vadd4": vadd})
    assert str(lowering.lower(s2, fresh)) == str(lowering.lower(s, args))
