"""Target parsing, host CPU detection and device keys."""

from __future__ import annotations

import pytest

from tessel_errors import CodegenError
from tessel_target import (
    Target,
    at_other_thread_counts,
    device_key,
    device_threads,
    host_cpu,
    host_features,
    legacy_device_key,
)


def test_parse_llvm_with_options() -> None:
    t = Target.parse("llvm -mcpu=sapphirerapids -fast-math")
    assert t.kind == "llvm"
    assert t.attrs == {"mcpu": "sapphirerapids", "fast-math": True}
    assert t.fast_math and t.mcpu == "sapphirerapids"
    assert t.keys == ("cpu",)


def test_parse_cuda_and_accel() -> None:
    assert Target.parse("cuda -arch=sm_90").attrs["arch"] == "sm_90"
    assert Target.parse("cuda").keys == ("cuda", "gpu")
    assert Target.parse("accel").kind == "accel"


def test_string_round_trip_is_canonical() -> None:
    t = Target.parse("llvm  -fast-math -mcpu=skylake-avx512")
    assert str(t) == "llvm -fast-math -mcpu=skylake-avx512"
    assert Target.parse(str(t)) == t
    assert hash(Target.parse(str(t))) == hash(t)
    assert Target.parse(t) is t


def test_unknown_kind_is_rejected() -> None:
    with pytest.raises(CodegenError, match=r"unknown target kind 'metal' in 'metal'; expected "
                                           r"one of llvm, cuda, accel"):
        Target.parse("metal")


def test_malformed_option_is_rejected() -> None:
    with pytest.raises(CodegenError, match=r"target option 'mcpu=x' in 'llvm mcpu=x' must look "
                                           r"like -key=value"):
        Target.parse("llvm mcpu=x")


def test_empty_target_is_rejected() -> None:
    with pytest.raises(CodegenError, match="target must be a non-empty string"):
        Target.parse("  ")


def test_with_attr_copies() -> None:
    t = Target.parse("llvm")
    assert str(t.with_attr("fast-math")) == "llvm -fast-math"
    assert str(t) == "llvm"


def test_host_cpu_is_detected() -> None:
    name, features = host_cpu()
    assert name and name != "generic"
    assert "+sse2" in features.split(",")
    feats = host_features()
    # the masked-CPUID fix: an AVX-512 machine is never called rocketlake
    if "avx512f" in feats:
        assert name != "rocketlake"
    assert Target.parse("llvm").mcpu == name


def test_foreign_cpu_gets_no_host_features() -> None:
    assert Target.parse("llvm -mcpu=znver1").mattr == "" or \
        Target.parse("llvm -mcpu=znver1").mcpu == host_cpu()[0]


