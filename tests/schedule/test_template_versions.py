"""A template whose decisions changed must say so with its version: what each registered
template decides for its canonical tasks (compute, config space, fallback, schedule; see
tests/schedule/pin_templates.py) is pinned beside its version in template_fingerprints.json,
and a fingerprint that changed under the same version fails here, naming the template and
the two ways out (raise `version=`, or re-pin)."""

from __future__ import annotations

import inspect
import json

import pytest

import schedule.templates as st
from tests.schedule import pin_templates as P

PIN = "python3 -m tests.schedule.pin_templates"


def _where(name: str) -> str:
    path = inspect.getsourcefile(st.TEMPLATES[name].schedule) or "?"
    return path[path.rfind("schedule/templates/"):]


def test_every_template_has_a_canonical_task() -> None:
    missing = sorted(set(P.own_templates()) - set(P.CASES))
    assert not missing, (f"templates without a canonical task: {missing}; add one or two "
                         f"(args, attrs) per template to CASES in tests/schedule/"
                         f"pin_templates.py, then pin them: {PIN} {' '.join(missing)}")


@pytest.mark.parametrize("name", P.own_templates())
def test_a_template_that_decides_otherwise_has_a_raised_version(name: str) -> None:
    if name not in P.CASES:
        pytest.fail(f"template {name!r} has no canonical task (see "
                    "test_every_template_has_a_canonical_task)")
    pinned = P.load_golden().get(name)
    now = P.fingerprint_template(name)
    if pinned is None:
        pytest.fail(f"template {name!r} is not pinned: {PIN} {name}")
    if pinned["version"] != now["version"]:
        pytest.fail(f"template {name!r} is at version {now['version']}, pinned at "
                    f"{pinned['version']}: re-pin it with {PIN} {name}")
    if pinned != now:
        pytest.fail(
            f"template {name!r} ({_where(name)}) decides otherwise than pinned: "
            f"{P.changes(pinned, now)}; its version is still {now['version']}.\n"
            f"- If a config now does something else (another default, a knob value that "
            f"builds another loop nest, another compute), the records measured before no "
            f"longer describe it: raise version= in its register_template(...) to "
            f"{now['version'] + 1}, then re-pin: {PIN} {name}\n"
            f"- If no config does anything different (a refactor, a renamed stage or axis), "
            f"re-pin only: {PIN} {name}")


def test_a_changed_default_changes_the_fallback_fingerprint(monkeypatch) -> None:
    from schedule.space import FallbackConfig

    target, (_, args, attrs) = P.X86[1], P.CASES["matmul.x86"][1][0]
    before = P.fingerprint_case("matmul.x86", target, args, attrs)
    chosen = FallbackConfig.__getitem__

    def other_unroll(cfg, name):  # the default's unroll_kw flipped, all else as it was
        value = chosen(cfg, name)
        if name != "unroll_kw":
            return value
        options = cfg.knobs[name].entities
        return options[-1] if value.to_json() == options[0].to_json() else options[0]

    monkeypatch.setattr(FallbackConfig, "__getitem__", other_unroll)
    after = P.fingerprint_case("matmul.x86", target, args, attrs)
    assert after["space"] == before["space"] and after["schedule"] == before["schedule"]
    assert after["fallback"] != before["fallback"]


def test_a_schedule_that_applies_a_knob_otherwise_changes_the_schedule_fingerprint(
        monkeypatch) -> None:
    tpl = st.TEMPLATES["dense.x86"]
    target, (_, args, attrs) = P.X86[0], P.CASES["dense.x86"][1][0]
    before = P.fingerprint_case("dense.x86", target, args, attrs)

    def one_more_unroll(cfg, outs):
        s = tpl.schedule(cfg, outs)
        st_ = s[outs[0]]
        st_.unroll(st_.leaf_iter_vars[-1])
        return s

    monkeypatch.setitem(st.TEMPLATES, "dense.x86",
                        type(tpl)(**{**tpl.__dict__, "schedule": one_more_unroll}))
    after = P.fingerprint_case("dense.x86", target, args, attrs)
    assert after["space"] == before["space"]
    assert after["schedule"] != before["schedule"] and after["fallback"] != before["fallback"]


def test_fingerprints_read_neither_lowering_nor_the_host(monkeypatch) -> None:
    # a lowering pass or a backend is not the template's decision, and a host that is one
    # of the named CPUs must read that CPU's known features, as any other host does
    import lowering
    import tessel_target

    def no(*_a, **_k):
        raise AssertionError("a fingerprint lowered the schedule")

    monkeypatch.setattr(lowering, "lower", no)
    monkeypatch.setattr(lowering, "build", no)
    monkeypatch.setattr(tessel_target, "host_cpu",
                        lambda: ("haswell", "+avx2,+fma,+avx512f,+avx512bw,+avx512vnni"))
    target, (label, args, attrs) = P.X86[1], P.CASES["conv2d_int8.x86"][1][0]
    pinned = P.load_golden()["conv2d_int8.x86"]["cases"][f"{target} | {label}"]
    assert P.fingerprint_case("conv2d_int8.x86", target, args, attrs) == pinned


def test_the_pin_command_rewrites_what_it_is_told_and_keeps_the_rest(monkeypatch, tmp_path,
                                                                      capsys) -> None:
    golden = tmp_path / "pins.json"
    pins = P.load_golden()
    stale = {**pins["matmul.x86"], "version": 0}
    golden.write_text(json.dumps({"matmul.x86": stale,
                                                "dense.x86": pins["dense.x86"]}))
    monkeypatch.setattr(P, "GOLDEN", golden)
    assert P.main(["matmul.x86"]) == 0
    assert "matmul.x86: version 0 -> 1" in capsys.readouterr().out
    assert P.load_golden() == {"matmul.x86": pins["matmul.x86"],
                               "dense.x86": pins["dense.x86"]}
    assert P.main(["no_such.x86"]) == 2


def test_a_fingerprint_refuses_an_object_address() -> None:
    # an attr printed by repr ("<... at 0x7f...>") would pin one run's memory layout
    with pytest.raises(ValueError, match="object's address"):
        P._digest([["compute", "C", "", [["fn", str(object())]]]])
