"""Differential test: random small TE programs under random legal schedules give the same
result through the loop-IR interpreter, the LLVM kernel, te.evaluate and numpy.

Programs: chains of 1-3 stages (elementwise, broadcast, padding via if_then_else, a 3-tap
reduction window, matmul). Schedules: splits (factor or nparts, often non-dividing),
reorders, fuse, unroll, vectorize, parallel, compute_at, compute_inline, cache_write,
cache_read, rfactor."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lowering
import tensor_expr as te
from schedule import create_schedule
from schedule.stage import INLINE

STEPS = ("affine", "relu", "square", "bcast", "pad", "window", "matmul")


def _body(kind, T, extra=None):
    """The compute lambda of one step (a closure: te.compute counts lambda parameters)."""
    hh, ww = (d.value for d in T.shape)
    if kind == "affine":
        return lambda i, j: T[i, j] * 1.5 + 0.25
    if kind == "relu":
        return lambda i, j: te.max(T[i, j], 0.0)
    if kind == "square":
        return lambda i, j: T[i, j] * T[i, j] - 0.5
    if kind == "bcast":
        return lambda i, j: T[i, j] + extra[j]
    if kind == "pad":
        return lambda i, j: te.if_then_else(
            te.all(i >= 1, i < hh + 1, j >= 1, j < ww + 1), T[i - 1, j - 1], 0.0)
    if kind == "window":
        return lambda i, j: te.sum(T[i + extra, j], axis=extra)
    W, k = extra
    return lambda i, j: te.sum(T[i, k] * W[k, j], axis=k)


_REF = {
    "affine": lambda x, _: x * np.float32(1.5) + np.float32(0.25),
    "relu": lambda x, _: np.maximum(x, 0),
    "square": lambda x, _: x * x - np.float32(0.5),
    "pad": lambda x, _: np.pad(x, 1),
    "window": lambda x, _: x[:-2] + x[1:-1] + x[2:],
}


def _build_program(data):
    """A chain of 1-3 stages over a 2-D input, with its numpy reference."""
    h = data.draw(st.integers(1, 7), label="h")
    w = data.draw(st.integers(1, 7), label="w")
    A = te.placeholder((h, w), name="A")
    inputs = [A]
    steps = data.draw(st.lists(st.sampled_from(STEPS), min_size=1, max_size=3), label="steps")
    cur, ref_fns = A, []
    for n, kind in enumerate(steps):
        hh, ww = (d.value for d in cur.shape)
        if kind == "window" and hh < 3:
            kind = "affine"
        shape, extra = (hh, ww), None
        if kind == "bcast":
            extra = te.placeholder((ww,), name=f"V{n}")
            inputs.append(extra)
            ref_fns.append(lambda x, feeds, V=extra: x + feeds[V][None, :])
        elif kind == "pad":
            shape = (hh + 2, ww + 2)
        elif kind == "window":
            extra = te.reduce_axis((0, 3), name=f"r{n}")
            shape = (hh - 2, ww)
        elif kind == "matmul":
            m = data.draw(st.integers(1, 6), label="m")
            W = te.placeholder((ww, m), name=f"W{n}")
            inputs.append(W)
            extra = (W, te.reduce_axis((0, ww), name=f"k{n}"))
            shape = (hh, m)
            ref_fns.append(lambda x, feeds, W=W: x @ feeds[W])
        if kind in _REF:
            ref_fns.append(_REF[kind])
        cur = te.compute(shape, _body(kind, cur, extra), name=f"S{n}")
    return inputs, cur, ref_fns


def _schedule_loops(data, stage, allow_parallel):
    for _ in range(data.draw(st.integers(0, 4), label="n_ops")):
        leaves = stage.leaf_iter_vars
        op = data.draw(st.sampled_from(["split", "reorder", "fuse", "unroll"]), label="op")
        if op == "split":
            lv = data.draw(st.sampled_from(leaves), label="split axis")
            if data.draw(st.booleans(), label="by factor"):
                stage.split(lv, factor=data.draw(st.integers(1, 5), label="factor"))
            else:
                stage.split(lv, nparts=data.draw(st.integers(1, 4), label="nparts"))
        elif op == "reorder" and len(leaves) > 1:
            stage.reorder(*data.draw(st.permutations(leaves), label="order"))
        elif op == "fuse":
            pairs = [(a, b) for a, b in zip(leaves, leaves[1:])
                     if stage.is_reduce(a) == stage.is_reduce(b)]
            if pairs:
                stage.fuse(*data.draw(st.sampled_from(pairs), label="fuse pair"))
        elif op == "unroll":
            stage.unroll(data.draw(st.sampled_from(leaves), label="unroll axis"))
    leaves = stage.leaf_iter_vars
    if not stage.is_reduce(leaves[-1]) and data.draw(st.booleans(), label="vectorize"):
        stage.vectorize(leaves[-1])
    if allow_parallel and not stage.is_reduce(leaves[0]) and \
            data.draw(st.booleans(), label="parallel"):
        stage.parallel(leaves[0])


def _attach_points(stage):
    """Leaves a stage can be computed at: not inside a vector loop (its body must be stores)."""
    out = []
    for lv in stage.leaf_iter_vars:
        attr = stage.iter_attrs.get(lv)
        if attr is not None and attr.kind == "vectorize":
            break
        out.append(lv)
    return out


def _first_computed_reader(s, stage):
    q = s.readers(stage)[0]
    while q.attach_type == INLINE:
        q = s.readers(q)[0]
    return q


def _maybe_rfactor(data, s, stage):
    """Split the first reduction axis and rfactor its inner part (a root stage)."""
    if not stage.op.reduce_axis or not data.draw(st.booleans(), label="rfactor"):
        return
    ko, ki = stage.split(stage.op.reduce_axis[0],
                         factor=data.draw(st.integers(1, 4), label="rf factor"))
    rf = s[s.rfactor(stage.op.output(0), data.draw(st.sampled_from([ko, ki]), label="rf axis"))]
    _schedule_loops(data, rf, allow_parallel=True)


def _attach(data, s, stage):
    """compute_at the first computed reader at a random legal loop; False: left at root."""
    q = _first_computed_reader(s, stage)
    points = _attach_points(q)
    if not points:
        return False
    stage.compute_at(q, data.draw(st.sampled_from(points), label="at axis"))
    return True


def _random_schedule(data, out, chain, source):
    s = create_schedule(out)
    out_stage = s[out]
    cache = None
    if data.draw(st.booleans(), label="cache_write"):
        cache = s[s.cache_write(out, data.draw(st.sampled_from(["local", "global"]),
                                               label="scope"))]
    else:
        _maybe_rfactor(data, s, out_stage)
    _schedule_loops(data, out_stage, allow_parallel=True)
    if cache is not None:
        points = _attach_points(out_stage)
        at_root = not points or data.draw(st.booleans(), label="cache at root")
        if not at_root:
            cache.compute_at(out_stage, data.draw(st.sampled_from(points), label="cache attach"))
        _schedule_loops(data, cache, allow_parallel=at_root)
    for t in reversed(chain[:-1]):
        stage = s[t]
        has_reduce = bool(stage.op.reduce_axis)
        choice = data.draw(st.sampled_from(["root", "at"] + ([] if has_reduce else ["inline"])),
                           label="attach")
        if choice == "inline":
            stage.compute_inline()
            continue
        _maybe_rfactor(data, s, stage)
        at = choice == "at" and _attach(data, s, stage)
        _schedule_loops(data, stage, allow_parallel=not at)
    if data.draw(st.booleans(), label="cache_read"):
        readers = s.readers(s[source])
        cached = s[s.cache_read(source, data.draw(st.sampled_from(["local", "global"]),
                                                  label="read scope"), readers[:1])]
        at = data.draw(st.booleans(), label="read at") and _attach(data, s, cached)
        _schedule_loops(data, cached, allow_parallel=not at)
    return s


def _case(data):
    inputs, out, ref_fns = _build_program(data)
    chain = []
    t = out
    while t.op not in [i.op for i in inputs]:
        chain.append(t)
        t = t.op.input_tensors[0]
    chain.reverse()
    s = _random_schedule(data, out, chain, inputs[0])
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="seed"))
    feeds = {x: rng.standard_normal([d.value for d in x.shape]).astype("float32")
             for x in inputs}
    ref = feeds[inputs[0]]
    for fn in ref_fns:
        ref = fn(ref, feeds).astype("float32")
    return inputs, out, s, feeds, ref


_SETTINGS = settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@_SETTINGS
@given(st.data())
def test_interpreter_matches_numpy_and_oracle(data):
    inputs, out, s, feeds, ref = _case(data)
    args = inputs + [out]
    func = lowering.lower(s, args)
    got = np.full([d.value for d in out.shape], np.nan, "float32")
    lowering.interpret(func, *[feeds[x] for x in inputs], got)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=str(func))
    oracle = te.evaluate(out, feeds)
    np.testing.assert_allclose(got, oracle, rtol=1e-4, atol=1e-4)


@_SETTINGS
@given(st.data())
def test_llvm_kernel_matches_numpy(data):
    inputs, out, s, feeds, ref = _case(data)
    args = inputs + [out]
    kernel = lowering.build(s, args, target="llvm")
    got = np.full([d.value for d in out.shape], np.nan, "float32")
    kernel(*[feeds[x] for x in inputs], got)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4,
                               err_msg=str(lowering.lower(s, args)))