def test_device_key_names_target_cpu_features_and_thread_count(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSEL_NUM_THREADS", "3")
    key = device_key("llvm")
    target, model, digest, threads = key.split("|")
    assert target == f"llvm -mcpu={host_cpu()[0]}"
    assert model and len(digest) == 8 and threads == "threads=3"
    assert device_key("llvm", threads=1) == key.replace("threads=3", "threads=1")
    assert legacy_device_key(key) == f"{target}|{model}|{digest}"
    assert device_threads(key) == 3 and device_threads(legacy_device_key(key)) is None
    assert device_key("llvm") == key
    assert device_key("llvm -fast-math") != key
    from tessel_target.gpu import gpu

    found = gpu()  # a GPU's records are filed under its name, capability and driver
    assert device_key("cuda -arch=sm_90") == "cuda -arch=sm_90|" + (
        found.key if found is not None else "no GPU")


def test_native_cpu_means_the_host() -> None:
    t = Target.parse("llvm -mcpu=native")
    assert t.mcpu == host_cpu()[0] and t.mattr == host_cpu()[1]


@pytest.mark.parametrize("text, bits, lanes, registers", [
    ("llvm -mcpu=haswell", 256, 8, 16),
    ("llvm -mcpu=znver3", 256, 8, 16),
    ("llvm -mcpu=skylake-avx512", 512, 16, 32),
    ("llvm -mcpu=znver5", 512, 16, 32),
    ("llvm -mcpu=haswell -mattr=+avx512f", 512, 16, 32),
    ("llvm -mcpu=sapphirerapids -mattr=-avx512f", 256, 8, 16),
    ("llvm -mcpu=pentium4", 128, 4, 16),
])
def test_a_named_cpu_gives_its_own_vector_facts_on_any_host(text: str, bits: int, lanes: int,
                                                            registers: int) -> None:
    t = Target.parse(text)
    assert (t.vector_bits, t.fp32_lanes, t.vector_registers) == (bits, lanes, registers)


def test_the_host_target_reads_the_host_features() -> None:
    t = Target.parse("llvm")
    assert t.features == frozenset(host_features())
    assert t.vector_bits == (512 if "avx512f" in t.features else
                             256 if {"avx2", "fma"} <= t.features else 128)


def test_tessel_vector_bits_overrides_the_host_target_only(monkeypatch) -> None:
    monkeypatch.setenv("TESSEL_VECTOR_BITS", "128")
    assert Target.parse("llvm").fp32_lanes == 4
    assert Target.parse("llvm -mcpu=skylake-avx512").fp32_lanes == 16


def test_accel_target_has_the_vta_defaults_as_int_attributes() -> None:
    t = Target.parse("accel")
    assert t.attrs == {"batch": 1, "block": 16, "inp_buf_kib": 32, "wgt_buf_kib": 256,
                       "acc_buf_kib": 128, "uop_buf_kib": 32, "dram_bytes_per_cycle": 8,
                       "dram_latency": 64, "clock_mhz": 100}
    assert str(t) == "accel" and t.keys == ("accel",)


def test_accel_options_override_and_a_default_given_explicitly_is_the_same_target() -> None:
    t = Target.parse("accel -batch=4 -dram_bytes_per_cycle=16")
    assert (t.attrs["batch"], t.attrs["dram_bytes_per_cycle"], t.attrs["block"]) == (4, 16, 16)
    assert str(t) == "accel -batch=4 -dram_bytes_per_cycle=16"
    assert Target.parse("accel -batch=1 -block=16") == Target.parse("accel")
    assert Target.parse("accel").with_attr("batch", 2) == Target.parse("accel -batch=2")


@pytest.mark.parametrize("text, message", [
    ("accel -batchsize=4", r"unknown accel target option -batchsize; the options are -batch, "),
    ("accel -block=12", r"-block must be a power of two .*, got 12"),
    ("accel -batch=two", r"-batch needs an integer, got 'two'"),
    ("accel -dram_bytes_per_cycle=0", r"-dram_bytes_per_cycle must be at least 1, got 0"),
    ("accel -batch", r"-batch needs an integer, got True"),
])
def test_bad_accel_options_are_rejected_naming_the_option(text: str, message: str) -> None:
    with pytest.raises(CodegenError, match=message):
        Target.parse(text)


def test_accel_device_key_spells_out_the_whole_configuration() -> None:
    key = device_key("accel")
    assert key == ("accel|batch=1,block=16,inp_buf_kib=32,wgt_buf_kib=256,acc_buf_kib=128,"
                   "uop_buf_kib=32,dram_bytes_per_cycle=8,dram_latency=64,clock_mhz=100")
    assert device_key("accel -batch=1") == key
    assert device_key("accel -wgt_buf_kib=512").startswith(
        "accel -wgt_buf_kib=512|batch=1,block=16,inp_buf_kib=32,wgt_buf_kib=512,")


def test_l2_size_comes_from_the_named_cpu_or_the_option() -> None:
    assert Target.parse("llvm -mcpu=haswell").l2_bytes == 256 * 1024
    assert Target.parse("llvm -mcpu=sapphirerapids").l2_bytes == 2048 * 1024
    assert Target.parse("llvm -mcpu=znver4").l2_bytes == 1024 * 1024
    assert Target.parse("llvm -mcpu=bdver2").l2_bytes == 256 * 1024  # unknown: the smallest
    assert Target.parse("llvm -mcpu=haswell -l2-kib=1024").l2_bytes == 1024 * 1024


@pytest.mark.parametrize("value", ["abc", "0", "True"])
def test_a_bad_l2_size_option_says_what_it_must_be(value: str) -> None:
    t = Target.parse(f"llvm -mcpu=haswell -l2-kib={value}" if value != "True"
                     else "llvm -mcpu=haswell -l2-kib")
    with pytest.raises(CodegenError, match="-l2-kib=.* must be the L2 size of one core in KiB"):
        _ = t.l2_bytes


def test_records_at_other_thread_counts_are_this_devices_at_another_count_only() -> None:
    from types import SimpleNamespace

    here = device_key("llvm", threads=2)
    keys = {"one": device_key("llvm", threads=1), "here": here,
            "legacy": legacy_device_key(here), "four": device_key("llvm", threads=4),
            "fast-math": device_key("llvm -fast-math", threads=1),
            "other CPU": "llvm -mcpu=znver4|AMD EPYC 9654|0a1b2c3d|threads=1"}
    records = [SimpleNamespace(name=n, device_key=k) for n, k in keys.items()]
    assert [r.name for r in at_other_thread_counts(records, here)] == ["one", "four"]
