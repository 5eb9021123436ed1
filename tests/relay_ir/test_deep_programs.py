"""Deep programs through the walks and type inference with Python's own recursion limit:
dataflow chains and let chains are walked with explicit stacks, no big-stack thread and no
raised limit; nesting past the limit is a clear RelayTypeError, not a RecursionError."""

from __future__ import annotations

import sys

import pytest

import relay_ir
from relay_ir import deep_stack
from relay_ir.expr import Function, If, Let, Var
from relay_ir.op.tensor import add, exp
from relay_ir.ty import TensorType
from relay_ir.visitor import ExprMutator, free_vars, post_order
from tessel_errors import RelayTypeError

DEPTH = 20_000
X = Var("x", TensorType((4,), "float32"))


def _op_chain() -> relay_ir.IRModule:
    e = X
    for i in range(DEPTH):
        e = add(e, X) if i % 2 else exp(e)
    return relay_ir.IRModule.from_expr(Function((X,), e))


def _let_chain() -> relay_ir.IRModule:
    vs = [Var(f"v{i}") for i in range(DEPTH)]
    body = vs[-1]
    for i in range(DEPTH - 1, 0, -1):
        body = Let(vs[i], add(vs[i - 1], vs[i - 1]), body)
    return relay_ir.IRModule.from_expr(Function((X,), Let(vs[0], X, body)))


@pytest.fixture
def no_big_stack(monkeypatch: pytest.MonkeyPatch):
    """Fail if anything runs on deep_stack's big-stack thread or moves the limit."""
    def refuse(*args, **kwargs):
        raise AssertionError("ran on the big-stack thread")
    monkeypatch.setattr(deep_stack, "run_with_big_stack", refuse)
    limit = sys.getrecursionlimit()
    yield
    assert sys.getrecursionlimit() == limit


@pytest.mark.parametrize("program", [_op_chain, _let_chain])
def test_type_inference_of_a_20000_deep_program_needs_no_big_stack(program, no_big_stack
                                                                     ) -> None:
    mod = relay_ir.transform.InferType()(program())
    assert str(mod["main"].checked_type.ret_type) == "Tensor[(4,), float32]"


@pytest.mark.parametrize("program", [_op_chain, _let_chain])
def test_walks_over_a_20000_deep_program_need_no_big_stack(program, no_big_stack) -> None:
    fn = program()["main"]
    assert free_vars(fn) == []
    assert len(post_order(fn)) > DEPTH
    assert ExprMutator().visit(fn) is fn


def test_ifs_nested_past_the_recursion_limit_are_a_type_error_not_a_crash() -> None:
    c = Var("c", TensorType((), "bool"))
    e = X
    for _ in range(sys.getrecursionlimit() * 2):
        e = If(c, e, X)
    mod = relay_ir.IRModule.from_expr(Function((c, X), e))
    with pytest.raises(RelayTypeError, match="nests functions, ifs or matches deeper"):
        relay_ir.transform.InferType()(mod)
