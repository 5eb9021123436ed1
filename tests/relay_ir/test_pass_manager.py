"""The pass manager: opt levels, required and disabled passes, TESSEL_DUMP_IR, timing,
verification after each pass, and the pass decorators."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import relay_ir.transform as T
from relay_ir.expr import Call, Constant, Function, Var
from relay_ir.module import IRModule
from relay_ir.op import tensor as Tn
from relay_ir.transform.analysis import post_order
from tessel_errors import RelayError
from tests.relay_ir.programs import const, main_module, tvar


def _foldable() -> IRModule:
    x = tvar("x", (3,))
    return main_module([x], Tn.add(x, Tn.exp(const([1.0, 2.0, 3.0]))))


def _has_op(mod: IRModule, name: str) -> bool:
    return any(isinstance(e, Call) and getattr(e.op, "name", None) == name
               for e in post_order(mod["main"].body))


def _seq() -> T.Sequential:
    return T.Sequential([T.InferType(), T.FoldConstant(), T.DeadCodeElimination()])


def test_sequential_skips_passes_above_the_opt_level():
    with T.PassContext(opt_level=1):
        assert _has_op(_seq()(_foldable()), "exp")  # FoldConstant is opt_level 2
    with T.PassContext(opt_level=2):
        assert not _has_op(_seq()(_foldable()), "exp")


def test_required_pass_runs_below_its_opt_level():
    with T.PassContext(opt_level=0, required_pass=["FoldConstant"]):
        assert not _has_op(_seq()(_foldable()), "exp")


def test_disabled_pass_wins_over_opt_level_and_required():
    with T.PassContext(opt_level=3, required_pass=["FoldConstant"],
                       disabled_pass=["fold_constant"]):
        assert _has_op(_seq()(_foldable()), "exp")


def test_a_pass_the_sequence_requires_runs_below_the_opt_level():
    seq = T.Sequential([T.InferType(), T.FoldConstant()], required=["FoldConstant"])
    with T.PassContext(opt_level=0):
        assert not _has_op(seq(_foldable()), "exp")


def test_disabling_a_pass_the_sequence_requires_is_an_error():
    seq = T.Sequential([T.InferType(), T.FoldConstant()], name="folding",
                       required=["FoldConstant"])
    with T.PassContext(disabled_pass=["fold_constant"]):
        with pytest.raises(RelayError, match=r"disables FoldConstant, which folding needs "
                                             r"\(it always runs FoldConstant\)"):
            seq(_foldable())


def test_a_sequence_can_only_require_its_own_passes():
    with pytest.raises(RelayError, match=r"requires FuseOps, which is not among its passes "
                                         r"\(InferType\)"):
        T.Sequential([T.InferType()], name="types", required=["FuseOps"])


def test_calling_a_pass_directly_always_runs_it():
    with T.PassContext(opt_level=0):
        assert not _has_op(T.FoldConstant()(_foldable()), "exp")


def test_unknown_pass_name_is_rejected_with_a_suggestion():
    with pytest.raises(RelayError, match=r"unknown pass 'FoldConstnt'; did you mean FoldConstant"):
        with T.PassContext(disabled_pass=["FoldConstnt"]):
            pass


def test_opt_level_must_be_in_range():
    with pytest.raises(RelayError, match=r"opt_level must be an int in 0..4, got 7"):
        T.PassContext(opt_level=7)


def test_contexts_nest_and_restore():
    outer = T.PassContext(opt_level=1)
    with outer:
        with T.PassContext(opt_level=3) as inner:
            assert T.PassContext.current() is inner
        assert T.PassContext.current() is outer


def test_dump_ir_prints_after_the_named_pass(monkeypatch, capsys):
    monkeypatch.setenv("TESSEL_DUMP_IR", "fold_constant")
    _seq()(_foldable())
    out = capsys.readouterr().out
    assert "// TESSEL_DUMP_IR: IR after pass FoldConstant" in out
    assert "def @main(%x: Tensor[(3,), float32])" in out
    assert "InferType" not in out and "DeadCodeElimination" not in out
    assert "exp(" not in out  # printed after folding


def test_dump_ir_accepts_a_list_and_all(monkeypatch, capsys):
    monkeypatch.setenv("TESSEL_DUMP_IR", "InferType,DeadCodeElimination")
    _seq()(_foldable())
    out = capsys.readouterr().out
    assert out.count("// TESSEL_DUMP_IR") == 2
    monkeypatch.setenv("TESSEL_DUMP_IR", "all")
    _seq()(_foldable())
    assert capsys.readouterr().out.count("// TESSEL_DUMP_IR") == 3


def test_no_dump_without_the_variable(monkeypatch, capsys):
    monkeypatch.delenv("TESSEL_DUMP_IR", raising=False)
    _seq()(_foldable())
    assert capsys.readouterr().out == ""


def test_timing_records_every_pass_with_nesting():
    with T.PassContext(opt_level=2, timing=True) as ctx:
        _seq()(_foldable())
    names = [(t.name, t.depth) for t in ctx.timings]
    assert names == [("Sequential", 0), ("InferType", 1), ("FoldConstant", 1),
                     ("DeadCodeElimination", 1)]
    assert all(t.seconds >= 0 for t in ctx.timings)
    assert ctx.timings[0].seconds >= sum(t.seconds for t in ctx.timings[1:])
    report = ctx.timing_report()
    assert report.splitlines()[0].split() == ["pass", "time", "(ms)"]
    assert "  FoldConstant" in report


def test_timing_off_records_nothing():
    with T.PassContext(opt_level=2) as ctx:
        _seq()(_foldable())
    assert ctx.timings == []


def test_optimize_reports_its_passes_to_the_outer_timing_context():
    with T.PassContext(timing=True) as ctx:
        T.optimize(_foldable(), opt_level=3)
    assert {"optimize", "FuseOps", "FoldConstant"} <= {t.name for t in ctx.timings}


def test_optimize_keeps_the_outer_disabled_passes_when_given_an_opt_level():
    with T.PassContext(disabled_pass=["FoldConstant", "FuseOps"]):
        assert _has_op(T.optimize(_foldable(), opt_level=3), "exp")
    assert not _has_op(T.optimize(_foldable(), opt_level=3, disabled_pass=["FuseOps"]), "exp")


def test_standard_sequence_names_its_purposes():
    with pytest.raises(RelayError, match=r"purpose must be one of optimize, build, got 'vm'"):
        T.standard_sequence("vm")


@T.module_pass(opt_level=0, name="BreakScoping")
def _break_scoping(mod, ctx):
    ghost = tvar("ghost", (3,))
    fn = mod["main"]
    return mod.with_function("main", replace(fn, body=Tn.add(fn.body, ghost)))


@T.module_pass(opt_level=0, name="BindTwice")
def _bind_twice(mod, ctx):
    fn = mod["main"]
    p = fn.params[0]
    return mod.with_function("main", replace(fn, body=Function((p,), p)))


@T.module_pass(opt_level=0, name="BreakTypes")
def _break_types(mod, ctx):
    fn = mod["main"]
    return mod.with_function("main", replace(fn, body=Tn.add(fn.body, const(np.ones(4)))))


def test_verify_catches_an_unbound_variable():
    with T.PassContext(verify=True):
        with pytest.raises(RelayError, match=r"verification failed after pass BreakScoping: "
                                             r"ill-formed IR in @main: unbound variable.*%ghost"):
            _break_scoping(_foldable())


def test_verify_catches_a_variable_bound_twice():
    with T.PassContext(verify=True):
        with pytest.raises(RelayError, match=r"after pass BindTwice.*%x is bound more than once"):
            _bind_twice(_foldable())


def test_verify_reruns_type_inference():
    with T.PassContext(verify=True):
        with pytest.raises(RelayError, match=r"after pass BreakTypes: type inference"):
            _break_types(_foldable())


def test_without_verify_a_broken_pass_goes_unnoticed():
    assert isinstance(_break_scoping(_foldable()), IRModule)


def test_function_pass_applies_to_every_non_primitive_global():
    seen = []

    @T.function_pass(opt_level=1, name="Collect")
    def collect(fn, mod, ctx):
        seen.append(len(fn.params))
        return fn

    x = tvar("x", (3,))
    mod = IRModule({}).with_function("prim", Function((x,), x, attrs=(("Primitive", 1),)))
    mod = mod.with_function("main", Function((), Constant(np.float32(1))))
    out = collect(mod)
    assert seen == [0] and out is mod  # unchanged functions: the same module back


def test_a_pass_must_return_a_module():
    @T.module_pass(name="ReturnsNone")
    def returns_none(mod, ctx):
        return None

    with pytest.raises(RelayError, match=r"pass ReturnsNone returned a NoneType"):
        returns_none(_foldable())


def test_a_pass_rejects_a_non_module():
    with pytest.raises(RelayError, match=r"expects an IRModule, got Var.*from_expr"):
        T.InferType()(Var("x"))


def test_sequential_rejects_non_passes():
    with pytest.raises(RelayError, match=r"Sequential expects Pass objects, got str"):
        T.Sequential(["FoldConstant"])  # type: ignore[list-item]
