"""Every fuzz target, seeded and bounded: its inputs raise only Tessel errors.

A failure lists each finding with the command that replays it. Targets another change has
not written yet are skipped (they join through driver.TARGET_MODULES)."""

from __future__ import annotations

import pytest

from tests.fuzz.driver import TARGET_MODULES, fuzz, load_targets

SEED = 20261203
# inputs per target (default 100)
COUNTS = {"relay_text": 120, "onnx_models": 200, "artifacts": 300, "tuning_import": 300,
          "cuda_artifacts": 200}
SECONDS = 8.0  # and at most this long per target, so one slow target stays bounded


@pytest.mark.parametrize("name", TARGET_MODULES)
def test_fuzz_target_raises_only_tessel_errors(name: str) -> None:
    notes: list[str] = []
    targets = load_targets([name], note=notes.append)
    if not targets:
        pytest.skip(notes[0])
    report = fuzz(targets[0], SEED, count=COUNTS.get(name, 100), seconds=SECONDS)
    assert report.tried > 0
    refused = report.tried - report.counts["ok"] - report.counts["finding"]
    assert refused > 0  # the mutations reach the checks (a fuzzer of only valid inputs is none)
    assert not report.findings, report.summary() + "".join(
        f"\n  {f.error}\n    input: {f.description[:200]}\n    replay: {f.replay_command()}"
        for f in report.findings)
