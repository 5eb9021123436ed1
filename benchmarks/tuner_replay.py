"""Tuners replayed on a measured landscape: how many trials each needs, over many seeds.

A real tuning run is one noisy sample: one seed, one machine state. Here every config of a
small space is measured once into a tuning database (`tessel tune --op SPEC --tuner grid
--trials SIZE --db land.db` does that), and each tuner then runs many times, one seed
each, against a FakeRunner that answers from that table (times a log-normal measurement
noise, `--noise 0.03` = 3%). A trial counts by the config's table value, not by its noisy
answer, so "reached 95%" means the tuner really found a config within 95% of the best.

    python -m benchmarks.tuner_replay --db land.db --op conv2d_nchwc:1,64,56,56,64,3,3,1,1
    python -m benchmarks.tuner_replay --db land.db --op ... --tuners xgb,random --seeds 20

`benchmarks/landscapes/` keeps measured landscapes as `tessel db export` files (--db takes
them as they are): conv2d_nchwc_64x56x56_3x3.jsonl.gz is the whole 2,058-point space of
the ResNet-18 layer 3x3 conv 64@56x56 on a 2-core AMD EPYC (Zen 5, AVX-512) machine:

    python -m benchmarks.tuner_replay --op conv2d_nchwc:1,64,56,56,64,3,3,1,1 \
        --db benchmarks/landscapes/conv2d_nchwc_64x56x56_3x3.jsonl.gz

Config indices depend on the host's vector width (the template sizes its knobs by it), so
a landscape replays on machines of the kind that measured it.

It prints per tuner: the median (and quartiles) of trials to 95% of the landscape's best
(runs that never got there count as more than --trials), how many runs got there, and the
mean fraction of the best found after each checkpoint.
"""

from __future__ import annotations

import argparse
import gzip
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autotune import FakeRunner, Task, make_tuner, parse_op_spec, tune
from tessel_errors import TesselError
from tuning_logs import ErrorKind, TuningDatabase


def _open(path: str | Path, workdir: Path) -> TuningDatabase:
    """A database read-only, or a `tessel db export` file (.jsonl, .jsonl.gz) imported into
    a temporary one."""
    name = str(path)
    if not name.endswith((".jsonl", ".jsonl.gz")):
        return TuningDatabase(path, readonly=True)
    db = TuningDatabase(workdir / (Path(name).name + ".db"))
    with (gzip.open(name, "rt") if name.endswith(".gz") else open(name)) as f:
        db.import_jsonl(f)
    return db


def load_landscape(db_paths: Sequence[str | Path], task: Task) -> dict[int, float]:
    """{config index: seconds} of every error-free record of `task` in the databases or
    export files (the fastest where a config was measured more than once)."""
    table: dict[int, float] = {}
    work = Path(tempfile.mkdtemp(prefix="tessel-landscape-"))
    for path in db_paths:
        with _open(path, work) as db:
            for r in db.history(task.workload_key):
                if not r.ok:
                    continue
                try:
                    i = task.config_from_json(r.config_json).index
                except TesselError:  # another version of the template
                    continue
                table[i] = min(table.get(i, np.inf), r.mean)
    return table


def replay(task: Task, table: dict[int, float], tuner: str, seed: int, trials: int,
           noise: float, workdir: Path, **tuner_args: Any) -> list[float]:
    """One run of `tuner` on the landscape; the true best GFLOP/s after each trial."""
    rng = np.random.default_rng(10_000 + seed)
    flop = task.flop or 1.0

    def cost(t: Task, cfg: Any) -> float | ErrorKind:
        secs = table.get(cfg.index)
        if secs is None:  # not in the table: failed when measured, or never measured
            return ErrorKind.RUNTIME_ERROR
        return secs * float(np.exp(rng.normal(0.0, noise))) if noise else secs

    curve: list[float] = []

    def note(p: Any, inputs: Sequence[Any], results: Sequence[Any]) -> None:
        best = curve[-1] if curve else 0.0
        for inp in inputs:
            secs = table.get(inp.config.index)
            best = max(best, flop / secs / 1e9 if secs else 0.0)
            curve.append(best)

    with TuningDatabase(workdir / f"{tuner}-{seed}.db") as db:
        tune(task, make_tuner(tuner, task, seed=seed, **tuner_args), trials, db,
             FakeRunner(cost), callbacks=[note], transfer=False)
    return curve


def summarize(curves: list[list[float]], top: float, trials: int,
              checkpoints: Sequence[int]) -> str:
    """One table row: trials to 95% (median, quartiles), runs that got there, and the mean
    fraction of `top` after each checkpoint."""
    hits = []
    for c in curves:
        k = next((n + 1 for n, v in enumerate(c) if v >= 0.95 * top), None)
        hits.append(k if k is not None else trials + 1)
    q1, med, q3 = np.percentile(hits, [25, 50, 75])
    reached = sum(h <= trials for h in hits)

    def shown(x: float) -> str:
        return f">{trials}" if x > trials else f"{x:.0f}"

    fracs = [np.mean([c[min(n, len(c)) - 1] / top if c else 0.0 for c in curves])
             for n in checkpoints]
    return (f"{shown(med):>7} {shown(q1) + '-' + shown(q3):>11} {reached:>4}/{len(curves):<3}"
            + "".join(f"{f:8.3f}" for f in fracs))


def main(argv: Sequence[str] | None = None, task: Task | None = None) -> None:
    """Command line entry: see the module docstring (`task` stands in for --op, for a
    template an op spec cannot name)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, action="append",
                    help="tuning database holding the landscape (repeatable)")
    ap.add_argument("--op", required=True, help="the op spec measured, e.g. matmul:64x64x64")
    ap.add_argument("--tuners", default="xgb,ga,random")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--checkpoints", default="32,64,128,256")
    ap.add_argument("--noise", type=float, default=0.03,
                    help="log-normal sigma of the simulated measurement noise")
    a = ap.parse_args(argv)
    task = task or parse_op_spec(a.op)
    table = load_landscape(a.db, task)
    if not table:
        raise SystemExit(f"{', '.join(a.db)} hold no error-free record of "
                         f"{task.workload_key}")
    top = max(task.flop / s / 1e9 for s in table.values())
    checkpoints = [int(x) for x in a.checkpoints.split(",")]
    print(f"{a.op}: {len(table)} of {task.space.size} configs measured, best {top:.1f} "
          f"GFLOP/s; {a.seeds} seeds, {a.trials} trials, noise {a.noise:g}")
    print(f"{'tuner':10} {'to-95%':>7} {'quartiles':>11} {'hit':>8}"
          + "".join(f"{'@' + str(n):>8}" for n in checkpoints))
    work = Path(tempfile.mkdtemp(prefix="tessel-replay-"))
    for name in a.tuners.split(","):
        curves = [replay(task, table, name, s, a.trials, a.noise, work)
                  for s in range(a.seeds)]
        print(f"{name:10} " + summarize(curves, top, a.trials, checkpoints), flush=True)


if __name__ == "__main__":
    main()
