"""The ONNX backend node tests of the issue-named ops (`CORE_OPS`) against
TesselCompiledBackend: ONNX import, relay_ir.build(target="llvm"), then the compiled kernels.

The same cases as tests/relay_ir/frontend/test_onnx_backend.py::TestOnnxNodeCoreOps, with the
interpreter's KNOWN_FAILURES plus KNOWN_COMPILED_FAILURES (cases the interpreter passes and the
compiled path does not, each with its cause). TestOnnxControlFlowOnTheVM runs the If, Loop and
Scan cases the frontend converts: build rejects them as not dataflow, so they are compiled with
relay_ir.vm.compile and run by the VM (KNOWN_CONTROL_FLOW_FAILURES: the ones that fail).

All 511 cases run (no sampling): about 45 s on the 2-core CI machine, most of it LLVM.

    python -m pytest tests/e2e/test_onnx_backend_compiled.py -q -rs
"""

from __future__ import annotations

import functools
import re
import unittest
import warnings
from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.backend.test.runner import Runner

import relay_ir
import relay_ir.vm
from relay_ir import builder as B
from relay_ir.op.nn import matmul
from relay_ir.op.tensor import cast, divide, multiply
from tests.relay_ir.frontend import test_onnx_backend as interp
from tests.relay_ir.frontend.onnx_backend import TesselCompiledBackend, TesselCompiledRep
from tests.rng import seeded_rng

# regex on the test name -> why the compiled path fails where the interpreter passes
KNOWN_COMPILED_FAILURES: dict[str, str] = {
    r"test_cast(like)?_(FLOAT_to_)?BFLOAT16|test_cast(like)?_\w*FLOAT8E5M2":
        "codegen has no bfloat16 / float8_e5m2 element types (the interpreter uses ml_dtypes)",
    r"test_pow_types_int": "tensor_expr power needs floats (ONNX Pow takes int operands)",
    r"test_(max|average)pool_2d_dilations": "compiled pooling has no dilation",
}
# regex -> why the case is not run at all (it crashes the process, so no xfail can catch it)
KNOWN_COMPILED_CRASHES: dict[str, str] = {}  # none now (float64 -> float16 casts fixed)


def _guarded(name: str, fn: Callable[..., None]) -> Callable[..., None]:
    """Run the case unless it is a known compiled crash."""

    @functools.wraps(fn)
    def case(self: unittest.TestCase) -> None:
        for pattern, why in KNOWN_COMPILED_CRASHES.items():
            if re.search(pattern, name):
                raise unittest.SkipTest(f"known compiled crash: {why}")
        fn(self)

    return case


# the ONNX control-flow cases the frontend converts: not dataflow, so compiled for the VM
CONTROL_FLOW = re.compile(r"test_(if|loop11|scan9_\w+|range_\w+_expanded"
                          r"|linear_attention_\w+_expanded)_cpu$")
KNOWN_CONTROL_FLOW_FAILURES = {
    r"test_range_bfloat16": "codegen has no bfloat16 element type",
}


with warnings.catch_warnings():  # building the cases divides by zero on purpose
    warnings.simplefilter("ignore", RuntimeWarning)
    _runner = Runner(TesselCompiledBackend, __name__)
for _pattern in {**interp.KNOWN_FAILURES, **KNOWN_COMPILED_FAILURES,
                 **KNOWN_CONTROL_FLOW_FAILURES}:
    _runner.xfail(_pattern)
_CORE = {n for n in dir(interp.TestOnnxNodeCoreOps) if n.startswith("test_")}
_SUITE = _runner.test_cases["OnnxBackendNodeModelTest"]
_CASES = {k: _guarded(k, getattr(_SUITE, k)) for k in sorted(_CORE)}
_CF_CASES = {k: _guarded(k, v) for k, v in sorted(vars(_SUITE).items()) if CONTROL_FLOW.match(k)}
del _SUITE  # the runner's class is not kept at module level, or pytest would collect it

TestOnnxNodeCoreOpsCompiled = type("TestOnnxNodeCoreOpsCompiled", (unittest.TestCase,), _CASES)
TestOnnxControlFlowOnTheVM = type("TestOnnxControlFlowOnTheVM", (unittest.TestCase,), _CF_CASES)


def test_compiled_subset_is_the_interpreted_subset():
    assert set(_CASES) == _CORE and len(_CASES) > 400


def test_float64_to_float16_cast_compiles_and_rounds_as_numpy():
    # fptrunc double -> half was a libcall the JIT left unresolved (a segfault)
    x = B.var("x", B.tensor_type((300,), "float64"))
    lib = relay_ir.build(B.function([x], cast(x, "float16")))
    rng = seeded_rng()
    v = np.concatenate([rng.standard_normal(290) * 10.0 ** rng.integers(-9, 6, 290),
                        [np.inf, -np.inf, 0.0, -0.0, 65520.0, 65519.99, 1e-8, 2.98e-8,
                         -1e300, 1e300]])
    with np.errstate(over="ignore"):
        want = v.astype(np.float16)
    np.testing.assert_array_equal(lib.run(x=v).view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint16"])
def test_integer_divide_compiles_truncating_as_the_interpreter(dtype):
    x = B.var("x", B.tensor_type((3, 40), dtype))
    y = B.var("y", B.tensor_type((40,), dtype))
    fn = B.function([x, y], divide(x, y))
    rng = seeded_rng()
    lo = 0 if dtype.startswith("u") else -100
    a = rng.integers(lo, 100, (3, 40)).astype(dtype)
    b = rng.integers(lo, 100, (40,)).astype(dtype)
    b[0] = 0  # the interpreter divides by 1 there
    got = relay_ir.build(fn).run(x=a, y=b)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, relay_ir.interpret(fn, x=a, y=b))


@pytest.mark.parametrize("sa,sb", [((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)),
                                   ((4, 3), (2, 3, 3, 2))])
def test_batched_broadcast_matmul_compiles_as_numpy(sa, sb):
    x, y = B.var("x", B.tensor_type(sa)), B.var("y", B.tensor_type(sb))
    rng = seeded_rng()
    a = rng.standard_normal(sa).astype("float32")
    b = rng.standard_normal(sb).astype("float32")
    got = relay_ir.build(B.function([x, y], matmul(x, y))).run(x=a, y=b)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_control_flow_runs_on_the_vm_with_builds_reason():
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "cf_model",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])])
    rep = TesselCompiledRep(helper.make_model(graph), None)
    x = B.var("x", B.tensor_type((3,)))
    fn = B.function([x], B.if_(B.const(True), multiply(x, B.const(np.float32(2))), x))
    v = seeded_rng().standard_normal(3).astype("float32")
    TesselCompiledBackend.vm_runs.clear()
    np.testing.assert_allclose(rep.execute(fn, {}, {"x": v}), 2 * v)
    assert "control flow" in TesselCompiledBackend.vm_runs["cf_model"]
    assert isinstance(rep.compiled[id(fn)][1], relay_ir.vm.VirtualMachine)
