"""The fuzz driver: outcomes sorted by kind, findings saved and replayable, hangs caught."""

from __future__ import annotations

import types

import pytest

from tessel_errors import ParseError
from tests.fuzz import driver
from tests.fuzz.driver import FINDING, OK, fuzz, load_targets


def target(thunk_for_index, name: str = "fake") -> types.SimpleNamespace:
    """A target whose input `i` runs thunk_for_index(i) (the index read back from the rng)."""
    def one_input(rng):
        i = int(rng.integers(3))
        return f"input kind {i}", lambda: thunk_for_index(i)
    return types.SimpleNamespace(NAME=name, one_input=one_input)


def raise_by_kind(i: int) -> None:
    if i == 1:
        raise ParseError("bad text")
    if i == 2:
        raise KeyError("x")


def test_tessel_errors_are_counted_by_class_name_and_others_are_findings():
    report = fuzz(target(raise_by_kind), seed=1, count=60)
    assert report.tried == 60
    assert set(report.counts) == {OK, "ParseError", FINDING}
    assert sum(report.counts.values()) == 60
    assert all(f.error == "KeyError: 'x'" for f in report.findings)
    assert len(report.findings) == report.counts[FINDING]


def test_a_finding_is_saved_with_its_traceback_and_replay_command(tmp_path):
    report = fuzz(target(raise_by_kind), seed=7, count=30, findings_dir=tmp_path)
    first = report.findings[0]
    saved = (tmp_path / "fake" / f"seed7-input{first.index}.txt").read_text()
    assert f"replay: python -m tests.fuzz --target fake --seed 7 --replay {first.index}" \
        in saved
    assert "KeyError: 'x'" in saved and "Traceback" in saved


def test_the_same_seed_and_index_give_the_same_input():
    descriptions = []

    def one_input(rng):
        descriptions.append(float(rng.random()))
        return "x", lambda: None
    t = types.SimpleNamespace(NAME="fake", one_input=one_input)
    fuzz(t, seed=3, count=5)
    driver.run_input(t, 3, 4)
    assert descriptions[4] == descriptions[5] and len(set(descriptions[:5])) == 5


def test_a_hang_is_a_finding_and_the_run_goes_on():
    def spin(i: int) -> None:
        if i == 0:
            while True:
                pass
    report = fuzz(target(spin), seed=2, count=8, time_limit=0.2)
    assert report.tried == 8 and report.counts[OK] > 0
    assert report.findings and all(f.error == "hang: ran past 0.2 s" for f in report.findings)


def test_a_target_that_fails_to_make_an_input_is_a_finding():
    def one_input(rng):
        raise IndexError("no seed programs")
    t = types.SimpleNamespace(NAME="broken", one_input=one_input)
    report = fuzz(t, seed=0, count=3)
    assert report.counts[FINDING] == 3
    assert report.findings[0].error == "IndexError: no seed programs"


def test_a_target_not_written_yet_is_skipped_with_a_note(monkeypatch):
    monkeypatch.setattr(driver, "TARGET_MODULES", ("relay_text", "not_written_target"))
    notes: list[str] = []
    loaded = load_targets(note=notes.append)
    assert [t.NAME for t in loaded] == ["relay_text"]
    assert notes == ["fuzz target not_written_target: not written yet "
                     "(tests/fuzz/not_written_target.py), skipped"]


def test_summary_lists_inputs_ok_each_error_kind_and_findings():
    report = fuzz(target(raise_by_kind), seed=1, count=60)
    c = report.counts
    assert report.summary() == (f"fake (seed 1): 60 inputs, ok {c[OK]}, ParseError "
                                f"{c['ParseError']}, findings {c[FINDING]}")


def test_fuzz_needs_a_count_or_a_time():
    with pytest.raises(ValueError, match="give count, seconds or both"):
        fuzz(target(raise_by_kind), seed=0)
