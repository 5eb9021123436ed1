"""Long fuzz runs: `python -m tests.fuzz --minutes 10 [--target NAME ...] [--seed S]`.

The minutes are shared equally by the targets run. Prints, per target, the inputs tried
and the count of each outcome (ok, each Tessel error kind, findings); each finding is
saved under --findings (default fuzz_findings/) with the command that replays it:
`python -m tests.fuzz --target relay_text --seed 7 --replay 1234`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

from tessel_errors import TesselError
from tests.fuzz.driver import (
    TARGET_MODULES,
    TIME_LIMIT_S,
    fuzz,
    input_rng,
    load_targets,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=1.0,
                    help="total time, shared equally by the targets (default 1)")
    ap.add_argument("--target", action="append", choices=TARGET_MODULES,
                    help="a target to run (repeatable; default all that exist)")
    ap.add_argument("--seed", type=int, default=None,
                    help="the run's seed (default: from the clock, printed)")
    ap.add_argument("--findings", type=Path, default=Path("fuzz_findings"),
                    help="where findings are saved (default fuzz_findings/)")
    ap.add_argument("--time-limit", type=float, default=TIME_LIMIT_S,
                    help=f"seconds one input may run before it counts as a hang "
                         f"(default {TIME_LIMIT_S:g})")
    ap.add_argument("--memory-fraction", type=float, default=0.75,
                    help="cap the address space at this fraction of physical memory, so an "
                         "input that allocates without bound is a MemoryError (a finding), "
                         "not the whole run killed by the OS (default 0.75; 0: no cap)")
    ap.add_argument("--replay", type=int, metavar="INDEX",
                    help="run input INDEX of --target and --seed once, with its traceback")
    args = ap.parse_args(argv)
    _limit_memory(args.memory_fraction)
    if args.replay is not None:
        if args.seed is None or not args.target or len(args.target) != 1:
            ap.error("--replay needs one --target and the --seed of the run")
        return _replay(args.target[0], args.seed, args.replay)
    seed = args.seed if args.seed is not None else int(time.time())
    targets = load_targets(args.target)
    if not targets:
        print("no fuzz targets to run")
        return 0
    per_target = args.minutes * 60 / len(targets)
    print(f"fuzzing {', '.join(t.NAME for t in targets)} with seed {seed}, "
          f"{per_target:.0f} s each", flush=True)
    total_findings = 0
    for target in targets:
        report = fuzz(target, seed, seconds=per_target, findings_dir=args.findings,
                      time_limit=args.time_limit)
        print(report.summary(), flush=True)
        for f in report.findings[:10]:
            print(f"  finding: {f.error}\n    input: {f.description[:200]}\n"
                  f"    replay: {f.replay_command()}")
        total_findings += len(report.findings)
    if total_findings:
        print(f"{total_findings} finding(s) saved under {args.findings}/")
    return 1 if total_findings else 0


def _limit_memory(fraction: float) -> None:
    if fraction <= 0 or not hasattr(os, "sysconf"):
        return
    import resource

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = int(total * fraction)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    print(f"address space capped at {limit / 2**30:.1f} GiB (--memory-fraction {fraction:g})")


def _replay(name: str, seed: int, index: int) -> int:
    (target,) = load_targets([name])
    description, thunk = target.one_input(input_rng(seed, index))
    print(f"{name} seed {seed} input {index}: {description}")
    try:
        result = thunk()
    except TesselError as e:
        print(f"a Tessel error (fine): {type(e).__name__}: {e}")
        return 0
    except Exception:
        traceback.print_exc()
        return 1
    print(f"ok: {type(result).__name__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
