"""Every pass preserves meaning: on every program of programs.py, the interpreter gives
the same result before and after the pass, on fresh random inputs; the result is also
well-formed and type-checks."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import relay_ir.transform as T
from relay_ir.interpreter import interpret
from relay_ir.module import IRModule
from relay_ir.transform.pass_manager import verify_module
from tests.relay_ir.programs import PROGRAMS, assert_values_close
from tests.rng import seeded_rng

PASSES: dict[str, Callable[[], T.Pass]] = {
    "InferType": T.InferType,
    "FoldConstant": T.FoldConstant,
    "FoldScaleAxis": T.FoldScaleAxis,
    "DeadCodeElimination": T.DeadCodeElimination,
    "EliminateCommonSubexpr": T.EliminateCommonSubexpr,
    "SimplifyInference": T.SimplifyInference,
    "SimplifyInference_keep_layer_norm": lambda: T.SimplifyInference(expand_layer_norm=False),
    "SimplifyExpr": T.SimplifyExpr,
    "ToANormalForm": T.ToANormalForm,
    "ToGraphNormalForm": T.ToGraphNormalForm,
    "Inline": T.Inline,
    "FuseOps": T.FuseOps,
    "FuseOps_depth2": lambda: T.FuseOps(max_depth=2),
    "FuseOps_level0": lambda: T.FuseOps(fuse_opt_level=0),
    "ANF_then_GNF": lambda: T.Sequential([T.ToANormalForm(), T.ToGraphNormalForm()]),
}


def _check(program, transform: Callable[[IRModule], IRModule]) -> None:
    rng = seeded_rng()
    before = program.build()
    after = transform(program.build())
    verify_module(after)
    for _ in range(2):  # two fresh input sets
        args = program.inputs(rng)
        assert_values_close(interpret(after, *args), interpret(before, *args),
                            program.rtol, program.atol, where=program.name)


@pytest.mark.parametrize("pass_name", sorted(PASSES))
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_pass_preserves_meaning(program, pass_name):
    _check(program, PASSES[pass_name]())


@pytest.mark.parametrize("opt_level", [0, 1, 2, 3])
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_optimize_preserves_meaning(program, opt_level):
    _check(program, lambda mod: T.optimize(mod, opt_level=opt_level))


def test_optimize_with_verification_after_every_pass():
    for program in PROGRAMS:
        _check(program, lambda mod: T.optimize(mod, opt_level=3, verify=True))
