"""What the bytecode translator (relay_ir.vm.translate) needs to know about a VM function:
its basic blocks and their dominators, each register's definitions and uses, which
tensors are temporaries that may live in one buffer reused by every run of the function,
and which functions may be called as plain Python functions.

Everything here is about one function's instruction list, except `plain_functions`,
which looks at the call graph of the whole executable.

    >>> from relay_ir.vm import bytecode as B
    >>> code = (B.LoadConsti(1, 1), B.If(0, 1, 1, 2), B.Ret(0), B.Ret(1))
    >>> info = FunctionInfo(B.Function("f", 1, code, 2))
    >>> info.blocks
    [(0, 2), (2, 3), (3, 4)]
    >>> info.idom
    [-1, 0, 0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relay_ir.vm import bytecode as B

PARAM = -1  # the "instruction" defining a parameter register


def reads(ins: B.Instruction) -> tuple[int, ...]:
    """The registers an instruction reads (an InvokePacked reads its output slots too:
    a static kernel writes into the tensors they hold)."""
    if isinstance(ins, B.Move):
        return (ins.src,)
    if isinstance(ins, B.Ret):
        return (ins.result,)
    if isinstance(ins, B.Invoke):
        return ins.args
    if isinstance(ins, B.InvokeClosure):
        return (ins.closure, *ins.args)
    if isinstance(ins, B.InvokePacked):
        return ins.args
    if isinstance(ins, (B.AllocTensor,)):
        return (ins.storage,)
    if isinstance(ins, B.AllocADT):
        return ins.fields
    if isinstance(ins, B.AllocClosure):
        return ins.captured
    if isinstance(ins, (B.GetField, B.GetTag)):
        return (ins.obj,)
    if isinstance(ins, B.If):
        return (ins.test, ins.target)
    if isinstance(ins, B.ShapeOf):
        return (ins.tensor,)
    if isinstance(ins, B.ReshapeTensor):
        return (ins.tensor, ins.shape_reg)
    if isinstance(ins, B.Fatal):
        return () if ins.value is None else (ins.value,)
    if isinstance(ins, B.RefNew):
        return (ins.value,)
    if isinstance(ins, B.RefRead):
        return (ins.ref,)
    if isinstance(ins, B.RefWrite):
        return (ins.ref, ins.value)
    return ()


def writes(ins: B.Instruction, dynamic_kernel: bool) -> tuple[int, ...]:
    """The registers an instruction (re)binds; a dynamic kernel binds its output slots."""
    if isinstance(ins, B.InvokePacked):
        return ins.args[ins.arity - ins.output_size:] if dynamic_kernel else ()
    dst = getattr(ins, "dst", None)
    return () if dst is None else (dst,)


def is_call(ins: B.Instruction) -> bool:
    return isinstance(ins, (B.Invoke, B.InvokeClosure))


def ends_block(ins: B.Instruction) -> bool:
    return isinstance(ins, (B.If, B.Goto, B.Ret, B.Fatal)) or (is_call(ins) and ins.tail)


@dataclass
class StaticStorage:
    """An AllocStorage whose tensors are all temporaries none of which is live across a
    call: one buffer per function (and calling thread) serves every run of it."""

    pc: int
    size: int
    alignment: int
    tensors: list[int]  # the AllocTensor pcs over it


class FunctionInfo:
    """Blocks, dominators, definitions and uses of one VM function.

    `dynamic(k)` tells whether kernel k returns fresh outputs (a DynamicKernel and the
    like) rather than writing the tensors in its output slots; such a kernel's inputs
    count as escaping (its result may be one of them)."""

    def __init__(self, fn: B.Function, static_kernel: Any = None) -> None:
        self.fn = fn
        self.code = fn.instructions
        self.static_kernel = static_kernel or (lambda k: False)
        self._blocks()
        self._dominators()
        self._defs_uses()

    # control flow

    def _blocks(self) -> None:
        n = len(self.code)
        leaders = {0}
        self.succ_pcs: dict[int, list[int]] = {}
        for pc, ins in enumerate(self.code):
            targets: list[int] = []
            if isinstance(ins, B.If):
                targets = [pc + ins.true_offset, pc + ins.false_offset]
            elif isinstance(ins, B.Goto):
                targets = [pc + ins.offset]
            elif not ends_block(ins) and pc + 1 < n:
                continue
            leaders.update(t for t in targets if 0 <= t < n)
            if pc + 1 < n:
                leaders.add(pc + 1)
            self.succ_pcs[pc] = [t for t in targets if 0 <= t < n]
        starts = sorted(leaders)
        self.blocks = [(s, e) for s, e in zip(starts, starts[1:] + [n])]
        self.block_of = {s: k for k, (s, _) in enumerate(self.blocks)}
        self.block_index = [k for k, (s, e) in enumerate(self.blocks) for _ in range(s, e)]
        self.succs: list[list[int]] = []
        for _, e in self.blocks:
            last = self.code[e - 1]
            if isinstance(last, (B.If, B.Goto)):
                self.succs.append([self.block_of[t] for t in self.succ_pcs[e - 1]])
            elif ends_block(last) or e == len(self.code):
                self.succs.append([])
            else:  # falls through to the next leader
                self.succs.append([self.block_of[e]])
        self.backward = any(t <= k for k, ss in enumerate(self.succs) for t in ss)

    def _dominators(self) -> None:
        """Immediate dominators (-1 for the entry and unreachable blocks). Jumps the
        compiler emits go forward, so one pass in block order settles them; a backward
        jump (only in a hand-made bytecode) leaves the blocks with the entry as their
        dominator, which claims nothing."""
        nb = len(self.blocks)
        preds: list[list[int]] = [[] for _ in range(nb)]
        for k, ss in enumerate(self.succs):
            for t in ss:
                preds[t].append(k)
        self.preds = preds
        dom: list[set[int] | None] = [None] * nb
        dom[0] = {0}
        for k in range(1, nb):
            ps = [p for p in preds[k] if dom[p] is not None]
            if self.backward:
                dom[k] = {0, k}
            elif ps:  # else unreachable
                dom[k] = set.intersection(*(dom[p] for p in ps)) | {k}  # type: ignore[misc]
        self.reachable = [d is not None for d in dom]
        self.idom = []
        for k in range(nb):
            d = dom[k]
            if k == 0 or d is None:
                self.idom.append(-1)
                continue
            # the nearest strict dominator: the largest block index among them (forward)
            self.idom.append(max(d - {k}))

    # registers

    def _defs_uses(self) -> None:
        n = self.fn.num_registers
        self.defs: list[list[int]] = [[] for _ in range(n)]
        self.uses: list[list[int]] = [[] for _ in range(n)]
        for r in range(min(self.fn.num_params, n)):
            self.defs[r].append(PARAM)
        for pc, ins in enumerate(self.code):
            dynamic = isinstance(ins, B.InvokePacked) and not self.static_kernel(ins.kernel)
            for r in reads(ins):
                if 0 <= r < n:
                    self.uses[r].append(pc)
            for r in writes(ins, dynamic):
                if 0 <= r < n:
                    self.defs[r].append(pc)
        self.call_pcs = [pc for pc, ins in enumerate(self.code) if is_call(ins)]

    def single_def(self, r: int) -> int | None:
        """The one instruction (PARAM for a parameter) defining `r`, or None."""
        d = self.defs[r]
        return d[0] if len(d) == 1 else None

    def aliases(self, r: int) -> set[int] | None:
        """The registers that may come to hold the tensor in `r` (r itself, a Move's
        destination, a GetField read of an elided tuple holding it), or None when it may
        outlive its last use in this function: it is returned, passed to a call, stored in
        a value, reshaped, or given to a kernel that may return it (anything but a static
        kernel's argument, an If test, a Fatal message or ShapeOf)."""
        seen: set[int] = set()
        todo = [r]
        while todo:
            x = todo.pop()
            if x in seen:
                continue
            seen.add(x)
            for pc in self.uses[x]:
                ins = self.code[pc]
                if isinstance(ins, B.InvokePacked) and self.static_kernel(ins.kernel):
                    continue
                if isinstance(ins, (B.If, B.Fatal, B.ShapeOf)):
                    continue
                if isinstance(ins, B.Move):
                    todo.append(ins.dst)
                    continue
                if isinstance(ins, B.AllocADT) and self.only_field_read(ins.dst):
                    for use in self.uses[ins.dst]:
                        get = self.code[use]
                        if ins.fields[get.index] == x:
                            todo.append(get.dst)
                    continue
                return None
        return seen

    def escapes(self, r: int) -> bool:
        """Whether the tensor in `r` may outlive its last use in this function (see
        `aliases`)."""
        return self.aliases(r) is None

    def live_range(self, pc: int) -> tuple[int, int] | None:
        """The pcs from the AllocTensor at `pc` to the last use of its tensor (under any of
        its aliases), or None when the tensor may outlive the function (see `aliases`) or
        its register is written elsewhere too. Jumps go forward, so on every path a later
        pc runs later: outside this range the tensor is dead."""
        ins = self.code[pc]
        if not isinstance(ins, B.AllocTensor) or self.single_def(ins.dst) != pc or \
                self.backward:
            return None
        names = self.aliases(ins.dst)
        if names is None:
            return None
        return pc, max([pc, *(u for x in names for u in self.uses[x])])

    def calls_within(self, first: int, last: int) -> bool:
        """Whether a call lies strictly between pcs `first` and `last` (a recursion there
        would run this function again while the range is live)."""
        return any(first < pc < last for pc in self.call_pcs)

    def temporary(self, pc: int) -> tuple[int, int] | None:
        """The live range of the AllocTensor at `pc` when its tensor is a temporary no call
        can see: it does not escape and no call happens while it is live."""
        rng = self.live_range(pc)
        return None if rng is None or self.calls_within(*rng) else rng

    def static_storages(self) -> dict[int, StaticStorage]:
        """The AllocStorage pcs whose buffer may be allocated once rather than at every
        run: every tensor over it is a temporary (see `temporary`). The storage plan in
        the bytecode keeps tensors that are live at once apart; a recursive run of the
        function can only start between those ranges, when nothing in the buffer is
        live."""
        out: dict[int, StaticStorage] = {}
        for pc, ins in enumerate(self.code):
            if not isinstance(ins, B.AllocStorage) or self.single_def(ins.dst) != pc:
                continue
            tensors = self.uses[ins.dst]
            if tensors and all(isinstance(self.code[t], B.AllocTensor) and
                               self.code[t].storage == ins.dst and
                               self.temporary(t) is not None for t in tensors):
                out[pc] = StaticStorage(pc, ins.size, ins.alignment, list(tensors))
        return out

    def known_closure(self, r: int) -> B.AllocClosure | None:
        """The AllocClosure defining `r` when it is the only definition and its captured
        registers are single-definition too (so the closure's contents are known at every
        call through it)."""
        d = self.single_def(r)
        if d is None or d == PARAM:
            return None
        ins = self.code[d]
        if not isinstance(ins, B.AllocClosure):
            return None
        if any(self.single_def(c) is None for c in ins.captured):
            return None
        return ins

    def only_called(self, r: int) -> bool:
        """Whether every use of `r` is as the callee of an InvokeClosure."""
        return all(isinstance(self.code[pc], B.InvokeClosure) and self.code[pc].closure == r
                   and r not in self.code[pc].args for pc in self.uses[r])

    def known_tuple(self, r: int) -> B.AllocADT | None:
        """The tuple AllocADT defining `r`, when single and its fields single-definition."""
        d = self.single_def(r)
        if d is None or d == PARAM:
            return None
        ins = self.code[d]
        if not isinstance(ins, B.AllocADT) or ins.tag != B.TUPLE_TAG:
            return None
        if any(self.single_def(f) is None for f in ins.fields):
            return None
        return ins

    def only_field_read(self, r: int) -> bool:
        """Whether every use of the tuple in `r` is a GetField within its arity."""
        t = self.known_tuple(r)
        return t is not None and all(
            isinstance(self.code[pc], B.GetField) and 0 <= self.code[pc].index < len(t.fields)
            for pc in self.uses[r])

    def callee(self, ins: B.Instruction) -> tuple[int, tuple[int, ...]] | None:
        """A call's callee when the bytecode names it: (function index, the captured
        registers passed before the arguments)."""
        if isinstance(ins, B.Invoke):
            return ins.func, ()
        if isinstance(ins, B.InvokeClosure):
            clo = self.known_closure(ins.closure)
            if clo is not None:
                return clo.func, clo.captured
        return None


def plain_functions(infos: list[FunctionInfo]) -> list[bool]:
    """Which functions may run as plain Python functions called directly: every call they
    make is a tail call to themselves (a loop) or a call of a named plain function, and no
    call chain from them comes back to them. The others run as generators under the VM's
    frame loop, so recursion of any depth never grows the Python stack."""
    n = len(infos)
    state = [0] * n  # 0 unknown, 1 visiting, 2 plain, 3 not plain

    def visit(f: int) -> bool:
        if state[f] in (2, 3):
            return state[f] == 2
        if state[f] == 1:
            return False  # a cycle through f
        state[f] = 1
        ok = True
        for ins in infos[f].code:
            if not is_call(ins):
                continue
            target = infos[f].callee(ins)
            if target is None or not 0 <= target[0] < n:
                ok = False
            elif target[0] == f:
                ok = ok and bool(ins.tail)
            elif not visit(target[0]):
                ok = False
            if not ok:
                break
        state[f] = 2 if ok else 3
        return ok

    return [visit(f) for f in range(n)]


__all__ = ["PARAM", "FunctionInfo", "StaticStorage", "is_call", "plain_functions", "reads",
           "writes"]
