"""The LLVM code generator is deterministic: the same PrimFunc gives the same IR text.

The byte-identity of the output across code-generator changes is checked by
benchmarks/codegen_speed.py (hashes old vs new); hashes are not pinned here since the
templates' choices may depend on the host.
"""

from lowering.llvm.codegen import generate
from tests.lowering.codegen_corpus import corpus, digest


def test_generate_twice_same_text() -> None:
    entries = corpus(small=True)
    kinds = {label.split("/")[0] for label, _, _ in entries}
    assert {"conv2d_NCHWc.x86", "dense.x86", "example"} <= kinds
    first, total = digest(entries)
    again, total2 = digest(entries)
    assert first == again and total == total2
    # and each text is a real module (not an empty string hashed twice)
    label, func, target = entries[0]
    text = generate(func, target).text
    assert "define" in text and "fmul" in text, label
