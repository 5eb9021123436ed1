"""Deep programs through the walks, type inference, ToANormalForm and the interpreter with
Python's own recursion limit: dataflow and let chains are walked with explicit stacks, the
interpreter's and ANF's nesting lives on relay_ir.trampoline's heap stack; nothing raises
the limit or starts a thread; nesting past the limit is a clear Tessel error, not a
RecursionError."""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import relay_ir
from relay_ir.expr import Function, If, Let, Var
from relay_ir.interpreter import interpret
from relay_ir.op.tensor import add, exp
from relay_ir.ty import TensorType
from relay_ir.visitor import ExprMutator, free_vars, post_order
from tessel_errors import RelayRuntimeError, RelayTypeError
from tests.rng import seeded_rng

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
    """Fail if anything moves the recursion limit or starts a (big-stack) thread."""
    def refuse(*args, **kwargs):
        raise AssertionError("tried to change the recursion limit or the thread stack size")
    monkeypatch.setattr(sys, "setrecursionlimit", refuse)
    monkeypatch.setattr(threading, "stack_size", refuse)
    limit, threads = sys.getrecursionlimit(), threading.active_count()
    yield
    assert (sys.getrecursionlimit(), threading.active_count()) == (limit, threads)


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


def test_a_normal_form_of_a_20000_deep_program_needs_no_big_stack(no_big_stack) -> None:
    body = relay_ir.transform.ToANormalForm()(_op_chain())["main"].body
    lets = 0
    while isinstance(body, Let):
        assert not isinstance(body.value, Let)
        body, lets = body.body, lets + 1
    assert lets == DEPTH


def test_interpreter_evaluates_a_20000_deep_dataflow_chain_with_no_big_stack(no_big_stack
                                                                           ) -> None:
    mod = _op_chain()
    x = seeded_rng().uniform(-2, -1, 4).astype("float32")
    want = x
    for i in range(DEPTH):
        want = want + x if i % 2 else np.exp(want)
    np.testing.assert_allclose(interpret(mod, x), want, rtol=1e-5)


def _count_down(depth_param: str) -> relay_ir.IRModule:
    # @count(n) = if n < 1 { 0 } else { 1 + @count(n - 1) }: the add waits on the call.
    return relay_ir.parse(f"""
def @count(%n: int32) -> int32 {{
  if (less(%n, 1)) {{ 0 }} else {{ add(1, @count(subtract(%n, 1))) }}
}}
def @main(%{depth_param}: int32) -> int32 {{ @count(%{depth_param}) }}
""")


def test_interpreter_runs_a_non_tail_recursion_100000_deep_with_no_big_stack(no_big_stack
                                                                           ) -> None:
    assert int(interpret(_count_down("m"), np.int32(100_000))) == 100_000


def test_interpreter_builds_and_folds_a_100000_element_list_with_no_big_stack(
        no_big_stack) -> None:
    mod = relay_ir.parse("""
def @upto(%n: int32) -> List[int32] {
  if (less(%n, 1)) { Nil } else { Cons(%n, @upto(subtract(%n, 1))) }
}
def @main(%m: int32) -> int32 {
  @foldl(fn (%acc: int32, %x: int32) -> int32 { add(%acc, %x) }, 0, @upto(%m))
}
""", init_module=relay_ir.IRModule().import_prelude())
    n = 100_000  # the sum, 5000050000, wraps in int32 as numpy's does
    assert interpret(mod, np.int32(n)) == np.arange(n + 1, dtype="int64").sum().astype("int32")


def test_a_match_failure_deep_in_a_recursion_is_one_short_error(no_big_stack) -> None:
    mod = relay_ir.parse("""
def @upto(%n: int32) -> List[int32] {
  if (less(%n, 1)) { Nil } else { Cons(%n, @upto(subtract(%n, 1))) }
}
def @no_nil_case(%l: List[int32]) -> int32 {
  match? (%l) { Cons(_, %t) => add(1, @no_nil_case(%t)) }
}
def @main(%m: int32) -> int32 { @no_nil_case(@upto(%m)) }
""", init_module=relay_ir.IRModule().import_prelude())
    with pytest.raises(RelayRuntimeError, match="match failure") as info:
        interpret(mod, np.int32(5000))  # fails 5000 calls deep
    assert len(str(info.value)) < 300
    assert len(info.traceback) < 20  # the failing step, not one frame per level
