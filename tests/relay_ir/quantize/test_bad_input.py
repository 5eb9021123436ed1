"""Bad calls of quantize are RelayErrors that say what is wrong and where: the dataset
(missing, empty, misnamed, misshaped, of the wrong dtype), the options, the params."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from relay_ir.quantize import qconfig, quantize
from tessel_errors import RelayError
from tests.relay_ir.quantize.models import images, small_cnn
from tests.rng import seeded_rng


def _call(dataset: Any, **options: Any) -> None:
    mod, params = small_cnn(seeded_rng())
    quantize(mod, params, dataset=dataset, **options)


@pytest.mark.parametrize("dataset,got", [(None, "got None"), ([], "got an empty sequence"),
                                         ({"x": 0}, "got a dict")], ids=["none", "empty",
                                                                         "dict"])
def test_minmax_without_samples_asks_for_a_dataset(dataset: Any, got: str) -> None:
    with pytest.raises(RelayError, match=rf"dataset= must be a non-empty list of input dicts "
                                         rf"such as \[\{{'x': array\}}, \.\.\.\], {got}"):
        _call(dataset, calibrate="minmax")


def test_kl_without_samples_asks_for_a_dataset() -> None:
    with pytest.raises(RelayError, match="or pass calibrate=<a float>"):
        _call([], calibrate="kl")


def test_sample_with_a_wrong_input_name_names_the_sample_and_the_inputs() -> None:
    data = images(seeded_rng(), 3)
    data[2] = {"image": data[2]["x"]}
    with pytest.raises(RelayError, match=r"dataset\[2\] does not name @main's inputs "
                                         r"\(missing 'x'; unknown 'image'\); @main takes 'x'"):
        _call(data)


def test_sample_naming_a_param_says_params_are_constants() -> None:
    data = images(seeded_rng(), 1)
    data[0]["w0"] = np.zeros((8, 3, 3, 3), "float32")
    with pytest.raises(RelayError, match=r"unknown 'w0'.*params given to quantize are "
                                         "constants"):
        _call(data)


def test_sample_of_a_wrong_shape_names_the_input_and_both_shapes() -> None:
    data = images(seeded_rng(), 2)
    data[1]["x"] = np.zeros((1, 3, 9, 8), "float32")
    with pytest.raises(RelayError, match=r"dataset\[1\]\['x'\] is a float32 array of shape "
                                         r"\(1, 3, 9, 8\), but input %x is "
                                         r"Tensor\[\(1, 3, 8, 8\), float32\]"):
        _call(data)


def test_sample_of_a_wrong_dtype_says_how_to_convert() -> None:
    data = images(seeded_rng(), 1)
    data[0]["x"] = data[0]["x"].astype("float64")
    with pytest.raises(RelayError, match=r"is a float64 array.*np\.asarray\(a, 'float32'\)"):
        _call(data)


def test_sample_that_is_not_a_dict_is_named() -> None:
    with pytest.raises(RelayError, match=r"dataset\[0\] is a ndarray, expected a dict"):
        _call([np.zeros((1, 3, 8, 8), "float32")])


def test_global_scale_checks_a_dataset_it_is_given() -> None:
    with pytest.raises(RelayError, match=r"dataset\[0\] does not name"):
        _call([{"y": 1}], calibrate=8.0)


@pytest.mark.parametrize("mode", ["max", "kl_divergence", "", True])
def test_unknown_calibrate_mode_lists_the_choices(mode: Any) -> None:
    with pytest.raises(RelayError, match=rf"unknown calibrate mode {mode!r}; use 'minmax', "
                                         "'kl' or a positive float"):
        _call(None, calibrate=mode)


def test_non_positive_global_scale_is_refused() -> None:
    with pytest.raises(RelayError, match="global-scale calibrate must be positive, got -1"):
        qconfig(calibrate=-1.0)


@pytest.mark.parametrize("options,message", [
    ({"requantize": "fixed_point"}, "unknown requantize mode 'fixed_point'"),
    ({"nbit": 16}, r"nbit=16; quantized values are int8, so use an int in 2\.\.8"),
    ({"skip_conv_layers": [-1]}, r"skip_conv_layers must be conv2d indices \(ints >= 0\)"),
    ({"calibrat": "kl"}, "unknown option.* calibrat; the options are calibrate, nbit"),
], ids=["requantize", "nbit", "skip", "typo"])
def test_bad_option_is_named(options: dict[str, Any], message: str) -> None:
    with pytest.raises(RelayError, match=message):
        _call(None, **options)


def test_unknown_param_name_is_reported_as_quantize_s() -> None:
    mod, params = small_cnn(seeded_rng())
    params["w9"] = params["w0"]
    with pytest.raises(RelayError, match=r"relay_ir\.quantize: params 'w9' are not parameters"):
        quantize(mod, params, calibrate=8.0)
