"""The storage plan in the bytecode (relay_ir.vm.storage_plan): temporaries share one
storage at offsets that keep tensors live at once apart, tensors that outlive their
instructions keep storages of their own, the plan is saved and loaded with the bytecode,
and the VM allocates exactly what the bytecode says."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
import relay_ir.vm as vm
from relay_ir.vm import bytecode as B
from relay_ir.vm.analysis import FunctionInfo
from relay_ir.vm.compiler import Executable
from relay_ir.vm.translate import Translation
from tessel_errors import RelayError
from tests.relay_ir.programs import PROGRAMS
from tests.relay_ir.vm.test_vm_save_load import _forge
from tests.relay_ir.vm.test_vm_translation import _kept_across_the_call
from tests.rng import seeded_rng

CHAIN = ("def @main(%x: Tensor[(1, 8), float32], %w: Tensor[(8, 8), float32])"
         " { nn.dense(nn.dense(nn.dense(nn.dense(%x, %w), %w), %w), %w) }")


def _chain() -> Executable:
    return vm.compile(relay_ir.parse(CHAIN))


def _outputs(fn: B.Function) -> list[B.AllocTensor]:
    """The AllocTensor of each kernel call's output, in call order."""
    allocs = {i.dst: i for i in fn.instructions if isinstance(i, B.AllocTensor)}
    return [allocs[i.args[-1]] for i in fn.instructions if isinstance(i, B.InvokePacked)]


def test_temporaries_live_at_different_times_share_bytes_of_one_storage():
    fn = _chain().functions[0]
    first, second, third, _ = _outputs(fn)
    # the 1st output is dead once the 2nd dense has read it, before the 3rd is allocated
    assert fn.instructions[0] == B.AllocStorage(fn.instructions[0].size, 64, first.storage)
    assert first.storage == second.storage == third.storage
    assert first.offset == third.offset
    assert abs(second.offset - first.offset) >= 32


def test_the_shared_storage_computes_the_chain():
    rng = seeded_rng()
    x = rng.standard_normal((1, 8)).astype("float32")
    w = (rng.standard_normal((8, 8)) * 0.5).astype("float32")
    want = x
    for _ in range(4):
        want = want @ w.T
    np.testing.assert_allclose(vm.VirtualMachine(_chain()).run(x, w), want, rtol=1e-4,
                               atol=1e-5)


def test_printed_bytecode_shows_the_shared_storage_and_the_reused_bytes():
    text = str(_chain().bytecode).splitlines()
    arena = text[1].split("dst=")[1]
    assert text[1].startswith("   0: alloc_storage size=")
    shared = [ln for ln in text if f"alloc_tensor storage={arena} offset=0 " in ln]
    assert len(shared) == 2
    first = shared[0].split("dst=")[1]
    assert shared[1].endswith(f"dst=%7  # reuses bytes of {first}")
    assert sum("reuses bytes" in ln for ln in text) == 1


def test_a_returned_tensor_keeps_a_storage_of_its_own():
    fn = _chain().functions[0]
    last = _outputs(fn)[-1]
    assert [i.storage for i in fn.instructions
            if isinstance(i, B.AllocTensor)].count(last.storage) == 1


def test_a_tensor_read_after_a_call_keeps_a_storage_of_its_own():
    exe = vm.compile(_kept_across_the_call())
    fn = exe.functions[exe.function_index["f"]]
    by_kernel = {exe.kernels[i.kernel].name: i.args[-1] for i in fn.instructions
                 if isinstance(i, B.InvokePacked)}
    allocs = {i.dst: i for i in fn.instructions if isinstance(i, B.AllocTensor)}
    product = allocs[by_kernel["fused_multiply"]]
    storages = [i.storage for i in allocs.values()]
    assert storages.count(product.storage) == 1 and product.offset == 0


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_no_two_tensors_live_at_once_share_a_byte(program):
    exe = vm.compile(program.build())
    for fn in exe.functions:
        info = FunctionInfo(fn, lambda k: not exe.kernels[k].dynamic)
        tensors = [(pc, i) for pc, i in enumerate(fn.instructions)
                   if isinstance(i, B.AllocTensor)]
        for a, (pa, ta) in enumerate(tensors):
            for pb, tb in tensors[:a]:
                if ta.storage != tb.storage:
                    continue
                na = np.dtype(ta.dtype).itemsize * int(np.prod(ta.shape))
                nb = np.dtype(tb.dtype).itemsize * int(np.prod(tb.shape))
                if ta.offset + na <= tb.offset or tb.offset + nb <= ta.offset:
                    continue
                ra, rb = info.live_range(pa), info.live_range(pb)
                assert ra is not None and rb is not None, (fn.name, pa, pb)
                if _written_over(exe, info, rb[1], tb.dst, ta.dst):
                    continue
                assert ra[1] < rb[0] or rb[1] < ra[0], (fn.name, pa, pb)


