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


def test_generate_restores_gc_state() -> None:
    import gc

    import pytest

    import tensor_expr as te
    from lowering.ir import Buffer, BufferStore, PrimFunc
    from tessel_errors import CodegenError

    A = Buffer("A", (4,), "float32")
    unbound = te.var("k")
    bad = PrimFunc("bad", (A,), BufferStore(A, te.const(1.0, "float32"), (unbound,)))
    from tests.lowering.ir_examples import elementwise_2d

    good = (None, elementwise_2d()[0], "llvm")
    try:
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            generate(good[1], good[2])
            assert gc.isenabled() is enabled
            with pytest.raises(CodegenError, match="not bound"):
                generate(bad, "llvm")
            assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_shared_constants_keep_their_text() -> None:
    # the constant cache must not merge values that compare equal but print differently
    from llvmlite import ir

    from lowering.llvm.types import I1, I64, const, reg_type, vec

    f32 = reg_type("float32")
    for t in (f32, vec(f32, 8)):
        assert str(const(t, -0.0)) == str(ir.Constant(t, [-0.0] * 8 if t != f32 else -0.0))
        assert str(const(t, 0.0)) != str(const(t, -0.0))
        assert const(t, 1.5) is const(t, 1.5)
    nan = const(f32, float("nan"))
    assert str(nan) == str(ir.Constant(f32, float("nan")))
    assert str(const(I1, True)) == "i1 true" and str(const(I1, 1)) == "i1 1"
    assert str(const(I64, 0)) == "i64 0"
    assert str(const(vec(I64, 2), 3)) == "<2 x i64> <i64 3, i64 3>"
    assert vec(I64, 4) is vec(I64, 4)


def test_text_fixups_match_their_regex() -> None:
    # the string-search versions of the two text fix-ups do what the regexes did
    import re

    from lowering.llvm.codegen import _after_define_lines, _fix_loop_ids

    def old_attrs(t: str) -> str:
        return re.sub(r"^(define [^\n]*\))", lambda m: m.group(1) + " X", t, flags=re.M)

    def old_ids(t: str) -> str:
        return re.sub(r'^(!\d+) = !\{\s*!"tessel\.loop\.self"\s*,', r"\1 = distinct !{\1,",
                      t, flags=re.M)

    texts = ["", "define i32 @f(ptr %a) {\n}", "x\ndefine void @g() ) y\n  define i32 @h()\n",
             "define nothing here\ndefine i32 @k(i32 %x)", "a(b)\n\n!0 = !{ !\"tessel.loop.self\","
             " !1}\n!1 = !{}\n!2 = !{!\"tessel.loop.self\" , !1}", "!3 = !{!\"tessel.loop.self\",}",
             "call !4 = !{!\"tessel.loop.self\", !1}\n"]
    for t in texts:
        assert _after_define_lines(t, " X") == old_attrs(t), t
        assert _fix_loop_ids(t) == old_ids(t), t
