"""The VM on random programs (hypothesis) with lets, ifs, tuples and closures: the same
values as the interpreter on random inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import relay_ir.vm as vm
from relay_ir.expr import Call, Expr, Function, If, Let, Tuple, TupleGetItem, Var
from relay_ir.interpreter import interpret
from relay_ir.module import IRModule
from relay_ir.op import reduce as R
from relay_ir.op import tensor as Tn
from tests.relay_ir.programs import assert_values_close, main_module, tvar

SHAPE = (2, 3)
KINDS = ["tanh", "add", "multiply", "if", "tuple", "closure", "closure_from_if",
         "closure_returning_tuple"]


def _cond(a: Expr, c: Expr) -> Expr:
    return Tn.greater(R.sum(a), R.sum(c))


def _build(choices: list[tuple[str, int, int, int]]) -> IRModule:
    """@main(x, y) as a let chain, one binding per (kind, operand, operand, operand)."""
    x, y = tvar("x", SHAPE), tvar("y", SHAPE)
    values: list[Expr] = [x, y]
    bindings: list[tuple[Var, Expr]] = []
    for n, (kind, i, j, k) in enumerate(choices):
        a, c, d = (values[m % len(values)] for m in (i, j, k))
        z = tvar(f"z{n}", SHAPE)
        if kind == "tanh":
            e: Expr = Tn.tanh(a)
        elif kind == "add":
            e = Tn.add(a, c)
        elif kind == "multiply":
            e = Tn.multiply(a, Tn.tanh(c))
        elif kind == "if":
            e = If(_cond(a, c), Tn.add(a, d), Tn.negative(c))
        elif kind == "tuple":
            t = Tuple((a, Tn.add(c, d)))
            e = TupleGetItem(t, k % 2)
        elif kind == "closure":  # captures c and d
            e = Call(Function((z,), Tn.add(Tn.multiply(z, c), d)), (a,))
        elif kind == "closure_from_if":  # a function value chosen at run time
            f1 = Function((z,), Tn.multiply(z, c))
            z2 = tvar(f"w{n}", SHAPE)
            f2 = Function((z2,), Tn.subtract(z2, d))
            e = Call(If(_cond(c, d), f1, f2), (a,))
        else:  # closure_returning_tuple
            pair = Call(Function((z,), Tuple((Tn.tanh(z), Tn.add(z, c)))), (a,))
            e = Tn.add(TupleGetItem(pair, 0), TupleGetItem(pair, 1))
        v = Var(f"v{n}")
        bindings.append((v, e))
        values.append(v)
    body: Expr = Tuple(tuple(values[-2:]))
    for v, e in reversed(bindings):
        body = Let(v, e, body)
    return main_module([x, y], body)


programs = st.tuples(
    st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 30), st.integers(0, 30),
                       st.integers(0, 30)), min_size=1, max_size=6),
    st.integers(0, 2**32 - 1),
)


@settings(max_examples=20, deadline=None)
@given(programs)
def test_random_programs_run_as_in_the_interpreter(case):
    choices, seed = case
    machine = vm.VirtualMachine(vm.compile(_build(choices)))
    rng = np.random.default_rng(seed)
    for _ in range(2):
        args = [rng.standard_normal(SHAPE).astype("float32") for _ in range(2)]
        assert_values_close(machine.run(*args), interpret(_build(choices), *args),
                            1e-5, 1e-5)
