"""CPU time of a tuning candidate's build: lower, LLVM code generation, object emission.

Per-candidate process CPU time for random configs of the 64@56 3x3 NCHWc conv (model
layouts, as a build worker builds them), and with `--hash` the sha256 of the generated IR
of the code-generator corpus (tests/lowering/codegen_corpus.py), so that a faster code
generator can be shown to produce byte-identical text. Run it once per checkout with
PYTHONPATH pointing at each (base, new), alternating; there is no in-process peer, the
comparison is old code vs new code.

    PYTHONPATH=/path/to/checkout python3 benchmarks/codegen_speed.py --n 16 --target llvm
    PYTHONPATH=/path/to/checkout python3 benchmarks/codegen_speed.py --hash
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


def _time_builds(n: int, target: str, seed: int, full: bool) -> dict[str, list[float]]:
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
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=16, help="random configs per run")
    ap.add_argument("--target", default="llvm")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-emit", action="store_true", help="skip LLVM O3 + object emission")
    ap.add_argument("--hash", action="store_true", help="hash the corpus IR instead")
    a = ap.parse_args()
    import lowering

    where = os.path.dirname(os.path.dirname(lowering.__file__))
    if a.hash:
        cc = _corpus_module()
        _, total = cc.digest(cc.corpus())
        print(f"{where}: corpus IR sha256 {total}")
        return
    r = _time_builds(a.n, a.target, a.seed, not a.no_emit)
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
