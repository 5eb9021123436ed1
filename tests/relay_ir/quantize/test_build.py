"""The quantized model compiled by relay_ir.build for the CPU equals the Relay
interpreter on the same module bit for bit (the graph is integer from the quantized
input to the dequantized output), and stays close to the float model it came from."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir as R
from relay_ir.quantize import quantize
from tests.relay_ir.quantize.helpers import float_outputs, relative_error
from tests.relay_ir.quantize.models import images, small_cnn
from tests.rng import seeded_rng


@pytest.mark.parametrize("calibrate,requantize", [("minmax", "shift"), ("kl", "float")])
def test_build_equals_interpreter_bit_for_bit(calibrate: str, requantize: str) -> None:
    rng = seeded_rng()
    mod, params = small_cnn(rng)
    qmod = quantize(mod, params, dataset=images(rng, 8), calibrate=calibrate,
                    requantize=requantize, skip_conv_layers=[])
    lib = R.build(qmod, target="llvm")
    for sample in images(rng, 4):  # fresh inputs, not the calibration ones
        got = lib.run(**sample)
        want = R.interpret(qmod, **sample)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("calibrate,requantize,bound", [
    ("minmax", "shift", 0.05), ("kl", "shift", 0.05), ("minmax", "float", 0.03)])
def test_quantized_output_is_close_to_the_float_output(calibrate: str, requantize: str,
                                                       bound: float) -> None:
    rng = seeded_rng()
    mod, params = small_cnn(rng)
    qmod = quantize(mod, params, dataset=images(rng, 16), calibrate=calibrate,
                    requantize=requantize)  # skip_conv_layers=[0], the default
    tests = images(rng, 16)  # the calibration data's distribution, other samples
    got = [np.asarray(R.interpret(qmod, **s)) for s in tests]
    assert relative_error(got, float_outputs(mod, params, tests)) < bound
