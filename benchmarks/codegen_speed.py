"""CPU time of a tuning candidate's build: lower, LLVM code generation, object emission.

Per-candidate process CPU time for random configs of the 64@56 3x3 NCHWc conv (model
layouts, as a build worker builds them), and with `--hash` the sha256 of the generated IR
of the code-generator corpus (tests/lowering/codegen_corpus.py), so that a faster code
generator can be shown to produce byte-identical text. Run it once per checkout with
PYTHONPATH pointing at each (base, new), alternating; there is no in-process peer, the
comparison is old code vs new code.

    PYTHONPATH=/path/to/checkout python3 benchmarks/codegen_speed.py --n 16 --target llvm
    PYTHONPATH=/path/to/checkout python3 benchmarks/codegen_speed.py --hash

When the generated IR differs between checkouts, O3's share is best compared in one
process on the saved IR of the same candidates (interleaved, so load changes hit both):

    PYTHONPATH=/path/to/old python3 benchmarks/codegen_speed.py --no-emit --save-ir /tmp/old
    PYTHONPATH=/path/to/new python3 benchmarks/codegen_speed.py --no-emit --save-ir /tmp/new
    PYTHONPATH=/path/to/new python3 benchmarks/codegen_speed.py --emit-ab /tmp/old /tmp/new
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import time
from pathlib import Path

_CORPUS = Path(__file__).resolve().parent.parent / "tests" / "lowering" / "codegen_corpus.py"


def _corpus_module():
    # loaded by path so that a base checkout without the corpus file can be hashed too
    spec = importlib.util.spec_from_file_location("codegen_corpus", _CORPUS)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _time_builds(n: int, target: str, seed: int, full: bool,
                 save_ir: str | None = None) -> dict[str, list[float]]:
    import lowering
    from autotune.measure import timed_as
    from autotune.task import Task
    from lowering.llvm.codegen import generate
    from lowering.llvm.jit import compile_object

    cc = _corpus_module()
    name, args, attrs = cc.CONV
    t = timed_as(Task(name, args, attrs, target=target), True)
    rng = random.Random(seed)
    idx = [rng.randrange(len(t.space)) for _ in range(n)]
    out: dict[str, list[float]] = {"lower": [], "generate": [], "emit": [], "lines": []}
    for i in idx:
        c0 = time.process_time()
        func = lowering.lower(*t.instantiate(t.config(i)), name="main")
        c1 = time.process_time()
        gen = generate(func, t.target)
        c2 = time.process_time()
        if full:
            compile_object(gen.text, t.target)
        c3 = time.process_time()
        out["lower"].append(c1 - c0)
        out["generate"].append(c2 - c1)
        out["emit"].append(c3 - c2)
        out["lines"].append(gen.text.count("\n"))  # IR size: what O3 has to chew on
        if save_ir:
            Path(save_ir, f"{len(out['lines']):03d}.ll").write_text(gen.text)
    return out


def _emit_ab(dir_a: str, dir_b: str, target: str, rounds: int = 2) -> None:
    """CPU time of LLVM O3 + object emission on the IR files of two checkouts (same
    candidates, same file names), a then b per candidate, `rounds` times."""
    from lowering.llvm.jit import compile_object
    from tessel_target import Target

    names = sorted(p.name for p in Path(dir_a).glob("*.ll"))
    if not names or any(not Path(dir_b, n).exists() for n in names):
        raise SystemExit(f"--emit-ab: {dir_a} and {dir_b} must hold the same *.ll files "
                         "(save both with --save-ir, same --n/--seed/--target)")
    tgt = Target.parse(target)
    times: dict[str, list[float]] = {dir_a: [], dir_b: []}
    for _ in range(rounds):
        for n in names:
            for d in (dir_a, dir_b):
                text = Path(d, n).read_text()
                c0 = time.process_time()
                compile_object(text, tgt)
                times[d].append(time.process_time() - c0)
    a, b = times[dir_a], times[dir_b]
    ratio = statistics.median(y / x for x, y in zip(a, b))
    print(f"[{target}] O3+object CPU ms/candidate over {len(names)} x {rounds}: "
          f"{dir_a} median {statistics.median(a) * 1e3:.1f} mean {statistics.mean(a) * 1e3:.1f}; "
          f"{dir_b} median {statistics.median(b) * 1e3:.1f} mean {statistics.mean(b) * 1e3:.1f}; "
          f"per-candidate b/a median {ratio:.3f}  (load {os.getloadavg()[0]:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=16, help="random configs per run")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-emit", action="store_true", help="skip LLVM O3 + object emission")
    ap.add_argument("--hash", action="store_true", help="hash the corpus IR instead")
    ap.add_argument("--save-ir", metavar="DIR", help="also write each candidate's IR here")
    ap.add_argument("--emit-ab", nargs=2, metavar=("DIR_A", "DIR_B"),
                    help="time O3 + object emission of two --save-ir folders, interleaved")
    a = ap.parse_args()
    if a.emit_ab:
        _emit_ab(*a.emit_ab, a.target)
        return
    if a.save_ir:
        os.makedirs(a.save_ir, exist_ok=True)
    import lowering

    where = os.path.dirname(os.path.dirname(lowering.__file__))
    if a.hash:
        cc = _corpus_module()
        _, total = cc.digest(cc.corpus())
        print(f"{where}: corpus IR sha256 {total}")
        return
    r = _time_builds(a.n, a.target, a.seed, not a.no_emit, a.save_ir)
    load = os.getloadavg()[0]
    lines = r.pop("lines")
    whole = [x + y + z for x, y, z in zip(r["lower"], r["generate"], r["emit"])]
    parts = "  ".join(f"{k} {statistics.median(v) * 1e3:6.1f}" for k, v in r.items())
    print(f"{where} [{a.target}] n={a.n} median CPU ms/candidate: {parts}  "
          f"build {statistics.median(whole) * 1e3:6.1f}; means: generate "
          f"{statistics.mean(r['generate']) * 1e3:6.1f} build {statistics.mean(whole) * 1e3:6.1f}"
          f"; IR lines median {statistics.median(lines):.0f}  (load {load:.2f})")


if __name__ == "__main__":
    main()