def _written_over(exe: Executable, info: FunctionInfo, pc: int, r: int, o: int) -> bool:
    """Whether the kernel call at `pc`, where the tensor in `r` is read for the last time,
    is the first use of the tensor in `o` and writes it over `r`'s, as its kernel's loop
    IR allows (relay_ir.backend.inplace): the one overlap of live ranges allowed."""
    ins = info.code[pc]
    if not isinstance(ins, B.InvokePacked):
        return False
    first = min(u for x in info.aliases(o) for u in info.uses[x])
    pairs = exe.kernels[ins.kernel].fn.inplace_pairs()
    n = ins.arity - ins.output_size
    return first == pc and ins.args.count(r) == 1 and \
        (ins.args.index(r), ins.args.index(o, n)) in pairs


def test_the_plan_is_saved_and_loaded_with_the_bytecode(tmp_path):
    exe = _chain()
    exe.save(str(tmp_path))
    loaded = vm.load(str(tmp_path))
    assert loaded.functions == exe.functions
    statics = Translation(loaded).statics
    assert [(s.size, [v[1:] for v in s.views]) for s in statics.values()] == \
        [(s.size, [v[1:] for v in s.views]) for s in Translation(exe).statics.values()]


def test_the_vm_makes_each_storage_of_temporaries_once_with_the_planned_views():
    exe = _chain()
    fn = exe.functions[0]
    arena = fn.instructions[0]
    statics = Translation(exe).statics
    assert list(statics) == ["S0_0"]
    static = statics["S0_0"]
    assert (static.size, static.alignment) == (arena.size, arena.alignment)
    planned = [(tuple(i.shape), np.dtype(i.dtype), i.offset) for i in fn.instructions
               if isinstance(i, B.AllocTensor) and i.storage == arena.dst]
    assert [v[1:] for v in static.views] == planned


def test_tensors_the_bytecode_puts_on_the_same_bytes_are_one_memory():
    # hand-written: negative(x) and exp(x) at offset 0 of one storage, the first
    # returned: it holds what the second kernel wrote there
    mod = relay_ir.parse("def @main(%x: Tensor[(4,), float32]) { (negative(%x), exp(%x)) }")
    compiled = vm.compile(mod)
    k = {compiled.kernels[i].name: i for i in range(len(compiled.kernels))}
    code = (B.AllocStorage(16, 16, 1),
            B.AllocTensor(1, 0, (4,), "float32", 2),
            B.InvokePacked(k["fused_negative"], 2, 1, (0, 2)),
            B.AllocTensor(1, 0, (4,), "float32", 3),
            B.InvokePacked(k["fused_exp"], 2, 1, (0, 3)),
            B.Ret(2))
    exe = Executable(B.Bytecode((B.Function("main", 1, code, 4),)), [], [],
                     compiled.kernels, compiled.params, "llvm", {"main": 0})
    x = seeded_rng().standard_normal(4).astype("float32")
    np.testing.assert_allclose(vm.VirtualMachine(exe).run(x), np.exp(x), rtol=1e-6)


def test_a_tensor_past_the_end_of_its_storage_is_refused_at_load(tmp_path):
    _chain().save(str(tmp_path))

    def shrink(desc):
        for ins in desc["functions"][0]["instructions"]:
            if ins["op"] == "alloc_storage":
                ins["ints"][0] = 16  # size

    _forge(str(tmp_path), shrink)
    with pytest.raises(RelayError, match=r"@main: instruction 1 \(alloc_tensor\): the tensor "
                                         r"ends at byte 32, past the end of its 16-byte storage"):
        vm.load(str(tmp_path))


def test_relocation_keeps_every_jump_on_its_target():
    from relay_ir.vm.storage_plan import relocate

    code = (B.If(0, 1, 1, 3), B.AllocStorage(8, 16, 2), B.Goto(2), B.Move(0, 3), B.Ret(3))
    out = relocate(code, {0: [B.LoadConsti(1, 4), code[0]], 1: [], 3: [B.Move(1, 3)]})
    assert out == (B.LoadConsti(1, 4), B.If(0, 1, 1, 2), B.Goto(2), B.Move(1, 3), B.Ret(3))


def test_a_storage_of_temporaries_past_a_page_starts_on_a_page():
    # the planner's block offsets are chosen modulo the page (relay_ir.backend.memory_plan)
    # and mean so only from a page-aligned start, as in the graph executor's arena
    from relay_ir.backend.memory_plan import PAGE
    from relay_ir.vm.runtime import storage

    big = CHAIN.replace("(1, 8)", "(64, 64)").replace("(8, 8)", "(64, 64)")
    exe = vm.compile(relay_ir.parse(big))
    arena = exe.functions[0].instructions[0]
    assert isinstance(arena, B.AllocStorage) and arena.size >= PAGE
    assert arena.alignment == PAGE
    assert _chain().functions[0].instructions[0].alignment == 64  # a small one: no page
    for _ in range(4):
        buf, addr = storage(arena.size, arena.alignment)
        assert addr % PAGE == 0 and buf.ctypes.data == addr and buf.nbytes == arena.size
    x, w = (seeded_rng().standard_normal((64, 64)).astype("float32") for _ in range(2))
    got = vm.VirtualMachine(exe).run(x, w)
    np.testing.assert_allclose(got, x @ w.T @ w.T @ w.T @ w.T, rtol=1e-4, atol=1e-3)
