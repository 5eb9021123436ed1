"""relay_ir.build runs the standard sequence under the current PassContext: opt_level,
disabled_pass and required_pass change what it compiles, the passes it cannot do without
always run, and every variant still computes what the interpreter computes."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import relay_ir.transform as T
from relay_ir.expr import Let, Var
from relay_ir.module import IRModule
from relay_ir.op import tensor as Tn
from tessel_errors import RelayError
from tests.relay_ir import programs as P


def _const_subgraph() -> IRModule:
    """relu(x + exp(c)): exp(c) is a constant subgraph FoldConstant removes."""
    x = P.tvar("x", (4, 8))
    return P.main_module([x], relay_ir.nn.relu(Tn.add(x, Tn.exp(P.const(np.linspace(
        -1, 1, 8))))))


def _twice() -> IRModule:
    """exp(x) + exp(x), written twice: EliminateCommonSubexpr (opt 3) merges them."""
    x = P.tvar("x", (4, 8))
    return P.main_module([x], Tn.add(Tn.exp(x), Tn.exp(x)))


def _groups(lib: relay_ir.CompiledModel) -> list[str]:
    return [s.group for s in lib.plan.steps]


def _assert_matches_interpreter(lib: relay_ir.CompiledModel, mod: IRModule,
                                rng: np.random.Generator, shape: tuple = (4, 8)) -> None:
    x = P.rand(rng, *shape)
    np.testing.assert_allclose(lib.run(x=x), relay_ir.interpret(mod, x), rtol=1e-5,
                               atol=1e-6)


def _sequence_passes(ctx: T.PassContext, name: str) -> list[str]:
    """The passes a timed context saw run directly inside the sequence `name`."""
    start = next(i for i, t in enumerate(ctx.timings) if t.name == name)
    depth, out = ctx.timings[start].depth, []
    for t in ctx.timings[start + 1:]:
        if t.depth <= depth:
            break
        if t.depth == depth + 1:
            out.append(t.name)
    return out


@pytest.mark.parametrize("options,groups", [
    ({}, ["fused_add_relu"]),
    ({"opt_level": 0}, ["fused_exp", "fused_add", "fused_relu"]),
    ({"disabled_pass": ["FoldConstant"]}, ["fused_exp_add_relu"]),
], ids=["default_folds_and_fuses", "opt_level_0_one_kernel_per_op_and_no_folding",
        "disabled_fold_constant_keeps_the_constant_subgraph_in_a_kernel"])
def test_the_pass_context_decides_the_kernels_of_build(options: dict, groups: list) -> None:
    with T.PassContext(**options):
        lib = relay_ir.build(_const_subgraph())
    assert _groups(lib) == groups
    _assert_matches_interpreter(lib, _const_subgraph(), np.random.default_rng(len(groups)))


def test_required_pass_runs_a_pass_above_the_opt_level() -> None:
    with T.PassContext(opt_level=0):
        plain = relay_ir.build(_twice())
    with T.PassContext(opt_level=0, required_pass=["EliminateCommonSubexpr"]):
        merged = relay_ir.build(_twice())
    assert _groups(plain) == ["fused_exp", "fused_exp", "fused_add"]
    assert _groups(merged) == ["fused_exp", "fused_add"]
    _assert_matches_interpreter(merged, _twice(), np.random.default_rng(3))


def test_build_cannot_run_with_fuse_ops_disabled() -> None:
    with T.PassContext(disabled_pass=["FuseOps"]):
        with pytest.raises(RelayError, match=r"disables FuseOps, which build needs.*remove "
                                             r"FuseOps from disabled_pass"):
            relay_ir.build(_const_subgraph())


def test_opt_level_0_build_still_puts_lets_in_graph_form() -> None:
    x = P.tvar("x", (4, 8))
    v = Var("v")
    mod = P.main_module([x], Let(v, Tn.exp(x), Tn.multiply(v, v)))
    with T.PassContext(opt_level=0):
        lib = relay_ir.build(mod)
    assert _groups(lib) == ["fused_exp", "fused_multiply"]
    _assert_matches_interpreter(lib, mod, np.random.default_rng(4))


def test_shapes_compiled_at_run_time_use_the_context_of_build() -> None:
    x = P.tvar("x", (None, 8))
    mod = P.main_module([x], relay_ir.nn.relu(Tn.exp(Tn.negative(x))))
    with T.PassContext(opt_level=0):
        lib = relay_ir.build(mod)
    _assert_matches_interpreter(lib, mod, np.random.default_rng(5), shape=(3, 8))
    assert _groups(lib) == ["fused_negative", "fused_exp", "fused_relu"]


@pytest.mark.parametrize("level", [1, 2, 3])
def test_build_and_optimize_run_the_same_passes(level: int) -> None:
    with T.PassContext(opt_level=level, timing=True) as ctx:
        relay_ir.build(P.simplifiable())
        T.optimize(P.simplifiable())
    built = _sequence_passes(ctx, "build")
    assert built == _sequence_passes(ctx, "optimize")
    assert ("FoldConstant" in built) == (level >= 2)
    assert ("EliminateCommonSubexpr" in built) == (level >= 3)


def test_at_opt_level_0_build_adds_only_the_passes_it_needs() -> None:
    with T.PassContext(opt_level=0, timing=True) as ctx:
        relay_ir.build(P.simplifiable())
        T.optimize(P.simplifiable())
    assert _sequence_passes(ctx, "build") == ["InferType", "SimplifyInference",
                                              "ToGraphNormalForm", "SimplifyExpr", "FuseOps"]
    assert _sequence_passes(ctx, "optimize") == ["InferType", "SimplifyInference",
                                                 "SimplifyExpr", "FuseOps"]
