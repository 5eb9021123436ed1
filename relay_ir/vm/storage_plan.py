"""The storage plan of one VM function, made by the compiler and written into its bytecode.

The code generator gives every tensor a storage of its own (AllocStorage, then
AllocTensor at offset 0). This pass finds the temporaries among them (tensors that do not
escape the function and are not live across a call: `FunctionInfo.temporary`) and puts
them all into one storage allocated at the function's entry, each AllocTensor at an
offset into it, as relay_ir.build plans its intermediates (relay_ir.backend.memory_plan,
live ranges in pcs): tensors live at once get disjoint bytes, a tensor allocated after
another's last use may take its bytes, and blocks start at distinct offsets modulo the
4 KiB page. The other tensors keep their own storage. So the bytecode says which
tensors share memory; the VM only decides how to allocate each AllocStorage
(relay_ir.vm.translate makes a storage of temporaries once per VM instead of at every
run).

    >>> from relay_ir.vm import bytecode as B
    >>> code = []  # four chained kernels over 64-byte tensors, the last one returned
    >>> for i in range(4):
    ...     code += [B.AllocStorage(64, 64, 2 * i + 1),
    ...              B.AllocTensor(2 * i + 1, 0, (16,), "float32", 2 * i + 2),
    ...              B.InvokePacked(0, 2, 1, (2 * i, 2 * i + 2))]
    >>> print(plan_storage(B.Function("f", 1, (*code, B.Ret(8)), 9), lambda k: True))
    fn @f(%0) [9 registers]
       0: alloc_storage size=640 alignment=64 dst=%1
       1: alloc_tensor storage=%1 offset=0 shape=(16,) dtype='float32' dst=%2
       2: invoke_packed kernel=0 arity=2 output_size=1 args=(%0, %2)
       3: alloc_tensor storage=%1 offset=576 shape=(16,) dtype='float32' dst=%4
       4: invoke_packed kernel=0 arity=2 output_size=1 args=(%2, %4)
       5: alloc_tensor storage=%1 offset=0 shape=(16,) dtype='float32' dst=%6  # reuses bytes of %2
       6: invoke_packed kernel=0 arity=2 output_size=1 args=(%4, %6)
       7: alloc_storage size=64 alignment=64 dst=%7
       8: alloc_tensor storage=%7 offset=0 shape=(16,) dtype='float32' dst=%8
       9: invoke_packed kernel=0 arity=2 output_size=1 args=(%6, %8)
      10: ret %8

(%6 takes %2's bytes: %2 is dead once the second kernel has read it; %4 starts 9 cache
lines on, at another page offset; %8 is returned, so it keeps a storage of its own.)

Where a static kernel may write an output over an input (its loop IR reads each element
of the input only for the same element of the output: relay_ir.backend.inplace, as the
graph executor's plan uses it), and that input is a temporary read there for the last
time, the output takes the input's bytes: a residual conv writes over its residual, as
in relay_ir.build. The kernel here is the same as the one above, and may:

    >>> print(plan_storage(B.Function("f", 1, (*code, B.Ret(8)), 9), lambda k: True,
    ...                    inplace=lambda k: [(0, 1)]))  # doctest: +ELLIPSIS
    fn @f(%0) [9 registers]
       0: alloc_storage size=64 alignment=64 dst=%1
       1: alloc_tensor storage=%1 offset=0 shape=(16,) dtype='float32' dst=%2
       2: invoke_packed kernel=0 arity=2 output_size=1 args=(%0, %2)
       3: alloc_tensor storage=%1 offset=0 shape=(16,) dtype='float32' dst=%4  # reuses bytes of %2
       4: invoke_packed kernel=0 arity=2 output_size=1 args=(%2, %4)
       5: alloc_tensor storage=%1 offset=0 shape=(16,) dtype='float32' dst=%6  # reuses bytes ...
       6: invoke_packed kernel=0 arity=2 output_size=1 args=(%4, %6)
       7: alloc_storage size=64 alignment=64 dst=%7
       8: alloc_tensor storage=%7 offset=0 shape=(16,) dtype='float32' dst=%8
       9: invoke_packed kernel=0 arity=2 output_size=1 args=(%6, %8)
      10: ret %8

Only static storage is planned so: a dynamic kernel (`?` dims) returns fresh outputs,
whose storage the VM allocates at run time, never over an input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from relay_ir.backend.memory_plan import ALIGN, PAGE, plan_memory
from relay_ir.vm import bytecode as B
from relay_ir.vm.analysis import FunctionInfo


@dataclass(frozen=True)
class _Temp:
    tensor_pc: int  # its AllocTensor
    storage_pc: int  # the AllocStorage the code generator gave it
    first: int
    last: int
    size: int
    alignment: int


def _temporaries(info: FunctionInfo) -> list[_Temp]:
    """The AllocTensors over a storage of their own (at offset 0) whose tensors are
    temporaries."""
    code = info.code
    out = []
    for pc, ins in enumerate(code):
        if not isinstance(ins, B.AllocTensor) or ins.offset != 0:
            continue
        st = info.single_def(ins.storage)
        if st is None or st < 0 or not isinstance(code[st], B.AllocStorage) or \
                info.uses[ins.storage] != [pc]:
            continue
        rng = info.temporary(pc)
        if rng is not None:
            out.append(_Temp(pc, st, rng[0], rng[1], code[st].size, code[st].alignment))
    return out


def _inplace_shares(info: FunctionInfo, temps: list[_Temp],
                    inplace: Callable[[int], Sequence[tuple[int, int]] | None]
                    ) -> dict[int, tuple[int, int]]:
    """Which temporaries may take the bytes of another (indices into `temps`): output v
    of a static kernel over its input u when the kernel allows it (`inplace(k)`: its
    (input slot, output slot) pairs, relay_ir.backend.inplace), u is read there for the
    last time and in no other slot, and v is first used there (so its live range may
    start at that pc, u's last): {v: (u, the pc)}."""
    code = info.code
    of_reg: dict[int, int] = {}  # a register holding a temporary's tensor -> the temporary
    first_use: dict[int, int] = {}
    for i, t in enumerate(temps):
        names = info.aliases(code[t.tensor_pc].dst) or set()
        for r in names:
            of_reg[r] = i
        first_use[i] = min((u for r in names for u in info.uses[r]), default=-1)
    share: dict[int, tuple[int, int]] = {}
    taken: set[int] = set()
    for pc, ins in enumerate(code):
        if not isinstance(ins, B.InvokePacked) or not info.static_kernel(ins.kernel):
            continue
        n = ins.arity - ins.output_size
        for ip, op in inplace(ins.kernel) or ():
            if not 0 <= ip < n <= op < ins.arity or len(ins.args) != ins.arity:
                continue
            u, v = of_reg.get(ins.args[ip]), of_reg.get(ins.args[op])
            if u is None or v is None or u in taken or v in share or u == v:
                continue
            a, b = code[temps[u].tensor_pc], code[temps[v].tensor_pc]
            if temps[u].last != pc or first_use[v] != pc or (a.shape, a.dtype) != \
                    (b.shape, b.dtype) or temps[u].size != temps[v].size or \
                    sum(of_reg.get(r) == u for r in ins.args) != 1:
                continue
            share[v] = (u, pc)
            taken.add(u)
    return share


def plan_storage(fn: B.Function, static_kernel: Callable[[int], bool],
                 inplace: Callable[[int], Sequence[tuple[int, int]] | None] | None = None
                 ) -> B.Function:
    """`fn` with its temporaries in one storage allocated at entry, at offsets that keep
    tensors live at once apart (see the module text); `static_kernel(k)` tells whether
    kernel k writes the tensors in its output slots (rather than returning fresh ones,
    which may be its inputs); `inplace(k)`, where given, kernel k's (input slot, output
    slot) pairs whose output may be written over the input (see `_inplace_shares`)."""
    info = FunctionInfo(fn, static_kernel)
    temps = _temporaries(info)
    if not temps:
        return fn
    spans = [(t.first, t.last, t.size) for t in temps]
    share = _inplace_shares(info, temps, inplace) if inplace is not None else {}
    for v, (_, pc) in share.items():  # its bytes are untouched until its kernel writes it
        spans[v] = (pc, temps[v].last, temps[v].size)
    plan = plan_memory(spans, share={v: u for v, (u, _) in share.items()})
    arena = fn.instructions[temps[0].storage_pc].dst  # the first one's storage, hoisted
    # the planner picks each block's offset modulo PAGE (skewed so that buffers do not
    # alias in the cache): offsets that mean so only from a page-aligned start, as the
    # graph executor's arena has; a storage under a page keeps the kernels' alignment
    align = max(ALIGN, *(t.alignment for t in temps))
    if plan.arena_bytes >= PAGE:
        align = max(align, PAGE)
    alloc = B.AllocStorage(plan.arena_bytes, align, arena)
    new: dict[int, list[B.Instruction]] = {0: [alloc, fn.instructions[0]]}
    for t, off in zip(temps, plan.offsets):
        new[t.storage_pc] = []
        new[t.tensor_pc] = [replace(fn.instructions[t.tensor_pc], storage=arena, offset=off)]
    if 0 in (t.storage_pc for t in temps):
        new[0] = [alloc]
    return B.Function(fn.name, fn.num_params, relocate(fn.instructions, new),
                      fn.num_registers)


def relocate(code: tuple[B.Instruction, ...], new: dict[int, list[B.Instruction]]
             ) -> tuple[B.Instruction, ...]:
    """`code` with the instruction at each pc in `new` replaced by a list of instructions
    (maybe none, maybe holding the instruction itself), jumps retargeted: a jump to a
    replaced pc lands on the first of its replacements (or, for none, on what follows).

        >>> code = (B.Goto(2), B.Move(0, 1), B.Ret(0))
        >>> relocate(code, {1: []})
        (Goto(offset=1), Ret(result=0))
    """
    start: list[int] = []  # old pc -> its new pc
    out: list[B.Instruction] = []
    for pc, ins in enumerate(code):
        start.append(len(out))
        out += new.get(pc, [ins])
    start.append(len(out))
    for pc, ins in enumerate(code):
        kept = [k for k, x in enumerate(new.get(pc, [ins])) if x is ins]
        if isinstance(ins, (B.If, B.Goto)) and kept:
            at = start[pc] + kept[0]
            if isinstance(ins, B.If):
                out[at] = replace(ins, true_offset=start[pc + ins.true_offset] - at,
                                  false_offset=start[pc + ins.false_offset] - at)
            else:
                out[at] = replace(ins, offset=start[pc + ins.offset] - at)
    return tuple(out)


__all__ = ["plan_storage", "relocate"]
